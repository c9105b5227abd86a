#!/bin/sh
# The whole-process benchmarks of `make bench` (after the C ones).
python3 "$(dirname "$0")/shim_overhead.py" || exit 1
# The wait calls: unthrottled overhead, and a throttled loop's CPU.
exec python3 "$(dirname "$0")/wait_overhead.py"
