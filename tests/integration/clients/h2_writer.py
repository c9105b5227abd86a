#!/usr/bin/env python3
"""An HTTP/2 client over TLS that writes exactly what a test asks for, with
Python's ssl module (SSL_write_ex), so that the shim's HTTP/2 request
count can be checked write by write.

Usage: h2_writer.py PORT STEP...
Steps, in order, on one connection until "conn" opens the next:
  conn        a new TLS connection (ALPN h2, no verification) and one write
              of the client preface and SETTINGS (no request)
  streams:K   one write that opens K streams (a GET HEADERS frame each)
  split:SEED  three requests (one with a 20 KB header: HEADERS and
              CONTINUATION; one with a body and trailers: a second HEADERS
              on its stream; one plain) among 300 PINGs and 50 SETTINGS,
              the bytes cut at random (SEED) into 1 to 7 byte writes
  wait        read until every stream opened so far has ended (5 s at most)
  block       the connection's socket blocking from now on (no timeout:
              its writes may sleep in the shim; "wait" cannot follow)
  timeout:S   the connection's writes time out after S s from now on (a
              write paced over several turns needs longer than 2 s)
Every write has a 2 s timeout (a refused write in fail mode times out:
its socket is held for a minute). Prints, for step i: t<i>=<time.time()
before it>, and step<i>=ok or step<i>=timeout (and stops); for
connection c: bytes<c>= and sha<c>= of everything written on it.
"""
import hashlib
import random
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events

port = int(sys.argv[1])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])

sock = conn = None
nconn = -1
sent = {}
open_streams = set()


def put(data):
    """One write (one SSL_write_ex), whole, or raise on its timeout."""
    sock.sendall(data)
    n, h = sent[nconn]
    h.update(data)
    sent[nconn] = (n + len(data), h)


def headers(path, extra=()):
    return [(":method", "GET"), (":scheme", "https"),
            (":authority", "localhost"), (":path", path)] + list(extra)


def new_conn():
    global sock, conn, nconn
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock = ctx.wrap_socket(raw, server_hostname="localhost")
    sock.settimeout(2)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding="utf-8"))
    nconn += 1
    sent[nconn] = (0, hashlib.sha256())
    open_streams.clear()
    conn.initiate_connection()
    put(conn.data_to_send())


def streams(k):
    for _ in range(k):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers("/a.txt?s=%d" % sid), end_stream=True)
        open_streams.add(sid)
    put(conn.data_to_send())


def split(seed):
    rnd = random.Random(seed)
    out = b""
    for i in range(300):
        conn.ping(b"%08d" % i)
        if i % 6 == 0:
            conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS:
                                  100 + i})
        if i == 50:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, headers("/big", [("x-big", "b" * 20000)]),
                              end_stream=True)
        elif i == 150:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, headers("/post", [("content-length", "4")]))
            conn.send_data(sid, b"body")
            conn.send_headers(sid, [("x-trailer", "1")], end_stream=True)
        elif i == 250:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, headers("/plain"), end_stream=True)
        out += conn.data_to_send()
    pos = 0
    while pos < len(out):
        k = rnd.randint(1, 7)
        put(out[pos:pos + k])
        pos += k


def wait():
    end = time.monotonic() + 5
    while open_streams and time.monotonic() < end:
        try:
            data = sock.recv(65536)
        except (socket.timeout, ssl.SSLError):
            continue
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                open_streams.discard(ev.stream_id)
        out = conn.data_to_send()
        if out:
            put(out)


for i, step in enumerate(sys.argv[2:]):
    print("t%d=%.6f" % (i, time.time()), flush=True)
    try:
        if step == "conn":
            new_conn()
        elif step.startswith("streams:"):
            streams(int(step.split(":")[1]))
        elif step.startswith("split:"):
            split(int(step.split(":")[1]))
        elif step == "wait":
            wait()
        elif step == "block":
            sock.settimeout(None)
        elif step.startswith("timeout:"):
            sock.settimeout(float(step.split(":")[1]))
        print("step%d=ok" % i, flush=True)
    except (socket.timeout, ssl.SSLError, OSError) as e:
        print("step%d=timeout" % i, flush=True)
        print("step %d: %r" % (i, e), file=sys.stderr)
        break
for c, (n, h) in sent.items():
    print("bytes%d=%d\nsha%d=%s" % (c, n, c, h.hexdigest()))
