#!/usr/bin/env python3
"""An HTTP server on 127.0.0.1 that records every request it receives.

Usage: http_count.py LOGFILE
Prints "PORT <n>" on stdout once listening (a random free port). Appends
one line per request to LOGFILE, flushed at once:
    <monotonic seconds> <METHOD> <body bytes> <sha256 of body> <start>
    <accepted>
(start: the time its headers had arrived; accepted: the time its
connection was accepted, the nearest the server sees to the connect).
GET answers a small body; POST reads the whole body (Content-Length or
chunked) before answering. Threaded, so parallel clients are served.
"""
import hashlib
import http.server
import os
import sys
import threading
import time

LOG = None
LOCK = threading.Lock()


def record(method, body, start, accepted):
    """One line per request: end time, method, body bytes, sha256 of the
    body, the time its headers had arrived (the body's start), and the
    time its connection was accepted."""
    line = "%.6f %s %d %s %.6f %.6f\n" % (time.monotonic(), method,
                                          len(body),
                                          hashlib.sha256(body).hexdigest(),
                                          start, accepted)
    with LOCK:
        LOG.write(line)
        LOG.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.accepted = self.server.accepted_at(self.request)

    def reply(self):
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        record("GET", b"", time.monotonic(), self.accepted)
        self.reply()

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n)

    def do_POST(self):
        start = time.monotonic()
        if self.headers.get("Expect", "").lower() == "100-continue":
            self.send_response_only(100)
            self.end_headers()
        body = self.read_body()
        record("POST", body, start, self.accepted)
        self.reply()

    do_PUT = do_POST


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, *args):
        super().__init__(*args)
        self.accepted = {}

    def get_request(self):
        # In the serving thread, right after accept(): its handler thread
        # may start late on a busy machine.
        sock, addr = super().get_request()
        with LOCK:
            self.accepted[sock] = time.monotonic()
        return sock, addr

    def accepted_at(self, sock):
        with LOCK:
            return self.accepted.pop(sock, time.monotonic())


def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    # HTTP_COUNT_HOST: another loopback address (tests of host names).
    srv = Server((os.environ.get("HTTP_COUNT_HOST", "127.0.0.1"), 0), Handler)
    sys.stdout.write("PORT %d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
