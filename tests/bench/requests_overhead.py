#!/usr/bin/env python3
"""What counting requests costs (issue 20), measured in one run, variants
alternating, medians of ROUNDS runs, with curl as the client:

- a keep-alive loop of N small GETs on one connection to a local server
  (nginx when installed, else tests/integration/servers/http_count.py):
  under a `request` limit that never binds vs bare (want >= 0.95), and vs
  the same shim with no `request` key (what the scanning adds);
- the same loop over HTTPS (the TLS layer: SSL_write), when nginx is there;
- one 100 MB POST under the never-binding `request` limit vs the same with
  no request key (want >= 0.98: a body costs arithmetic, not parsing).
Prints ratios of wall times; exits 1 only when a run fails."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
src = os.environ.get("RLSHIM_SRC", os.path.abspath("."))
rounds = int(os.environ.get("BENCH_ROUNDS", "7"))
n_get = int(os.environ.get("BENCH_GETS", "2000"))
shim = os.path.join(build, "librlshim.so")
tmp = tempfile.mkdtemp(prefix="rlshim-bench-req-")
curl = shutil.which("curl")
nginx = shutil.which("nginx") or (
    "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
if curl is None:
    print("requests: curl not installed: skipped (1 skip)")
    sys.exit(0)


def ini(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


never = ini("request.ini", "[default]\nrequest = 1000000/s\n"
            "request_burst = 1000000000\nconnect = 1000000/s\n"
            "connect_burst = 1000000000\n")
plain = ini("connect.ini", "[default]\nconnect = 1000000/s\n"
            "connect_burst = 1000000000\n")
procs = []


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_nginx():
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    with open(os.path.join(root, "s.txt"), "w") as f:
        f.write("ok\n")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-subj", "/CN=localhost", "-days", "1", "-keyout",
                    os.path.join(tmp, "k.pem"), "-out",
                    os.path.join(tmp, "c.pem")], capture_output=True, check=True)
    http, https = free_port(), free_port()
    conf = ini("nginx.conf", """daemon off; master_process off;
worker_processes 1; pid %(t)s/nginx.pid; error_log %(t)s/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path %(t)s; proxy_temp_path %(t)s;
  fastcgi_temp_path %(t)s; uwsgi_temp_path %(t)s; scgi_temp_path %(t)s;
  keepalive_requests 100000;
  server { listen 127.0.0.1:%(h)d; root %(r)s; }
  server { listen 127.0.0.1:%(s)d ssl; ssl_certificate %(t)s/c.pem;
           ssl_certificate_key %(t)s/k.pem; root %(r)s; }
}
""" % {"t": tmp, "h": http, "s": https, "r": root})
    procs.append(subprocess.Popen([nginx, "-c", conf, "-p", tmp],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
    time.sleep(0.5)
    return http, https


def start_counter():
    log = os.path.join(tmp, "count.log")
    p = subprocess.Popen([sys.executable, os.path.join(
        src, "tests/integration/servers/http_count.py"), log],
        stdout=subprocess.PIPE, text=True)
    procs.append(p)
    return int(p.stdout.readline().split()[1])


def once(config, args):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if config is not None:
        env.update({"LD_PRELOAD": shim, "RLSHIM_CONFIG": config,
                    "RLSHIM_STATE_DIR": tmp})
    t = time.monotonic()
    p = subprocess.run([curl, "-s", "-k"] + args, env=env,
                       capture_output=True, timeout=300)
    if p.returncode != 0:
        sys.stderr.write("curl exited %d\n" % p.returncode)
        return None
    return time.monotonic() - t


def medians(variants, args):
    times = {k: [] for k in variants}
    for _ in range(rounds):
        for k, cfg in variants.items():
            t = once(cfg, args)
            if t is None:
                return None
            times[k].append(t)
    return {k: statistics.median(v) for k, v in times.items()}


def loop_args(url):
    listing = os.path.join(tmp, "urls.txt")
    with open(listing, "w") as f:
        for _ in range(n_get):
            f.write('url = "%s"\noutput = "/dev/null"\n' % url)
    return ["-K", listing]


failed = False
try:
    if nginx is not None:
        http, https = start_nginx()
        base = "127.0.0.1"
    else:
        http, https, base = start_counter(), None, "127.0.0.1"
    server = "nginx" if nginx is not None else "http_count.py"
    for label, port, scheme in (("plaintext", http, "http"),
                                ("TLS", https, "https")):
        if port is None:
            print("requests %s: nginx not installed: skipped (1 skip)" % label)
            continue
        m = medians({"bare": None, "connect": plain, "request": never},
                    loop_args("%s://%s:%d/s.txt" % (scheme, base, port)))
        if m is None:
            failed = True
            continue
        print("requests %s keep-alive, %d GETs (curl, %s, median of %d): "
              "bare/request %.3f (want >= %s), no-request-key/request %.3f; "
              "%.1f us per request added over bare" %
              (label, n_get, server, rounds, m["bare"] / m["request"],
               "0.95" if label == "plaintext" else "0.97",
               m["connect"] / m["request"],
               (m["request"] - m["bare"]) / n_get * 1e6))
        want = 0.95 if label == "plaintext" else 0.97
        ratio = m["bare"] / m["request"]
        print("bar: requests %s keep-alive, bare / request: %.3f (target >= "
              "%.2f): %s" % (label, ratio, want,
                             "met" if ratio >= want else "NOT MET"))
    body = os.path.join(tmp, "body")
    with open(body, "wb") as f:
        f.truncate(100 * 1000 * 1000)
    port = start_counter()
    m = medians({"connect": plain, "request": never},
                ["--data-binary", "@" + body, "-o", "/dev/null",
                 "http://127.0.0.1:%d/up" % port])
    if m is None:
        failed = True
    else:
        print("requests 100 MB POST (curl, http_count.py, median of %d): "
              "no-request-key/request %.3f (want >= 0.98)" %
              (rounds, m["connect"] / m["request"]))
        ratio = m["connect"] / m["request"]
        print("bar: requests 100 MB POST, no-request-key / request: %.3f "
              "(target >= 0.98): %s" % (ratio,
                                        "met" if ratio >= 0.98 else "NOT MET"))
finally:
    for p in procs:
        p.terminate()
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failed else 0)
