#!/usr/bin/env python3
"""make docs: docs/adapt.svg from a real Scrapy crawl.

One HTTP server on 127.0.0.1 that answers in 50 ms, then, for a while,
in 400 ms, then in 50 ms again (by the page asked: its order is fixed),
with a robots.txt that names no Crawl-delay. Scrapy (ROBOTSTXT_OBEY on,
AutoThrottle off, no download delay of its own, one page at a time)
crawls it under `rlshim run` with docs/adapt.ini and a decision log; the
server prints each page's gap from the one before; then `rlshim timeline`
draws the log. Nothing is drawn by hand: run it again and the picture is
of that run. Needs python3-scrapy."""
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "docs/adapt.svg")
here = os.path.dirname(os.path.abspath(__file__))
ini = os.path.join(here, "adapt.ini")
rlshim = os.path.join(build, "rlshim")

FAST, SLOW, AFTER = 12, 8, 16
ROBOTS = b"User-agent: *\nDisallow: /private\n"
arrived = []


def latency(page):
    return 0.4 if FAST <= page < FAST + SLOW else 0.05


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = ROBOTS
        if self.path != "/robots.txt":
            page = int(self.path.rsplit("/", 1)[1])
            arrived.append((time.monotonic(), page))
            time.sleep(latency(page))
            body = b"page\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


SPIDER = """
import sys, scrapy
from scrapy.crawler import CrawlerProcess
base, n = sys.argv[1], int(sys.argv[2])
class Pages(scrapy.Spider):
    name = 'pages'
    custom_settings = {'ROBOTSTXT_OBEY': True, 'AUTOTHROTTLE_ENABLED': False,
                       'DOWNLOAD_DELAY': 0, 'CONCURRENT_REQUESTS': 1,
                       'LOG_LEVEL': 'ERROR', 'TELNETCONSOLE_ENABLED': False}
    def start_requests(self):
        yield scrapy.Request(base + '0', cb_kwargs={'i': 0})
    def parse(self, response, i):
        if i + 1 < n:
            yield scrapy.Request(base + str(i + 1), cb_kwargs={'i': i + 1})
p = CrawlerProcess({'LOG_LEVEL': 'ERROR'})
p.crawl(Pages)
p.start()
"""

srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
tmp = tempfile.mkdtemp(prefix="rlshim-docs-")
log = os.path.join(tmp, "decisions.jsonl")
env = dict(os.environ, RLSHIM_DECISION_LOG=log, RLSHIM_STATE_DIR=tmp)
env.pop("LD_PRELOAD", None)
base = "http://127.0.0.1:%d/page/" % srv.server_address[1]
subprocess.run([rlshim, "run", "-c", ini, "--", "/usr/bin/python3", "-c",
                SPIDER, base, str(FAST + SLOW + AFTER)], env=env, check=True,
               timeout=120)
for (t0, before), (t1, page) in zip(arrived, arrived[1:]):
    print("page %2d came %.3f s after page %2d, answered in %3d ms"
          % (page, t1 - t0, before, round(latency(before) * 1000)))
subprocess.run([rlshim, "timeline", log, "-c", ini, "--bin", "500ms",
                "--svg", out], check=True)
print("wrote", out)
