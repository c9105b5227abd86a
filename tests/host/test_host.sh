#!/bin/sh
# test_host.sh BUILD_DIR — the shim preloaded host-wide (SPEC §13), in a
# private mount namespace whose /etc is a copy holding the test's
# ld.so.preload and rlshim.ini: the machine's own /etc is never touched.
# Needs root (unshare -m, mount --bind). Ends on
# "host: N passed, N failed[, N skipped]".
set -u
B=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "skip - host-wide preload: needs root for unshare -m (not root)"
    echo "host: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
if [ "${RLSHIM_HOST_NS:-}" != 1 ]; then
    # Re-run inside a private mount namespace; the propagation is private,
    # so the bind mount below never reaches the host.
    RLSHIM_HOST_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi

pass=0
fail=0
skipped=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
tmp=$(mktemp -d /tmp/rlshim-host-XXXXXX)
chmod 0755 "$tmp"
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null
    umount /etc 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# The project's counting server (one line per request, its end time
# first), started before the preload exists: it is not throttled itself.
python3 "$here/../integration/servers/http_count.py" "$tmp/hits" > "$tmp/port" &
server=$!
i=0
while ! grep -q '^PORT ' "$tmp/port" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(sed -n 's/^PORT //p' "$tmp/port")

# A copy of /etc with the host's preload and config, over /etc.
mkdir "$tmp/state"
chmod 1777 "$tmp/state"
cp -a /etc "$tmp/etc"
# A copy every user can read, whatever the clone's own permissions.
install -d -m 0755 "$tmp/lib"
install -m 0644 "$B/librlshim.so" "$tmp/lib/librlshim.so"
lib=$tmp/lib/librlshim.so
cat > "$tmp/etc/rlshim.ini" <<INI
[rlshim]
on_deny = delay
[user:nobody]
connect = 2/s
connect_burst = 1
INI
chmod 0644 "$tmp/etc/rlshim.ini"
echo "$lib" > "$tmp/etc/ld.so.preload"
mount --bind "$tmp/etc" /etc

# 1. rlshim check --host sees it.
out=$("$B/rlshim" check --host 2>&1)
case "$out" in
*"preload: /etc/ld.so.preload:1 names $lib"*"loads"*"[user:nobody]: login nobody"*)
    ok "rlshim check --host: preloaded, loads, throttles nobody" ;;
*) bad "rlshim check --host said: $out" ;;
esac

