#!/bin/sh
# Usage: skipped-filter.sh FILE...
#
# Prints a Criterion --filter pattern that selects exactly the tests the
# FILEs list (one suite/test a line, as run-suite.sh writes them under
# RLSHIM_SKIPS_DIR), or one that selects none when they are empty.
set -eu
for f in "$@"; do
    if [ ! -f "$f" ]; then
        echo "skipped-filter.sh: no list at $f (make asan writes it)" >&2
        exit 1
    fi
done
tests=$(sort -u "$@" | paste -sd '|')
if [ -z "$tests" ]; then
    echo '!(*)'
else
    echo "@($tests)"
fi
