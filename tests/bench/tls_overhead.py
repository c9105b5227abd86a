#!/usr/bin/env python3
"""What the TLS hook adds to one SSL_write (SPEC §11), quota never binding:
tests/integration/helpers/bench_tls.c writes GET heads with SSL_write on a
TLS session whose other end is in the same process (a BIO pair: no system
call, so the hook's cost is not hidden behind one), each write from a
function of its own.

- instructions: callgrind's inclusive count of that function per call,
  bare, under the pass-through preload (tests/bench/control/passthrough.c,
  which wraps SSL_write), and under rlshim with a `request` limit that never
  binds and with no request key; rlshim's figure less the pass-through's
  is what the hook adds;
- wall: ns per write and its drain, medians of alternating runs, bare vs
  rlshim with the request limit (the bar: the issue's TLS keep-alive bar,
  >= 0.97, held here by the write alone, its worst case).
Exits 1 only when a run fails."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
helper = os.path.join(build, "tests", "helpers", "bench_tls")
shim = os.path.join(build, "librlshim.so")
rounds = int(os.environ.get("BENCH_ROUNDS", "7"))
N_INSTR, N_WALL = 2000, 50000

tmp = tempfile.mkdtemp(prefix="rlshim-bench-tls-")
try:
    cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-subj", "/CN=example.test", "-keyout", key, "-out", cert],
                   capture_output=True, check=True)
    passthrough = os.path.join(tmp, "passthrough.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", passthrough,
                    os.path.join(here, "control", "passthrough.c"), "-ldl"],
                   check=True)

    def ini(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    never = ini("request.ini", "[default]\nrequest = 1000000/s\n"
                "request_burst = 1000000000\n")
    nokey = ini("connect.ini", "[default]\nconnect = 1000000/s\n"
                "connect_burst = 1000000000\n")
    variants = {
        "bare": {},
        "passthrough": {"LD_PRELOAD": passthrough},
        "rlshim, request": {"LD_PRELOAD": shim, "RLSHIM_CONFIG": never,
                            "RLSHIM_STATE_DIR": tmp},
        "rlshim, no request key": {"LD_PRELOAD": shim, "RLSHIM_CONFIG": nokey,
                                   "RLSHIM_STATE_DIR": tmp},
    }

    def env(extra):
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        e.update(extra)
        return e

    def instructions(extra):
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file="
                        + out, helper, cert, key, str(N_INSTR)],
                       env=env(extra), capture_output=True, check=True)
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", out],
                             capture_output=True, text=True, check=True).stdout
        for line in ann.splitlines():
            if "measured_ssl_write" in line:
                return int(re.sub(r"[^0-9]", "", line.split()[0])) / N_INSTR
        raise RuntimeError("no measured_ssl_write in the profile")

    if shutil.which("valgrind") is None:
        print("tls_overhead: no valgrind (Debian package valgrind): "
              "instructions not counted")
        instr = None
    else:
        instr = {k: instructions(v) for k, v in variants.items()}
        print("instructions per SSL_write of an 80-byte head (callgrind, "
              "inclusive):")
        for k, v in instr.items():
            print("  %-24s %8.0f" % (k, v))
        added = instr["rlshim, request"] - instr["passthrough"]
        print("  added by the TLS hook over the pass-through: %.0f with a "
              "request limit, %.0f with none" %
              (added, instr["rlshim, no request key"] - instr["passthrough"]))

    def wall(extra):
        p = subprocess.run([helper, cert, key, str(N_WALL)], env=env(extra),
                           capture_output=True, text=True, check=True)
        return float(p.stdout.split("=")[1])

    times = {"bare": [], "rlshim, request": []}
    for _ in range(rounds):
        for k in times:
            times[k].append(wall(variants[k]))
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["bare"] / med["rlshim, request"]
    print("wall ns per SSL_write and its drain (median of %d): bare %.0f, "
          "rlshim %.0f: %.0f ns added" %
          (rounds, med["bare"], med["rlshim, request"],
           med["rlshim, request"] - med["bare"]))
    print("bar: TLS hook, in-memory SSL_write loop, bare / rlshim: %.3f "
          "(target >= 0.97): %s" % (ratio, "met" if ratio >= 0.97 else
                                    "NOT MET"))
except (subprocess.CalledProcessError, RuntimeError) as e:
    print("tls_overhead: %s" % e, file=sys.stderr)
    sys.exit(1)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
