#!/usr/bin/env python3
"""sync_tree.py - one sync of a tree of small files with rclone over WebDAV,
straight to Apache httpd with mod_dav and through fencegate in front of it
(under `fencectl lock`, the sequencer sent on every request: the recipe of
docs/clients.md). Prints the time of each run, the medians and their ratio.

    bench/sync_tree.py [--bin build/gateway/fencegate] [--files 300]
                       [--rounds 3]

Starts its own redis-server, Apache httpd and fencegate on free loopback
ports (the integration suite's helpers, tests/integration), each run into
a fresh collection, and stops them by PID at the end. Needs apache2,
rclone, redis-server (scripts/install-deps.sh installs them).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import harness  # noqa: E402
from apache import ApacheDav  # noqa: E402
from storage import write_config  # noqa: E402


def tree(root, n):
    for i in range(n):
        d = os.path.join(root, "d%d" % (i % 10))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%d.txt" % i), "w") as f:
            f.write("file %d\n" % i)


def rclone(url, src, work, fencectl=None, gw_url=None):
    """One `rclone sync` of src to url; its wall time in s."""
    env = dict(os.environ, RCLONE_CONFIG_FG_TYPE="webdav",
               RCLONE_CONFIG_FG_URL=url, RCLONE_CONFIG_FG_VENDOR="other",
               RCLONE_CONFIG=os.path.join(work, "rclone.conf"))
    sync = "rclone sync %s fg: --retries 1 --low-level-retries 1" % src
    if fencectl:
        env["FENCEGATE_URL"] = gw_url
        argv = [fencectl, "lock", "sync", "--ttl", "60s", "--", "sh", "-c",
                sync + ' --header "Fencing-Token: $FENCE_SEQUENCER"']
    else:
        argv = ["sh", "-c", sync]
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, timeout=600)
    secs = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit("rclone failed (%d): %s" % (p.returncode,
                                                     p.stderr.decode()[-2000:]))
    return secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gateway",
                                                  "fencegate"))
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    for exe in ("rclone", "apache2", "redis-server"):
        if not shutil.which(exe) and not os.path.exists("/usr/sbin/" + exe):
            raise SystemExit("%s not found (scripts/install-deps.sh)" % exe)
    harness.Config.bin = os.path.abspath(a.bin)
    fencectl = os.path.join(os.path.dirname(os.path.dirname(harness.Config.bin)),
                            "fencectl", "fencectl")
    work = tempfile.mkdtemp(prefix="sync-", dir=harness.tmp_root())
    src = os.path.join(work, "tree")
    tree(src, a.files)
    redis = apache = gw = None
    try:
        redis = harness.RedisServer()
        redis.start()
        apache = ApacheDav().start()
        gw = harness.Gateway(redis.port, apache.port,
                             ["--config", write_config("route /sync/ sync\n")])
        gw.start()
        direct, through = [], []
        for r in range(a.rounds):
            for d in ("/direct%d/" % r, "/sync/r%d/" % r):
                apache.mkdir(d)
            direct.append(rclone("http://127.0.0.1:%d/direct%d" % (apache.port, r),
                                 src, work))
            through.append(rclone("http://127.0.0.1:%d/sync/r%d" % (gw.port, r),
                                  src, work, fencectl,
                                  "http://127.0.0.1:%d" % gw.port))
            print("round %d: direct %.2f s, through fencegate %.2f s"
                  % (r + 1, direct[-1], through[-1]), flush=True)
        md, mt = statistics.median(direct), statistics.median(through)
        print("rclone sync of %d files, median of %d: direct %.2f s, "
              "through fencegate %.2f s, ratio %.2f"
              % (a.files, a.rounds, md, mt, mt / md))
        print("RESULT_DIRECT=%.2f\nRESULT_THROUGH=%.2f" % (md, mt))
    finally:
        for p in (gw, apache, redis):
            if p is not None:
                p.stop()
        shutil.rmtree(harness.tmp_root(), ignore_errors=True)


if __name__ == "__main__":
    main()
