#!/usr/bin/env python3
"""What the shim costs a program whose quota never binds, against bare and
against trickle (Debian's package, huge limits), measured in one run.

Each workload runs ROUNDS times per variant, the variants alternating so
that the noise of a shared 2-core machine falls on all of them alike; the
figure is the median of the loop times each run prints, and the ratio is
bare / variant (1.00 = as fast as bare, 0.50 = half the throughput).
Client and sink are pinned to different CPUs: unpinned, two runs of one
binary differ by up to 15 % here."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
rounds = int(os.environ.get("BENCH_ROUNDS", "7"))
helper = os.path.join(build, "tests", "helpers", "bench_net")
shim = os.path.join(build, "librlshim.so")
tmp = tempfile.mkdtemp(prefix="rlshim-bench-")
ini = os.path.join(tmp, "never-binds.ini")
with open(ini, "w") as f:
    f.write("[default]\n"
            "connect = 1000000/s\nconnect_burst = 1000000000\n"
            "send = 1000000/s\nsend_burst = 1000000000\n"
            "send_bytes = 10GiB/s\nsend_bytes_burst = 1000000000000\n")

cpus = os.sched_getaffinity(0)
pin_client, pin_sink = [], []
if len(cpus) >= 2 and shutil.which("taskset"):
    c = sorted(cpus)
    pin_client, pin_sink = ["taskset", "-c", str(c[0])], ["taskset", "-c", str(c[1])]

portfile = os.path.join(tmp, "port")
sink = subprocess.Popen(pin_sink + [helper, "sink", portfile])
for _ in range(100):
    if os.path.exists(portfile) and open(portfile).read().strip():
        break
    time.sleep(0.05)
port, abort_port = open(portfile).read().split()

variants = {"bare": ([], {})}
variants["rlshim"] = ([], {"LD_PRELOAD": shim, "RLSHIM_CONFIG": ini,
                           "RLSHIM_STATE_DIR": tmp})
if shutil.which("trickle"):
    variants["trickle"] = (["trickle", "-s", "-d", "10000000", "-u", "10000000"], {})

workloads = [
    ("send 64 B, 1 thread", ["send", port, "1", "200000"], ["trickle"]),
    ("send 64 B, 2 threads", ["send", port, "2", "100000"], ["trickle"]),
    ("write 64 B to /dev/null", ["write", "1000000"], []),
    ("connect+close (linger 0)", ["connect", abort_port, "5000"], []),
]


def once(variant, args):
    prefix, env_extra = variants[variant]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(env_extra)
    p = subprocess.run(pin_client + prefix + [helper] + args, env=env,
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return None
    return int(p.stdout.strip().splitlines()[-1])


rows = []
for title, args, extra in workloads:
    names = ["bare", "rlshim"] + [v for v in extra if v in variants]
    times = {n: [] for n in names}
    crashes = {n: 0 for n in names}
    for _ in range(rounds):
        for n in names:
            t = once(n, args)
            if t is None:
                crashes[n] += 1
            else:
                times[n].append(t)
    med = {n: statistics.median(v) if v else None for n, v in times.items()}
    rows.append((title, med, crashes))
sink.kill()

print(f"rlshim overhead, quota never binds: median of {rounds} alternating "
      "runs, ratio = bare/variant (throughput vs bare)")
print(f"{'workload':<28}{'bare ms':>9}{'rlshim ms':>11}{'ratio':>7}"
      f"{'trickle ms':>12}{'ratio':>7}{'trickle crashed':>17}")
for title, med, crashes in rows:
    b = med["bare"]
    r = med["rlshim"]
    line = f"{title:<28}{b / 1e6:>9.1f}"
    line += f"{r / 1e6:>11.1f}{b / r:>7.2f}" if r else f"{'failed':>11}{'':>7}"
    if "trickle" in med:
        t = med["trickle"]
        line += (f"{t / 1e6:>12.1f}{b / t:>7.2f}" if t else f"{'failed':>12}{'':>7}")
        line += f"{crashes['trickle']:>11} of {rounds}"
    if crashes["rlshim"]:
        line += f"  (rlshim failed {crashes['rlshim']} runs)"
    print(line)
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if any(c["rlshim"] for _, _, c in rows) else 0)
