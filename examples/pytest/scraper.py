#!/usr/bin/env python3
"""A small scraper, standing in for yours: fetches URL/page1 .. pageN, one
new connection per page. With --retries, a page whose connection fails
(rlshim in fail mode refuses it with EAGAIN) is tried again after a backoff
that doubles each time. With --on-429, a page answered 429 is given up
(give-up, the default), fetched again after the Retry-After it was told
(wait), or fetched again at once (retry-now: a scraper a test should
catch), up to --retries times. Prints one line per page: its status, or
ERR."""
import argparse
import http.client
import sys
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("--pages", type=int, default=10)
ap.add_argument("--retries", type=int, default=0)
ap.add_argument("--backoff", type=float, default=0.2)
ap.add_argument("--on-429", choices=["give-up", "wait", "retry-now"],
                default="give-up")
a = ap.parse_args()
u = urllib.parse.urlsplit(a.url)
failed = 0
for i in range(1, a.pages + 1):
    delay = a.backoff
    for attempt in range(a.retries + 1):
        try:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            c.request("GET", f"/page{i}")
            r = c.getresponse()
            r.read()
            c.close()
            if (r.status == 429 and a.on_429 != "give-up"
                    and attempt < a.retries):
                if a.on_429 == "wait":
                    time.sleep(float(r.getheader("Retry-After", "1")))
                continue
            print(r.status, flush=True)
            break
        except OSError as e:
            if attempt == a.retries:
                print("ERR", e.errno, flush=True)
                failed += 1
            else:
                time.sleep(delay)
                delay *= 2
sys.exit(1 if failed else 0)
