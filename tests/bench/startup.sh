#!/bin/sh
# startup.sh — what loading the shim costs every process (SPEC §13: with a
# host-wide preload, every process on the host pays it). Medians of
# alternating runs against a pass-through preload (a library that wraps
# the calls the benchmarks measure and does nothing: the floor of any
# preload), one run:
#   - 1,000 `true`s from one shell script, as a host full of short
#     processes would run them (target: at most 1.10 of the pass-through);
#   - one process that makes one connect, so the config is read and the
#     budgets set up (a user without a rule pays this once).
# /usr/bin/true's instructions at start-up (callgrind, a figure that does
# not drift with the machine's load) are instructions.py's 'true'.
set -eu
B=${RLSHIM_BUILD:?run through make bench}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -shared -fPIC -o "$tmp/passthrough.so" "$here/control/passthrough.c" -ldl
printf '[default]\nconnect = 1000/s\n' > "$tmp/rlshim.ini"
mkdir "$tmp/state"
export RLSHIM_CONFIG="$tmp/rlshim.ini" RLSHIM_STATE_DIR="$tmp/state"
ns() { date +%s%N; }
trues() { # trues LIB
    t0=$(ns)
    LD_PRELOAD=$1 sh -c 'i=0; while [ $i -lt 1000 ]; do /usr/bin/true; i=$((i + 1)); done'
    echo $(($(ns) - t0))
}
connect1() { # connect1 LIB: 200 processes that each make one connect
    t0=$(ns)
    i=0
    while [ $i -lt 200 ]; do
        LD_PRELOAD=$1 "$B/tests/helpers/client" connects 9 1 >/dev/null 2>&1 || :
        i=$((i + 1))
    done
    echo $(($(ns) - t0))
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for what in trues connect1; do
    : > "$tmp/r"
    : > "$tmp/a"
    : > "$tmp/b"
    for round in 1 2 3 4 5 6 7; do
        a=$($what "$B/librlshim.so")
        b=$($what "$tmp/passthrough.so")
        echo "$a" >> "$tmp/a"
        echo "$b" >> "$tmp/b"
        awk -v a="$a" -v b="$b" 'BEGIN {printf "%.4f\n", a / b}' >> "$tmp/r"
    done
    per=$([ "$what" = trues ] && echo 1000 || echo 200)
    printf '%-9s rlshim %.3f ms, pass-through %.3f ms per process: ratio %s (median of 7)\n' \
        "$what" "$(median < "$tmp/a" | awk -v n="$per" '{print $1 / n / 1e6}')" \
        "$(median < "$tmp/b" | awk -v n="$per" '{print $1 / n / 1e6}')" "$(median < "$tmp/r")"
done