# 1b. ... and names a cgroup section by the processes it covers (the
#     walkthrough's config), not as a key set through RLSHIM_KEY.
cp "$tmp/etc/rlshim.ini" "$tmp/ini.kept"
cat > "$tmp/etc/rlshim.ini" <<INI
[rlshim]
key = cgroup
[user:cgroup:/system.slice/crawler.scope]
request = 2/s
[user:cgroup:/system.slice/*]
connect = 20/s
INI
out=$("$B/rlshim" check --host 2>&1)
case "$out" in
*"[user:cgroup:/system.slice/crawler.scope]: every process in the cgroup /system.slice/crawler.scope"*"[user:cgroup:/system.slice/*]: every process in a cgroup below /system.slice"*)
    ok "rlshim check --host: a cgroup section names the cgroup it covers" ;;
*) bad "rlshim check --host, cgroup sections, said: $out" ;;
esac
cp "$tmp/ini.kept" "$tmp/etc/rlshim.ini"

# mark: where the server's log stands now; span MARK: requests and
# seconds between the first and last logged after MARK
mark() { wc -l < "$tmp/hits" 2>/dev/null || echo 0; }
span() {
    awk -v m="$1" 'NR > m {if (!n) a = $1; b = $1; n++}
        END {printf "%d %.3f", n, b - a}' "$tmp/hits"
}
fetch6() { # fetch6 USER LABEL: six curls as USER, no LD_PRELOAD anywhere
    env -u LD_PRELOAD RLSHIM_STATE_DIR="$tmp/state" setpriv \
        --reuid="$(id -u "$1")" --regid="$(id -g "$1")" --clear-groups sh -c \
        "for i in 1 2 3 4 5 6; do curl -s -o /dev/null http://127.0.0.1:$port/$2; done"
}

# 2. A configured user: six connects under 2/s, burst 1: >= 2.5 s.
m=$(mark)
fetch6 nobody ruled
set -- $(span "$m")
if [ "$1" -eq 6 ] && awk -v s="$2" 'BEGIN {exit !(s >= 2.45)}'; then
    ok "nobody (a rule) with no LD_PRELOAD: 6 requests over $2 s at the server"
else
    bad "nobody (a rule): the server saw $1 requests over $2 s (want 6 over >= 2.5 s)"
fi

# 3. A user with no rule is untouched: well under the throttle's 2.5 s,
#    and no segment of theirs in the state dir.
m=$(mark)
fetch6 daemon free
set -- $(span "$m")
segs=$(find "$tmp/state" -name 'rlshim-1-*' | wc -l)
if [ "$1" -eq 6 ] && awk -v s="$2" 'BEGIN {exit !(s < 1.25)}' && [ "$segs" -eq 0 ]; then
    ok "daemon (no rule): 6 requests over $2 s, no segment"
else
    bad "daemon (no rule): $1 requests over $2 s, $segs segments (want 6 over < 1.25 s, none)"
fi

# 4. A privileged program (a setuid-root copy of curl) run by nobody reads
#    no RLSHIM_* variable (SPEC §3): with RLSHIM_CONFIG, RLSHIM_DECISION_LOG
#    and RLSHIM_STATE_DIR naming a directory only root could write, nothing
#    is created there, the host's config throttles it (the same 2.5 s for
#    six fetches, one budget across the six processes) and its segment in
#    /dev/shm is nobody's, shared with nobody's other processes.
rootonly="$tmp/rootonly"
install -d -m 0755 "$rootonly"
install -m 4755 "$(command -v curl)" "$tmp/suid-curl"
nobody_uid=$(id -u nobody)
rm -f /dev/shm/rlshim-"$nobody_uid"-*
m=$(mark)
env -u LD_PRELOAD RLSHIM_CONFIG="$rootonly/rlshim.ini" \
    RLSHIM_DECISION_LOG="$rootonly/decisions.jsonl" \
    RLSHIM_STATE_DIR="$rootonly/state" RLSHIM_KEY=free-pass \
    setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups sh -c \
    "for i in 1 2 3 4 5 6; do $tmp/suid-curl -s -o /dev/null http://127.0.0.1:$port/suid; done"
set -- $(span "$m")
made=$(find "$rootonly" -mindepth 1 | wc -l)
owner=$(stat -c %u /dev/shm/rlshim-"$nobody_uid"-* 2>/dev/null | sort -u | tr '\n' ' ')
if [ "$1" -eq 6 ] && awk -v s="$2" 'BEGIN {exit !(s >= 2.45)}' &&
    [ "$made" -eq 0 ] && [ "$owner" = "$nobody_uid " ]; then
    ok "setuid curl run by nobody: the host's config, 6 requests over $2 s, nothing in the root-only dir, its segment nobody's"
else
    bad "setuid curl run by nobody: $1 requests over $2 s (want 6 over >= 2.5 s), $made files in the root-only dir (want 0), segment owned by '$owner' (want $nobody_uid)"
fi
rm -f /dev/shm/rlshim-"$nobody_uid"-*

# 4b. A privileged program's own files (SPEC §3): the host's config names
#     a decision log and a `log` file in a world-writable directory, where
#     nobody planted a link to a root-only file at the `log` path. Run by
#     nobody three times (one connect allowed, two denied), the setuid-root
#     curl writes neither: the link's target is unchanged, no decision log
#     is made there, and stderr says why, once per process for each file
#     it had lines for (3 decision logs, 2 logs of a denial). The control,
#     the same config under nobody's own curl (not privileged), writes the
#     decision log there, a line per process: the paths are in use.
ww="$tmp/ww"
install -d -m 0777 "$ww"
secret="$rootonly/secret"
printf 'root only\n' > "$secret"
chmod 0600 "$secret"
before=$(sha256sum < "$secret")
setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups \
    ln -s "$secret" "$ww/rlshim.log"
cp /etc/rlshim.ini "$tmp/rlshim.ini.saved"
cat > /etc/rlshim.ini <<INI
[rlshim]
on_deny = fail
log = $ww/rlshim.log
decision_log = $ww/decisions.jsonl
[user:nobody]
connect = 1/h
INI
three() { # three CURL: three fetches as nobody, stderr to $tmp/err
    env -u LD_PRELOAD RLSHIM_STATE_DIR="$tmp/state" setpriv \
        --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups sh -c \
        "for i in 1 2 3; do $1 -s -o /dev/null http://127.0.0.1:$port/ww; done" \
        2> "$tmp/err"
}
three curl
control=$(cat "$ww/decisions.jsonl" 2>/dev/null | wc -l)
rm -rf "$tmp/state"/*
rm -f "$ww/decisions.jsonl"
rm -f /dev/shm/rlshim-"$nobody_uid"-*
three "$tmp/suid-curl"
after=$(sha256sum < "$secret")
made=$(find "$ww" -mindepth 1 ! -name rlshim.log | wc -l)
refused="in a directory another user can write"
dsaid=$(grep -c "^rlshim: decision_log $ww/decisions.jsonl: $refused" "$tmp/err")
lsaid=$(grep -c "^rlshim: log $ww/rlshim.log: $refused" "$tmp/err")
if [ "$control" -eq 3 ] && [ "$before" = "$after" ] && [ "$made" -eq 0 ] &&
    [ "$dsaid" -eq 3 ] && [ "$lsaid" -eq 2 ]; then
    ok "setuid curl run by nobody, log paths in a world-writable dir: link target unchanged, nothing made there, refused $dsaid + $lsaid times on stderr (control: $control lines logged)"
else
    bad "setuid curl run by nobody, log paths in a world-writable dir: target changed: $([ "$before" = "$after" ] && echo no || echo YES), $made files made (want 0), decision log refused $dsaid times (want 3), log refused $lsaid times (want 2), control logged $control lines (want 3); stderr: $(cat "$tmp/err")"
fi
cp "$tmp/rlshim.ini.saved" /etc/rlshim.ini
rm -f /dev/shm/rlshim-"$nobody_uid"-*

# 5. Start-up, paid by every process of the host: SPEC §13 allows 0.1 ms
#    per process over an empty preload. Three measures, against a
#    pass-through preload (tests/bench/control/passthrough.c):
#    a) what a slower machine multiplies, counted exactly: the system
#       calls `true` makes under each (strace). The shim may add its two
#       (getpid, and access(2) for the config, SPEC §4) and must map no
#       more than the pass-through does (noseparate-code: 2 segments);
#    b) what the shim's start-up costs, counted exactly: the instructions
#       /usr/bin/true runs under each (callgrind), held to the `true`
#       figure of tests/bench/instructions.baseline (20 % and 10
#       instructions of room, as make instructions allows) — that suite
#       counts it under LD_PRELOAD, this under the host's preload file;
#    c) time, printed and not held: a script of 500 `true`s under each,
#       alternating, the median of 15 rounds. On a shared 2-core machine
#       one round swings by 100 us, and the median of a run has read from
#       1.04 to 1.12 of the pass-through with the same library: a bar on
#       it failed runs for the machine, not the shim. The time goal of
#       SPEC §13 is make bench's (tests/bench/startup.sh).
#       Root has no rule here: this is what a user without one pays.
cc -O2 -shared -fPIC -o "$tmp/lib/passthrough.so" "$here/../bench/control/passthrough.c" -ldl
calls() { # calls LIB: "total mappings" of /usr/bin/true's system calls with LIB the host's preload
    echo "$1" > /etc/ld.so.preload
    strace -qq -o "$tmp/strace" /usr/bin/true
    awk '{t++} /^(mmap|mprotect|munmap)\(/ {m++} END {print t + 0, m + 0}' "$tmp/strace"
}
if command -v strace > /dev/null; then
    set -- $(calls "$lib") $(calls "$tmp/lib/passthrough.so")
    if [ "$1" -le $(($3 + 2)) ] && [ "$2" -le "$4" ]; then
        ok "true's system calls: $1 under the shim, $3 under a pass-through; mappings $2 and $4"
    else
        bad "true's system calls: $1 under the shim, $3 under a pass-through (want at most 2 more); mappings $2 and $4 (want no more)"
    fi
else
    skipped=$((skipped + 1))
    echo "skip - true's system calls: strace is not installed"
fi
instr() { # instr LIB: instructions /usr/bin/true runs with LIB as the host's preload
    echo "$1" > /etc/ld.so.preload
    valgrind --tool=callgrind --callgrind-out-file=/dev/null /usr/bin/true 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | tail -1
}
if command -v valgrind > /dev/null; then
    shim_i=$(instr "$lib")
    pass_i=$(instr "$tmp/lib/passthrough.so")
    want=$(sed -n 's/^true \([0-9-]*\)$/\1/p' "$here/../bench/instructions.baseline")
    added=$((shim_i - pass_i))
    if [ -n "$want" ] && [ "$added" -le $((want + want / 5 + 10)) ]; then
        ok "true's start-up: $added instructions over a pass-through preload (baseline $want)"
    else
        bad "true's start-up: $added instructions over a pass-through preload ($shim_i and $pass_i), over the baseline ${want:-?} by more than 20 %"
    fi
else
    skipped=$((skipped + 1))
    echo "skip - true's start-up instructions: valgrind is not installed"
fi
trues() { # trues LIB: ns for 500 trues with LIB as the host's preload
    echo "$1" > /etc/ld.so.preload
    t0=$(date +%s%N)
    sh -c 'i=0; while [ $i -lt 500 ]; do /usr/bin/true; i=$((i + 1)); done'
    t1=$(date +%s%N)
    echo $((t1 - t0))
}
added=""
ratios=""
procs=""
for round in $(seq 15); do
    a=$(trues "$lib")
    b=$(trues "$tmp/lib/passthrough.so")
    added="$added $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", (a - b) / 500 / 1000}')"
    ratios="$ratios $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.4f", a / b}')"
    procs="$procs $(awk -v b="$b" 'BEGIN {printf "%.1f", b / 500 / 1000}')"
done
echo "$lib" > /etc/ld.so.preload
median=$(printf '%s\n' $added | sort -g | sed -n 8p)
ratio=$(printf '%s\n' $ratios | sort -g | sed -n 8p)
proc=$(printf '%s\n' $procs | sort -g | sed -n 8p)
echo "info - 500 trues under the host preload: $median us added per process, $ratio of a pass-through preload, whose process takes $proc us (us added:$added; ratios:$ratios)"

# 6. A missing library: ld.so warns and runs the program (the recovery
#    the README describes), and rlshim check --host says so.
echo "$tmp/missing/librlshim.so" > /etc/ld.so.preload
err=$(/bin/true 2>&1)
st=$?
out=$("$B/rlshim" check --host 2>&1)
hrc=$?
case "$err:$st:$hrc:$out" in
*"cannot be preloaded"*":0:1:"*"No such file"*)
    ok "a missing library: ld.so warns, programs run, check --host exits 1" ;;
*) bad "a missing library: true said '$err' (exit $st); check --host (exit $hrc): $out" ;;
esac

# 7. A file that is not a shared object: ignored the same way.
printf 'not an ELF file\n' > "$tmp/lib/garbage.so"
echo "$tmp/lib/garbage.so" > /etc/ld.so.preload
err=$(/bin/true 2>&1)
st=$?
case "$err:$st" in
*"cannot be preloaded"*":0") ok "a library that is not ELF: ld.so warns, programs run" ;;
*) bad "a library that is not ELF: true said '$err' (exit $st)" ;;
esac

if [ "$skipped" -gt 0 ]; then
    echo "host: $pass passed, $fail failed, $skipped skipped"
else
    echo "host: $pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
