#!/usr/bin/env bash
# Session 19, call A: the torch-loaded pickling probe (fresh process per configuration, alternated).
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
py=python3; date -u > "$out/start.txt"; cp .old/build-rev.txt "$out/build.txt"
$py -c "import torch, sys; print(torch.__version__, sys.version)" > "$out/versions.txt" 2>&1
for round in 1 2 3; do
  for cfg in plain torch numpy torch_freeze torch_nogc torch_threads1; do
    for cpu in 4 9; do
      timeout 60 $py .old/torch_probe.py $cfg $cpu >> "$out/probe.jsonl" 2>> "$out/probe.err"
    done
  done
  echo "round $round $(date -u +%T)"
done
date -u > "$out/end.txt"
python3 - "$out/probe.jsonl" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[r["cfg"]].append(r)
for cfg, rs in by.items():
    print(cfg, "pickle p10/p50:", [(r["pickle_us"][0], r["pickle_us"][1]) for r in rs])
    print("   pyloop p10/p50:", [(r["pyloop_us"][0], r["pyloop_us"][1]) for r in rs])
    print("   threads", rs[0]["threads"], "objs", rs[0]["gc_objects"], "gc", rs[0]["gc_collections"], "mon", rs[0].get("monitoring"), "other-thr ms", [r["other_threads_cpu_ms_in_0.5s"] for r in rs][:3], "imp", rs[0]["import_s"])
PY
