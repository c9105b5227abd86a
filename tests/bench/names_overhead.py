#!/usr/bin/env python3
"""What host names cost (issue 11), measured in one run, variants
alternating, medians of ROUNDS runs:

- getaddrinfo("localhost") under the shim vs bare (the resolver hook notes
  each answer's addresses): ratio bare / shim, want >= 0.98;
- connect + close to "localhost" under `to = localhost` (a name: each
  connect looks the name of its address up) vs `to = 127.0.0.1` (a plain
  rule): ratio name / address time, want <= 1.05.
Limits never bind (huge rates), so only the decision's cost shows."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
rounds = int(os.environ.get("BENCH_ROUNDS", "7"))
net = os.path.join(build, "tests", "helpers", "bench_net")
helper = os.path.join(build, "tests", "helpers", "bench_names")
shim = os.path.join(build, "librlshim.so")
tmp = tempfile.mkdtemp(prefix="rlshim-bench-names-")

def ini(name, to):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("[default]\nconnect = 1000000/s\nconnect_burst = 1000000000\n"
                "to = %s\n" % to)
    return path

by_name, by_addr = ini("name.ini", "localhost"), ini("addr.ini", "127.0.0.1")

cpus = sorted(os.sched_getaffinity(0))
pin_client, pin_sink = [], []
if len(cpus) >= 2 and shutil.which("taskset"):
    pin_client = ["taskset", "-c", str(cpus[0])]
    pin_sink = ["taskset", "-c", str(cpus[1])]
portfile = os.path.join(tmp, "port")
sink = subprocess.Popen(pin_sink + [net, "sink", portfile])
for _ in range(100):
    if os.path.exists(portfile) and open(portfile).read().strip():
        break
    time.sleep(0.05)
abort_port = open(portfile).read().split()[1]


def once(config, args):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if config is not None:
        env.update({"LD_PRELOAD": shim, "RLSHIM_CONFIG": config,
                    "RLSHIM_STATE_DIR": tmp})
    p = subprocess.run(pin_client + [helper] + args, env=env,
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        return None
    return int(p.stdout.strip().splitlines()[-1])


def compare(a, b, args):
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(once(a, args))
        tb.append(once(b, args))
    if None in ta or None in tb:
        return None, None
    return statistics.median(ta), statistics.median(tb)


bare, shimmed = compare(None, by_name, ["gai", "localhost", "20000"])
byaddr, byname = compare(by_addr, by_name,
                         ["connect", "localhost", abort_port, "5000"])
sink.kill()
shutil.rmtree(tmp, ignore_errors=True)
if None in (bare, shimmed, byaddr, byname):
    print("names: a run failed")
    sys.exit(1)
print(f"names: median of {rounds} alternating runs")
print(f"getaddrinfo(localhost) x20000: bare {bare / 1e6:.1f} ms, shim "
      f"{shimmed / 1e6:.1f} ms, ratio bare/shim {bare / shimmed:.3f} (want >= 0.98)")
print(f"connect+close x5000: to=127.0.0.1 {byaddr / 1e6:.1f} ms, to=localhost "
      f"{byname / 1e6:.1f} ms, ratio name/address {byname / byaddr:.3f} (want <= 1.05)")
print(f"bar: getaddrinfo, bare / rlshim: {bare / shimmed:.3f} (target >= "
      f"0.98): {'met' if bare / shimmed >= 0.98 else 'NOT MET'}")
print(f"bar: connect by name / by address: {byname / byaddr:.3f} (target <= "
      f"1.05): {'met' if byname / byaddr <= 1.05 else 'NOT MET'}")
