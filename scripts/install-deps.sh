#!/bin/sh
# Installs the Debian packages tandem's build and tests need. Idempotent and
# silent when everything is already present; uses sudo when not root.
set -eu

PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config \
libprotobuf-c-dev protobuf-c-compiler libcjson-dev libopenblas-dev \
python3-onnx python3-numpy python3-protobuf python3-torch python3-torchvision \
nodejs npm ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo graphviz chromium"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
# node and npm may come from outside apt (the machine image ships them).
case " $missing " in *" nodejs "*) command -v node >/dev/null 2>&1 && missing=$(echo "$missing" | sed 's/ nodejs//');; esac
case " $missing " in *" npm "*) command -v npm >/dev/null 2>&1 && missing=$(echo "$missing" | sed 's/ npm//');; esac

[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing$missing" >&2
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
