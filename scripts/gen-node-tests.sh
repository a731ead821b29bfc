#!/bin/sh
# Generates the ONNX backend node test data with Debian's python3-onnx (1.12)
# into $TANDEM_CACHE/onnx-node/, giving
#   $TANDEM_CACHE/onnx-node/node/<test_name>/model.onnx
#   $TANDEM_CACHE/onnx-node/node/<test_name>/test_data_set_N/{input_K.pb,output_K.pb}
# The generator also writes other kinds (real: data.json holding a download
# URL only; simple / pytorch-*: small models); they are kept but tandem only
# uses node/.
#
# numpy 1.24 removed np.float, np.int, np.bool and np.object, which onnx 1.12's
# test cases still use: the wrapper below restores them on the numpy module for
# this run only, then calls the generator.
#
# `gen-node-tests.sh 1.23` generates the newer suite instead, with the test
# environment's onnx 1.23 (scripts/testenv.sh, made first) into
# $TANDEM_CACHE/onnx-node-1.23/node: the PyPI wheel ships the node case
# generators (onnx/backend/test/case/node/*.py) but not their data, and its
# generate-data command writes only the model cases, so the node cases are
# handed to the same writer.
#
# Idempotent: does nothing when the suite's node/ folder exists. Generates
# into a temporary folder and renames it, so an interrupted run leaves nothing.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
SUITE=${1:-1.12}
case $SUITE in
1.12) DEST=$CACHE/onnx-node; PY=/usr/bin/python3 ;;
1.23) DEST=$CACHE/onnx-node-1.23; PY=$CACHE/venv/bin/python ;;
*) echo "gen-node-tests: unknown suite '$SUITE' (1.12 or 1.23)." >&2; exit 1 ;;
esac

[ -d "$DEST/node" ] && exit 0
[ "$SUITE" = 1.23 ] && sh "$ROOT/scripts/testenv.sh"

TMP=$CACHE/.$(basename "$DEST").tmp.$$
log=$TMP.log
trap 'rm -rf "$TMP" "$log"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rm -rf "$TMP"
mkdir -p "$TMP"
if ! "$PY" - "$TMP" "$SUITE" >"$log" 2>&1 <<'EOF'
import sys
import warnings
import numpy as np

# Aliases removed in numpy 1.24 but used by onnx 1.12's case generators.
for _name, _type in (("float", float), ("int", int), ("bool", bool),
                     ("object", object), ("complex", complex), ("str", str)):
    if not hasattr(np, _name):
        setattr(np, _name, _type)
warnings.simplefilter("ignore")

from onnx.backend.test import cmd_tools

if sys.argv[2] == "1.23":
    import onnx.backend.test.case.node as node_test
    cmd_tools.model_test.collect_testcases = node_test.collect_testcases

sys.argv = ["backend-test-tools", "generate-data", "-o", sys.argv[1]]
cmd_tools.main()
EOF
then
    tail -n 20 "$log" >&2
    rm -f "$log"
    echo "gen-node-tests: the onnx test-data generator failed." >&2
    exit 1
fi
rm -f "$log"

if [ ! -d "$TMP/node" ]; then
    echo "gen-node-tests: the generator produced no node/ folder." >&2
    exit 1
fi
rm -rf "$DEST"
mv "$TMP" "$DEST"
echo "gen-node-tests: generated $(find "$DEST/node" -mindepth 1 -maxdepth 1 -type d | wc -l) node cases in $DEST/node"
