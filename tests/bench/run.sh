#!/bin/sh
# The whole-process benchmarks of `make bench` (after the C ones).
exec python3 "$(dirname "$0")/shim_overhead.py"
