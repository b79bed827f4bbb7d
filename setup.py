"""setuptools glue for `pip install .`: builds ringcast's compiled modules with the project's CMake.

The metadata lives in pyproject.toml; this file names the package and adds the build step, in the shape of
pybind11's CMake example: one CMake extension whose build configures the repository's
CMakeLists.txt for the interpreter that runs the build (sys.executable), builds everything that
configuration enables (the C++ library, linked in statically; ringcast._core; ringcast._gpucore where
a GPU toolkit is found), and copies the modules to where setuptools packs them. RINGCAST_CMAKE_ARGS
adds configure options (e.g. -DRINGCAST_HIP=OFF -DRINGCAST_CUDA=OFF). The pure-Python files come
from bindings/python/ringcast/.

pybind11: the Python package's CMake files when it is importable (pip's pybind11), otherwise CMake's
own search (Debian's pybind11-dev). The build asks for pip's pybind11 (setup_requires, which setuptools
reports to pip and to `python -m build` as a build requirement) only when neither is there, so an
offline `--no-build-isolation` build and `python -m build --no-isolation` pass their dependency check
with Debian's packages alone, and an isolated build without pybind11-dev gets it from pip. Needs CMake
>= 3.22 and a C++20 compiler. CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs (default: all cores).

Build outputs go to build/setuptools/ (never next to the sources); the CMake tree there is kept, so
a second build for the same interpreter (a wheel after an install) compiles nothing again.
"""

import glob
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext
from setuptools.command.egg_info import egg_info

ROOT = Path(__file__).resolve().parent
BUILD_BASE = os.path.join("build", "setuptools")


class BuildUnderBuildDir(build):
    """build/lib.*, build/temp.* and bdist.* under build/setuptools/ instead of build/ itself, which
    is the CMake build tree of tools/demo and tools/test."""

    def initialize_options(self) -> None:
        super().initialize_options()
        self.build_base = BUILD_BASE


class EggInfoUnderBuildDir(egg_info):
    """ringcast.egg-info under build/setuptools/, not next to the package in bindings/python/."""

    def initialize_options(self) -> None:
        super().initialize_options()
        os.makedirs(BUILD_BASE, exist_ok=True)
        self.egg_base = BUILD_BASE


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


def _pybind11_cmake_dir() -> "str | None":
    """The CMake files of the pybind11 package this interpreter imports, if any."""
    try:
        import pybind11  # type: ignore[import]

        return str(pybind11.get_cmake_dir())
    except (ImportError, AttributeError):  # not installed, or installed without its CMake files
        return None


def _system_pybind11() -> bool:
    """Whether CMake's find_package(pybind11 CONFIG) will find an installed pybind11 (pybind11-dev)."""
    prefixes = [sys.prefix, sys.base_prefix, "/usr", "/usr/local"]
    prefixes += [p for p in os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep) if p]
    patterns = ["lib/cmake/pybind11", "lib64/cmake/pybind11", "share/cmake/pybind11", "lib/*/cmake/pybind11"]
    return any(glob.glob(os.path.join(prefix, pattern, "pybind11Config.cmake"))
               for prefix in prefixes for pattern in patterns)


def _build_requirements() -> "list[str]":
    if _pybind11_cmake_dir() is not None or _system_pybind11():
        return []
    return ["pybind11>=2.10"]


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("ringcast: building the Python module needs CMake >= 3.22 on PATH "
                               "(Debian/Ubuntu: apt install cmake g++)")
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        tree = Path(self.build_temp).resolve() / "cmake"
        tree.mkdir(parents=True, exist_ok=True)
        configure = [
            cmake, "-S", str(ROOT), "-B", str(tree),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DRINGCAST_BUILD_PYTHON=ON",
            "-DRINGCAST_BUILD_TESTS=OFF",
            "-DRINGCAST_BUILD_BENCH=OFF",
            "-DRINGCAST_BUILD_TOOLS=OFF",
        ]
        pybind11_dir = _pybind11_cmake_dir()
        if pybind11_dir:
            configure.append(f"-Dpybind11_DIR={pybind11_dir}")
        configure += shlex.split(os.environ.get("RINGCAST_CMAKE_ARGS", ""))  # e.g. -DRINGCAST_HIP=OFF; last wins
        print(f"ringcast: building for {sys.executable}; pybind11: "
              f"{pybind11_dir or 'the one CMake finds (pybind11-dev)'}", flush=True)
        subprocess.run(configure, check=True)
        cache = (tree / "CMakeCache.txt").read_text()
        if "pybind11_DIR:PATH=pybind11_DIR-NOTFOUND" in cache:
            raise RuntimeError(
                f"ringcast: pybind11 not found for {sys.executable}: neither importable there nor installed for "
                "CMake. `pip install pybind11` into that environment (packages installed with --user are not "
                "seen inside a venv), let pip build in isolation (no --no-build-isolation), `apt install "
                "pybind11-dev`, or pass RINGCAST_CMAKE_ARGS=-Dpybind11_DIR=<pybind11's CMake directory>")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        # Everything the configuration enables: the library, ringcast._core, and the optional parts that
        # come with their own module where their dependency is found (ringcast._gpucore).
        subprocess.run([cmake, "--build", str(tree), "-j", jobs], check=True)
        # Module names carry this interpreter's suffix (FindPython's SOABI), the one setuptools expects.
        built_dir = tree / "python" / "ringcast"
        suffix = target.name[len("_core"):]
        modules = sorted(built_dir.glob(f"_*{suffix}"))
        if target.name not in [m.name for m in modules]:
            raise RuntimeError(f"ringcast: expected {target.name} in {built_dir}, found "
                               f"{[p.name for p in built_dir.glob('*.so')]}")
        target.parent.mkdir(parents=True, exist_ok=True)
        for module in modules:
            shutil.copyfile(module, target.parent / module.name)


setup(
    # The package and its typing files (kept here, not in pyproject.toml's [tool.setuptools], which
    # Debian's setuptools 66 still calls beta).
    package_dir={"": "bindings/python"},
    packages=["ringcast"],
    package_data={"ringcast": ["py.typed", "*.pyi"]},
    include_package_data=False,
    ext_modules=[CMakeExtension("ringcast._core")],
    setup_requires=_build_requirements(),
    cmdclass={"build": BuildUnderBuildDir, "egg_info": EggInfoUnderBuildDir, "build_ext": CMakeBuild},
    zip_safe=False,
)
