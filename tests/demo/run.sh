#!/bin/sh
# make demo: see tests/demo/demo.py.
set -e
command -v curl >/dev/null || sh "$(dirname "$0")/../../.ci/ensure-deps" curl:cmd:curl
exec python3 "$(dirname "$0")/demo.py" "$1"
