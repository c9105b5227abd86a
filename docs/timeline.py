#!/usr/bin/env python3
"""make docs: docs/timeline.svg from a real run.

Two HTTP servers (127.0.0.1 and 127.0.0.2), four curl scrapers (two per
host) fetching as fast as they can under `rlshim run` with docs/timeline.ini and
a decision log; then `rlshim timeline` draws the log. Nothing is drawn by
hand: run it again and the picture is of that run."""
import http.server
import os
import subprocess
import sys
import tempfile
import threading

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "docs/timeline.svg")
here = os.path.dirname(os.path.abspath(__file__))
ini = os.path.join(here, "timeline.ini")
rlshim = os.path.join(build, "rlshim")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"page\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ports = []
for host in ("127.0.0.1", "127.0.0.2"):
    srv = http.server.ThreadingHTTPServer((host, 0), Handler)
    ports.append((host, srv.server_address[1]))
    threading.Thread(target=srv.serve_forever, daemon=True).start()

tmp = tempfile.mkdtemp(prefix="rlshim-docs-")
log = os.path.join(tmp, "decisions.jsonl")
env = dict(os.environ, RLSHIM_DECISION_LOG=log, RLSHIM_STATE_DIR=tmp)
env.pop("LD_PRELOAD", None)
procs = []
for host, port in ports * 2:
    # Two scrapers per host, 12 pages each, each a fresh connection; "000" = refused.
    # A refused connect (curl: 000) is retried 250 ms later, 8 times at most.
    loop = (f"for i in $(seq 12); do for try in 1 2 3 4 5 6 7 8; do "
            f"c=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 "
            f"http://{host}:{port}/page$i); [ $c = 200 ] && break; "
            f"sleep 0.25; done; printf '%s ' $c; done")
    procs.append(subprocess.Popen([rlshim, "run", "-c", ini, "--", "sh", "-c",
                                   loop], env=env, stdout=subprocess.PIPE,
                                  text=True))
for p in procs:
    print("scraper saw:", p.communicate(timeout=120)[0])
subprocess.run([rlshim, "timeline", log, "-c", ini, "--bin", "200ms",
                "--svg", out], check=True)
subprocess.run([rlshim, "verify", log, "--limit", "connect=5/s,burst=3"],
               check=True)
print("wrote", out)
