#!/bin/sh
# deadcode.sh [BUILD_DIR] — functions nothing calls.
#
# Candidates: the rl_ functions the built objects define (nm: T) and the
# static inline functions of src/ headers. A candidate is used where its
# name appears on a line that does not start at column 0 (in this code a
# definition or prototype starts at column 0; calls and function pointers
# are indented; comment lines do not count, a `*` starting a line counts
# as a comment's only when a space, a tab, a slash or the line's end
# follows it: `*p = f(...)` is a call). Prints each candidate used
# nowhere, or by tests only, and exits 1 when there is one. Build the
# unit tests first (make unit) so that every object exists. Run by
# tests/lint.sh in `make test`.
B=${1:-build}
objs=$(find "$B/obj" -name '*.o' 2>/dev/null)
[ -n "$objs" ] || { echo "deadcode: no objects in $B/obj" >&2; exit 2; }

uses() { # uses NAME DIR...: indented lines naming it, in .c and .h files
    name=$1
    shift
    grep -rw -e "$name" --include='*.c' --include='*.h' "$@" |
        grep -v -e "^[^:]*:[^ 	]" \
            -e "^[^:]*:[ 	]*\(\*\([ 	/]\|\$\)\|/\*\|//\)" |
        wc -l
}

{
    nm $objs 2>/dev/null | awk '$2 == "T" && $3 ~ /^rl_/ { print $3 }'
    find src -name '*.h' -exec sed -n \
        's/^static inline [a-z_0-9 ]*[ *]\([a-z_0-9]*\)(.*/\1/p' {} +
} | sort -u | {
    found=1
    while read -r f; do
        s=$(uses "$f" src)
        t=$(uses "$f" tests)
        if [ "$s" -eq 0 ] && [ "$t" -eq 0 ]; then
            echo "$f: called nowhere"
            found=0
        elif [ "$s" -eq 0 ] &&
            ! grep -q "^$f[[:space:]]" tests/deadcode.allow 2>/dev/null; then
            echo "$f: called by tests only (not on tests/deadcode.allow)"
            found=0
        fi
    done
    [ "$found" -eq 1 ]
}
