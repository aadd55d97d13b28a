"""Build step of the wheel: compile libcortiq with CMake from the repository this folder sits in
and put the shared library inside the package (cortiq/_lib/libcortiq.so).

Environment:
  CORTIQ_PREBUILT_LIB  path of an already built libcortiq.so to package instead of building
  CORTIQ_CMAKE_ARGS    extra arguments for the CMake configure step
  CORTIQ_BUILD_JOBS    parallel build jobs (default: the number of CPUs)
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


class BinaryDistribution(Distribution):
    """The wheel carries a native library: mark it platform-specific."""

    def has_ext_modules(self):
        return True


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        dest = Path(self.build_lib) / "cortiq" / "_lib"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._library(), dest / "libcortiq.so")

    def _library(self) -> Path:
        pre = os.environ.get("CORTIQ_PREBUILT_LIB")
        if pre:
            return Path(pre).resolve()
        if not (REPO / "CMakeLists.txt").exists():
            raise RuntimeError(f"{REPO}: no CMakeLists.txt; build the package from a checkout of "
                               "the cortiq repository (pip install ./python), or set "
                               "CORTIQ_PREBUILT_LIB")
        build = HERE / "build" / "cmake"
        cmake = shutil.which("cmake")
        if not cmake:
            raise RuntimeError("cmake not found: run scripts/install-deps first (README)")
        args = [cmake, "-S", str(REPO), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                "-DCORTIQ_BUILD_TESTS=OFF", "-DCORTIQ_BUILD_BENCH=OFF"]
        args += os.environ.get("CORTIQ_CMAKE_ARGS", "").split()
        subprocess.check_call(args)
        jobs = os.environ.get("CORTIQ_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call([cmake, "--build", str(build), "--target", "cortiq_shared",
                               "-j", jobs])
        return (build / "src" / "libcortiq.so").resolve()


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildWithLibrary})
