#!/bin/sh
# The whole-process benchmarks of `make bench` (after the C ones).
d="$(dirname "$0")"
python3 "$d/names_overhead.py" || exit 1
exec python3 "$d/shim_overhead.py"
