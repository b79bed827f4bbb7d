#!/usr/bin/env bash
# The install path of tools/demo and tools/test (tools/lib/common.sh) against a fake apt-get and
# dpkg-query on PATH: a lock held by another package run is waited for, then the install happens; a lock
# never released ends with a clear message after RINGCAST_APT_LOCK_WAIT_S; any other apt failure ends at
# once; only the missing packages are asked for.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
failures=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1 ($2)"; failures=$((failures + 1)); fi; }

# apt-get: appends its arguments to calls.log; fails with apt's lock message while locks_left > 0
# (decremented per call; "forever" never unlocks), or with MODE=broken with an unrelated error.
cat >"$tmp/bin/apt-get" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >>"$FAKE_DIR/calls.log"
left=$(cat "$FAKE_DIR/locks_left")
if [ "${MODE:-}" = broken ]; then echo "E: Unable to locate package no-such-package" >&2; exit 100; fi
if [ "$left" = forever ] || [ "$left" -gt 0 ]; then
  [ "$left" = forever ] || echo $((left - 1)) >"$FAKE_DIR/locks_left"
  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (unattended-upgr)" >&2
  exit 100
fi
exit 0
FAKE
# dpkg-query: every package is installed except those in missing.txt.
cat >"$tmp/bin/dpkg-query" <<'FAKE'
#!/usr/bin/env bash
pkg=${*: -1}
grep -qx "$pkg" "$FAKE_DIR/missing.txt" && exit 1
echo "install ok installed"
FAKE
printf '#!/usr/bin/env bash\nexec "$@"\n' >"$tmp/bin/sudo"
chmod +x "$tmp/bin/"*
export FAKE_DIR=$tmp PATH="$tmp/bin:$PATH" RINGCAST_APT_LOCK_PAUSE_S=0.1
run() {  # run NAME LOCKS [VAR=VALUE...]: ensure_packages in a subshell with the given lock count
  local name=$1 locks=$2; shift 2
  : >"$tmp/calls.log"; echo "$locks" >"$tmp/locks_left"
  (export "$@" 2>/dev/null; source "$here/../../tools/lib/common.sh"; ensure_packages) >"$tmp/$name.out" 2>&1
  echo $? >"$tmp/$name.rc"
}
printf 'spin\nlibgtest-dev\n' >"$tmp/missing.txt"

# 1. the lists lock is held for three tries, then released: waits, then updates and installs.
run waits 3
check "a held lock is waited for, then the install runs" '[ "$(cat $tmp/waits.rc)" = 0 ]'
check "it said it was waiting, naming the holder" \
  '[ "$(grep -c "waiting for another package run.*4242" $tmp/waits.out)" = 3 ]'
check "update tried until the lock was free, then install" \
  '[ "$(grep -c "^update" $tmp/calls.log)" = 4 ] && [ "$(grep -c "^install" $tmp/calls.log)" = 1 ]'
check "only the missing packages are installed, with dpkg's own lock timeout" \
  'grep -q "^install .* libgtest-dev spin -o DPkg::Lock::Timeout=" $tmp/calls.log'

# 2. a lock never released: gives up after RINGCAST_APT_LOCK_WAIT_S with a message saying so.
run never forever RINGCAST_APT_LOCK_WAIT_S=1
check "a lock held forever fails after the limit" '[ "$(cat $tmp/never.rc)" != 0 ]'
check "the failure names the lock and the limit" \
  'grep -q "could not get lock" -i $tmp/never.out && grep -q "still locked by another package run after 1 s" $tmp/never.out'
check "install never ran while locked" '! grep -q "^install" $tmp/calls.log'

# 3. an unrelated apt failure is not retried.
run broken 0 MODE=broken
check "another apt failure ends at once" \
  '[ "$(cat $tmp/broken.rc)" != 0 ] && [ "$(wc -l <$tmp/calls.log)" = 1 ] && grep -q "no-such-package" $tmp/broken.out'

# 4. nothing missing: apt is not called at all.
: >"$tmp/missing.txt"
run nothing 0
check "nothing missing, no apt call" '[ "$(cat $tmp/nothing.rc)" = 0 ] && [ ! -s $tmp/calls.log ]'

[ $failures -eq 0 ] && echo "apt lock test: all passed" || { echo "apt lock test: $failures failed"; exit 1; }
