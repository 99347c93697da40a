#!/usr/bin/env bash
# Installs dtsim's build dependencies (Debian 12 packages) and builds it into build/.
# Usage: scripts/setup.sh            what building and running dtsim and its Python module need, and only those
#                                    targets (the first command of README: no test binaries, linters, clang or Jupyter)
#        scripts/setup.sh --tests    also the test suite's tools (GoogleTest, pytest, Jupyter, Open MPI, clang, the
#                                    linters) and every target with the test binaries (scripts/test.sh runs this)
# Run as root, or with sudo available.
# Environment: DTSIM_BUILD_DIR (default build), DTSIM_WERROR=ON to treat warnings as errors (CI), DTSIM_UNITY=ON|OFF
#              (default: ON without --tests, OFF with),
#              DTSIM_SKIP_APT=1 to skip the package installation, DTSIM_PTH=0 not to write the dtsim.pth file that
#              lets the system python3 `import dtsim` (from BUILD_DIR/python; see the end of this script).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DTSIM_BUILD_DIR:-build}
TESTS=OFF
case "${1:-}" in
  "") ;;
  --tests) TESTS=ON ;;
  *) echo "setup: unknown argument '$1' (usage: scripts/setup.sh [--tests])" >&2; exit 2 ;;
esac
# dtsim itself: the compiler and CMake, SimGrid, JSON, Boost.Program_options, CBC (the UniAP planner's MILP),
# libarchive (compressed traces), Protocol Buffers (Perfetto and Chakra traces); the Python module (pybind11 over
# Debian's python3, pandas for to_frame()).
PACKAGES=(build-essential cmake ninja-build pkg-config python3
          libsimgrid-dev nlohmann-json3-dev libboost-dev libboost-program-options-dev
          coinor-libcbc-dev libarchive-dev protobuf-compiler libprotobuf-dev
          pybind11-dev python3-dev python3-pandas)
if [ "$TESTS" = ON ]; then
  # The test suite: GoogleTest, pytest, protobuf for the test that decodes exported Chakra traces, Jupyter to run the
  # notebooks, Open MPI for the sharded sweep (studies/ builds its MPI path where found), time for the benchmarks.
  # python3-venv and python3-wheel: the test that pip-installs the package into a virtual environment.
  PACKAGES+=(libgtest-dev python3-pytest python3-protobuf python3-venv python3-wheel libopenmpi-dev openmpi-bin time
             jupyter-nbconvert python3-nbconvert python3-ipykernel python3-matplotlib python3-nbformat)
  # The fuzz smoke test of scripts/test.sh (scripts/fuzz_smoke.sh): clang and the libFuzzer runtime it links.
  PACKAGES+=(clang libclang-rt-14-dev)
  # The static checks of scripts/test.sh (scripts/lint.sh): clang-format and clang-tidy.
  PACKAGES+=(clang-format clang-tidy)
fi

if [ "${DTSIM_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# A unity build (CMake's UNITY_BUILD: each library compiled as a few merged sources) without the tests: README's
# first command took 4 min 13 s with it on a fresh Debian 12 chroot of a 2-core machine (2026-12-02), 7 min 16 s
# without (2026-11-29). With --tests one object per source unless DTSIM_UNITY=ON (scripts/test.sh's from-scratch
# build sets it): incremental rebuilds recompile one source, not its merged batch. clang-tidy has its own
# per-source compile database (scripts/lint.sh, build-lint).
UNITY=ON
[ "$TESTS" = ON ] && UNITY=OFF
UNITY=${DTSIM_UNITY:-$UNITY}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING="$TESTS" -DCMAKE_UNITY_BUILD="$UNITY" \
      -DDTSIM_WERROR="${DTSIM_WERROR:-OFF}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/bin/dtsim"
# `import dtsim` for the system python3: a .pth file naming BUILD_DIR/python in its user site-packages directory (as
# `pip install --user -e` would do). Without it: PYTHONPATH=$BUILD_DIR/python.
PY_DIR=$(realpath -m "$BUILD_DIR/python")
if [ "${DTSIM_PTH:-1}" = 1 ] && [ -d "$PY_DIR/dtsim" ] && [ -x /usr/bin/python3 ]; then
  SITE=$(/usr/bin/python3 -m site --user-site)
  mkdir -p "$SITE" && echo "$PY_DIR" >"$SITE/dtsim.pth"
  echo "setup: python3 -c 'import dtsim' finds $PY_DIR/dtsim (via $SITE/dtsim.pth)"
fi
