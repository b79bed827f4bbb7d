#!/usr/bin/env bash
# check.sh -- model-check the Promela models of ringcast's protocols with spin:
#   tests/model/ring.pml    the broadcast ring: futex handshakes, announcement
#                           bits, a dead reader's rank (claim, eviction)
#   tests/model/gather.pml  the gather doorbell with fragmented replies
#   tests/model/stamp.pml   record stamps: what a caught-up reader polls
#   tests/model/arm.pml     an event loop's arm of an endpoint (WaitSet) beside
#                           cancel() and the endpoint's own blocking call
# (see the header of each model for what is modelled and what each property
#  means).
#
#   * every check of a correct model must find 0 errors, with the search
#     complete (no "max search depth too small", no out-of-memory);
#   * every negative variant (a -DBUG_* switch that breaks the protocol) must
#     make pan report an error OF THE EXPECTED KIND.
#
# Prints one line per check; exits non-zero if any line is FAIL.
# Works from any cwd; builds in a temporary directory (removed at exit; set
# KEEP=1 to keep it).  JOBS=n runs n checks at once (default: nproc, max 4).
# ONLY=regex runs only the checks whose name matches.  MODEL_DIR=dir checks
# the models in another directory (to test this script).
# Needs spin (Debian package `spin`) and a C compiler (CC, default gcc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model_dir="${MODEL_DIR:-$here}"
CC="${CC:-gcc}"

for tool in spin "$CC"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "FAIL  $tool not found (install the Debian package 'spin' / a C compiler)" >&2
        exit 1
    fi
done
for m in ring.pml gather.pml stamp.pml arm.pml; do
    [[ -r "$model_dir/$m" ]] || { echo "FAIL  $model_dir/$m not readable" >&2; exit 1; }
done

jobs_max="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
(( jobs_max > 4 )) && jobs_max=4
(( jobs_max < 1 )) && jobs_max=1

work="$(mktemp -d "${TMPDIR:-/tmp}/ringcast-model.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
    echo "(keeping build dir $work)"
else
    trap 'rm -rf "$work"' EXIT
fi

