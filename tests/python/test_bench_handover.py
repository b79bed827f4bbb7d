"""bench/python/bench_handover.py end to end on a tiny budget: both transports and both payloads round by
round, the in-process calls, and a summary whose figures follow from the medians it printed. Asserts
structure and arithmetic, never a duration."""
import os
import re
import statistics
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_handover.py")


def run(*args):
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_the_handover_bench_alternates_both_transports_and_states_what_the_target_asks():
    text = run("--workers", "2", "--rounds", "2", "--steps", "30", "--calls", "60")
    assert "W=2, all ranks reply, 2 rounds x 30 round trips" in text, text
    rows = {(v, p): [float(x) for x in vals.split()] + [float(m)] for v, p, vals, m in
            re.findall(r"^  \((a|c)\) (showdown|tiny)\s+([\d. ]+?)\s+median\s+([\d.]+)$", text, re.M)}
    assert set(rows) == {("a", "showdown"), ("c", "showdown"), ("a", "tiny"), ("c", "tiny")}, text
    for key, vals in rows.items():
        per_round, med = vals[:-1], vals[-1]
        assert len(per_round) == 2 and all(v > 0 for v in per_round), (key, vals)
        assert abs(statistics.median(per_round) - med) <= 0.051, (key, vals)
    ratios = re.findall(r"^  \(c\)/\(a\) (showdown|tiny)\s+([\d. ]+?)\s+median", text, re.M)
    assert [r[0] for r in ratios] == ["showdown", "tiny"], text
    glue = re.findall(r"^  (dumps|loads|c enqueue|c dequeue|a enqueue|a dequeue)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$",
                      text, re.M)
    assert [g[0] for g in glue] == ["dumps", "loads", "c enqueue", "c dequeue", "a enqueue", "a dequeue"], text
    ask = re.search(r"save 0\.2 x \(a\) = ([\d.]+) us per step \(\(a\) ([\d.]+) us", text)
    assert ask and abs(float(ask.group(1)) - 0.2 * float(ask.group(2))) <= 0.051, text
    assert abs(float(ask.group(2)) - rows[("a", "showdown")][-1]) <= 0.051, text
    saving = re.search(r"saves \(a\) - \(c\) = (-?[\d.]+) us per round trip with tiny payloads \(([\d.]+) - ([\d.]+)\)",
                       text)
    assert saving, text
    assert abs(float(saving.group(1)) - (float(saving.group(2)) - float(saving.group(3)))) <= 0.051, text
    assert re.search(r"^reachable by the transport: (yes|no, short by [\d.]+ us)$", text, re.M), text


def test_single_rank_mode_and_bad_arguments():
    text = run("--workers", "2", "--rounds", "1", "--steps", "20", "--calls", "20", "--single")
    assert "rank 0 replies" in text, text
    bad = subprocess.run([sys.executable, SCRIPT, "--workers", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--workers" in bad.stderr, bad.stderr
