#!/usr/bin/env python3
"""An HTTP/1.1 server on 127.0.0.1 (keep-alive, threaded) whose answers a
request's path chooses, for the Retry-After tests (SPEC §12).

Usage: http_status.py LOGFILE
Environment: RL_TLS=1 serves HTTPS with a throwaway self-signed RSA
certificate made in LOGFILE's directory; HTTP_STATUS_HOST=ADDRESS listens
there instead of 127.0.0.1 (a bridge the fleet tests' hosts reach).
Prints "PORT <n>" once listening; appends one line per request, flushed
at once, when its head has arrived:
    REQ <monotonic seconds> <METHOD> <path> <status answered>
Paths:
    /s/STATUS/RA     answer STATUS (e.g. 429, 503) with "Retry-After: RA";
                     RA "-" sends no Retry-After; "date+N" sends the
                     HTTP-date N seconds from now
    /once/STATUS/RA  the same the first time this exact path is asked,
                     200 after that (a client's retry gets through)
    /nth/N/STATUS/RA the same to the N-th request of this path (its query
                     aside), 200 to the others (one answer among requests
                     a client has queued)
    /slow/MS[/...]   200 after MS milliseconds (stamped when the head
                     came, before the wait): a server's response time
                     (SPEC §14 latency)
    /reset           no answer: the connection is reset (SO_LINGER 0) once
                     the request's head is read (SPEC §14 backoff_on)
    /hang/N          no answer for N seconds, then the connection closed
    anything else    200
Every answer has a small body framed by Content-Length.
"""
import email.utils
import http.server
import io
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

LOG = None
LOCK = threading.Lock()
SEEN = set()
ASKED = {}


def retry_after(ra):
    if ra.startswith("date+"):
        return email.utils.formatdate(time.time() + float(ra[5:]),
                                      usegmt=True)
    return ra


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def no_answer(self, t, parts):
        with LOCK:
            LOG.write("REQ %.6f %s %s 0\n" % (t, self.command, self.path))
            LOG.flush()
        if parts[1] == "hang":
            time.sleep(float(parts[2]))
        else:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True
        # Nothing left to flush at the handler's end.
        self.wfile = io.BytesIO()

    def answer(self, body):
        t = time.monotonic()
        parts = self.path.split("/")
        if len(parts) >= 2 and (parts[1] == "reset" or
                                (parts[1] == "hang" and len(parts) >= 3)):
            self.no_answer(t, parts)
            return
        status, ra = 200, "-"
        if len(parts) >= 4 and parts[1] in ("s", "once"):
            with LOCK:
                first = self.path not in SEEN
                SEEN.add(self.path)
            if parts[1] == "s" or first:
                status, ra = int(parts[2]), "/".join(parts[3:])
        if len(parts) >= 5 and parts[1] == "nth":
            path = self.path.split("?")[0]
            with LOCK:
                ASKED[path] = ASKED.get(path, 0) + 1
                nth = ASKED[path] == int(parts[2])
            if nth:
                status, ra = int(parts[3]), "/".join(parts[4:]).split("?")[0]
        with LOCK:
            LOG.write("REQ %.6f %s %s %d\n" % (t, self.command, self.path,
                                               status))
            LOG.flush()
        if len(parts) >= 3 and parts[1] == "slow":
            time.sleep(int(parts[2]) / 1000.0)
        data = b"busy\n" if status != 200 else b"ok\n"
        self.send_response(status)
        if ra not in ("-", ""):
            self.send_header("Retry-After", retry_after(ra))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self):
        self.answer(True)

    def do_HEAD(self):
        self.answer(False)


def main():
    global LOG
    log = sys.argv[1]
    LOG = open(log, "a")
    srv = http.server.ThreadingHTTPServer(
        (os.environ.get("HTTP_STATUS_HOST", "127.0.0.1"), 0), Handler)
    srv.daemon_threads = True
    if os.environ.get("RL_TLS") == "1":
        d = os.path.dirname(os.path.abspath(log))
        key, crt = os.path.join(d, "status.key"), os.path.join(d, "status.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                        "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                        "-subj", "/CN=127.0.0.1"],
                       check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        # Each connection's handshake in its own thread (at its first
        # read), not in accept: a client whose Finished is held back (its
        # request waiting for its turn) must not hold the others' up.
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True,
                                     do_handshake_on_connect=False)
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
