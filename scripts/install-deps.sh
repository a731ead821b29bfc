#!/bin/sh
# Installs the Debian packages tandem's build and tests need. Idempotent and
# silent when everything is already present; uses sudo when not root.
set -eu

# Debian's packages only; the PyPI test environment (onnxruntime, the oracle;
# the model-carrying wheels) is scripts/testenv.sh's.
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config \
libprotobuf-c-dev protobuf-c-compiler libcjson-dev libopenblas-dev \
python3-onnx python3-numpy python3-protobuf python3-torch python3-torchvision \
python3-pil python3-venv fonts-dejavu-core \
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo graphviz"

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
