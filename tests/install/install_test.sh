#!/bin/sh
# Installs this build into a temporary DESTDIR and builds prog.c against it
# with pkg-config (shared, and --static) and with find_package(tandem)
# (tandem::tandem, tandem::tandem_static); runs each program; checks the CLI,
# the man page and the Python package as installed.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
BUILD=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/tandem-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
CC=${CC:-cc}

fail() { echo "install test: $*" >&2; exit 1; }

DESTDIR=$T/stage cmake --install "$BUILD" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install failed"; }
PREFIX=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$BUILD/CMakeCache.txt")
R=$T/stage$PREFIX
PC=$(find "$R" -name tandem.pc | head -n 1)
[ -n "$PC" ] || fail "no tandem.pc installed"
LIBDIR=$(dirname "$(dirname "$PC")")
for f in "$LIBDIR/libtandem.a" "$LIBDIR/libtandem.so" "$R/include/tandem/tandem.h" "$R/include/tandem/device.h" \
         "$R/bin/tandem" "$R/share/man/man1/tandem.1" "$LIBDIR/cmake/tandem/tandemConfig.cmake"; do
    [ -e "$f" ] || fail "not installed: $f"
done
"$R/bin/tandem" --version
man -l "$R/share/man/man1/tandem.1" 2>/dev/null | grep -q "EXIT STATUS" || \
    { command -v man >/dev/null 2>&1 && fail "the man page does not render"; }

/usr/bin/python3 "$SRC/tests/install/make_model.py" "$T/model.onnx"

echo "== pkg-config, shared"
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
pkg-config --modversion tandem
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Werror -o "$T/prog_pc" "$SRC/tests/install/prog.c" $(pkg-config --cflags --libs tandem)
readelf -d "$T/prog_pc" | grep -q "NEEDED.*libtandem.so.0" || fail "prog_pc does not link libtandem.so.0"
LD_LIBRARY_PATH=$LIBDIR "$T/prog_pc" "$T/model.onnx"

echo "== pkg-config --static"
# -l:libtandem.a: the linker would otherwise prefer libtandem.so.
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Werror -o "$T/prog_pc_static" "$SRC/tests/install/prog.c" $(pkg-config --cflags tandem) \
    $(pkg-config --static --libs tandem | sed 's/-ltandem\b/-l:libtandem.a/')
if readelf -d "$T/prog_pc_static" | grep -q "NEEDED.*libtandem"; then fail "prog_pc_static needs libtandem.so"; fi
"$T/prog_pc_static" "$T/model.onnx"

echo "== find_package(tandem)"
cmake -S "$SRC/tests/install/consumer" -B "$T/consumer" -DCMAKE_PREFIX_PATH="$R" -DCMAKE_C_COMPILER="$CC" \
    >"$T/consumer.log" 2>&1 || { cat "$T/consumer.log"; fail "find_package(tandem) failed"; }
cmake --build "$T/consumer" >"$T/consumer-build.log" 2>&1 || { cat "$T/consumer-build.log"; fail "the consumer did not build"; }
readelf -d "$T/consumer/prog_shared" | grep -q "NEEDED.*libtandem.so.0" || fail "tandem::tandem is not the shared library"
if readelf -d "$T/consumer/prog_static" | grep -q "NEEDED.*libtandem"; then fail "tandem::tandem_static needs libtandem.so"; fi
"$T/consumer/prog_shared" "$T/model.onnx"
"$T/consumer/prog_static" "$T/model.onnx"

echo "== the Python package, as installed"
PYDIR=$(dirname "$(find "$R" -path '*/tandem/_installed.py' | head -n 1)")
[ -f "$PYDIR/__init__.py" ] || fail "the Python package is not installed"
env -u TANDEM_LIBRARY PYTHONPATH="$(dirname "$PYDIR")" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c "
import sys, tandem, numpy as np
assert tandem.library_path.startswith('$LIBDIR'), tandem.library_path
s = tandem.InferenceSession(sys.argv[1], providers=['vnpu:edge-npu', 'cpu'])
y = s.run(None, {'x': np.array([[-1, 0.5, 2, -3]], np.float32)})[0]
assert y.tolist() == [[0, 1, 4, 0]], y
print('python', tandem.__version__, tandem.library_path, s.ledger['summary']['nodes_by_device'])
" "$T/model.onnx"
echo "install test: ok"
