"""Builds dtsim for `pip install --no-build-isolation .` (see pyproject.toml).

The package is python/dtsim/ (the Python sources) with the pybind11 extension _dtsim CMake builds into
<build>/python/dtsim/, plus the `dtsim` executable as dtsim/_bin/dtsim, which the `dtsim` console script (dtsim._cli) runs. Both are
self-contained (the library is linked in statically), so the wheel needs nothing from the build tree once installed.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent


class CMakeBuildPy(build_py):
    """Configures (once) and builds the `dtsim` and `dtsim_python` targets; build_py copies the Python sources, this
    adds the extension and the executable."""

    def run(self):
        build_dir = Path(os.environ.get("DTSIM_PIP_BUILD_DIR", ROOT / "build-pip")).resolve()
        if not (build_dir / "CMakeCache.txt").exists():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir), *generator,
                                   "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF", "-DCMAKE_UNITY_BUILD=ON",
                                   "-DPython3_EXECUTABLE=" + sys.executable])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "dtsim", "dtsim_python",
                               "--parallel", str(os.cpu_count() or 1)])
        super().run()  # python/dtsim/*.py, *.pyi, py.typed (package_dir, package_data)
        extensions = list((build_dir / "python" / "dtsim").glob("_dtsim*.so"))
        if not extensions:
            sys.exit(f"setup.py: {build_dir}/python/dtsim has no _dtsim extension: CMake found no pybind11-dev / "
                     "python3-dev (Debian: apt-get install pybind11-dev python3-dev)")
        package = Path(self.build_lib) / "dtsim"
        for f in extensions:
            shutil.copy2(f, package / f.name)
        (package / "_bin").mkdir(exist_ok=True)
        shutil.copy2(build_dir / "bin" / "dtsim", package / "_bin" / "dtsim")


class BinaryDistribution(Distribution):
    """The wheel holds a compiled extension and executable: a platform wheel, installed into platlib."""

    def has_ext_modules(self):
        return True


# setuptools' own build and egg-info trees go under build-pip/, not into CMake's build/ or the source root.
(ROOT / "build-pip").mkdir(exist_ok=True)
setup(packages=["dtsim"], package_dir={"dtsim": "python/dtsim"}, package_data={"dtsim": ["py.typed", "*.pyi"]},
      cmdclass={"build_py": CMakeBuildPy}, distclass=BinaryDistribution,
      options={"build": {"build_base": "build-pip/setuptools"}, "egg_info": {"egg_base": "build-pip"}})
