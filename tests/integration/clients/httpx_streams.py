#!/usr/bin/env python3
"""Concurrent HTTP/2 streams on one httpx connection, from threads.

Usage: httpx_streams.py MODE URL...
  threads  one thread a URL, started together (a barrier)
  pool     the first URL alone (it opens the connection), then the
           others from a pool of threads, one each (the conformance
           matrix's way)
httpx's sync client, http2=True, TLS on the socket's fd (python's ssl,
SSL_write_ex); h2lock keeps httpcore's unlocked h2 state sane. Prints
"error: ..." on stderr for a request that failed.
"""
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import h2lock  # noqa: F401  (first: before httpx drives h2)
import httpx


def get(c, u):
    try:
        r = c.get(u)
        assert r.http_version == "HTTP/2", r.http_version
    except Exception as e:
        print("error: %r" % e, file=sys.stderr)


def main():
    mode, urls = sys.argv[1], sys.argv[2:]
    with httpx.Client(http2=True, verify=False, timeout=20) as c:
        if mode == "pool":
            get(c, urls[0])
            with ThreadPoolExecutor(max_workers=len(urls)) as ex:
                list(ex.map(lambda u: get(c, u), urls[1:]))
            return
        go = threading.Barrier(len(urls))

        def one(u):
            go.wait()
            get(c, u)
        ts = [threading.Thread(target=one, args=(u,)) for u in urls]
        [t.start() for t in ts]
        [t.join() for t in ts]


if __name__ == "__main__":
    main()
