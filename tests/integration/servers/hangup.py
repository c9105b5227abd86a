#!/usr/bin/env python3
"""An HTTP/1.1 keep-alive server on 127.0.0.1 that hangs up on an idle
connection as some servers do: a FIN first, then a reset a while later
(SPEC §2: what the kernel has to say about a socket is never hidden).

Usage: hangup.py LOGFILE
Environment: RL_TLS=1 serves HTTPS with a throwaway self-signed RSA
certificate made in LOGFILE's directory (the FIN and the reset come
without a close_notify, as from a server that drops the connection);
RL_IDLE (seconds a connection may stay idle, default 0.3),
RL_RST_AFTER (seconds between the FIN and the reset, default 1).
Prints "PORT <n>" once listening; appends one line per event, flushed at
once, with the server's monotonic clock:
    REQ <seconds> <path> <status answered>   a request's head arrived
    FIN <seconds>                            an idle connection half-closed
    RST <seconds>                            ... and reset
    LATE <seconds> <bytes>                   bytes that came after the FIN
A request's body (Content-Length) is read and dropped.
Paths: /s/STATUS/RA answers STATUS with "Retry-After: RA"; anything else
200. Every answer has a small body framed by Content-Length.
"""
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

LOCK = threading.Lock()
LOG = None
IDLE = float(os.environ.get("RL_IDLE", "0.3"))
RST_AFTER = float(os.environ.get("RL_RST_AFTER", "1"))


def log(line):
    with LOCK:
        LOG.write("%s\n" % line)
        LOG.flush()


def body_len(head):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v)
    return 0


def answer(conn, head):
    first = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    path = first[1] if len(first) > 1 else "/"
    parts = path.split("/")
    status, ra = 200, None
    if len(parts) >= 4 and parts[1] == "s":
        status, ra = int(parts[2]), parts[3]
    log("REQ %.6f %s %d" % (time.monotonic(), path, status))
    body = b"ok\n" if status == 200 else b"busy\n"
    reason = {200: "OK", 429: "Too Many Requests",
              503: "Service Unavailable"}.get(status, "Status")
    out = "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n" % (status, reason,
                                                         len(body))
    if ra is not None:
        out += "Retry-After: %s\r\n" % ra
    conn.sendall(out.encode() + b"\r\n" + body)


def hang_up(conn):
    """FIN now; whatever comes after it is logged, and the connection is
    reset RST_AFTER seconds later (SO_LINGER 0: close sends RST)."""
    conn.shutdown(socket.SHUT_WR)
    log("FIN %.6f" % time.monotonic())
    end = time.monotonic() + RST_AFTER
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            data = conn.recv(65536)
        except socket.timeout:
            break
        except OSError:
            break
        if not data:
            break
        log("LATE %.6f %d" % (time.monotonic(), len(data)))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                    struct.pack("ii", 1, 0))
    conn.close()
    log("RST %.6f" % time.monotonic())


def serve(conn):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" in buf:
                head, rest = buf.split(b"\r\n\r\n", 1)
                n = body_len(head)
                if len(rest) < n:
                    break  # its body is still coming
                buf = rest[n:]
                answer(conn, head)
            conn.settimeout(IDLE)
            try:
                data = conn.recv(65536)
            except socket.timeout:
                hang_up(conn)
                return
            if not data:
                conn.close()
                return
            buf += data
    except OSError:
        conn.close()


def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    if os.environ.get("RL_TLS") == "1":
        d = os.path.dirname(os.path.abspath(sys.argv[1]))
        key, crt = os.path.join(d, "hangup.key"), os.path.join(d, "hangup.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                        "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                        "-subj", "/CN=127.0.0.1"],
                       check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        ls = ctx.wrap_socket(ls, server_side=True)
    sys.stdout.write("PORT %d\n" % ls.getsockname()[1])
    sys.stdout.flush()
    while True:
        try:
            c, _ = ls.accept()
        except (OSError, ssl.SSLError):
            continue  # a handshake that failed
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
