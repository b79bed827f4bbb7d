"""bench/python/bench_handover.py end to end on a tiny budget: both transports, both payloads and both reply
modes round by round in alternating order, the in-process calls, and a summary whose every figure follows
from the rounds and medians it printed. Asserts structure and arithmetic, never a duration."""
import json
import os
import re
import statistics
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_handover.py")
NUM = r"(-?[\d.]+)"
SIGNED = r"([+-][\d.]+)"  # a difference printed with its sign ({:+.2f}), "+0.05" as well as "-0.08"


def run(*args):
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def close(x, y, tol=0.051):
    return abs(float(x) - float(y)) <= tol


# What the printed figures can differ by from what the script computed from unrounded values: a figure
# printed to 0.1 is within 0.05 of it, one printed to 0.01 within 0.005; a sum or ratio recomputed here
# from printed figures carries each of its terms' error.
D1, D2 = 0.05, 0.005
SLACK = 1e-9


def ratio_close(printed, x, y):
    """A ratio printed to 0.01 against x / y recomputed from x and y printed to 0.1. Magnitudes: x may
    be negative (a round whose tiny-payload round trip took longer than its showdown step, when the
    spinner lost its CPU), and a negative bound must not make the tolerance negative."""
    x, y = float(x), float(y)
    return abs(float(printed) - x / y) <= D2 + abs(x / y) * (D1 / abs(x) + D1 / abs(y)) + SLACK


def floor_json(tmp_path, workers, single, all_):
    """A ringcast-showdown-floor --json of W workers whose gather doorbell rows have these overheads."""
    rows = [{"collect": "gather doorbell", "replies": "single", "overhead_p50_us": single},
            {"collect": "rank-by-rank", "replies": "all", "overhead_p50_us": 99.0},
            {"collect": "gather doorbell", "replies": "all", "overhead_p50_us": all_}]
    path = tmp_path / f"floor-w{workers}.json"
    path.write_text(json.dumps({"workers": workers, "rows": rows}))
    return str(path)


