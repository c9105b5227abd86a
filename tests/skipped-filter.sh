#!/bin/sh
# Usage: skipped-filter.sh FILE
#
# Prints a Criterion --filter pattern that selects exactly the tests FILE
# lists (one suite/test a line, as run-suite.sh writes them under
# RLSHIM_SKIPS_DIR), or one that selects none when FILE is empty.
set -eu
if [ ! -f "$1" ]; then
    echo "skipped-filter.sh: no list at $1 (make asan writes it)" >&2
    exit 1
fi
tests=$(sort -u "$1" | paste -sd '|')
if [ -z "$tests" ]; then
    echo '!(*)'
else
    echo "@($tests)"
fi
