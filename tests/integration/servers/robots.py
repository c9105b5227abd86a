#!/usr/bin/env python3
"""An HTTP/1.1 server on 127.0.0.1 (keep-alive, threaded) with a
robots.txt of three groups, for the Crawl-delay tests (SPEC §14):
polite-bot 1 s, Scrapy (its default User-Agent's product token) 1 s,
everyone else 0.5 s.

Usage: robots.py LOGFILE
Environment: RL_ROBOTS picks how /robots.txt is answered:
    plain (default)  200, framed by Content-Length
    chunked          200, Transfer-Encoding: chunked, in pieces
    gzip             200, Content-Encoding: gzip, Content-Length
    gzip-chunked     200, gzip and chunked
    close            200, no length: the body ends where the server closes
                     the connection
    404              404 Not Found (its body names a delay all the same)
Prints "PORT <n>" once listening; appends one line per request, flushed
at once, when its head has arrived:
    REQ <monotonic seconds> <METHOD> <path> <User-Agent's first word>
Every other path answers 200 with a small body.
"""
import gzip
import http.server
import os
import sys
import threading
import time

LOG = None
LOCK = threading.Lock()
ROBOTS = (b"# three groups\n"
          b"User-agent: polite-bot\n"
          b"Crawl-delay: 1\n"
          b"Disallow: /private\n"
          b"\n"
          b"User-agent: Scrapy\n"
          b"Crawl-delay: 1\n"
          b"\n"
          b"User-agent: *\n"
          b"Crawl-delay: 0.5\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def chunked(self, data):
        step = max(1, len(data) // 3)
        for i in range(0, len(data), step):
            piece = data[i:i + step]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self):
        t = time.monotonic()
        ua = (self.headers.get("User-Agent") or "-").split()[0]
        with LOCK:
            LOG.write("REQ %.6f %s %s %s\n" % (t, self.command, self.path, ua))
            LOG.flush()
        mode = os.environ.get("RL_ROBOTS", "plain")
        if self.path != "/robots.txt":
            data = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        data = ROBOTS
        if mode == "404":
            self.send_response(404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if mode.startswith("gzip"):
            data = gzip.compress(data)
            self.send_header("Content-Encoding", "gzip")
        if mode == "close":
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
            return
        if mode.endswith("chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunked(data)
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
