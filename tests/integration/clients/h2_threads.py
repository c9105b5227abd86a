#!/usr/bin/env python3
"""Two HTTP/2 requests from two threads on one TLS connection, a third
thread reading, as a threaded client shares one connection (httpcore).

Usage: h2_threads.py PORT PATH1 PATH2
The first thread's request goes, then the second's: under a request limit
it waits for its turn inside its write while the reader thread reads the
first one's answer. Prints status<stream>=<code> for each answer read
within 10 s. The reader never writes (its SETTINGS acknowledgement goes
with the next request), so that no two threads write on the session at
once.
"""
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events

port, path1, path2 = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                       server_hostname="localhost")
conn = h2.connection.H2Connection(
    config=h2.config.H2Configuration(client_side=True))
state = threading.Lock()  # the h2 state, never held across a socket call
conn.initiate_connection()
sock.sendall(conn.data_to_send())
ended = {}


def reader():
    while len(ended) < 2:
        data = sock.recv(65536)
        if not data:
            return
        with state:
            events = conn.receive_data(data)
        for e in events:
            if isinstance(e, h2.events.ResponseReceived):
                ended[e.stream_id] = dict(e.headers).get(b":status", b"?")


def get(stream_id, path):
    with state:
        conn.send_headers(stream_id, [(":method", "GET"), (":scheme", "https"),
                                      (":authority", "localhost"),
                                      (":path", path)], end_stream=True)
        out = conn.data_to_send()
    sock.sendall(out)


threading.Thread(target=reader, daemon=True).start()
get(1, path1)
second = threading.Thread(target=get, args=(3, path2))
second.start()
second.join(10)
deadline = time.time() + 10
while len(ended) < 2 and time.time() < deadline:
    time.sleep(0.01)
for sid in sorted(ended):
    print("status%d=%s" % (sid, ended[sid].decode()), flush=True)
