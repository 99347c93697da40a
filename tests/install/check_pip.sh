#!/usr/bin/env bash
# `pip install --no-build-isolation .` into a fresh virtual environment (with the system site packages, as Debian's
# pandas lives there), offline (--no-index), reusing the CMake build tree BUILD_DIR; then `import dtsim` and the
# `dtsim` command from that environment, outside the source tree. Usage: check_pip.sh BUILD_DIR. Exit 77 (skipped)
# where python3 has no venv module or pip.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:?usage: check_pip.sh BUILD_DIR}")
python=${PYTHON:-/usr/bin/python3}
"$python" -c "import venv, ensurepip" 2>/dev/null || { echo "check_pip: $python has no venv/ensurepip (python3-venv)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv --system-site-packages "$tmp/venv"
DTSIM_PIP_BUILD_DIR="$build" "$tmp/venv/bin/pip" install --no-build-isolation --no-index -q "$src"
cd "$tmp"
version=$("$tmp/venv/bin/python" -c "import dtsim, sys; print(dtsim.version()); assert '$tmp/venv' in dtsim.__file__, dtsim.__file__")
echo "check_pip: import dtsim $version from the environment"
"$tmp/venv/bin/dtsim" --version
"$tmp/venv/bin/dtsim" simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --dp 4 --gbs 32 --network analytic -q \
  --out "$tmp/out"
test -s "$tmp/out/summary.json"
echo "check_pip: the dtsim command of the environment simulates"