# One check per line:
#   name | expect | spin -D flags | cc flags | pan flags | what
# The model is ring.pml unless the spin flags start with another model's file
# name (gather.pml, stamp.pml, arm.pml).
# (cc flags after the default -O0 override it: -O1 pays off only for the
#  largest searches; pan.c takes ~1.5 s to compile at -O1, ~0.5 s at -O0.
#  -w is the hash table's size, 2^w slots: 2^22 holds up to ~4 million
#  states without long chains; ahead-cap2's 9 million ran in 13 s with
#  -w24 against 20 s with -w22, while a small search pays ~0.4 s to clear
#  the larger table)
# expect: "pass"  -> pan must report errors: 0, search complete
#         a regex -> pan must report an error whose "pan:1:" line matches it
#                    (grep -E; no '|' in it: that separates the fields)
# Every correct check has must-fail partners: the negative lines after it.
MAIN="-DN=2 -DCAP=2 -DM=4"
DEAD="-DN=2 -DCAP=1 -DM=4 -DNO_CLOSE -DNO_MONITOR"   # deadlock check alone
DIE1="-DN=1 -DCAP=1 -DM=3 -DDEATH"                    # one rank, its reader may die
G="gather.pml"
ST="stamp.pml"
A="arm.pml"
P1='assertion violated .*tail-head'                   # P1, at the room decision
PAY='assertion violated .*ring\['                     # P1, the payload a reader copies
P3R='assertion violated .*r_blocked'                  # P3, reader half
P3W='assertion violated .*w_blocked'                  # P3, writer half
P3C='assertion violated .*c_blocked'                  # P3, the gather collector
P6='assertion violated .*fresh'                       # P6, leaked announcement
SAFE="-DSAFETY -DNOFAIR -DNOCLAIM"                    # safety-only pan (asserts + invalid end states)
CHECKS=(
# ---- ring.pml: the futex handshakes (w1 = the cursor exchange) ----
"safety-cap2       |pass|$MAIN|$SAFE -O1|-m200000 -w22|P1 no overwrite, P2 all delivered, P3 no lost wake-up, P4 no deadlock (close path)"
"safety-cap1       |pass|-DN=2 -DCAP=1 -DM=4|$SAFE -O1|-m200000 -w22|P1-P4, ring full at every message"
"noclose-cap1      |pass|-DN=2 -DCAP=1 -DM=4 -DNO_CLOSE|$SAFE|-m200000 -w22|P1-P4, writer never closes: the *-dl configuration, correct model"
"spurious          |pass|-DN=2 -DCAP=2 -DM=3 -DSPURIOUS|$SAFE|-m200000 -w22|P1-P4 with futex_wait timeouts/EINTR/spurious returns"
"nonprogress       |pass|-DN=2 -DCAP=1 -DM=2 -DSPURIOUS|-DNP|-m200000 -w22 -l -f|P5 no non-progress cycle under weak fairness, with early returns"
"neg-np-unfair     |non-progress cycle|-DN=2 -DCAP=1 -DM=2 -DSPURIOUS|-DNP|-m200000 -w22 -l|sanity: without fairness a reader may time out forever (progress labels are live)"
"neg-no-recheck    |$P3R|$MAIN -DBUG_NO_RECHECK|$SAFE|-m200000 -w20|Reader::wait_for_data without 3d: P3"
"neg-no-recheck-dl |invalid end state|$DEAD -DBUG_NO_RECHECK|$SAFE|-m200000 -w20|same, deadlock check alone"
"neg-w1-store      |$P3R|$MAIN -DBUG_W1_RELEASE_STORE|$SAFE|-m200000 -w20|Writer::commit_record w1 a plain release store, w2 hoisted above it: P3"
"neg-w1-store-dl   |invalid end state|$DEAD -DBUG_W1_RELEASE_STORE|$SAFE|-m200000 -w20|same, deadlock check alone"
"neg-head-store    |$P3W|$MAIN -DBUG_HEAD_RELEASE_STORE|$SAFE|-m200000 -w20|Reader::store_head w1 a plain release store, w2 hoisted above it: P3"
"neg-head-store-dl |invalid end state|$DEAD -DBUG_HEAD_RELEASE_STORE|$SAFE|-m200000 -w20|same, deadlock check alone"
"neg-space-recheck |$P3W|$MAIN -DBUG_SPACE_NO_RECHECK|$SAFE|-m200000 -w20|Writer::wait_for_space without 3d: P3"
"neg-space-rchk-dl |invalid end state|$DEAD -DBUG_SPACE_NO_RECHECK|$SAFE|-m200000 -w20|same, deadlock check alone"
"neg-room-off-by-1 |$P1|$MAIN -DBUG_ROOM_OFF_BY_ONE|$SAFE|-m200000 -w20|room test off by one: P1 overwrite"
"neg-close-order   |assertion violated .*head\[_pid\]==|$MAIN -DBUG_CLOSE_ORDER|$SAFE|-m200000 -w20|reader loads tail before closed: P2 messages dropped"
# ---- ring.pml: a reader killed at any step; its replacement (C1, C2); eviction (E1, E2) ----
"death-n1          |pass|$DIE1|$SAFE|-m200000 -w22|P1-P4 and P6 no leaked announcement; claim vs eviction, one rank"
"death-cap2        |pass|-DN=1 -DCAP=2 -DM=4 -DDEATH|$SAFE|-m200000 -w22|same, ring of 2"
"death-n2          |pass|-DN=2 -DCAP=1 -DM=3 -DDEATH|$SAFE -O1|-m200000 -w22|same, beside a second live rank (shared word of bits)"
"death-noclose     |pass|$DIE1 -DNO_CLOSE|$SAFE|-m200000 -w22|same, writer never closes (no close wake to repair anything)"
"neg-no-clear-claim|$P6|$DIE1 -DBUG_NO_CLEAR_ON_CLAIM|$SAFE|-m200000 -w20|replacement without C2: P6 the dead reader's bit leaks"
"neg-no-clear-evict|$P6|$DIE1 -DBUG_NO_CLEAR_ON_EVICT|$SAFE|-m200000 -w20|eviction without E2: P6 the dead reader's bit leaks"
"neg-evict-race    |$PAY|$DIE1 -DBUG_EVICT_CHECK_THEN_STORE|$SAFE|-m200000 -w20|old claim/evict (check, then store): P1 replacement reads overwritten slots"
"neg-claim-word    |$P3R|-DN=2 -DCAP=1 -DM=2 -DDEATH -DBUG_CLAIM_CLEARS_WORD|$SAFE|-m200000 -w20|C2 stores 0 to the word of bits: P3 the other rank's wake is lost"
"neg-no-tick-dl    |invalid end state|$DIE1 -DNO_CLOSE -DNO_LIVENESS_TIMEOUT -DNO_MONITOR|$SAFE|-m200000 -w20|sanity: without its liveness timeout the writer hangs on a dead reader (the tick is live)"
# ---- ring.pml -DEVENTFD: rank 0 sleeps on an eventfd, rank 1 on the futex word ----
"eventfd-cap2      |pass|-DN=2 -DCAP=2 -DM=3 -DEVENTFD|$SAFE -O1|-m200000 -w22|P1-P4 with an eventfd sleeper beside a futex sleeper (drain 3a', poll 3e, signal w3)"
"eventfd-cap1-dl   |pass|-DN=2 -DCAP=1 -DM=4 -DNO_CLOSE -DEVENTFD|$SAFE|-m200000 -w22|same, writer never closes"
"eventfd-spurious  |pass|-DN=2 -DCAP=2 -DM=3 -DSPURIOUS -DEVENTFD|$SAFE|-m200000 -w22|same, poll/futex_wait may return early"
"neg-drain-late    |$P3R|$MAIN -DEVENTFD -DBUG_DRAIN_AFTER_RECHECK|$SAFE|-m200000 -w20|eventfd drained after the re-check: P3, the signal is eaten"
"neg-drain-late-dl |invalid end state|$DEAD -DEVENTFD -DBUG_DRAIN_AFTER_RECHECK|$SAFE|-m200000 -w20|same, deadlock check alone"
"neg-skip-futex    |$P3R|$MAIN -DEVENTFD -DBUG_SKIP_FUTEX_WAKE|$SAFE|-m200000 -w20|futex wake skipped once an eventfd was written: P3, the futex rank sleeps on"
# ---- ring.pml -DAHEAD: Writer::wake_ahead (w2..w3 with no cursor moved) before any message ----
"ahead-cap2        |pass|$MAIN -DAHEAD|$SAFE -O1|-m200000 -w24|P1-P4 with a wake-ahead before any message"
"ahead-cap1-dl     |pass|-DN=2 -DCAP=1 -DM=4 -DNO_CLOSE -DAHEAD|$SAFE -O1|-m200000 -w22|same, writer never closes"
"ahead-eventfd     |pass|-DN=2 -DCAP=2 -DM=3 -DEVENTFD -DAHEAD|$SAFE -O1|-m200000 -w22|same beside an eventfd sleeper, which is not woken ahead"
"ahead-spurious    |pass|-DN=2 -DCAP=2 -DM=3 -DSPURIOUS -DAHEAD|$SAFE|-m200000 -w22|same, futex_wait may return early"
"neg-ahead-no-wake |$P3R|$MAIN -DAHEAD -DBUG_AHEAD_SKIPS_WAKE|$SAFE|-m200000 -w20|the publish after a wake-ahead skips its own wake: P3, a reader that slept again sleeps on"
"neg-ahead-nw-dl   |invalid end state|$DEAD -DAHEAD -DBUG_AHEAD_SKIPS_WAKE|$SAFE|-m200000 -w20|same, deadlock check alone"
# ---- gather.pml: doorbell wait against fragmented replies (F > CAP) ----
"gather-k1         |pass|$G -DK=1 -DCAP=1 -DF=3|$SAFE|-m200000 -w22|payload, P2 replies complete, P3 collector and workers, P4 no deadlock"
"gather-k2         |pass|$G -DK=2 -DCAP=1 -DF=3|$SAFE -O1|-m200000 -w22|same, two workers"
"gather-cap2       |pass|$G -DK=1 -DCAP=2 -DF=5|$SAFE|-m200000 -w22|same, ring of 2 fragments"
"gather-waitv      |pass|$G -DK=2 -DCAP=1 -DF=2 -DWAITV|$SAFE|-m200000 -w22|same with futex_waitv over the reply rings instead of the doorbell"
"neg-bell-last     |$P3C|$G -DK=1 -DCAP=1 -DF=2 -DBUG_BELL_AFTER_LAST_FRAGMENT|$SAFE|-m200000 -w20|doorbell only after the last fragment: P3 collector asleep on records"
"neg-bell-last-dl  |invalid end state|$G -DK=1 -DCAP=1 -DF=2 -DBUG_BELL_AFTER_LAST_FRAGMENT -DNO_MONITOR|$SAFE|-m200000 -w20|same, deadlock check alone: worker waits for space, collector asleep on the bell"
"neg-coll-recheck  |$P3C|$G -DK=2 -DCAP=1 -DF=2 -DBUG_COLLECTOR_NO_RECHECK|$SAFE|-m200000 -w20|wait_any without 3d: P3"
"neg-waitv-recheck |$P3C|$G -DK=2 -DCAP=1 -DF=2 -DWAITV -DBUG_COLLECTOR_NO_RECHECK|$SAFE|-m200000 -w20|wait_any_waitv without 3d: P3"
# ---- stamp.pml: record stamps, polled by a caught-up reader instead of the tail ----
"stamp-cap3        |pass|$ST -DCAP=3 -DM=5|$SAFE -O1|-m200000 -w22|S1 the next message, never payload or an old lap; S2 stamp there; S3 no deadlock"
"stamp-cap4        |pass|$ST -DCAP=4 -DM=6|$SAFE -O1|-m200000 -w22|same, ring of 4 cells"
"neg-no-zero-ahead |assertion violated .*msg\\[|$ST -DBUG_NO_ZERO_AHEAD|$SAFE|-m200000 -w20|commit_record without Z: S1, a reader takes old payload for a record"
"neg-z-after-stamp |assertion violated .*msg\\[|$ST -DBUG_Z_AFTER_STAMP|$SAFE|-m200000 -w20|Z after the stamp: S1, the reader polls the old word first"
"neg-no-lap        |assertion violated .*msg\\[|$ST -DBUG_NO_LAP|$SAFE|-m200000 -w20|stamps without laps: S1, a full ring's old record taken again"
"neg-z-always      |assertion violated .*st%4|$ST -DBUG_Z_ALWAYS|$SAFE|-m200000 -w20|Z on a full ring: S2, the lagging reader's header is cleared"
# ---- arm.pml: a WaitSet member's arm beside cancel() and the endpoint's own blocking call ----
"arm-cancel        |pass|$A -DCANCEL|$SAFE|-m200000 -w20|A1 every message taken and the cancel seen, whenever cancel() runs (waits may time out)"
"arm-own-call      |pass|$A -DCANCEL -DOWN_CALL|$SAFE|-m200000 -w20|A1 with the endpoint's own blocking calls between the waits"
"arm-own-call-m3   |pass|$A -DOWN_CALL -DM=3|$SAFE|-m200000 -w20|same without cancel (no poke to hide a lost wake), 3 messages"
"neg-arm-no-cancel |invalid end state|$A -DCANCEL -DBUG_ARM_IGNORES_CANCEL|$SAFE|-m200000 -w20|the arm's re-check without the flag: A1, its drain eats the poke"
"neg-poke-first    |invalid end state|$A -DCANCEL -DBUG_POKE_BEFORE_FLAG|$SAFE|-m200000 -w20|cancel() pokes before it stores the flag: A1"
"neg-no-reannounce |invalid end state|$A -DOWN_CALL -DBUG_NO_REANNOUNCE|$SAFE|-m200000 -w20|wait() without re-announcing its armed member: A1, the own call's withdrawal loses the wake"
"gather-alarm      |pass|$G -DK=2 -DCAP=1 -DF=3 -DALARM|$SAFE|-m200000 -w22|the predicted waits: two of the collect's sleeps (the first wait's, the later window's) may end by an alarm at any moment"
"gather-alarm-waitv|pass|$G -DK=2 -DCAP=1 -DF=2 -DWAITV -DALARM|$SAFE|-m200000 -w22|same over futex_waitv"
"neg-alarm-recheck |$P3C|$G -DK=2 -DCAP=1 -DF=2 -DALARM -DBUG_COLLECTOR_NO_RECHECK|$SAFE|-m200000 -w20|the alarm does not hide a missing 3d: P3"
"neg-alarm-dl      |invalid end state|$G -DK=2 -DCAP=1 -DF=2 -DALARM -DBUG_COLLECTOR_NO_RECHECK -DNO_MONITOR|$SAFE|-m200000 -w20|same, deadlock check alone: the alarms cannot rescue a lost wake-up"
)

