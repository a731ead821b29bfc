#!/bin/sh
# tandem against onnxruntime on the CPU: same models and inputs, one run,
# alternating rounds, at 1 and 2 threads. A markdown table on stdout, every
# figure in a JSON file. `bench/run.sh --help` tells the options; the work
# is done by bench/run.py (/usr/bin/python3, standard library only).
set -eu
exec /usr/bin/python3 "$(dirname "$0")/run.py" "$@"
