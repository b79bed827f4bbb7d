#!/usr/bin/env bash
# Is (c)'s all-rank async step systematically in the slow state? W=2 and W=8, variant c only, 8 interleaved runs.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/async4; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/async4.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-async4
SHOWDOWN_ARGS="--variants c" WORKERS="2 8" REPEATS=8 STEPS=300 timeout 400 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$?"
rm -f "$work/sd/showdown.tgz" "$work/sd/build.log"
python3 - "$work" <<'PY'
import json, sys
for w in (2, 8):
    d = json.load(open(f"{sys.argv[1]}/sd/w{w}/showdown.json"))
    for r in d["rows"]:
        print(w, r["mode"], r["replies"], " ".join(f'{x["overhead_p50_us"]:.0f}/{x["breakdown_p50_us"]["enqueue"]:.0f}/{x["breakdown_p50_us"]["collected_after_both"]:.0f}' for x in r["runs"]))
PY