trim() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; echo "${s%"${s##*[![:space:]]}"}"; }

# run_one INDEX: runs check INDEX in $work/INDEX, writes $work/INDEX/result
run_one() {
    local idx="$1" line name expect sflags cflags pflags what dir t0 t1 out
    line="${CHECKS[$idx]}"
    IFS='|' read -r name expect sflags cflags pflags what <<<"$line"
    name="$(trim "$name")"
    dir="$work/$idx"
    mkdir -p "$dir"
    local pml=ring.pml first
    first="$(trim "$sflags")"; first="${first%% *}"
    if [[ "$first" == *.pml ]]; then
        pml="$first"; sflags="$(trim "$sflags")"; sflags="${sflags#"$first"}"
    fi
    cp "$model_dir/$pml" "$dir/$pml"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086  # flag lists are split on purpose
    (
        cd "$dir"
        spin -a $sflags "$pml" >spin.log 2>&1 &&
        "$CC" -O0 -w $cflags -o pan pan.c >cc.log 2>&1 &&
        ./pan $pflags -n >pan.out 2>&1
    ) || true
    t1=$(date +%s.%N)
    local secs states errors first verdict detail
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1fs", b-a}')
    out="$dir/pan.out"
    states=$(awk '/states, stored/{print $1; exit}' "$out" 2>/dev/null || true)
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" 2>/dev/null | head -n1 || true)
    first=$(grep -m1 '^pan:1:' "$out" 2>/dev/null || true)
    verdict=FAIL
    if [[ -z "$errors" ]]; then
        detail="no pan result (see spin.log / cc.log / pan.out below)"
    elif [[ "$expect" == pass ]]; then
        if [[ "$errors" != 0 ]]; then
            detail="$first"
        elif grep -qE 'max search depth too small|out of memory|search not completed' "$out"; then
            detail="search incomplete: $(grep -m1 -E 'max search depth too small|out of memory|search not completed' "$out")"
        else
            verdict=PASS; detail="0 errors"
        fi
    else
        if [[ "$errors" == 0 ]]; then
            detail="bug NOT found (0 errors)"
        elif grep -qE -- "$expect" <<<"$first"; then
            verdict=PASS; detail="caught: ${first#pan:1: }"
        else
            detail="wrong error: $first (expected /$expect/)"
        fi
    fi
    printf '%-4s  %-17s  %9s states  %6s  %s -- %s\n' \
        "$verdict" "$name" "${states:-?}" "$secs" "$what" "$detail" >"$dir/result"
    if [[ "$verdict" == FAIL ]]; then
        {
            echo "      model: $pml | spin flags: $sflags | cc: $cflags | pan: $pflags"
            tail -n 15 "$dir/spin.log" "$dir/cc.log" "$out" 2>/dev/null | sed 's/^/      | /'
            if [[ "$expect" == pass && -n "$errors" && "$errors" != 0 ]]; then
                echo "      trail (spin -t -p):"
                # shellcheck disable=SC2086
                (cd "$dir" && spin -t -p $sflags "$pml" 2>&1 | tail -n 60 | sed 's/^/      | /') || true
            fi
        } >>"$dir/result"
    fi
}

start=$(date +%s.%N)
echo "ringcast protocol models: $model_dir/{ring,gather,stamp,arm}.pml ($(spin -V | head -n1), $jobs_max jobs)"
selected=()
for idx in "${!CHECKS[@]}"; do
    name="$(trim "${CHECKS[$idx]%%|*}")"
    [[ -z "${ONLY:-}" || "$name" =~ $ONLY ]] && selected+=("$idx")
done
(( ${#selected[@]} )) || { echo "FAIL  no check matches ONLY=${ONLY:-}"; exit 1; }
for idx in "${selected[@]}"; do
    while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n || true; done
    run_one "$idx" &
done
wait || true

fails=0
for idx in "${selected[@]}"; do
    if [[ -f "$work/$idx/result" ]]; then
        cat "$work/$idx/result"
        grep -q '^FAIL' "$work/$idx/result" && fails=$((fails + 1))
    else
        echo "FAIL  check $idx produced no result"
        fails=$((fails + 1))
    fi
done
end=$(date +%s.%N)
total=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')
if (( fails )); then
    echo "model check: $fails of ${#selected[@]} checks FAILED (${total}s)"
    exit 1
fi
echo "model check: all ${#selected[@]} checks passed (${total}s)"
