#!/usr/bin/env bash
# ringcast-line-home: every figure it prints follows from the per-pair table it prints first — each
# round's min, median, max and mean from that round's row, each pair's median over the rounds from its
# column, the spread between the pairs from those medians, the rounds' rank correlations — and every bad
# option is refused with its name. A short unpinned run (4 pairs, 200 trips, 3 rounds); durations are
# never asserted.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" --pairs 4 --trips 200 --rounds 3 > "$dir/out.txt"
python3 - "$dir/out.txt" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
pairs, rounds = 4, 3
rows = [[float(x) for x in m.group(2).split()] for m in re.finditer(r"^round (\d+):((?: +\d+)+)$", text, re.M)]
assert len(rows) == rounds and all(len(r) == pairs for r in rows), text
assert all(v > 0 for r in rows for v in r), rows
summary = re.findall(r"^(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)$", text, re.M)
assert [int(s[0]) for s in summary] == list(range(1, rounds + 1)), text
near = lambda a, b: abs(a - b) <= 1.0  # the printed rows are rounded to whole ns
for row, s in zip(rows, summary):
    lo, mid, hi, mean, walking = map(float, s[1:])
    assert near(lo, min(row)) and near(hi, max(row)) and near(mid, statistics.median(row)), (row, s)
    assert near(mean, sum(row) / pairs) and walking > 0, (row, s)
m = re.search(r"^each pair's median over the rounds, ns:((?: +\d+)+)$", text, re.M)
assert m, text
medians = [float(x) for x in m.group(1).split()]
want = [statistics.median(col) for col in zip(*rows)]
assert len(medians) == pairs and all(near(a, b) for a, b in zip(medians, want)), (medians, want)
m = re.search(r"^between the pairs \(their medians\): (\d+)\.\.(\d+) ns; one pair over the rounds \(max - min\), "
              r"median of the pairs: (\d+) ns$", text, re.M)
assert m, text
assert near(float(m.group(1)), min(want)) and near(float(m.group(2)), max(want)), (m.group(0), want)
spreads = [max(col) - min(col) for col in zip(*rows)]
assert near(float(m.group(3)), statistics.median(spreads)), (m.group(0), spreads)
# Spearman's rank correlation of every two rounds (ties share their mean rank); the table's values are
# whole ns as measured, so the recomputation is exact.
def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r
def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    mean = (len(a) + 1) / 2
    sab = sum((x - mean) * (y - mean) for x, y in zip(ra, rb))
    saa, sbb = sum((x - mean) ** 2 for x in ra), sum((y - mean) ** 2 for y in rb)
    return sab / (saa * sbb) ** 0.5 if saa > 0 and sbb > 0 else 0.0
rho = [spearman(rows[a], rows[b]) for a in range(rounds) for b in range(a + 1, rounds)]
m = re.search(r"^the pairs' order from round to round: Spearman's rank correlation, median of the (\d+) pairs of rounds "
              r"(-?[\d.]+) \((-?[\d.]+)\.\.(-?[\d.]+)\)$", text, re.M)
assert m, text
close = lambda a, b: abs(a - b) <= 0.0051
assert int(m.group(1)) == len(rho) == 3, m.group(0)
assert close(float(m.group(2)), statistics.median(rho)) and close(float(m.group(3)), min(rho)), (m.group(0), rho)
assert close(float(m.group(4)), max(rho)) and all(-1 <= r <= 1 for r in rho), (m.group(0), rho)
PY
# Bad options: each refused with exit 2, naming the option.
for bad in "--pairs 1" "--pairs 4097" "--trips 99" "--trips 12x" "--trips +200" "--rounds 0" "--cpus 1,1" "--cpus 0" \
           "--cpus -1,0" "--rounds" "--bogus 1" "--pairs 4096 --trips 100000"; do
  set +e
  # shellcheck disable=SC2086  # the option and its value are two words
  "$bin" $bad > /dev/null 2> "$dir/bad.txt"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "'$bad' exited $rc, want 2"; exit 1; }
  grep -q -- "${bad%% *}" "$dir/bad.txt" || { echo "'$bad' was refused without naming it:"; cat "$dir/bad.txt"; exit 1; }
done
echo "ok"
