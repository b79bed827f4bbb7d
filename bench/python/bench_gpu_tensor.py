#!/usr/bin/env python3
"""A CUDA tensor through MessageQueue's device path vs the vLLM way (tensor.cpu() + pickle + .cuda()).

1 writer -> 1 reader process, both on cuda:0. Per message size (1 MiB, 64 MiB):
  throughput  the writer enqueues --count tensors back to back; time from the first enqueue to the
              reader having the last one on its device (torch.cuda.synchronize) -> GB/s
  latency     one tensor at a time: writer's enqueue start -> reader's tensor on device (the reader
              acks through a second queue before the next one; the ack is not timed), median
(a) ringcast: q.enqueue({"t": cuda_tensor}); reader q.dequeue(device=0)  (DMA into/out of the ring)
(b) vLLM-style: q.enqueue({"t": cuda_tensor.cpu()}); reader obj["t"].cuda()
The variants alternate in every repeat; every repeat's value is printed, then median ratios b/a.
Usage: PYTHONPATH=<build>/python python3 bench/python/bench_gpu_tensor.py [--repeats 3]
"""
import argparse
import multiprocessing as mp
import statistics
import time

MiB = 1 << 20


def reader(handle, plan, results):
    import torch
    import ringcast
    q = ringcast.MessageQueue.create_from_handle(handle, 0)
    acks = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=16)
    results.put(acks.export_handle())
    torch.cuda.init()
    for variant, mode, count in plan:
        stamps = []
        for _ in range(count):
            obj = q.dequeue(timeout=120, device=0)
            t = obj["t"] if variant == "ringcast" else obj["t"].cuda()
            torch.cuda.synchronize()
            stamps.append(time.monotonic())
            if mode == "latency":
                acks.enqueue(1, timeout=60)
        results.put(stamps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch
    import ringcast
    sizes = [(1 * MiB, 200, 100), (64 * MiB, 20, 10)]  # (bytes, throughput count, latency count)
    plan = []
    for _ in range(args.repeats):
        for size, tput_n, lat_n in sizes:
            for variant in ("ringcast", "vllm"):
                plan.append((variant, "throughput", tput_n))
                plan.append((variant, "latency", lat_n))
    ctx = mp.get_context("spawn")
    q = ringcast.MessageQueue(1, 1)  # the default ring: 16 MiB, records of 4 MiB
    results = ctx.Queue()
    p = ctx.Process(target=reader, args=(q.export_handle(), plan, results))
    p.start()
    acks = ringcast.MessageQueue.create_from_handle(results.get(timeout=120), 0)
    q.wait_until_ready(timeout=120)
    values = {}
    for _ in range(args.repeats):
        for size, tput_n, lat_n in sizes:
            t = torch.randint(0, 1 << 30, (size // 4,), dtype=torch.int32, device="cuda:0")
            for variant in ("ringcast", "vllm"):
                send = (lambda: q.enqueue({"t": t}, timeout=120)) if variant == "ringcast" else \
                       (lambda: q.enqueue({"t": t.cpu()}, timeout=120))
                # throughput
                torch.cuda.synchronize()
                start = time.monotonic()
                for _ in range(tput_n):
                    send()
                stamps = results.get(timeout=300)
                gbps = size * tput_n / (stamps[-1] - start) / 1e9
                values.setdefault((size, variant, "GB/s"), []).append(gbps)
                # latency
                lat = []
                for _ in range(lat_n):
                    s0 = time.monotonic()
                    send()
                    acks.dequeue(timeout=60)
                    lat.append(s0)
                stamps = results.get(timeout=300)
                values.setdefault((size, variant, "latency ms"), []).append(
                    statistics.median((b - a) * 1e3 for a, b in zip(lat, stamps)))
    p.join(timeout=60)
    q.shutdown()
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}, repeats {args.repeats}, "
          "1 writer -> 1 reader process, default ring (16 MiB)")
    print("| size | metric | ringcast device path (every repeat) | tensor.cpu()+pickle+.cuda() (every repeat) | ringcast / vLLM-style |")
    print("|---|---|---|---|---|")
    for size, _, _ in sizes:
        for metric in ("GB/s", "latency ms"):
            a = values[(size, "ringcast", metric)]
            b = values[(size, "vllm", metric)]
            ratio = statistics.median(a) / statistics.median(b)
            fmt = lambda v: " ".join(f"{x:.2f}" for x in v)
            print(f"| {size // MiB} MiB | {metric} | {statistics.median(a):.2f} ({fmt(a)}) | "
                  f"{statistics.median(b):.2f} ({fmt(b)}) | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
