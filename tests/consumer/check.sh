#!/usr/bin/env bash
# Proves the installed package is relocatable. Builds ringcast from <source> configured for one prefix
# (<work>/configured, never created), installs it with `cmake --install --prefix <work>/installed`
# (what a user does), then MOVES the installed tree to <work>/moved, so no file may still point at
# either earlier place. From the moved tree it builds and runs a consumer twice: with CMake's
# find_package(ringcast) (CMAKE_PREFIX_PATH) and with pkg-config (PKG_CONFIG_LIBDIR: only this .pc).
# Done for libdir `lib` and again for a multiarch libdir one level deeper (lib/x86_64-linux-gnu).
set -euo pipefail
src=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
log=$work/log
fail() {
  echo "install_consumer: FAILED: $*" >&2
  echo "---- last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
}
step() { echo "+ $*" >>"$log"; "$@" >>"$log" 2>&1; }
# Ninja where it is installed (tools/test installs it): its second configure (another libdir) leaves
# the objects alone, where Make's tree recompiled the remote library; Make otherwise.
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# check NAME LIBDIR: configure with that libdir, install elsewhere, move, consume from the new place.
check() {
  local name=$1 libdir=$2
  local configured=$work/$name/configured installed=$work/$name/installed moved=$work/$name/moved
  mkdir -p "$work/$name"
  # The same build tree for every libdir: only install paths change, nothing recompiles.
  # Debug (-O0): this checks what gets installed, not speed; half the compile time of an optimised tree.
  step cmake -S "$src" -B "$work/lib" ${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=Debug -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF \
       -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TOOLS=OFF \
       -DCMAKE_INSTALL_PREFIX="$configured" -DCMAKE_INSTALL_LIBDIR="$libdir" || fail "$name: configure"
  step cmake --build "$work/lib" -j2 || fail "$name: build"
  step cmake --install "$work/lib" --prefix "$installed" || fail "$name: install"
  [ ! -e "$configured" ] || fail "$name: the install wrote into the configured prefix $configured"
  mv "$installed" "$moved"

  # The components this install has (each part installs its own export set): events always; remote
  # and gpu when the build had ZeroMQ / CUDA or HIP. Each is required by, and run in, the consumer.
  local parts="" part
  for part in events remote gpu; do
    [ -f "$moved/$libdir/cmake/ringcast/ringcast${part^}Targets.cmake" ] && parts+="${parts:+;}$part"
  done
  for part in events remote gpu; do  # every part the build made must be installed as a component
    if [ -f "$work/lib/src/$part/libringcast_$part.a" ]; then
      case ";$parts;" in *";$part;"*) ;; *) fail "$name: libringcast_$part was built but not installed as a component" ;; esac
    fi
  done
  case ";$parts;" in *";events;"*) ;; *) fail "$name: the install lacks the events component" ;; esac
  echo "install_consumer: $name: components installed: $parts"

  # find_package(ringcast COMPONENTS ...), looking only at the moved tree.
  step cmake -S "$here" -B "$work/$name/consumer-cmake" ${generator[@]+"${generator[@]}"} -DCMAKE_PREFIX_PATH="$moved" -DRINGCAST_COMPONENTS="$parts" \
       || fail "$name: find_package(ringcast COMPONENTS $parts) with CMAKE_PREFIX_PATH=$moved"
  local found
  found=$(sed -n 's/^ringcast_DIR:[A-Z]*=//p' "$work/$name/consumer-cmake/CMakeCache.txt")
  case $found in "$moved"/*) ;; *) fail "$name: find_package found ringcast at '$found', not under $moved" ;; esac
  step cmake --build "$work/$name/consumer-cmake" || fail "$name: consumer build (find_package)"
  "$work/$name/consumer-cmake/consumer" || fail "$name: consumer run (find_package)"
  for part in ${parts//;/ }; do
    "$work/$name/consumer-cmake/consumer_$part" || fail "$name: consumer_$part run (find_package component $part)"
  done
  # A component that does not exist fails find_package, naming it.
  if cmake -S "$here" -B "$work/$name/consumer-bogus" -DCMAKE_PREFIX_PATH="$moved" -DRINGCAST_COMPONENTS="nonesuch" \
       >"$work/$name/bogus.log" 2>&1; then
    fail "$name: find_package(ringcast COMPONENTS nonesuch) succeeded"
  fi
  grep -q "component nonesuch: no such component" "$work/$name/bogus.log" \
    || fail "$name: find_package(ringcast COMPONENTS nonesuch) failed without naming it: $(tail -n 5 "$work/$name/bogus.log")"

  # pkg-config, with only the moved tree's ringcast.pc visible.
  local pcdir=$moved/$libdir/pkgconfig
  [ -f "$pcdir/ringcast.pc" ] || fail "$name: no ringcast.pc in $pcdir"
  local pc_prefix flags
  pc_prefix=$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --variable=prefix ringcast) || fail "$name: pkg-config ringcast"
  flags=$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --cflags --libs ringcast) || fail "$name: pkg-config --cflags --libs"
  echo "+ $name: pkg-config prefix=$pc_prefix flags: $flags" >>"$log"
  # shellcheck disable=SC2086  # $flags is a list of compiler arguments
  step g++ "$here/main.cpp" -o "$work/$name/consumer-pc" $flags \
    || fail "$name: consumer build with pkg-config from $pcdir (ringcast.pc says prefix=$pc_prefix; flags: $flags)"
  [ "$(realpath -m "$pc_prefix")" = "$(realpath "$moved")" ] \
    || fail "$name: ringcast.pc says prefix=$pc_prefix, the tree is at $moved"
  "$work/$name/consumer-pc" || fail "$name: consumer run (pkg-config)"
  echo "install_consumer: $name (libdir $libdir): find_package and pkg-config work from the moved tree"
}

check plain lib
multiarch=$(g++ -print-multiarch 2>/dev/null || true)
if [ -n "$multiarch" ]; then
  check multiarch "lib/$multiarch"
else
  echo "install_consumer: no multiarch triplet from g++ -print-multiarch: the lib/<triplet> case is skipped"
fi
