#!/bin/sh
# test_deb.sh DEB — the package as an operator gets it (SPEC §13): its
# files, lintian, and its own `rlshim run` throttling a real curl from a
# root it was extracted into. Ends on "deb: N passed, N failed".
set -u
deb=$1
pass=0
fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
here=$(cd "$(dirname "$0")" && pwd)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
tmp=$(mktemp -d /tmp/rlshim-deb-XXXXXX)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

# 1. The files, exactly: nothing missing, nothing extra, no /etc.
want="./usr/bin/rlshim
./usr/lib/$ma/rlshim/librlshim.so
./usr/share/doc/rlshim/changelog.Debian.gz
./usr/share/doc/rlshim/copyright
./usr/share/doc/rlshim/examples/crawler.ini
./usr/share/doc/rlshim/examples/demo.ini
./usr/share/doc/rlshim/examples/rlshim.ini
./usr/share/lintian/overrides/rlshim
./usr/share/man/man1/rlshim.1.gz
./usr/share/man/man5/rlshim.ini.5.gz"
have=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sort)
if [ "$have" = "$want" ]; then
    ok "the package holds exactly its $(echo "$want" | wc -l) files"
else
    bad "file list differs:
$(printf '%s\n' "$want" > "$tmp/want"; printf '%s\n' "$have" | diff "$tmp/want" -)"
fi

# 2. Depends: only what the binaries link (inih, hiredis are static).
dep=$(dpkg-deb -f "$deb" Depends)
case "$dep" in
*inih* | *hiredis*) bad "Depends names a static library: $dep" ;;
*libc6*) ok "Depends: $dep" ;;
*) bad "Depends lacks libc6: $dep" ;;
esac

# 3. lintian: no error, no warning without an override.
lint=$(lintian --fail-on error,warning "$deb" 2>&1)
rc=$?
lint=$(printf '%s\n' "$lint" | grep -v 'running with root privileges')
if [ "$rc" -eq 0 ] && [ -z "$lint" ]; then
    ok "lintian: no error or warning"
else
    bad "lintian (exit $rc): $lint"
fi

# 4. Extracted into a root of its own, its rlshim finds its own library
#    (../lib/MULTIARCH/rlshim from usr/bin) and throttles a real curl:
#    six fetches under connect = 2/s with a burst of 1 reach the server
#    over at least 2.5 s (bare, they take well under a second).
root="$tmp/root"
dpkg-deb -x "$deb" "$root"
lib=$("$root/usr/bin/rlshim" run -- sh -c 'printf %s "$LD_PRELOAD"' 2>/dev/null)
if [ "$lib" = "$root/usr/lib/$ma/rlshim/librlshim.so" ]; then
    ok "rlshim run preloads the package's own library"
else
    bad "rlshim run preloaded '$lib'"
fi

# The project's counting server: one line per request, its end time first.
python3 "$here/../integration/servers/http_count.py" "$tmp/hits" > "$tmp/port" &
server=$!
i=0
while ! grep -q '^PORT ' "$tmp/port" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(sed -n 's/^PORT //p' "$tmp/port")
cat > "$tmp/rlshim.ini" <<INI
[rlshim]
on_deny = delay
[default]
connect = 2/s
connect_burst = 1
INI
mkdir "$tmp/state"
RLSHIM_STATE_DIR="$tmp/state" "$root/usr/bin/rlshim" run -c "$tmp/rlshim.ini" -- \
    sh -c "for i in 1 2 3 4 5 6; do curl -s -o /dev/null http://127.0.0.1:$port/; done"
span=$(awk 'NR == 1 {a = $1} {b = $1; n++} END {printf "%d %.3f", n, b - a}' "$tmp/hits")
n=${span% *}
s=${span#* }
if [ "$n" -eq 6 ] && awk -v s="$s" 'BEGIN {exit !(s >= 2.45)}'; then
    ok "the package's rlshim run throttled curl: 6 requests over ${s} s at the server"
else
    bad "6 curl requests under connect = 2/s: the server saw $n over ${s} s (want 6 over >= 2.5 s)"
fi

echo "deb: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
