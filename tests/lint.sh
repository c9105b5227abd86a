#!/bin/sh
# Checks that are not C tests: the exported symbols of the shim, the man
# pages, and the example config. Prints "N passed, N failed" at the end.
B=${1:-build}
pass=0
fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
# The words of $2 that are not words of $1, each after a space.
not_in() {
    for w in $2; do
        case " $(echo $1) " in *" $w "*) ;; *) printf ' %s' "$w" ;; esac
    done
}

# The .so exports exactly the hooked libc and TLS library names, nothing of
# inih or ours.
allowed="connect getsockopt send sendto sendmsg sendmmsg write writev sendfile sendfile64
read readv recv recvfrom recvmsg
close close_range closefrom dup dup2 dup3 fcntl fcntl64 fclose vfork __vfork clone
socket socketpair accept accept4 syscall
poll ppoll __poll_chk __ppoll_chk select pselect
epoll_wait epoll_pwait epoll_pwait2 epoll_ctl
getaddrinfo gethostbyname gethostbyname2 gethostbyname_r gethostbyname2_r
sigaction signal
SSL_write SSL_write_ex SSL_get_error SSL_free SSL_connect SSL_sendfile
gnutls_record_send gnutls_server_name_set gnutls_deinit
SSL_read SSL_read_ex gnutls_record_recv SSL_peek SSL_pending
gnutls_record_check_pending"
exported=$(nm -D --defined-only "$B/librlshim.so" | awk '$2 ~ /^[TWiV]$/ {print $3}' |
    sed 's/@.*//' | sort -u)
extra=$(not_in "$allowed" "$exported")
if [ -z "$exported" ]; then
    bad "librlshim.so exports nothing"
elif [ -n "$extra" ]; then
    bad "librlshim.so exports names it must not:$extra"
else
    ok "librlshim.so exports only hooked libc names ($(echo $exported | wc -w))"
fi

# The core library (policy/, state/, util/, limit/, fleet/) never calls a
# name the .so exports: inside the preloaded library that name is our own
# hook. It calls through util/sys.h's table instead.
core_calls=$(nm -u "$B/librlcore.a" 2>/dev/null | awk '{print $2}' | sed 's/@.*//' | sort -u)
hooked=""
for s in $exported fopen; do
    case " $(echo $core_calls) " in *" $s "*) hooked="$hooked $s" ;; esac
done
if [ -z "$core_calls" ]; then
    bad "librlcore.a: nm -u found nothing"
elif [ -n "$hooked" ]; then
    bad "librlcore.a calls hooked names (use util/sys.h's rl_sys):$hooked"
else
    ok "librlcore.a calls no hooked name"
fi

# Functions nothing calls (tests/deadcode.sh).
if out=$(sh tests/deadcode.sh "$B" 2>&1); then
    ok "no dead functions"
else
    bad "dead functions: $(echo $out)"
fi

# One fork handler for the library (shim/init.c's: policy/proc.h writes
# down the order of its steps); a second registration's order would be
# the link order again.
atforks=$(grep -rn --include='*.c' 'pthread_atfork *(' src | grep -v '^src/cli/' |
    grep -v '^[^:]*:[0-9]*: *\*' )
if [ "$(printf '%s\n' "$atforks" | grep -c .)" -eq 1 ]; then
    ok "one pthread_atfork in the library ($(printf '%s' "$atforks" | cut -d: -f1-2))"
else
    bad "the library must register one fork handler, found: $(echo $atforks)"
fi

# Arrows one way (src/README.md's map): a folder of src/ includes only
# its own headers and those of the folders below it. limit/ includes
# nothing of ours; util/ nothing but util/.
may_include() {
    case $1 in
    shim)   echo "shim policy util" ;;
    cli)    echo "cli policy fleet state model limit util" ;;
    policy) echo "policy fleet http state model limit util" ;;
    fleet)  echo "fleet model limit util" ;;
    http)   echo "http util" ;;
    state)  echo "state util" ;;
    model)  echo "model limit util" ;;
    limit)  echo "limit" ;;
    util)   echo "util" ;;
    *)      echo "" ;; # a new folder has no place in the map yet
    esac
}
# Known arrows against the map, file and header exactly, each with why it
# stays for now. An entry that no longer matches fails too, so the list
# only shrinks.
#   (none today)
include_exceptions=""
against=""
used=""
for f in $(find src -name '*.[ch]' | sort); do
    from=${f#src/}
    from=${from%%/*}
    allowed=$(may_include "$from")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        to=${inc%%/*}
        [ "$to" = "$inc" ] && to=$from # "x.h": the file's own folder
        case " $allowed " in *" $to "*) continue ;; esac
        case " $(echo $include_exceptions) " in
        *" $f:$inc "*) used="$used $f:$inc" ;;
        *) against="$against $f:$inc" ;;
        esac
    done
done
stale=$(not_in "$used" "$include_exceptions")
if [ -z "$against$stale" ]; then
    ok "includes point down src/README.md's map ($(echo $used | wc -w) listed exceptions)"
else
    bad "includes${against:+ against src/README.md's map:$against}${stale:+ listed as exceptions but gone (drop them):$stale}"
fi

# Small files that each own one thing: none in src/ over 600 lines.
long=$(find src -name '*.[ch]' -exec wc -l {} + | awk '$2 != "total" && $1 > 600 {print $2 " (" $1 ")"}')
if [ -z "$long" ]; then
    ok "no file in src/ over 600 lines"
else
    bad "files in src/ over 600 lines: $(echo $long)"
fi

for page in src/man/rlshim.1 src/man/rlshim.ini.5; do
    if [ ! -f "$page" ]; then
        bad "$page is missing"
    elif out=$(mandoc -T lint -W warning "$page" 2>&1) && [ -z "$out" ]; then
        ok "$page lints clean"
    else
        bad "$page: $out"
    fi
done

if [ -f conf/rlshim.ini ] && "$B/rlshim" check -c conf/rlshim.ini >/dev/null; then
    ok "conf/rlshim.ini passes rlshim check"
else
    bad "conf/rlshim.ini does not pass rlshim check"
fi

echo "lint: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
