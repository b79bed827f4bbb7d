# Shared by tools/test and tools/demo: install what is missing (Debian apt), configure and build.
# shellcheck shell=bash
set -euo pipefail

RINGCAST_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The Python the binding is built for and tested with: Debian's own, because apt's pybind11-dev,
# python3-pytest and python3-numpy are packaged for it (the pyenv python3 on PATH has none of them).
RINGCAST_PYTHON=/usr/bin/python3
JOBS=$(nproc 2>/dev/null || echo 2)
# The normal build tree (tools/demo, tools/test): -O2 with line tables only (-g1), as the sanitizer
# trees' -g1: a failure's backtrace keeps file and line, and the compile takes ~30 % less than
# RelWithDebInfo's -O2 -g (tests/ring_test.cpp: 39 -> 28 s on the 2-core CI VM).
RINGCAST_NORMAL_BUILD=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")

# Package → why. Only missing ones are installed.
RINGCAST_PACKAGES=(
  g++ cmake ninja-build pkg-config      # build
  libgtest-dev                          # C++ tests
  spin                                  # Promela model check of the futex protocol
  libbenchmark-dev libboost-dev         # microbenchmarks, Boost.Interprocess peer
  cppzmq-dev libzmq3-dev                # ZeroMQ peer in the benchmark harness
  liburing-dev                          # io_uring back end of the wait set
  python3-uvloop                        # asyncio tests run under uvloop too
  python3-torch                         # the vLLM plug-in's executor test (gloo groups), tensors out of band
  python3-setuptools python3-wheel python3-venv python3-build mypy   # pip install ., wheel, type check
  hipcc libamdhip64-dev                 # HIP build of the GPU interop (compile only without an AMD GPU)
  python3-matplotlib                    # the showdown plot under build/report/
  python3 python3-dev pybind11-dev python3-pytest python3-numpy   # the Python binding and its tests
  clang libclang-rt-14-dev              # libFuzzer targets
  util-linux procps                     # setpriv (security test), ps
)

ensure_packages() {
  local missing=() p
  for p in "${RINGCAST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  apt_waiting_for_lock $sudo apt-get update -qq
  apt_waiting_for_lock $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

# apt_waiting_for_lock COMMAND...: runs an apt-get command; while another apt or dpkg run holds one of
# apt's locks (a fresh machine runs unattended-upgrades at boot) it waits and tries again, up to
# RINGCAST_APT_LOCK_WAIT_S seconds (default 900), instead of failing at once. apt's own
# DPkg::Lock::Timeout covers only the dpkg lock of `install`, not the lists lock of `update`, hence
# the retry. Any other failure ends the run at once with apt's message.
apt_waiting_for_lock() {
  local limit=${RINGCAST_APT_LOCK_WAIT_S:-900} pause=${RINGCAST_APT_LOCK_PAUSE_S:-5} start=$SECONDS out rc
  local -a cmd=("$@")
  [[ " ${cmd[*]} " == *" install "* ]] && cmd+=(-o "DPkg::Lock::Timeout=$limit")
  while true; do
    rc=0; out=$("${cmd[@]}" 2>&1) || rc=$?
    [ $rc -eq 0 ] && return 0
    if ! grep -qiE 'could not (get|open) lock|unable to (acquire|lock)|is held by process' <<<"$out"; then
      printf '%s\n' "$out" >&2
      echo "== apt failed (exit $rc): ${cmd[*]}" >&2
      return $rc
    fi
    if (( SECONDS - start >= limit )); then
      printf '%s\n' "$out" >&2
      echo "== apt is still locked by another package run after ${limit} s (RINGCAST_APT_LOCK_WAIT_S); giving up" >&2
      return $rc
    fi
    echo "== waiting for another package run to release apt's lock ($(grep -oiE 'held by process [0-9]+[^)]*' <<<"$out" | head -n 1 || true))"
    sleep "$pause"
  done
}

# configure_build DIR [cmake args...]: configures, then builds every target, or only those named in
# RINGCAST_BUILD_TARGETS (space-separated: tools/demo builds what it runs, not the test suites).
configure_build() {
  local dir=$1; shift
  # --no-warn-unused-cli: the sanitizer builds leave the binding off, so Python_EXECUTABLE goes unused there
  # configure.log: what the configure left out (optional parts), for tools/test to print
  mkdir -p "$RINGCAST_ROOT/$dir"
  cmake -S "$RINGCAST_ROOT" -B "$RINGCAST_ROOT/$dir" -G Ninja --no-warn-unused-cli -DPython_EXECUTABLE="$RINGCAST_PYTHON" "$@" >"$RINGCAST_ROOT/$dir/configure.log"
  local -a targets=()
  # shellcheck disable=SC2206  # a list of target names, split on purpose
  [ -n "${RINGCAST_BUILD_TARGETS:-}" ] && targets=(--target $RINGCAST_BUILD_TARGETS)
  cmake --build "$RINGCAST_ROOT/$dir" -j "$JOBS" "${targets[@]}"
}
