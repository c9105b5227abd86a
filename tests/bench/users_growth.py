#!/usr/bin/env python3
"""What a shared segment costs in memory as its users grow: 1, 64, 1,024
and 4,096 users (RLSHIM_KEY=uN), each a real process under the shim that
makes one connect (so that its budget is claimed), then the segment file's
allocated bytes (st_blocks * 512: a segment is paid for as it is used) and
its length (the address space each process maps). `rlshim stat --json`
must show exactly that many users, or the run fails.

Environment: BENCH_USERS_MAX (4096)."""
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

build = os.environ.get("RLSHIM_BUILD", os.path.abspath("build"))
most = int(os.environ.get("BENCH_USERS_MAX", "4096"))
counts = [n for n in (1, 64, 1024, 4096) if n <= most]
client = os.path.join(build, "tests", "helpers", "client")
shim = os.path.join(build, "librlshim.so")
tmp = tempfile.mkdtemp(prefix="rlshim-bench-users-")
ini = os.path.join(tmp, "never-binds.ini")
with open(ini, "w") as f:
    f.write("[rlshim]\nmax_users = %d\n[default]\n"
            "connect = 1000000/s\nconnect_burst = 1000000000\n"
            "send = 1000000/s\nsend_burst = 1000000000\n"
            "send_bytes = 10GiB/s\nsend_bytes_burst = 1000000000000\n"
            % (2 * max(counts)))
env = dict(os.environ)
env.pop("LD_PRELOAD", None)
env.update({"RLSHIM_CONFIG": ini, "RLSHIM_STATE_DIR": tmp})


def one_user(i):
    """User uI's process: one connect (to port 9 on 127.0.0.1: refused
    after its decision, which is what claims the budget)."""
    e = dict(env, LD_PRELOAD=shim, RLSHIM_KEY="u%d" % i)
    return subprocess.run([client, "connects", "9", "1"], env=e,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=60).returncode


def users_seen():
    out = subprocess.run([os.path.join(build, "rlshim"), "stat", "--json"],
                         env=env, capture_output=True, text=True,
                         check=True).stdout
    return len({row["user"] for row in json.loads(out)})


rows = []
try:
    made = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for n in counts:
            list(pool.map(one_user, range(made, n)))
            made = n
            segs = glob.glob(os.path.join(tmp, "rlshim-%d-*" % os.getuid()))
            seen = users_seen()
            if len(segs) != 1 or seen != n:
                sys.exit("users_growth: %d users made, stat shows %d in %d "
                         "segments" % (n, seen, len(segs)))
            st = os.stat(segs[0])
            rows.append((n, st.st_blocks * 512, st.st_size))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("segment bytes vs users (one segment, a rule of 3 limits, one budget "
      "per user; allocated = st_blocks * 512):")
print(f"  {'users':>8} {'allocated':>12} {'per user':>10} {'length':>12}")
first_n, first_b, _ = rows[0]
for n, allocated, length in rows:
    per = (allocated - first_b) / (n - first_n) if n > first_n else 0
    print(f"  {n:>8} {allocated:>12} {per:>10.0f} {length:>12}")
print("  (per user: growth over the first user's segment; the length is "
      "the file's, max_users = %d)" % (2 * max(counts)))
