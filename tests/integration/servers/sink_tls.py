#!/usr/bin/env python3
"""A TLS byte sink on 127.0.0.1 with a throwaway self-signed certificate.

Usage: sink_tls.py LOGFILE
Makes a key and certificate in LOGFILE's directory with openssl, prints
"PORT <n>" once listening, and appends one line per connection:
    CONN <monotonic first> <monotonic last> <bytes> <sha256>
counting the decrypted application bytes.
"""
import hashlib
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

LOCK = threading.Lock()


def serve(fh, ctx, conn):
    h = hashlib.sha256()
    n = 0
    first = last = time.monotonic()
    try:
        with ctx.wrap_socket(conn, server_side=True) as s:
            while True:
                data = s.recv(1 << 16)
                if not data:
                    break
                if n == 0:
                    first = time.monotonic()
                last = time.monotonic()
                n += len(data)
                h.update(data)
    except (OSError, ssl.SSLError):
        pass
    with LOCK:
        fh.write("CONN %.6f %.6f %d %s\n" % (first, last, n, h.hexdigest()))
        fh.flush()


def main():
    log = sys.argv[1]
    d = os.path.dirname(os.path.abspath(log))
    key, crt = os.path.join(d, "tls.key"), os.path.join(d, "tls.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "1", "-subj", "/CN=localhost"],
                   check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    fh = open(log, "a")
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("127.0.0.1", 0))
    t.listen(64)
    sys.stdout.write("PORT %d\n" % t.getsockname()[1])
    sys.stdout.flush()
    while True:
        conn, _ = t.accept()
        threading.Thread(target=serve, args=(fh, ctx, conn),
                         daemon=True).start()


if __name__ == "__main__":
    main()
