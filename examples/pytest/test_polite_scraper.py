"""Throttling a scraper in a test suite, with rlshim (SPEC §9).

Copy this file. Each test runs a real scraper (scraper.py here: put yours)
under `rlshim run` against a local server, with a decision log, and asserts
on what rlshim decided (`rlshim verify`) and on what the server saw.

Needs `rlshim` on PATH (make examples puts the build tree first)."""
import http.server
import json
import os
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRAPER = [sys.executable, os.path.join(HERE, "scraper.py")]


@pytest.fixture
def server():
    """A local HTTP server that notes each page it serves."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((time.monotonic(), self.path))
            body = b"page\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    srv.shutdown()


def quota(tmp_path, on_deny):
    """A config for this test alone: 5 connections a second, burst 2."""
    ini = tmp_path / "rlshim.ini"
    ini.write_text(f"[rlshim]\non_deny = {on_deny}\nmax_delay = 10s\n"
                   "[default]\nconnect = 5/s\nconnect_burst = 2\n"
                   "to = 127.0.0.1\n")
    return str(ini)


def under_rlshim(tmp_path, ini, args):
    """Run args under rlshim with a decision log; returns (proc, log path)."""
    log = tmp_path / "decisions.jsonl"
    env = dict(os.environ, RLSHIM_DECISION_LOG=str(log),
               RLSHIM_STATE_DIR=str(tmp_path))
    env.pop("LD_PRELOAD", None)
    p = subprocess.run(["rlshim", "run", "-c", ini, "--", *args], env=env,
                       capture_output=True, text=True, timeout=120)
    return p, str(log)


def verify(log, limit, *more):
    return subprocess.run(["rlshim", "verify", log, "--limit", limit, *more],
                          capture_output=True, text=True)


def test_scraper_is_polite(tmp_path, server):
    url, seen = server
    p, log = under_rlshim(tmp_path, quota(tmp_path, "delay"),
                          SCRAPER + [url, "--pages", "10"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["200"] * 10
    assert len(seen) == 10
    # The assertion a test suite wants, in one line:
    v = verify(log, "connect=5/s,burst=2")
    assert v.returncode == 0, v.stdout
    # And it would have caught a scraper faster than 2/s.
    assert verify(log, "connect=2/s,burst=1").returncode == 1


def test_client_retries_when_throttled(tmp_path, server):
    url, seen = server
    p, log = under_rlshim(tmp_path, quota(tmp_path, "fail"),
                          SCRAPER + [url, "--pages", "8", "--retries", "6",
                                     "--backoff", "0.1"])
    # Every page arrived once, although connects were refused on the way.
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(path for _, path in seen) == sorted(
        f"/page{i}" for i in range(1, 9))
    lines = [json.loads(x) for x in open(log)]
    denied = [x for x in lines if x["verdict"] == "deny"]
    allowed = [x for x in lines if x["verdict"] == "allow"]
    assert len(allowed) == 8
    assert denied, "the quota never bit: this test proves nothing"
    # Retried with a backoff, not in a tight loop: after a refusal the same
    # process waits at least the backoff before its next attempt.
    by_time = sorted(lines, key=lambda x: x["mono_ns"])
    for a, b in zip(by_time, by_time[1:]):
        if a["verdict"] == "deny":
            assert b["mono_ns"] - a["mono_ns"] >= 90_000_000, (a, b)
    assert verify(log, "connect=5/s,burst=2").returncode == 0


def gateway(tmp_path):
    """A config that answers like a gateway: 2 requests a second, and a
    request over it is answered 429 with Retry-After, never sent."""
    ini = tmp_path / "gateway.ini"
    ini.write_text("[rlshim]\non_deny = respond\n"
                   "[default]\nrequest = 2/s\nrequest_burst = 1\n"
                   "to = 127.0.0.1\n")
    return str(ini)


def obeyed_retry_after(log):
    return subprocess.run(["rlshim", "verify", log, "--obeyed-retry-after"],
                          capture_output=True, text=True)


def test_scraper_honours_retry_after(tmp_path, server):
    url, seen = server
    p, log = under_rlshim(tmp_path, gateway(tmp_path),
                          SCRAPER + [url, "--pages", "4", "--on-429", "wait",
                                     "--retries", "5"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["200"] * 4
    # A 429 never reached the server: it got each page once.
    assert len(seen) == 4
    verdicts = [json.loads(x)["verdict"] for x in open(log)]
    assert "respond" in verdicts, "no 429 was given: this test proves nothing"
    v = obeyed_retry_after(log)
    assert v.returncode == 0, v.stdout


def test_a_scraper_that_retries_at_once_is_caught(tmp_path, server):
    url, seen = server
    p, log = under_rlshim(tmp_path, gateway(tmp_path),
                          SCRAPER + [url, "--pages", "3", "--on-429",
                                     "retry-now", "--retries", "3"])
    # It asked again at once after each 429, and gave up on some pages.
    assert "429" in p.stdout.split(), p.stdout
    assert len(seen) < 3
    v = obeyed_retry_after(log)
    assert v.returncode == 1, v.stdout
