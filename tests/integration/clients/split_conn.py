"""One keep-alive HTTP/1.1 connection, two threads: one writes the
requests one after another, the other reads the answers and prints
"RESP <status line>" for each.

Usage: split_conn.py PORT MODE PATH...

MODE "free": no lock, a blocking socket (a pipelining client's shape, and
Java's and Go's HTTP/1.1 transports'). MODE "before" or "after": one lock
guards the connection, as httpcore's HTTP/2 connection does: the writer
holds it for all its requests, the reader takes it before each read, or
after each read (to acknowledge); the socket has a timeout, so it is
non-blocking and its waits are poll's. A "tls-" in front of MODE: over
TLS, the certificate not checked.
"""
import select
import socket
import ssl
import sys
import threading

port, mode, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
tls = mode.startswith("tls-")
mode = mode[4:] if tls else mode
s = socket.create_connection(("127.0.0.1", port))
if tls:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
lock = threading.Lock() if mode != "free" else None
if lock is not None:
    s.settimeout(30)


def read_once():
    """The next bytes, b"" at the end, None for nothing yet."""
    if lock is None:
        return s.recv(4096)
    if not (tls and s.pending()):
        select.select([s], [], [], 30)
    if mode == "before":
        lock.acquire()
    try:
        d = s.recv(4096)
    except (socket.timeout, ssl.SSLWantReadError):
        d = None
    if mode == "after":
        lock.acquire()
    lock.release()
    return d


def reader():
    buf, n = b"", 0
    while n < len(paths):
        d = read_once()
        if d is None:
            continue
        if not d:
            break
        buf += d
        while b"\r\n\r\n" in buf:
            i = buf.index(b"\r\n\r\n")
            head = buf[:i].decode("latin-1").split("\r\n")
            cl = 0
            for h in head[1:]:
                k, _, v = h.partition(":")
                if k.strip().lower() == "content-length":
                    cl = int(v)
            if len(buf) < i + 4 + cl:
                break
            print("RESP", head[0], flush=True)
            buf, n = buf[i + 4 + cl:], n + 1


def head(p):
    return b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % p.encode()


t = threading.Thread(target=reader)
t.start()
if lock is None:
    for p in paths:
        s.sendall(head(p))
else:
    with lock:
        for p in paths:
            s.sendall(head(p))
t.join()
