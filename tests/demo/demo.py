#!/usr/bin/env python3
"""make demo: one real scraper (a curl loop), bare and under rlshim.

Starts an HTTP server on 127.0.0.1 that notes when each request arrives,
runs the same scraper three times (bare; under the shim with on_deny=delay;
under the shim with on_deny=fail) and prints, side by side, how many
requests reached the server in each 100 ms and what the scraper saw."""
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time

REQUESTS = 15
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
arrivals = []
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with lock:
            arrivals.append(time.monotonic())
        body = b"page\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
port = server.server_address[1]
threading.Thread(target=server.serve_forever, daemon=True).start()

scraper = (
    f"for i in $(seq {REQUESTS}); do "
    f"curl -s -o /dev/null -w '%{{http_code}} ' --max-time 5 "
    f"http://127.0.0.1:{port}/page$i; done"
)


def run(title, config=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    state = tempfile.mkdtemp(prefix="rlshim-demo-")
    if config:
        env.update(LD_PRELOAD=os.path.join(build, "librlshim.so"),
                   RLSHIM_CONFIG=config, RLSHIM_STATE_DIR=state)
    with lock:
        arrivals.clear()
    t0 = time.monotonic()
    out = subprocess.run(["sh", "-c", scraper], env=env, capture_output=True,
                         text=True, timeout=120).stdout.split()
    wall = time.monotonic() - t0
    with lock:
        got = [a - t0 for a in arrivals]
    ok = sum(1 for c in out if c == "200")
    return dict(title=title, arrivals=got, wall=wall, ok=ok,
                failed=len(out) - ok)


delay_ini = os.path.join(src, "conf", "demo.ini")
fail_ini = os.path.join(tempfile.mkdtemp(prefix="rlshim-demo-"), "fail.ini")
with open(delay_ini) as f, open(fail_ini, "w") as g:
    g.write(f.read().replace("on_deny   = delay", "on_deny   = fail"))

print(f"A scraper fetches {REQUESTS} pages from 127.0.0.1:{port} with curl, "
      "as fast as it can.")
print("Quota (conf/demo.ini): connect = 5/s, connect_burst = 1, "
      "to = 127.0.0.1\n")
runs = [run("bare"), run("rlshim delay", delay_ini),
        run("rlshim fail", fail_ini)]

slots = int(max(max(r["wall"] for r in runs), 0.1) / 0.1) + 1
print("requests reaching the server, per 100 ms "
      "(one # per request)\n")
print("  time   " + "".join(f"{r['title']:<16}" for r in runs))
for s in range(slots):
    cells = []
    for r in runs:
        n = sum(1 for a in r["arrivals"] if s * 0.1 <= a < (s + 1) * 0.1)
        cells.append(f"{'#' * n:<16}")
    if any(c.strip() for c in cells) or s % 10 == 0:
        print(f"  {s / 10:4.1f}s  " + "".join(cells))
print()
print("what the scraper saw:")
for r in runs:
    print(f"  {r['title']:<14} {r['ok']:>2} pages OK, {r['failed']:>2} failed, "
          f"{len(r['arrivals']):>2} reached the server, {r['wall']:.2f} s")
print("\ndelay: every page arrives, paced at 5/s. fail: calls over the quota "
      "fail at once\nwith EAGAIN (curl: \"Couldn't connect\"); nothing over "
      "the quota reaches the server.")
server.shutdown()
