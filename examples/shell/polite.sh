#!/bin/sh
# polite.sh — assert, in a shell test, that a scraper stays under a quota.
#
# Runs a curl loop (your scraper goes there) under `rlshim run` against a
# local server, with a decision log, then asks `rlshim verify` whether the
# connections obeyed 5/s with a burst of 2. Exit status: verify's.
# Needs rlshim on PATH, python3 (the server) and curl.
set -eu
tmp=$(mktemp -d)
trap 'kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT

cat > "$tmp/rlshim.ini" <<'INI'
[rlshim]
on_deny   = delay
max_delay = 10s
[default]
connect       = 5/s
connect_burst = 2
to            = 127.0.0.1
INI

python3 -m http.server 0 --bind 127.0.0.1 --directory "$tmp" \
    > "$tmp/server.out" 2>&1 &
srv=$!
port=
for _ in $(seq 50); do
    port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$tmp/server.out")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "polite.sh: the server did not start" >&2; exit 2; }

RLSHIM_DECISION_LOG="$tmp/decisions.jsonl" RLSHIM_STATE_DIR="$tmp" \
    rlshim run -c "$tmp/rlshim.ini" -- sh -c "
        for i in \$(seq 10); do
            curl -sf -o /dev/null http://127.0.0.1:$port/rlshim.ini || exit 1
        done"

# The assertion itself:
rlshim verify "$tmp/decisions.jsonl" --limit connect=5/s,burst=2

# A check that the log holds what we think it does: 10 connections, and
# they would fail a stricter limit.
n=$(grep -c '"verdict":"allow"\|"verdict":"delay"' "$tmp/decisions.jsonl")
[ "$n" -eq 10 ] || { echo "polite.sh: $n connections logged, not 10" >&2; exit 1; }
if rlshim verify "$tmp/decisions.jsonl" --limit connect=2/s,burst=1 >/dev/null; then
    echo "polite.sh: a 2/s limit passed too: the log proves nothing" >&2
    exit 1
fi
echo "polite.sh: ok"
