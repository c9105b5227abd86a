#!/usr/bin/env python3
"""A sink on 127.0.0.1 that reads HTTP/1.x requests as a server would and
records exactly what each connection carried. It never answers: the
clients of the request tests only write.

Usage: http_heads.py LOGFILE
Prints "PORT <n>" once listening. Appends to LOGFILE, flushed at once:
    REQ <monotonic seconds> <METHOD> <target>   one per request head
    CONN <bytes> <sha256 of all of them>         when a connection ends
Bodies framed by Content-Length or chunked coding (extensions, trailers)
are skipped, as a server skips them; a connection whose first bytes are
not a request line is only hashed.
"""
import hashlib
import socket
import sys
import threading
import time

LOG = None
LOCK = threading.Lock()
METHODS = (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS",
           b"PATCH", b"TRACE", b"CONNECT")


def log(line):
    with LOCK:
        LOG.write(line + "\n")
        LOG.flush()


class Parser:
    """Incremental: feed() bytes as they arrive."""

    def __init__(self):
        self.buf = b""
        self.state = "head"   # head | length | chunk-size | chunk | trailer | junk
        self.left = 0

    def feed(self, data):
        self.buf += data
        while self.step():
            pass

    def line(self):
        i = self.buf.find(b"\r\n")
        if i < 0:
            return None
        out, self.buf = self.buf[:i], self.buf[i + 2:]
        return out

    def step(self):
        if self.state == "junk":
            self.buf = b""
            return False
        if self.state == "head":
            if self.buf and not any(m.startswith(self.buf[:len(m)]) or
                                    self.buf.startswith(m + b" ")
                                    for m in METHODS):
                self.state = "junk"
                return False
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return False
            head, self.buf = self.buf[:end], self.buf[end + 4:]
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ")
            method = parts[0].decode("latin-1")
            target = parts[1].decode("latin-1") if len(parts) > 1 else "-"
            log("REQ %.6f %s %s" % (time.monotonic(), method, target))
            length, chunked = 0, False
            for h in lines[1:]:
                name, _, value = h.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value.strip())
                elif name == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
            if chunked:
                self.state = "chunk-size"
            elif length > 0:
                self.state, self.left = "length", length
            return True
        if self.state == "length":
            n = min(self.left, len(self.buf))
            self.buf, self.left = self.buf[n:], self.left - n
            if self.left == 0:
                self.state = "head"
                return True
            return False
        if self.state == "chunk-size":
            ln = self.line()
            if ln is None:
                return False
            size = int(ln.split(b";")[0].strip(), 16)
            if size == 0:
                self.state = "trailer"
            else:
                self.state, self.left = "chunk", size + 2  # data + CRLF
            return True
        if self.state == "chunk":
            n = min(self.left, len(self.buf))
            self.buf, self.left = self.buf[n:], self.left - n
            if self.left == 0:
                self.state = "chunk-size"
                return True
            return False
        if self.state == "trailer":
            ln = self.line()
            if ln is None:
                return False
            if ln == b"":
                self.state = "head"
            return True
        return False


def serve(conn):
    h = hashlib.sha256()
    total = 0
    p = Parser()
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            h.update(data)
            total += len(data)
            p.feed(data)
    finally:
        log("CONN %d %s" % (total, h.hexdigest()))
        conn.close()


def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    sys.stdout.write("PORT %d\n" % srv.getsockname()[1])
    sys.stdout.flush()
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
