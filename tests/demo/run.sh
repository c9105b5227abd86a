#!/bin/sh
# make demo: see tests/demo/demo.py.
set -e
sh "$(dirname "$0")/../../.ci/ensure-deps" curl:cmd:curl python3:cmd:python3
exec python3 "$(dirname "$0")/demo.py" "$1"
