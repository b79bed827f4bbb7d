#!/usr/bin/env bash
# Installs ringcast from <source> into <work>/prefix, then builds a consumer against it twice:
# with CMake's find_package(ringcast) and with pkg-config. Runs both.
set -euo pipefail
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
cmake -S "$src" -B "$work/lib" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_PYTHON=OFF \
      -DCMAKE_INSTALL_PREFIX="$work/prefix" >"$work/log" 2>&1
cmake --build "$work/lib" -j2 >>"$work/log" 2>&1
cmake --install "$work/lib" >>"$work/log" 2>&1
here=$(cd "$(dirname "$0")" && pwd)
cmake -S "$here" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >>"$work/log" 2>&1
cmake --build "$work/consumer" >>"$work/log" 2>&1
"$work/consumer/consumer"
pc_dir=$(dirname "$(find "$work/prefix" -name ringcast.pc | head -1)")
g++ "$here/main.cpp" -o "$work/consumer-pc" $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs ringcast)
"$work/consumer-pc"