def test_the_handover_bench_alternates_both_transports_and_states_what_the_targets_ask(tmp_path):
    floors = {"single": 20.25, "all": 40.5}  # large against any step, so that a floor left out or swapped shows
    text = run("--workers", "3", "--rounds", "3", "--steps", "30", "--calls", "60",
               "--cpp-floor-json", floor_json(tmp_path, 3, floors["single"], floors["all"]))
    assert "W=3, all-rank and single-rank replies, 3 rounds x 30 round trips" in text, text
    assert "the variants' order in rounds 1..N: ac ca ac" in text, text
    rows = {(m, v, p): ([float(x) for x in vals.split()], float(md)) for m, v, p, vals, md in
            re.findall(r"^  (all|single)\s+\((a|c)\) (showdown|tiny)\s+([\d. ]+?)\s+median\s+([\d.]+)$", text, re.M)}
    assert set(rows) == {(m, v, p) for m in ("all", "single") for v in "ac" for p in ("showdown", "tiny")}, text
    for key, (per_round, md) in rows.items():
        assert len(per_round) == 3 and all(v > 0 for v in per_round), (key, per_round)
        assert close(statistics.median(per_round), md), (key, per_round, md)
    ratios = {(m, p): ([float(x) for x in vals.split()], float(md)) for m, p, vals, md in
              re.findall(r"^  (all|single)\s+\(c\)/\(a\) (showdown|tiny)\s+([\d. ]+?)\s+median ([\d.]+)$", text, re.M)}
    assert set(ratios) == {(m, p) for m in ("all", "single") for p in ("showdown", "tiny")}, text
    for (m, p), (per_round, md) in ratios.items():  # each round's (c) over the same round's (a)
        want = [c / a for c, a in zip(rows[(m, "c", p)][0], rows[(m, "a", p)][0])]
        assert all(abs(x - w) <= 0.006 + 0.06 * w for x, w in zip(per_round, want)), (m, p, per_round, want)
        assert close(md, statistics.median(per_round), 0.006), (m, p, md)
    glue = re.findall(r"^  (dumps|loads|c enqueue|c dequeue|a enqueue|a dequeue|reply loads)\s+([\d.]+)\s+([\d.]+)"
                      r"\s+([\d.]+)$", text, re.M)
    assert [g[0] for g in glue] == ["dumps", "loads", "c enqueue", "c dequeue", "a enqueue", "a dequeue",
                                    "reply loads"], text
    med = {g[0]: statistics.median(float(x) for x in g[1:]) for g in glue}
    beyond = re.search(r"beyond the pickling \(medians\): \(a\) enqueue \+ dequeue " + NUM + r" us, \(c\) " + NUM, text)
    glue_a = med["a enqueue"] - med["dumps"] + med["a dequeue"] - med["loads"]
    glue_c = med["c enqueue"] - med["dumps"] + med["c dequeue"] - med["loads"]
    tol = 4 * D2 + D2 + SLACK  # four medians of figures printed to 0.01, and the figure's own rounding
    assert beyond and close(beyond.group(1), glue_a, tol) and close(beyond.group(2), glue_c, tol), text
    for m in ("all", "single"):
        target = re.search(m + r"-rank, the sync target \(c\) <= 0\.8 x \(a\) with the showdown's payloads at zero "
                           r"work: \(c\)/\(a\) " + NUM + r" \(the rounds' median; medians " + NUM + " / " + NUM +
                           r" us\): (met|missed)\.", text)
        assert target, (m, text)
        ratio, c_step, a_step, verdict = target.groups()
        assert close(ratio, ratios[(m, "showdown")][1], 0.006), target.group(0)
        assert close(c_step, rows[(m, "c", "showdown")][1]) and close(a_step, rows[(m, "a", "showdown")][1])
        assert verdict == ("met" if float(ratio) <= 0.8 else "missed") or close(ratio, 0.8, 0.006)
        estimate = re.search(r"ringcast saves " + NUM + r" us per round trip \(" + NUM + " - " + NUM +
                             r"\) where the target asks 0\.2 x \(a\) = " + NUM + r" us; (as much|[\d.]+ us short)\. "
                             r"The calls' own Python \(one process, the showdown's request\): \(c\) " + SIGNED,
                             text[target.end():])
        assert estimate, (m, text)
        saving, a_tiny, c_tiny, ask, enough, own = estimate.groups()
        assert close(a_tiny, rows[(m, "a", "tiny")][1]) and close(c_tiny, rows[(m, "c", "tiny")][1])
        assert close(saving, float(a_tiny) - float(c_tiny), 3 * D1 + SLACK)
        assert close(ask, 0.2 * float(a_step), D1 + 0.2 * D1 + SLACK)
        assert (enough == "as much") == (float(saving) >= float(ask)) or close(saving, ask, 0.1), estimate.group(0)
        assert close(own, glue_c - glue_a, 4 * D2 + D2 + SLACK), (own, glue_c, glue_a)  # the pickling cancels
        bound = re.search(r"a transport that cost nothing but the C\+\+ floor \(" + NUM + r" us, the same step in "
                          r"C\+\+\): " + NUM + r" \+ " + NUM + r" us at least \(the spinner's step less its "
                          r"tiny-payload round trip\), \(c\)/\(a\) >= " + NUM + r": 0\.8 x \(a\) "
                          r"(out of reach at zero work|within reach)\.", text[target.end():])
        assert bound, (m, text)
        floor, payload_part, floor2, ratio_bound, reach = bound.groups()
        assert floor == floor2 and close(floor, floors[m], D1 + SLACK), (m, floor)  # its own mode's row
        assert close(payload_part, float(a_step) - float(a_tiny), 3 * D1 + SLACK)
        assert ratio_close(ratio_bound, float(payload_part) + floors[m], a_step)
        assert (reach == "within reach") == (float(ratio_bound) <= 0.8) or close(ratio_bound, 0.8, 0.006)
    agg = re.search(r"^aggregation: \(c\) all / single " + NUM + r" \(" + NUM + " / " + NUM + r" us; \(a\) " + NUM +
                    r"\); .*?it takes " + NUM + r" us more, of which the transport's " + NUM +
                    r" us \(tiny payloads\), the executor's unpickling of 2 more replies " + NUM + r" us \(" + NUM +
                    r" us each, in one process\), the rest " + NUM + " us", text, re.M)
    assert agg, text
    ratio, c_all, c_single, a_ratio, more, transport, loads2, each, rest = agg.groups()
    assert close(c_all, rows[("all", "c", "showdown")][1]) and close(c_single, rows[("single", "c", "showdown")][1])
    assert ratio_close(ratio, c_all, c_single) and close(more, float(c_all) - float(c_single), 3 * D1 + SLACK)
    assert ratio_close(a_ratio, rows[("all", "a", "showdown")][1], rows[("single", "a", "showdown")][1])
    assert close(transport, rows[("all", "c", "tiny")][1] - rows[("single", "c", "tiny")][1], 3 * D1 + SLACK)
    assert close(each, med["reply loads"], D2 + SLACK) and close(loads2, 2 * float(each), D1 + 2 * D2 + SLACK)
    assert close(rest, float(more) - float(transport) - float(loads2), 4 * D1 + SLACK)
    # the script judges the unrounded rest: one in (-0.05, 0) prints as "-0.0" with the remark
    assert ("less than nothing" in agg.string[agg.end():agg.end() + 80]) == rest.startswith("-"), text


def test_one_worker_has_only_the_single_rank_mode_and_bad_arguments_are_refused(tmp_path):
    text = run("--workers", "1", "--rounds", "1", "--steps", "20", "--calls", "20")
    assert "W=1, single-rank replies" in text and "aggregation:" not in text and "all-rank," not in text, text
    assert "single-rank, the sync target" in text and "a transport that cost nothing" not in text, text
    bad = subprocess.run([sys.executable, SCRIPT, "--workers", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--workers" in bad.stderr, bad.stderr
    other_w = subprocess.run([sys.executable, SCRIPT, "--workers", "1",
                              "--cpp-floor-json", floor_json(tmp_path, 3, 1, 2)], capture_output=True, text=True,
                             timeout=60)
    assert other_w.returncode == 2 and "is of W=3, this run W=1" in other_w.stderr, other_w.stderr
    missing = subprocess.run([sys.executable, SCRIPT, "--cpp-floor-json", str(tmp_path / "none.json")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read a floor from" in missing.stderr, missing.stderr
