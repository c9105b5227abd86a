#!/usr/bin/env python3
"""The python carriers of the conformance matrix (test_matrix.c).

Usage: matrix_client.py MODE URL...
  requests  python requests, one Session: a plain blocking socket for
            http URLs, TLS on the socket's fd (SSL_write) for https
  membio    TLS through a memory BIO (ssl.MemoryBIO, as Twisted's): the
            program moves the ciphertext itself; HTTP/1.1 keep-alive
  h2        httpx's sync client with http2=True: the first URL alone (the
            connection), then every other URL as concurrent streams on it,
            one thread each
Prints done=1 when every URL was answered (any status).
"""
import socket
import ssl
import sys
from urllib.parse import urlsplit


def with_requests(urls):
    import requests
    import urllib3
    urllib3.disable_warnings()
    s = requests.Session()
    for u in urls:
        s.get(u, verify=False, timeout=30)


def with_membio(urls):
    first = urlsplit(urls[0])
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    s = socket.create_connection(("127.0.0.1", first.port))
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=first.hostname)

    def flush():
        d = out.read()
        if d:
            s.sendall(d)

    def pump():
        d = s.recv(65536)
        if not d:
            raise SystemExit("eof")
        inc.write(d)

    while True:
        try:
            o.do_handshake()
            flush()
            break
        except ssl.SSLWantReadError:
            flush()
            pump()
    for u in urls:
        p = urlsplit(u)
        o.write(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                 % (p.path, p.netloc)).encode())
        flush()
        buf = b""
        while True:
            head, sep, body = buf.partition(b"\r\n\r\n")
            if sep:
                n = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-length:")][0]
                if len(body) >= n:
                    break
            try:
                buf += o.read(65536)
            except ssl.SSLWantReadError:
                pump()


def with_h2(urls):
    import h2lock  # noqa: F401  (httpcore's h2 state, locked: h2lock.py)
    import httpx
    from concurrent.futures import ThreadPoolExecutor

    # The sync client from threads, as issue 31's item 17 ran it: TLS on
    # the socket's fd. (asyncio's TLS is a memory BIO, whose write of
    # several streams still goes whole at its last turn: README.)
    with httpx.Client(http2=True, verify=False, timeout=30) as c:
        r = c.get(urls[0])
        assert r.http_version == "HTTP/2", r.http_version
        with ThreadPoolExecutor(max_workers=len(urls)) as ex:
            for r in ex.map(c.get, urls[1:]):
                assert r.http_version == "HTTP/2", r.http_version


def main():
    mode, urls = sys.argv[1], sys.argv[2:]
    {"requests": with_requests, "membio": with_membio,
     "h2": with_h2}[mode](urls)
    print("done=1")


if __name__ == "__main__":
    main()
