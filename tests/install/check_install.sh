#!/usr/bin/env bash
# install/check_install.sh BUILD_DIR SOURCE_DIR -- `cmake --install` and `find_package(dtsim CONFIG)` end to end.
#
# Installs BUILD_DIR into a temporary prefix and checks the installed tree: bin/dtsim runs `version` (printing the
# package's version); lib/libdtsim.so, lib/cmake/dtsim/dtsim{Config,ConfigVersion,Targets}.cmake and
# include/dtsim-X.Y/dtsim/dtsim.hpp exist; every "..." include of an installed header is installed too; the
# installed CMake files name neither the source nor the build tree. Then configures the out-of-tree consumer
# (SOURCE_DIR/tests/install/consumer: find_package(dtsim CONFIG REQUIRED) + dtsim::dtsim, nothing else) with
# -DCMAKE_PREFIX_PATH=prefix, Ninja and BUILD_DIR's compiler (and sanitizer flags, in a sanitizer build), builds it,
# checks that it loads the installed libdtsim.so, and runs it: it simulates one iteration through the public API and
# exits non-zero unless the iteration time is positive.
set -euo pipefail

BUILD=${1:?usage: check_install.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: check_install.sh BUILD_DIR SOURCE_DIR}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$SRC" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix

failures=0
ok() { echo "ok  $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# cache VAR -- the value of VAR in BUILD_DIR's CMakeCache.txt ("" if unset).
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt" | head -n 1; }

# ---- install ------------------------------------------------------------------------------------------------------
if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1; then
  fail "cmake --install $BUILD --prefix $PREFIX: $(tail -n 20 "$TMP/install.log")"
  exit 1
fi
ok "cmake --install: $(grep -c '^-- Installing:' "$TMP/install.log") files installed"

LIBDIR=$(cache CMAKE_INSTALL_LIBDIR)
LIBDIR=${LIBDIR:-lib}
CMAKEDIR=$PREFIX/$LIBDIR/cmake/dtsim
for f in "$CMAKEDIR/dtsimConfig.cmake" "$CMAKEDIR/dtsimConfigVersion.cmake" "$CMAKEDIR/dtsimTargets.cmake" \
         "$PREFIX/$LIBDIR/libdtsim.so" "$PREFIX/bin/dtsim"; do
  if [[ -e $f ]]; then ok "installed ${f#"$PREFIX"/}"; else fail "not installed: ${f#"$PREFIX"/}"; fi
done
[[ $failures -eq 0 ]] || exit 1

# The package's version, as dtsimConfigVersion.cmake states it.
VERSION=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$CMAKEDIR/dtsimConfigVersion.cmake")
if [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then ok "package version $VERSION"; else fail "package version '$VERSION'"; fi

# Headers: one folder, project paths kept, every quoted include of an installed header installed as well.
INCDIR=$PREFIX/$(cache CMAKE_INSTALL_INCLUDEDIR)/dtsim-${VERSION%.*}
if [[ -f $INCDIR/dtsim/dtsim.hpp ]]; then
  ok "installed ${INCDIR#"$PREFIX"/}/dtsim/dtsim.hpp ($(find "$INCDIR" -name '*.hpp' | wc -l) headers)"
  missing=$(cd "$INCDIR" && find . -name '*.hpp' -print0 |
    xargs -0 sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' | sort -u |
    while read -r h; do [[ -f $h ]] || echo "$h"; done)
  if [[ -z $missing ]]; then ok "every header the installed headers include is installed"; else
    fail "included by installed headers but not installed: $(echo $missing)"; fi
else
  fail "not installed: ${INCDIR#"$PREFIX"/}/dtsim/dtsim.hpp"
fi

leaks=$(grep -lF -e "$SRC" -e "$BUILD" "$CMAKEDIR"/*.cmake || true)
if [[ -z $leaks ]]; then ok "installed CMake files name neither the source nor the build tree"; else
  fail "installed CMake files naming the source or build tree: $(echo $leaks)"; fi

# ---- the installed binary ----------------------------------------------------------------------------------------
out=$("$PREFIX/bin/dtsim" version 2>&1) || fail "bin/dtsim version: exit code $?: $out"
expected="^dtsim ${VERSION//./\\.}( |$)"
if [[ $out =~ $expected ]]; then ok "bin/dtsim version: $out"; else
  fail "bin/dtsim version: expected 'dtsim $VERSION ...', got: $out"; fi

# ---- the out-of-tree consumer ------------------------------------------------------------------------------------
args=(-G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)")
sanitize=$(cache DTSIM_SANITIZE)
if [[ -n $sanitize ]]; then  # libdtsim.so is instrumented: so must the program be, for the runtime to come first
  args+=(-DCMAKE_CXX_FLAGS="-fsanitize=$sanitize" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$sanitize")
fi
if ! cmake -S "$SRC/tests/install/consumer" -B "$TMP/consumer" "${args[@]}" >"$TMP/configure.log" 2>&1; then
  fail "consumer: configure failed: $(tail -n 30 "$TMP/configure.log")"
  exit 1
fi
ok "consumer: configured (find_package(dtsim CONFIG) found $(sed -n 's/^dtsim_DIR:PATH=//p' \
  "$TMP/consumer/CMakeCache.txt" | sed "s|^$PREFIX/||"))"
if ! cmake --build "$TMP/consumer" >"$TMP/build.log" 2>&1; then
  fail "consumer: build failed: $(tail -n 30 "$TMP/build.log")"
  exit 1
fi
ok "consumer: built against dtsim::dtsim"

lib=$(ldd "$TMP/consumer/dtsim_consumer" | sed -n 's/^[[:space:]]*libdtsim\.so[^ ]* => \([^ ]*\).*/\1/p')
if [[ $lib == "$PREFIX"/* ]]; then ok "consumer: loads ${lib#"$PREFIX"/}"; else
  fail "consumer: loads libdtsim from '$lib', not from the installed prefix"; fi

rc=0
"$TMP/consumer/dtsim_consumer" >"$TMP/consumer.out" 2>&1 || rc=$?
if [[ $rc -eq 0 ]] && grep -q "^dtsim $VERSION" "$TMP/consumer.out" && grep -q "iteration" "$TMP/consumer.out"; then
  ok "consumer: ran: $(tr '\n' ';' <"$TMP/consumer.out")"
else
  fail "consumer: exit code $rc: $(cat "$TMP/consumer.out")"
fi

echo
if [[ $failures -ne 0 ]]; then
  echo "install: $failures failures"
  exit 1
fi
echo "install: passed"
