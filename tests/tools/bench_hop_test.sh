#!/usr/bin/env bash
# ringcast-bench hop: the floor and the ringcast rows alternate in rounds, and every ratio it prints is
# that round's p50 over the same round's floor (the figure the core-hop target is stated on). A short
# run (1 reader, 3 rounds of 50 ms rows) checks the arithmetic from its JSON against the text, the
# rounds' orders, and that a bad option is refused with its name.
set -euo pipefail
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bench" hop --readers 1 --rounds 3 --rtt-seconds 0.05 --json "$dir/hop.json" > "$dir/hop.txt" 2> "$dir/err.txt"
grep -q "^hybrid RTT / atomic floor, median of the rounds: [0-9.]* (target <= 1.30: \(met\|MISSED\))" "$dir/hop.txt"
python3 - "$dir/hop.json" "$dir/hop.txt" <<'PY'
import json, re, statistics, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
rows = {r["system"]: r for r in d["rows"]}
names = ["floor_atomic", "floor_wakeable", "floor_ring", "floor_ring_tail", "floor_ring_asym", "spin", "hybrid",
         "hybrid_adapt"]
assert list(rows) == names, list(rows)
floor = rows["floor_atomic"]["p50_ns"]
assert len(floor) == 3 and all(v > 0 for v in floor), floor
for name, r in rows.items():
    assert len(r["p50_ns"]) == 3 and all(v > 0 for v in r["p50_ns"]), (name, r)
    assert len(r["round_trips"]) == 3 and all(n >= 1 for n in r["round_trips"]), (name, r)  # a loaded machine: few
    want = [p / f for p, f in zip(r["p50_ns"], floor)]
    assert all(abs(a - b) <= 1e-4 * b for a, b in zip(r["over_floor_atomic"], want)), (name, r, want)
    for floor_name in ("floor_wakeable", "floor_ring", "floor_ring_tail", "floor_ring_asym"):
        want = [p / f for p, f in zip(r["p50_ns"], rows[floor_name]["p50_ns"])]
        got = r["over_" + floor_name]
        assert all(abs(a - b) <= 1e-4 * b for a, b in zip(got, want)), (name, floor_name, r, want)
    if name != "floor_atomic":  # the text's row: each round's ratio, their median, the count <= 1.30
        m = re.search(r"^%-16s((?: +[\d.]+){3})   median ([\d.]+), <= 1\.30 in (\d) of 3$" % name, text, re.M)
        assert m, (name, text)
        shown = [float(x) for x in m.group(1).split()]
        near = lambda a, b: abs(a - b) <= 0.0051 + 1e-5 * abs(b)  # the text's 2 decimals, the JSON's 6 digits
        assert all(near(a, b) for a, b in zip(shown, r["over_floor_atomic"])), (name, shown, r)
        assert near(float(m.group(2)), statistics.median(r["over_floor_atomic"])), (name, m.group(0))
        assert int(m.group(3)) == sum(v <= 1.3 for v in r["over_floor_atomic"]), (name, m.group(0))
# Every round runs each row once; the order moves: no row keeps its place, rounds 2k+1 run backwards.
orders = d["orders"]
n = len(names)
assert len(orders) == 3 and all(sorted(o) == list(range(n)) for o in orders), orders
assert orders[0] == list(range(n)) and orders[1] == list(range(n))[::-1], orders
assert orders[2] == list(range(1, n)) + [0], orders
letters = " ".join("".join("fwrtysha"[i] for i in o) for o in orders)
assert ("order per round (f floor_atomic, w floor_wakeable, r floor_ring, t floor_ring_tail, y floor_ring_asym,\n"
        "s spin, h hybrid, a hybrid_adapt): " + letters in text), (letters, text)
hybrid = rows["hybrid"]["over_floor_atomic"]
assert abs(d["hybrid_over_floor_median"] - statistics.median(hybrid)) <= 1e-4 * statistics.median(hybrid), d
m = re.search(r"^hybrid RTT / atomic floor, median of the rounds: ([\d.]+) ", text, re.M)
assert m and abs(float(m.group(1)) - statistics.median(hybrid)) <= 0.0051 + 1e-5 * statistics.median(hybrid), text
# The wakeable and ring floors: hybrid's ratio to each, round by round, and its median in the text and the JSON.
for floor_name, words in (("wakeable", "wakeable floor"), ("ring", "ring floor"), ("ring_tail", "ring floor with a tail"),
                          ("ring_asym", "ring floor with a tail, no fences")):
    to_floor = statistics.median(rows["hybrid"]["over_floor_" + floor_name])
    assert abs(d["hybrid_over_floor_%s_median" % floor_name] - to_floor) <= 1e-4 * to_floor, d
    m = re.search(r"^hybrid RTT / %s, median of the rounds: ([\d.]+) " % words, text, re.M)
    assert m and abs(float(m.group(1)) - to_floor) <= 0.0051 + 1e-5 * to_floor, text
assert d["readers"] == 1 and d["size"] == 64 and d["pinned"] is False, d
PY
# A bad option names itself and exits 2.
set +e
"$bench" hop --rounds 0 > /dev/null 2> "$dir/bad.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "hop --rounds 0 exited $rc, want 2"; exit 1; }
grep -q -- "--rounds" "$dir/bad.txt" || { cat "$dir/bad.txt"; exit 1; }
echo "ok"
