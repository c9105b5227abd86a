#!/usr/bin/env python3
"""An HTTPS server on 127.0.0.1 (keep-alive) that timestamps each request.

Usage: https_count.py LOGFILE
Makes a throwaway self-signed RSA certificate in LOGFILE's directory,
prints "PORT <n>" once listening, and appends one line per request head
received, flushed at once:
    REQ <monotonic seconds when its head had arrived> <path> <conn id>
Answers every GET with a small body and keeps the connection open.
Threaded, so parallel clients are served.
"""
import http.server
import itertools
import os
import ssl
import subprocess
import sys
import threading
import time

LOG = None
LOCK = threading.Lock()
CONN_IDS = itertools.count(1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.conn_id = next(CONN_IDS)

    def do_GET(self):
        with LOCK:
            LOG.write("REQ %.6f %s %d\n" % (time.monotonic(), self.path,
                                            self.conn_id))
            LOG.flush()
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    global LOG
    log = sys.argv[1]
    d = os.path.dirname(os.path.abspath(log))
    key, crt = os.path.join(d, "https.key"), os.path.join(d, "https.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                    "-subj", "/CN=localhost"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    LOG = open(log, "a")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    sys.stdout.write("PORT %d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
