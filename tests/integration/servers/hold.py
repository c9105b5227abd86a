#!/usr/bin/env python3
"""A TCP server on 127.0.0.1 that holds every connection until the client
closes it, and logs how many are open at each change.

Usage: hold.py LOGFILE
Prints "PORT <n>" on stdout once listening. Appends to LOGFILE, flushed at
once, one line per accept or close: "<monotonic seconds> open <n>".
"""
import os
import socket
import sys
import threading
import time

LOCK = threading.Lock()
OPEN = 0


def log(f, delta):
    global OPEN
    with LOCK:
        OPEN += delta
        f.write("%.6f open %d\n" % (time.monotonic(), OPEN))
        f.flush()


def serve(conn, f):
    log(f, +1)
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    log(f, -1)  # before the close: a client that waits for it sees it
    conn.close()


def main():
    f = open(sys.argv[1], "a")
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    sys.stdout.write("PORT %d\n" % ls.getsockname()[1])
    sys.stdout.flush()
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, f), daemon=True).start()


if __name__ == "__main__":
    main()
