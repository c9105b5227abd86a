#!/usr/bin/env python3
"""A byte sink on 127.0.0.1: TCP and UDP on the same random port.

Usage: sink.py LOGFILE
With SINK_HOST=ADDRESS it listens there instead of 127.0.0.1 (a second
site on 127.0.0.2). With SINK_PAUSE=SECONDS in the environment, each TCP connection is left
unread for that long first (with a small receive buffer), so the sender's
kernel buffers fill and its sends come back short.
Prints "PORT <n>" on stdout once listening. Appends one line per TCP
connection when it closes, and one per datagram, flushed at once
(first is when the connection was accepted if it sent nothing):
    CONN <monotonic first> <monotonic last> <bytes> <sha256>
    DGRAM <monotonic> <bytes> <sha256>
"""
import hashlib
import os
import socket
import sys
import threading
import time

LOCK = threading.Lock()


def log(fh, line):
    with LOCK:
        fh.write(line + "\n")
        fh.flush()


PAUSE = float(os.environ.get("SINK_PAUSE", "0"))
HOST = os.environ.get("SINK_HOST", "127.0.0.1")


def serve_conn(fh, conn, accepted):
    if PAUSE > 0:
        time.sleep(PAUSE)
    h = hashlib.sha256()
    n = 0
    first = last = accepted
    with conn:
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                break
            if not data:
                break
            if n == 0:
                first = time.monotonic()
            last = time.monotonic()
            n += len(data)
            h.update(data)
    log(fh, "CONN %.6f %.6f %d %s" % (first, last, n, h.hexdigest()))


def serve_udp(fh, u):
    while True:
        data = u.recv(1 << 16)
        log(fh, "DGRAM %.6f %d %s" % (time.monotonic(), len(data),
                                      hashlib.sha256(data).hexdigest()))


def main():
    fh = open(sys.argv[1], "a")
    # Bind TCP and UDP to the same free port (retry if UDP's is taken).
    while True:
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if PAUSE > 0:
            t.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        t.bind((HOST, 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind((HOST, port))
            break
        except OSError:
            t.close()
            u.close()
    t.listen(128)
    threading.Thread(target=serve_udp, args=(fh, u), daemon=True).start()
    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    while True:
        conn, _ = t.accept()
        # Stamped here, not in the thread: a thread started on a busy
        # core can run late, and a connection that sends nothing is
        # logged at this time.
        accepted = time.monotonic()
        threading.Thread(target=serve_conn, args=(fh, conn, accepted),
                         daemon=True).start()


if __name__ == "__main__":
    main()
