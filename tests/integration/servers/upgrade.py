#!/usr/bin/env python3
"""An HTTP/1.1 server on 127.0.0.1 that answers 101 Switching Protocols,
asked for or not, for the 101 tests (SPEC §12).

Usage: upgrade.py LOGFILE
Prints "PORT <n>" once listening; appends one line per request head it
reads, flushed at once:
    REQ <monotonic seconds> <METHOD> <path> <1 if it had an Upgrade header>
A connection is read head after head (no bodies), whatever was answered
before: after a 101 the client's bytes are still read as request heads.
Answers:
    path /unasked...   101 Switching Protocols, though the request did not
                       ask to upgrade
    an Upgrade header  101 Switching Protocols
    anything else      200 with a small body framed by Content-Length
"""
import socket
import sys
import threading
import time

LOG = None
LOCK = threading.Lock()

SWITCH = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
          b"Upgrade: websocket\r\n\r\n")
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"


def serve(conn):
    buf = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            t = time.monotonic()
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ")
            method = parts[0].decode("latin-1")
            path = parts[1].decode("latin-1") if len(parts) > 1 else "-"
            upgrade = any(l.lower().startswith(b"upgrade:") for l in lines[1:])
            with LOCK:
                LOG.write("REQ %.6f %s %s %d\n" % (t, method, path,
                                                   1 if upgrade else 0))
                LOG.flush()
            if path.startswith("/unasked") or upgrade:
                conn.sendall(SWITCH)
            else:
                conn.sendall(OK)


def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print("PORT %d" % srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
