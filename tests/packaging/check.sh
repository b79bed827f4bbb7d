#!/usr/bin/env bash
# The Python package as users get it: `pip install .` into a fresh virtual environment, a wheel that
# installs elsewhere, and the pytest suite run against the installed package from outside the source
# tree (not against <build>/python).
#   usage: check.sh SOURCE WORK [PYTHON [PART]]   (PYTHON: /usr/bin/python3; PART: all, install or suite)
# PART install runs steps 1-3 (ctest's python_packaging_install: the compile, beside other tests),
# PART suite step 4 against the venv that install left in WORK (ctest's python_packaging: run alone).
# Steps, each timed (the compile happens once, in step 2; step 3 reuses its CMake tree):
#   1. copy the source tree (git's tracked and untracked-not-ignored files) to WORK/src, so nothing is
#      written into SOURCE or its build trees;
#   2. `python3 -m venv --system-site-packages` (Debian's pytest/numpy/torch stay visible), then
#      `pip install --no-build-isolation --no-index WORK/src` (offline);
#   3. `python -m build --wheel --no-isolation` in WORK/src; the wheel goes into a second, bare venv
#      (no system packages) after WORK/src is deleted, and a queue round trip runs there;
#   4. the suite (a copy of tests/python, with the examples/ and bench/showdown/ scripts it runs; not
#      the benchmark tools' tests nor the tests marked timing, see step 4) from WORK, against venv 1.
# GPU interop is left out of this build (RINGCAST_CMAKE_ARGS) to keep the compile short: the build
# tree's python_tests_build_tree covers it. The module is compiled with pybind11's GIL assertions
# (RINGCAST_PYTHON_GIL_ASSERTS, bindings/python/CMakeLists.txt): a reference count changed without the
# GIL aborts the test that did it, naming the object. It differs from a user's module by those checks
# and the GPU part, and the suite of step 4 is the one run of the untimed tests, so it checks both.
set -euo pipefail
src=$1 work=$2 python=${3:-/usr/bin/python3} part=${4:-all}
case $part in all|install|suite) ;; *) echo "check.sh: PART is all, install or suite, not '$part'" >&2; exit 2 ;; esac
venv=$work/venv
log=$work/log
if [ "$part" = suite ]; then
  [ -f "$work/installed" ] || { echo "python_packaging: FAILED: no installed package in $work (the install part did not run or failed)" >&2; exit 1; }
  log=$work/log-suite; : >"$log"
else
  rm -rf "$work"; mkdir -p "$work/src"
fi
fail() {
  echo "python_packaging: FAILED: $*" >&2
  echo "---- last lines of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
}
step() { echo "+ $*" >>"$log"; "$@" >>"$log" 2>&1; }
t0=$SECONDS
lap() { echo "python_packaging: $1: $((SECONDS - t0)) s"; t0=$SECONDS; }

if [ "$part" != suite ]; then

# 1. the copy
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do [ -f "$src/$f" ] && printf '%s\0' "$f"; done \
      < <(git -C "$src" ls-files -z --cached --others --exclude-standard) \
    | tar -C "$src" --null -T - -cf - | tar -C "$work/src" -xf - || fail "copy of $src"
else  # a source tarball: everything but build trees
  tar -C "$src" --exclude='./build*' -cf - . | tar -C "$work/src" -xf - || fail "copy of $src"
fi
lap "copied the source tree"

# 2. pip install . into a fresh venv
step "$python" -m venv --system-site-packages "$venv" || fail "python3 -m venv"
# A PYTHON that itself runs in a virtual environment (e.g. a machine whose python3 is a venv holding
# torch, pytest, pybind11): --system-site-packages reaches only the base interpreter's packages, so the
# parent venv's site-packages are added by a .pth file — what "the packages this python sees" means.
parent_site=$("$python" -c 'import sys, site; print(site.getsitepackages()[0] if sys.prefix != sys.base_prefix else "")')
if [ -n "$parent_site" ]; then
  "$venv/bin/python" -c 'import site, sys; open(site.getsitepackages()[0] + "/ringcast-parent-venv.pth", "w").write(sys.argv[1] + "\n")' \
    "$parent_site" || fail "linking the parent venv's packages"
  echo "python_packaging: $python runs in a venv; its packages ($parent_site) stay visible"
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
export RINGCAST_CMAKE_ARGS="-DRINGCAST_HIP=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_PYTHON_GIL_ASSERTS=ON"
step "$venv/bin/python" -m pip install -v --no-build-isolation --no-index "$work/src" || fail "pip install"
# The configure said so (pip -v keeps CMake's output in the log): without it the suite would check no GIL.
grep -q "ringcast._core with pybind11's GIL assertions" "$log" \
  || fail "the package was not compiled with pybind11's GIL assertions (RINGCAST_PYTHON_GIL_ASSERTS)"
