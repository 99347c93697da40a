"""The `dtsim` command of a pip-installed dtsim: runs the executable installed beside the module (dtsim/_bin/dtsim)."""
import os
import sys
from pathlib import Path


def main():
    exe = Path(__file__).resolve().parent / "_bin" / "dtsim"
    if not exe.is_file():
        sys.exit(f"dtsim: {exe} is missing: this dtsim package was not installed by pip (use the build's bin/dtsim)")
    os.execv(str(exe), [str(exe), *sys.argv[1:]])
