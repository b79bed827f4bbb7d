#!/usr/bin/env bash
# ringcast-fanout: a short run with 3 readers ends (every reader checked every byte of every step and
# that the steps came one after another: a misplaced byte or a lost step fails the run), each way's
# medians follow from its per-round row, and bad options are refused with their names. Durations are
# never asserted.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" --readers 3 --size 300 --steps 60 --rounds 4 --gap-us 0 > "$dir/out.txt"
"$bin" --readers 1 --size 16 --steps 30 --rounds 1 --gap-us 0 --line 128 > "$dir/out-small.txt"
python3 - "$dir/out.txt" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
ways = ["natural", "line-last", "demote", "both"]
rows = {m.group(1): [tuple(map(float, t.split("/"))) for t in m.group(2).split()]
        for m in re.finditer(r"^  (\S+) +((?:\s*\d+/\d+/\d+)+)$", text, re.M)}
assert sorted(rows) == sorted(ways) and all(len(r) == 4 for r in rows.values()), text
for way, r in rows.items():
    for p, first, last in r:
        assert p > 0 and 0 < first <= last, (way, r)  # reader 0 is one of the readers the last one bounds
near = lambda a, b: abs(a - b) <= 1.0
base = [statistics.median(col) for col in zip(*rows["natural"])]
for way in ways:
    m = re.search(rf"^  {re.escape(way)} +publish +(\d+) \(([\d.]+)\)  reader 0 +(\d+) \(([\d.]+)\)  last +(\d+) \(([\d.]+)\)$",
                  text, re.M)
    assert m, (way, text)
    want = [statistics.median(col) for col in zip(*rows[way])]
    got = [float(m.group(i)) for i in (1, 3, 5)]
    assert all(near(a, b) for a, b in zip(got, want)), (way, got, want)
    ratios = [float(m.group(i)) for i in (2, 4, 6)]
    assert all(abs(q - w / b) <= 0.011 for q, w, b in zip(ratios, want, base)), (way, ratios)
PY
refused() {
  local want=$1; shift
  if "$bin" "$@" > "$dir/err.txt" 2>&1; then echo "accepted: $*"; exit 1; fi
  grep -q -- "$want" "$dir/err.txt" || { echo "no '$want' in: $(cat "$dir/err.txt")"; exit 1; }
}
refused "bad --readers '16'" --readers 16
refused "bad --readers '0'" --readers 0
refused "bad --size '8'" --size 8
refused "--line must be 64 or 128" --line 96
refused "--cpus needs the writer's CPU and one per reader" --readers 2 --cpus 0,1
refused "unknown option --bogus" --bogus 1
refused "missing value of --steps" --steps
echo "bench_fanout: ok"
