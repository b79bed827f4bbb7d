#!/usr/bin/env bash
# Each documented way to leave parts out configures and generates: the top-level options
# (RINGCAST_BUILD_TESTS / _BENCH / _PYTHON / _TOOLS) in the combinations a packager or a CI job
# takes, and the targets each one promises are there or not. Configure only (no build): a target that
# names a part left out fails at generate, which is what this catches (tests on with the CLI off did).
# Usage: configure_options_test.sh SOURCE_DIR
set -uo pipefail
src=${1:?source dir}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
failures=0
# configure NAME OPTIONS...: configures into $tmp/NAME (GPU parts off: not what is tested here, and
# nvcc's detection alone takes seconds); a failure prints the tail of CMake's output.
configure() {
  local name=$1; shift
  if cmake -S "$src" -B "$tmp/$name" "${gen[@]}" -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF "$@" >"$tmp/$name.log" 2>&1; then
    echo "ok   $name configures and generates"
  else
    echo "FAIL $name: cmake $*"; tail -15 "$tmp/$name.log"; failures=$((failures + 1)); return 1
  fi
}
targets() { cmake --build "$tmp/$1" --target help 2>/dev/null | sed -E 's/^\.\.\. //; s/:.*//'; }
# expect NAME TARGET present|absent
expect() {
  local list got=absent
  list=$(targets "$1")  # whole, then searched: grep -q in the pipe would end it early (pipefail)
  grep -qx -- "$2" <<<"$list" && got=present
  if [ "$got" = "$3" ]; then echo "ok   $1: $2 $3"; else echo "FAIL $1: $2 is $got, expected $3"; failures=$((failures + 1)); fi
}

if configure tests-without-cli -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_PYTHON=OFF; then
  expect tests-without-cli ringcast_tests present
  expect tests-without-cli ringcast_security_tests present
  expect tests-without-cli ringcast_cli absent
  expect tests-without-cli ringcast_cli_tests absent
fi
if configure tests-with-cli -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_PYTHON=OFF; then
  expect tests-with-cli ringcast_cli present
  expect tests-with-cli ringcast_cli_tests present
fi
if configure library-alone -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TOOLS=OFF; then
  expect library-alone ringcast present
  expect library-alone ringcast_tests absent
  expect library-alone ringcast_cli absent
fi
if configure bench-without-tests -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TOOLS=OFF; then
  expect bench-without-tests ringcast_tests absent
fi
[ "$failures" -eq 0 ] && echo "all configurations passed" || { echo "$failures check(s) failed"; exit 1; }
