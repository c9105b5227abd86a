#!/usr/bin/env python3
"""The wait calls under the shim (SPEC §2), measured in one run.

1. What poll and epoll_wait cost on fds the shim does not hold, against
   bare: each workload runs ROUNDS times per variant, alternating, and the
   figure is the median of the loop's CPU times the helper prints; ratio =
   bare / rlshim (1.00 = as fast as bare). Targets: >= 0.95, and poll on
   10,000 fds < 5 % above bare.
2. What a throttled loop burns while it waits: a C client on
   edge-triggered epoll and on select, and python asyncio, upload 300 KB at
   100KB/s (2 s of waiting) in fail and delay modes; the figure is the
   client's CPU (user + system) per second of wall time, beside its
   unthrottled run and, for select (trickle wraps select and poll only),
   trickle at the same rate. Target: <= 10 ms of CPU per second."""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
src = os.environ.get("RLSHIM_SRC", os.path.abspath("."))
rounds = int(os.environ.get("BENCH_ROUNDS", "11"))
helpers = os.path.join(build, "tests", "helpers")
shim = os.path.join(build, "librlshim.so")
tmp = tempfile.mkdtemp(prefix="rlshim-bench-wait-")


def ini(text):
    path = os.path.join(tmp, "c%d.ini" % abs(hash(text)))
    with open(path, "w") as f:
        f.write(text)
    return path


# A rule that applies (so the hooks are live) and never binds.
never = ini("[default]\nsend_bytes = 10GiB/s\nsend_bytes_burst = 1000000000000\n")
shim_env = {"LD_PRELOAD": shim, "RLSHIM_CONFIG": never, "RLSHIM_STATE_DIR": tmp}


# Pinned to one CPU: unpinned, two runs of one binary differ by more than
# the bars allow.
cpus = sorted(os.sched_getaffinity(0))
pin = ["taskset", "-c", str(cpus[0])] if shutil.which("taskset") else []


def loop_ns(env, args):
    e = dict(os.environ)
    e.update(env)
    out = subprocess.run(pin + [os.path.join(helpers, "bench_wait")] + args, env=e,
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


print("== wait calls on fds the shim does not hold (median of %d runs, "
      "ratio = bare / rlshim)" % rounds)
print(f"{'workload (CPU time)':<34}{'bare us':>10}{'rlshim us':>11}{'ratio':>7}")
for name, args in [("poll, 1 fd, 200k calls", ["poll", "1", "200000"]),
                   ("epoll_wait, 1 fd, 200k calls", ["epoll", "2", "200000"]),
                   ("poll, 10,000 fds, 2k calls", ["poll", "10000", "2000"]),
                   ("epoll_wait, 10,000 fds, 200k", ["epoll", "10000", "200000"])]:
    bare, sh = [], []
    for _ in range(rounds):
        bare.append(loop_ns({}, args))
        sh.append(loop_ns(shim_env, args))
    b, s = statistics.median(bare), statistics.median(sh)
    print(f"{name:<34}{b / 1e3:>10.0f}{s / 1e3:>11.0f}{b / s:>7.2f}")
    bar = 1 / 1.05 if name.startswith("poll, 10,000") else 0.95
    print(f"bar: {name}, bare / rlshim CPU: {b / s:.2f} (target >= "
          f"{bar:.2f}): {'met' if b / s >= bar else 'NOT MET'}")
    sys.stdout.flush()

# --- a throttled loop's CPU per second of waiting ---
sink_log = os.path.join(tmp, "sink.log")
sink = subprocess.Popen([sys.executable,
                         os.path.join(src, "tests/integration/servers/sink.py"),
                         sink_log], stdout=subprocess.PIPE, text=True)
port = sink.stdout.readline().split()[1]
payload = os.path.join(tmp, "payload")
with open(payload, "wb") as f:
    f.write(os.urandom(300000))
asyncio_py = ("import asyncio, sys\n"
              "async def main():\n"
              "    r, w = await asyncio.open_connection('127.0.0.1', int(sys.argv[1]))\n"
              "    w.write(open(sys.argv[2], 'rb').read()); await w.drain()\n"
              "    w.close(); await w.wait_closed()\n"
              "asyncio.run(main())\n")
clients = [("C epoll-ET", [os.path.join(helpers, "evloop"), "et", "upload", port, payload, "0"]),
           ("C select", [os.path.join(helpers, "evloop"), "select", "upload", port, payload, "0"]),
           ("python asyncio", [sys.executable, "-c", asyncio_py, port, payload])]


def cpu_run(env, argv):
    e = dict(os.environ)
    e.update(env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, env=e, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


print()
print("== a throttled loop: 300 KB at 100KB/s (ideal 2 s); CPU beyond the "
      "unthrottled run, ms per second of wall (target <= 10)")
print(f"{'client':<16}{'mode':<8}{'wall s':>8}{'cpu ms':>9}"
      f"{'unthrottled':>13}{'beyond, ms/s':>14}")
for name, argv in clients:
    base_cpu, _ = cpu_run({}, argv)
    for mode in ("fail", "delay"):
        cfg = ini("[rlshim]\non_deny = %s\nmax_delay = 30s\n[default]\n"
                  "send_bytes = 100KB/s\nto = 127.0.0.1:%s\n" % (mode, port))
        # A fresh state dir each run: budgets are shared host-wide, and
        # the previous run's would make this one start with an empty bucket.
        state = tempfile.mkdtemp(dir=tmp)
        cpu, wall = cpu_run({"LD_PRELOAD": shim, "RLSHIM_CONFIG": cfg,
                             "RLSHIM_STATE_DIR": state}, argv)
        extra = max(0.0, cpu - base_cpu)
        print(f"{name:<16}{mode:<8}{wall:>8.2f}{cpu * 1e3:>9.0f}"
              f"{base_cpu * 1e3:>13.0f}{extra * 1e3 / wall:>14.1f}")
        print(f"bar: throttled {name} ({mode}), CPU beyond unthrottled: "
              f"{extra * 1e3 / wall:.1f} ms/s (target <= 10): "
              f"{'met' if extra * 1e3 / wall <= 10 else 'NOT MET'}")
        sys.stdout.flush()
if shutil.which("trickle"):
    base_cpu, _ = cpu_run({}, clients[1][1])
    cpu, wall = cpu_run({}, ["trickle", "-s", "-u", "100"] + clients[1][1])
    print(f"{'C select':<16}{'trickle':<8}{wall:>8.2f}{cpu * 1e3:>9.0f}"
          f"{base_cpu * 1e3:>13.0f}"
          f"{max(0.0, cpu - base_cpu) * 1e3 / wall:>14.1f}")
sink.kill()
shutil.rmtree(tmp, ignore_errors=True)
