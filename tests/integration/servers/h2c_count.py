#!/usr/bin/env python3
"""An HTTP/2 server without TLS (prior knowledge, h2c) on 127.0.0.1, built
on python3-h2, that stamps every stream it gets: the count of requests
that reached it over HTTP/2 (SPEC §15, on_deny = respond).

Usage: h2c_count.py LOGFILE
Environment: RL_TLS=1 serves HTTPS with ALPN h2 instead, with a throwaway
self-signed certificate made in LOGFILE's directory.
Prints "PORT <n>" once listening; appends one line per event, flushed:
    CONN <monotonic seconds>                 a connection accepted
    REQ <monotonic seconds> <stream> <path>  a request's headers came
    ERR <what>                               the connection broke (a
                                             protocol error, a GOAWAY)
Every request is answered 200 with a short body.
"""
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
except ImportError:
    # The python3 on PATH may lack the distribution's python3-h2.
    if sys.executable != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

LOCK = threading.Lock()
LOG = None


def log(line):
    with LOCK:
        LOG.write(line + "\n")
        LOG.flush()


def serve(sock, ctx):
    if ctx is not None:
        try:
            sock = ctx.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError) as e:
            log("ERR handshake %s" % e)
            sock.close()
            return
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    log("CONN %.6f" % time.monotonic())
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    path = dict(ev.headers).get(b":path", b"?").decode()
                    log("REQ %.6f %d %s" % (time.monotonic(), ev.stream_id,
                                            path))
                    body = b"ok\n"
                    conn.send_headers(ev.stream_id, [
                        (":status", "200"),
                        ("content-length", str(len(body)))])
                    conn.send_data(ev.stream_id, body, end_stream=True)
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    log("ERR goaway %s" % ev.error_code)
            sock.sendall(conn.data_to_send())
    except h2.exceptions.ProtocolError as e:
        log("ERR %s" % type(e).__name__)
        try:
            sock.sendall(conn.data_to_send())
        except OSError:
            pass
    except OSError:
        pass
    finally:
        sock.close()


def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    ctx = None
    if os.environ.get("RL_TLS") == "1":
        d = os.path.dirname(os.path.abspath(sys.argv[1]))
        key, crt = os.path.join(d, "h2.key"), os.path.join(d, "h2.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                        "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                        "-subj", "/CN=127.0.0.1"],
                       check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        ctx.set_alpn_protocols(["h2"])
    print("PORT %d" % srv.getsockname()[1], flush=True)
    while True:
        s, _ = srv.accept()
        threading.Thread(target=serve, args=(s, ctx), daemon=True).start()


main()
