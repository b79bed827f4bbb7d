#!/usr/bin/env bash
# ringcast-bench hop: the floor and the ringcast rows alternate in rounds, and every ratio it prints is
# that round's p50 over the same round's floor (the figure the core-hop target is stated on). A short
# run (1 reader, 2 rounds of 50 ms rows) checks the arithmetic from its JSON, the text's summary line,
# and that a bad option is refused with its name.
set -euo pipefail
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bench" hop --readers 1 --rounds 2 --rtt-seconds 0.05 --json "$dir/hop.json" > "$dir/hop.txt" 2> "$dir/err.txt"
grep -q "^hybrid RTT / atomic floor, median of the rounds: [0-9.]* (target <= 1.30: \(met\|MISSED\))" "$dir/hop.txt"
python3 - "$dir/hop.json" "$dir/hop.txt" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
rows = {r["system"]: r for r in d["rows"]}
assert list(rows) == ["floor_atomic", "spin", "hybrid", "hybrid_adapt"], list(rows)
floor = rows["floor_atomic"]["p50_ns"]
assert len(floor) == 2 and all(v > 0 for v in floor), floor
for name, r in rows.items():
    assert len(r["p50_ns"]) == 2 and all(v > 0 for v in r["p50_ns"]), (name, r)
    want = [p / f for p, f in zip(r["p50_ns"], floor)]
    assert all(abs(a - b) <= 1e-4 * b for a, b in zip(r["over_floor_atomic"], want)), (name, r, want)
hybrid = rows["hybrid"]["over_floor_atomic"]
assert abs(d["hybrid_over_floor_median"] - statistics.median(hybrid)) <= 1e-4 * statistics.median(hybrid), d
line = "hybrid RTT / atomic floor, median of the rounds: %.2f" % statistics.median(hybrid)
assert line in text, (line, text)
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
