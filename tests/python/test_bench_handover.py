"""bench/python/bench_handover.py end to end on a tiny budget: both transports, both payloads and both reply
modes round by round, the in-process calls, and a summary whose figures follow from the medians it
printed. Asserts structure and arithmetic, never a duration."""
import os
import re
import statistics
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_handover.py")
NUM = r"(-?[\d.]+)"


def run(*args):
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def close(x, y, tol=0.051):
    return abs(float(x) - float(y)) <= tol


def test_the_handover_bench_alternates_both_transports_and_states_what_the_targets_ask():
    text = run("--workers", "3", "--rounds", "2", "--steps", "30", "--calls", "60")
    assert "W=3, all-rank and single-rank replies, 2 rounds x 30 round trips" in text, text
    rows = {(m, v, p): ([float(x) for x in vals.split()], float(md)) for m, v, p, vals, md in
            re.findall(r"^  (all|single)\s+\((a|c)\) (showdown|tiny)\s+([\d. ]+?)\s+median\s+([\d.]+)$", text, re.M)}
    assert set(rows) == {(m, v, p) for m in ("all", "single") for v in "ac" for p in ("showdown", "tiny")}, text
    for key, (per_round, md) in rows.items():
        assert len(per_round) == 2 and all(v > 0 for v in per_round), (key, per_round)
        assert close(statistics.median(per_round), md), (key, per_round, md)
    ratios = re.findall(r"^  (all|single)\s+\(c\)/\(a\) (showdown|tiny)\s+([\d. ]+?)\s+median", text, re.M)
    assert [r[:2] for r in ratios] == [("all", "showdown"), ("all", "tiny"), ("single", "showdown"),
                                       ("single", "tiny")], text
    glue = re.findall(r"^  (dumps|loads|c enqueue|c dequeue|a enqueue|a dequeue|reply loads)\s+([\d.]+)\s+([\d.]+)"
                      r"\s+([\d.]+)$", text, re.M)
    assert [g[0] for g in glue] == ["dumps", "loads", "c enqueue", "c dequeue", "a enqueue", "a dequeue",
                                    "reply loads"], text
    med = {g[0]: statistics.median(float(x) for x in g[1:]) for g in glue}
    for m in ("all", "single"):
        line = re.search(m + r"-rank: the sync target \(c\) <= 0\.8 x \(a\) asks the transport to save 0\.2 x \(a\) = "
                         + NUM + r" us per step \(\(a\) " + NUM + r" us .*? saves \(a\) - \(c\) = " + NUM +
                         r" us per round trip with tiny payloads \(" + NUM + " - " + NUM + r"\): (reachable|short by "
                         + r"[\d.]+ us)", text)
        assert line, (m, text)
        ask, a_step, saving, a_tiny, c_tiny, verdict = line.groups()
        assert close(a_step, rows[(m, "a", "showdown")][1]) and close(ask, 0.2 * float(a_step), 0.06), (m, line.group(0))
        assert close(a_tiny, rows[(m, "a", "tiny")][1]) and close(c_tiny, rows[(m, "c", "tiny")][1]), line.group(0)
        assert close(saving, float(a_tiny) - float(c_tiny), 0.11), line.group(0)
        assert (verdict == "reachable") == (float(saving) >= float(ask)) or abs(float(saving) - float(ask)) < 0.1
    agg = re.search(r"^aggregation: \(c\) all / single " + NUM + r" \(" + NUM + " / " + NUM + r" us; .*?it takes " + NUM +
                    r" us more, of which the transport's " + NUM + r" us \(tiny payloads\), the executor's unpickling "
                    r"of 2 more replies " + NUM + r" us \(" + NUM + r" us each, in one process\), the rest " + NUM +
                    r" us: the slowest of 3 workers", text, re.M)
    assert agg, text
    ratio, c_all, c_single, more, transport, loads2, each, rest = agg.groups()
    assert close(c_all, rows[("all", "c", "showdown")][1]) and close(c_single, rows[("single", "c", "showdown")][1])
    assert close(ratio, float(c_all) / float(c_single), 0.006) and close(more, float(c_all) - float(c_single), 0.11)
    assert close(transport, rows[("all", "c", "tiny")][1] - rows[("single", "c", "tiny")][1], 0.11)
    assert close(each, med["reply loads"], 0.006) and close(loads2, 2 * float(each), 0.051)
    assert close(rest, float(more) - float(transport) - float(loads2), 0.21)


def test_one_worker_has_only_the_single_rank_mode_and_bad_arguments_are_refused():
    text = run("--workers", "1", "--rounds", "1", "--steps", "20", "--calls", "20")
    assert "W=1, single-rank replies" in text and "aggregation:" not in text and "all-rank:" not in text, text
    assert "single-rank: the sync target" in text, text
    bad = subprocess.run([sys.executable, SCRIPT, "--workers", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--workers" in bad.stderr, bad.stderr
