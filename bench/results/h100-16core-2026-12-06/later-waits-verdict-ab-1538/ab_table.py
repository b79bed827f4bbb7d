"""The A/B's table: (c)'s overhead p50 per round and arm, from the showdown.py outputs w<W>-r<round>-<arm>.txt
of first/ and second/. Usage: python3 ab_table.py [folder]"""
import glob, os, re, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(d + '/*/w*-r*-*.txt')):
    batch = os.path.basename(os.path.dirname(f))
    w, r, arm = re.search(r'w(\d+)-r(\d+)-(old|new)\.txt', f).groups()
    seen = set()
    for line in open(f):  # the first table (overhead p50 its fifth column); later tables repeat the labels
        m = re.match(r'^\(c\) ringcast \+ gather\s+(single|all)\s+(sync|async)\s+\S+\s+\S+\s+(\S+)', line)
        if m and (m.group(1), m.group(2)) not in seen:
            seen.add((m.group(1), m.group(2)))
            rows.setdefault((int(w), m.group(1), m.group(2), arm), []).append((batch, int(r), float(m.group(3))))
for w in sorted({k[0] for k in rows}, reverse=True):
    for rep in ('single', 'all'):
        for mode in ('sync', 'async'):
            old = sorted(rows.get((w, rep, mode, 'old'), [])); new = sorted(rows.get((w, rep, mode, 'new'), []))
            lower = sum(n[2] < o[2] for o, n in zip(old, new))
            print(f"W={w} {rep:6} {mode:5} old {' '.join(f'{x[2]:.1f}' for x in old)} (median {st.median(x[2] for x in old):.1f})"
                  f" | new {' '.join(f'{x[2]:.1f}' for x in new)} (median {st.median(x[2] for x in new):.1f})"
                  f" | new lower in {lower} of {len(old)} rounds")
