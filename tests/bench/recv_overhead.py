#!/usr/bin/env python3
"""What reading responses costs (issue 21, SPEC §12), in one run:

- the instructions the receive hook adds to a read of an fd it never
  marked (every process reads all the time): control/readloop.c's reads
  of /dev/zero under callgrind, bare, under the pass-through preload
  (control/passthrough.c: the floor any preload pays) and under rlshim
  with a request limit in force; two runs of N and 2N reads, so that the
  difference is N reads and nothing of the start-up;
- a 100 MB download with curl from nginx on one counted connection
  (a `request` limit that never binds: every read goes through the
  response scanner) vs the same shim with no request key (reads unmarked),
  plaintext (recv) and over TLS (SSL_read); medians of alternating runs,
  want >= 0.98 in wall time. A download is short: on a loaded machine
  the wall times scatter, so curl's CPU time (what the reads cost) is
  printed beside them, and curl's instructions for a 10 MB download
  under callgrind, which the load cannot move.
The ns per response parsed are bench_respconn's (a C benchmark of make
bench). Prints figures; exits 1 only when a run fails."""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
src = os.environ.get("RLSHIM_SRC", os.path.abspath("."))
rounds = int(os.environ.get("BENCH_ROUNDS", "11"))
shim = os.path.join(build, "librlshim.so")
tmp = tempfile.mkdtemp(prefix="rlshim-bench-recv-")
control = os.path.join(src, "tests", "bench", "control")


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


never = "connect = 1000000/s\nconnect_burst = 1000000000\n"
with_request = write("request.ini", "[default]\nrequest = 1000000/s\n"
                     "request_burst = 1000000000\n" + never)
no_request = write("connect.ini", "[default]\n" + never)


def env_for(config, preload=shim):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload is not None:
        env["LD_PRELOAD"] = preload
    if config is not None:
        env.update({"RLSHIM_CONFIG": config, "RLSHIM_STATE_DIR": tmp})
    return env


def instructions(env, n, argv=None):
    """Instructions of readloop N (or of argv) under callgrind."""
    out = os.path.join(tmp, "cg.out")
    argv = argv or [os.path.join(tmp, "readloop"), str(n)]
    p = subprocess.run(["valgrind", "--tool=callgrind",
                        "--callgrind-out-file=" + out] + argv,
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    for line in open(out):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    return None


def per_read():
    if shutil.which("valgrind") is None:
        print("recv: valgrind not installed: instructions not counted "
              "(1 skip)")
        return True
    subprocess.run(["cc", "-O2", "-o", os.path.join(tmp, "readloop"),
                    os.path.join(control, "readloop.c")], check=True)
    passthrough = os.path.join(tmp, "passthrough.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", passthrough,
                    os.path.join(control, "passthrough.c"), "-ldl"],
                   check=True)
    n = 20000
    got = {}
    for name, env in (("bare", env_for(None, None)),
                      ("passthrough", env_for(None, passthrough)),
                      ("rlshim", env_for(with_request))):
        a, b = instructions(env, n), instructions(env, 2 * n)
        if a is None or b is None:
            print("recv: callgrind failed under %s" % name)
            return False
        got[name] = (b - a) / n
    print("recv: instructions per read of an unmarked fd (callgrind, %d "
          "reads): bare %.1f, pass-through preload %.1f, rlshim %.1f: "
          "%+.1f over the pass-through, %+.1f over bare" %
          (n, got["bare"], got["passthrough"], got["rlshim"],
           got["rlshim"] - got["passthrough"], got["rlshim"] - got["bare"]))
    added = got["rlshim"] - got["passthrough"]
    print("bar: instructions a read of an unmarked fd adds over the "
          "pass-through preload: %.1f (target <= 0): %s" %
          (added, "met" if added <= 0 else "NOT MET"))
    return True


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def nginx_serving(root):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        return None
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-subj", "/CN=localhost", "-days", "1",
                    "-keyout", os.path.join(tmp, "k.pem"), "-out",
                    os.path.join(tmp, "c.pem")], capture_output=True,
                   check=True)
    http, https = free_port(), free_port()
    conf = write("nginx.conf", """daemon off; master_process off;
worker_processes 1; pid %(t)s/nginx.pid; error_log %(t)s/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path %(t)s; proxy_temp_path %(t)s;
  fastcgi_temp_path %(t)s; uwsgi_temp_path %(t)s; scgi_temp_path %(t)s;
  server { listen 127.0.0.1:%(h)d; root %(r)s; }
  server { listen 127.0.0.1:%(s)d ssl; ssl_certificate %(t)s/c.pem;
           ssl_certificate_key %(t)s/k.pem; root %(r)s; }
}
""" % {"t": tmp, "h": http, "s": https, "r": root})
    proc = subprocess.Popen([nginx, "-c", conf, "-p", tmp],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, http, https


def download(config, url):
    """(wall s, CPU s of curl) of one download."""
    t = time.monotonic()
    p = subprocess.Popen(["curl", "-sk", "-o", "/dev/null", url],
                         env=env_for(config), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    if status != 0:
        sys.stderr.write("curl exited with status %d\n" % status)
        return None
    return time.monotonic() - t, ru.ru_utime + ru.ru_stime


def downloads():
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    with open(os.path.join(root, "big"), "wb") as f:
        f.truncate(100 * 1000 * 1000)
    with open(os.path.join(root, "mid"), "wb") as f:
        f.truncate(10 * 1000 * 1000)
    started = nginx_serving(root)
    if started is None:
        print("recv: nginx not installed: downloads not measured (1 skip)")
        return True
    proc, http, https = started
    try:
        for label, url in (("plaintext", "http://127.0.0.1:%d/big" % http),
                           ("TLS", "https://127.0.0.1:%d/big" % https)):
            wall = {"request": [], "no-request": []}
            cpu = {"request": [], "no-request": []}
            for _ in range(rounds):
                for name, cfg in (("request", with_request),
                                  ("no-request", no_request)):
                    t = download(cfg, url)
                    if t is None:
                        return False
                    wall[name].append(t[0])
                    cpu[name].append(t[1])
            w = {k: statistics.median(v) for k, v in wall.items()}
            c = {k: statistics.median(v) for k, v in cpu.items()}
            print("recv: 100 MB download %s (curl, nginx, median of %d): "
                  "no-request-key/request %.3f in wall time (want >= 0.98), "
                  "%.3f in curl's CPU time; %.0f MB/s through the response "
                  "scanner" %
                  (label, rounds, w["no-request"] / w["request"],
                   c["no-request"] / c["request"], 100 / w["request"]))
            if shutil.which("valgrind") is not None:
                # What the machine's load cannot move: curl's instructions
                # for 10 MB, one run each.
                argv = ["curl", "-sk", "-o", "/dev/null",
                        url.replace("/big", "/mid")]
                i_req = instructions(env_for(with_request), 0, argv)
                i_no = instructions(env_for(no_request), 0, argv)
                if i_req is None or i_no is None:
                    return False
                print("recv: 10 MB download %s under callgrind: %d "
                      "instructions with a request limit, %d without "
                      "(+%.2f %%)" % (label, i_req, i_no,
                                      100.0 * (i_req - i_no) / i_no))
            ratio = w["no-request"] / w["request"]
            print("bar: 100 MB download %s, no-request-key / request: %.3f "
                  "(target >= 0.98): %s" %
                  (label, ratio, "met" if ratio >= 0.98 else "NOT MET"))
    finally:
        proc.terminate()
        proc.wait()
    return True


try:
    good = per_read() and downloads()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(0 if good else 1)
