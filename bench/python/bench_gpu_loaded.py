#!/usr/bin/env python3
"""What a loaded GPU array library costs MessageQueue.enqueue of a step's request (bench_glue's ~1.8 KB
scheduler-output-like dict: plain data, no device arrays). Once torch (or cupy, numba, jax) is in
sys.modules, enqueue has to look for device arrays in every message. Every executor of an inference
engine has torch loaded, so this is the default path there.

Each configuration runs in a process of its own (a library, once imported, cannot be unloaded):
  plain       no GPU array library loaded: the one-call path (pickle.dumps inside the module)
  torch       torch imported (left out where torch is not installed)
  stand-in    a module named "cupy" put into sys.modules (runs without torch)
and in the loaded ones, in the same process, three baselines on the same message: the plain one-call
path (`Writer.send_object` with its device pickler off: what enqueue does when no GPU library is
loaded), the device path in Python (ringcast._gpu.enqueue: what enqueue did until 2026-12-03, and still
does for a MessageQueue subclass with a _pickle of its own), and the device path as it was before its
pickler used reducer_override: a persistent_id hook, called by the C pickler for every pickled object
(reimplemented here). Per run: p50 of per-call times over --n enqueues (each dequeued at once); every
run printed; configurations alternate run by run, and the paths of one process in 10 rounds, their
order rotated.

    PYTHONPATH=<build>/python python3 bench/python/bench_gpu_loaded.py [--n 3000] [--runs 3]
"""
import argparse
import io
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def child(mode, n):
    if mode == "torch":
        import torch  # noqa: F401
    elif mode == "stand-in":
        sys.modules["cupy"] = types.ModuleType("cupy")
    import ringcast
    from ringcast import _gpu
    sys.path.insert(0, HERE)
    from bench_glue import STEP

    from ringcast._pickling import dumps_out_of_band

    q = ringcast.MessageQueue(1, 1)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)

    class PersistentIdPickler(pickle.Pickler):  # the device pickler before reducer_override
        plain = frozenset((int, float, str, bytes, bool, type(None), list, tuple, dict, set, bytearray))

        def persistent_id(self, obj):
            if type(obj) in self.plain or isinstance(obj, type):
                return None
            return None if _gpu._describe(obj) is None else 0

    def persistent_id_pickle(o, callback):
        out = io.BytesIO()
        PersistentIdPickler(out, 5, buffer_callback=callback).dump(o)
        return out.getvalue()

    def persistent_id_enqueue(m):
        q._writer.send(dumps_out_of_band(m, q._oob_threshold, q._max_parts - 3, persistent_id_pickle), 5)

    # The plain one-call path in this process: a second writer whose device pickler is off.
    plain_q = ringcast.MessageQueue(1, 1)
    plain_r = ringcast.MessageQueue.create_from_handle(plain_q.export_handle(), 0)
    plain_q._writer.set_device_pickler(None, [])
    paths = {"enqueue": (lambda m: q.enqueue(m, timeout=5), r)}
    if _gpu.may_hold_device_arrays():
        paths["python_path"] = (lambda m: _gpu.enqueue(q, m, 5), r)
        paths["persistent_id"] = (persistent_id_enqueue, r)
        paths["one_call"] = (lambda m: plain_q._writer.send_object(m, 5), plain_r)
    # In rounds, the paths' order rotated: a slow stretch of the machine (its speed episodes) then
    # falls on every path alike instead of on whichever ran then.
    times = {k: [] for k in paths}
    rounds = 10
    names = list(paths)
    for i in range(rounds):
        for k in names[i % len(names):] + names[:i % len(names)]:
            send, reader = paths[k]
            for _ in range(max(1, n // rounds)):
                t = time.perf_counter_ns()
                send(STEP)
                times[k].append(time.perf_counter_ns() - t)
                reader.dequeue(timeout=5)
    out = {"loaded": _gpu.may_hold_device_arrays()}
    out.update({k: statistics.median(v) / 1000.0 for k, v in times.items()})
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.n)
    modes = ["plain", "stand-in"]
    try:
        import importlib.util
        if importlib.util.find_spec("torch") is not None:
            modes.insert(1, "torch")
    except ImportError:
        pass
    print(f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}; {args.n} enqueues per run, {args.runs} runs, configurations alternated")
    results = {m: [] for m in modes}
    for _ in range(args.runs):
        for m in modes:
            out = subprocess.run([sys.executable, __file__, "--child", m, "--n", str(args.n)],
                                 capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                sys.exit(f"{m}: {out.stderr.strip()}")
            results[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print("enqueue p50 us per run (the request, ~1.8 KB pickled)")
    plain = [x["enqueue"] for x in results["plain"]]
    print(f"  {'plain (no GPU library)':34} " + "  ".join(f"{v:6.2f}" for v in plain))
    for m in modes[1:]:
        rows = results[m]
        print(f"  {m + ' loaded: enqueue':34} " + "  ".join(f"{x['enqueue']:6.2f}" for x in rows))
        print(f"  {m + ' loaded: plain one-call path':34} " + "  ".join(f"{x['one_call']:6.2f}" for x in rows))
        print(f"  {m + ' loaded: Python path (before)':34} " + "  ".join(f"{x['python_path']:6.2f}" for x in rows))
        print(f"  {m + ' loaded: persistent_id (before)':34} " + "  ".join(f"{x['persistent_id']:6.2f}" for x in rows))
        med = {k: statistics.median(x[k] for x in rows) for k in ("enqueue", "one_call", "python_path", "persistent_id")}
        print(f"    medians: enqueue {med['enqueue'] / med['one_call']:.2f}x the plain one-call path of the same process, "
              f"{med['enqueue'] / statistics.median(plain):.2f}x the plain process's enqueue; "
              f"the Python path {med['python_path'] / med['enqueue']:.2f}x, "
              f"persistent_id {med['persistent_id'] / med['enqueue']:.2f}x this enqueue")


if __name__ == "__main__":
    main()