[ -z "$(ls -A "$work/src/bindings/python" | grep -v '^ringcast$\|^src$\|^CMakeLists.txt$' || true)" ] \
  || fail "the build wrote into bindings/python: $(ls "$work/src/bindings/python")"
lap "venv + pip install --no-build-isolation . (compiles ringcast._core)"

# 3. a wheel, installed into a bare venv after the source copy is gone
step bash -c "cd '$work/src' && '$venv/bin/python' -m build --wheel --no-isolation --outdir '$work/dist'" \
  || fail "python -m build --wheel --no-isolation"
wheel=$(ls "$work"/dist/ringcast-*.whl) || fail "no wheel in $work/dist"
"$venv/bin/python" -m zipfile -l "$wheel" >"$work/wheel-files" 2>&1
for f in ringcast/__init__.py ringcast/vllm.py ringcast/_core.pyi ringcast/py.typed 'ringcast/_core\..*\.so' \
         'entry_points.txt'; do
  grep -q "$f" "$work/wheel-files" || fail "the wheel lacks $f ($(tr '\n' ' ' <"$work/wheel-files"))"
done
rm -rf "$work/src"
bare=$work/venv-bare
step "$python" -m venv "$bare" || fail "bare venv"
step "$bare/bin/python" -m pip install --no-index "$wheel" || fail "pip install of the wheel"
step bash -c "cd '$work' && '$bare/bin/python' -c '
import ringcast, sys
assert ringcast.__file__.startswith(sys.prefix), ringcast.__file__
q = ringcast.MessageQueue(1, 1, max_chunk_bytes=1 << 16, max_chunks=4)
r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
q.enqueue({\"step\": 1, \"data\": bytes(100000)})
assert r.dequeue(timeout=5) == {\"step\": 1, \"data\": bytes(100000)}
r.shutdown(); q.shutdown()
print(\"wheel ok:\", ringcast.__file__)
'" || fail "the wheel's package in a bare venv"
lap "python -m build --wheel + install into a bare venv + round trip"
: >"$work/installed"  # what the suite part looks for: steps 1-3 all passed
fi
[ "$part" = install ] && exit 0

# 4. the suite against the installed package, from outside the source tree: a copy of tests/python and of
#    the scripts some of its tests run (examples/, bench/showdown/), without the package's sources. Left
#    out: the tests of the benchmark tools under bench/python/ (python_tests_build_tree runs them) and
#    the tests marked timing (conftest.py: those that compare a wall or CPU clock, probe the GIL or count
#    kernel waits), timings of the same compiled sources, which python_tests runs against the build tree
#    with the cores to itself; this suite runs beside other tests. Every other test of the package's
#    modules, the examples and the showdown runs here, and only here (bindings/python/CMakeLists.txt).
tree=$work/tests-tree
rm -rf "$tree"
mkdir -p "$tree/tests" "$tree/bench"
cp -r "$src/tests/python" "$tree/tests/python"
# the benchmark tools' tests: python_tests_build_tree runs them (bindings/python/CMakeLists.txt)
(cd "$tree/tests/python" && rm -f test_bench_*.py test_step_split.py)
cp -r "$src/examples" "$tree/examples"
cp -r "$src/bench/showdown" "$tree/bench/showdown"
find "$tree" -name __pycache__ -prune -exec rm -rf {} +
cd "$work"
where=$("$venv/bin/python" -c 'import ringcast, sys; print(ringcast.__file__); assert ringcast.__file__.startswith(sys.prefix)') \
  || fail "venv's ringcast is not the installed one"
echo "python_packaging: testing $where"
# RINGCAST_PACKAGING_PYTEST_ARGS adds pytest options (e.g. -x; a -m of its own replaces this one).
# pytest's output goes to the log too.
# shellcheck disable=SC2086
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider \
  -m "not timing" \
  ${RINGCAST_PACKAGING_PYTEST_ARGS:-} "$tree/tests/python" 2>&1 | tee -a "$log" \
  || fail "pytest against the installed package"
lap "pytest suite against the installed package"
