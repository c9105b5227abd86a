#!/bin/sh
# Usage: run-suite.sh NAME BINARY [CRITERION ARGS...]
#
# Runs a Criterion test binary, then says in one plain closing line what
# it ran: "NAME: N passed, N failed, N skipped", with every skip and its
# reason above it. A skip is a test that proved nothing: the suite FAILS on
# any skip that tests/skips.allow does not allow for this build
# (RLSHIM_SANITIZER: "" plain, address, undefined or thread).
#
# The counts come from Criterion's TAP report (--tap=FILE): one line per
# test, "ok", "not ok", or "ok ... # SKIP reason". Criterion's own
# closing line counts no skips. Tests left out by a --filter are listed
# there as skipped with Criterion's generic message: those are counted as
# not selected, never as skips.
set -u
name=$1
bin=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
allow="$here/skips.allow"
build=${RLSHIM_SANITIZER:-plain}
[ "$(id -u)" = 0 ] || build="$build nonroot"

# RLSHIM_SKIPS_DIR=DIR: the skipped tests are also listed in DIR/NAME.skipped,
# one suite/test a line, for a later run of only those (make ubsan-rest).
skips_out=
if [ -n "${RLSHIM_SKIPS_DIR:-}" ]; then
    skips_out="$RLSHIM_SKIPS_DIR/$name.skipped"
    : >"$skips_out" || exit 1
fi

tap=$(mktemp "${TMPDIR:-/tmp}/rlshim-$name-XXXXXX.tap")
trap 'rm -f "$tap"' EXIT
filtered=no
for a in "$@"; do
    case "$a" in --filter*) filtered=yes ;; esac
done

t0=$(date +%s)
"$bin" "$@" --tap="$tap"
rc=$?
took=$(( $(date +%s) - t0 ))

# Is this skip allowed in this build? Each allow-list line is
# "BUILD REASON-GLOB"; BUILD is plain, address, undefined, thread, nonroot
# or any.
allowed() {
    while read -r b glob; do
        case "$b" in '' | '#'*) continue ;; esac
        for have in $build any; do
            [ "$b" = "$have" ] || continue
            # shellcheck disable=SC2254 # the glob is the pattern
            case "$1" in $glob) return 0 ;; esac
        done
    done <"$allow"
    return 1
}

passed=0 failed=0 skipped=0 unselected=0 bad=0
if [ ! -s "$tap" ]; then
    echo "$name: the runner wrote no report (status $rc)" >&2
    failed=1
else
    # "ok - suite::test  # SKIP reason" | "not ok - suite::test ..." | "ok - ..."
    while IFS= read -r line; do
        case "$line" in
        "not ok"*) failed=$((failed + 1)) ;;
        "ok "*"# SKIP "*)
            test=${line#ok - }
            test=${test%%  # SKIP*}
            test=${test%% *}
            why=${line#*# SKIP }
            if [ "$filtered" = yes ] && [ "$why" = "test was skipped" ]; then
                unselected=$((unselected + 1))
                continue
            fi
            skipped=$((skipped + 1))
            [ -n "$skips_out" ] && echo "$test" | sed 's|::|/|' >>"$skips_out"
            if allowed "$why"; then
                echo "$name: SKIP $test: $why (allowed in this build)"
            else
                echo "$name: SKIP $test: $why (NOT ALLOWED: see tests/skips.allow)"
                bad=$((bad + 1))
            fi
            ;;
        "ok "*) passed=$((passed + 1)) ;;
        esac
    done <"$tap"
fi

# Each failed test again, with its failed assertions, just above the
# closing line: a CI log that keeps only its tail still says what failed.
if [ "$failed" -gt 0 ]; then
    awk -v name="$name" '
        /^not ok - / { t = $4; print name ": FAILED " t; inside = 1; next }
        /^(ok|not ok) |^#/ { inside = 0 }
        inside && NF && !/^ *(---|\.\.\.|assertions:|failures:)/ {
            sub(/^ +/, ""); print name ":   " $0 }
    ' "$tap" | head -n 60
fi
# The slowest tests, for whoever plans CI's minutes.
sed -n 's/^\(not \)\{0,1\}ok - \([^ ]*\) .*(\([0-9.]*\)s).*/\3 \2/p' "$tap" |
    sort -rn | head -n 5 | while read -r secs test; do
    echo "$name: slowest: $secs s $test"
done
[ "$unselected" -gt 0 ] && echo "$name: $unselected tests not selected by the filter"
echo "$name: $passed passed, $failed failed, $skipped skipped"
echo "$name: ran for $took s"
if [ "$bad" -gt 0 ]; then
    echo "$name: FAILED: $bad skipped tests are not on the allow-list" >&2
    exit 1
fi
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] || exit 1
exit 0
