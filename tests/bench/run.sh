#!/bin/sh
# Usage: run.sh BENCH...   (make bench)
#
# Runs each benchmark (a C program, a .py or a .sh of tests/bench), then
# lists every bar of the run at the end: each benchmark prints its bars as
# "bar: WHAT: FIGURE (target ...): met" or "... NOT MET". A benchmark that
# cannot run fails the whole (after the others have run); a bar not met
# does not (the machines are shared: bars are reported, not enforced).
set -u
log=$(mktemp "${TMPDIR:-/tmp}/rlshim-bench-XXXXXX.log")
rc=$(mktemp "${TMPDIR:-/tmp}/rlshim-bench-XXXXXX.rc")
trap 'rm -f "$log" "$rc"' EXIT
failed=""
one() {
    case "$1" in
    *.py) python3 "$1" ;;
    *.sh) sh "$1" ;;
    *) "$1" ;;
    esac
}
for b in "$@"; do
    echo "== $b"
    # Through a pipe to keep a copy; the status comes back through a file.
    { one "$b"; echo $? >"$rc"; } 2>&1 | tee -a "$log"
    [ "$(cat "$rc")" = 0 ] || failed="$failed $b"
done
echo
echo "== bars of this run ($(uptime | sed 's/.*load average/load average/'))"
grep '^bar: ' "$log" | sed 's/^bar: /  /'
awk '/^bar: / { n++; if ($NF == "met") m++ }
     END { printf "bench: %d of %d bars met\n", m, n }' "$log"
if [ -n "$failed" ]; then
    echo "bench: FAILED to run:$failed" >&2
    exit 1
fi
