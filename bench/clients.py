#!/usr/bin/env python3
"""clients.py - what each client library costs over the same loop written
on its language's bare HTTP client, in one run.

    bench/clients.py --build build [--seconds S] [--rounds R]
                     [--only python,go,c]

For each language, two loops, each single-threaded against one real
gateway (nginx WebDAV behind it, one Redis; tests/clients/env.py starts
them):
  lock   acquire + release of a fresh lock name, as fast as it goes
  put    one grant, then fenced PUTs of 1 KiB with its sequencer
and each loop twice: `client` (the library: its lease, its stamping,
its renewer running) and `raw` (the same requests on the bare client:
http.client, net/http, libcurl). The programs are bench/clients/py_bench.py,
clients/go/cmd/fg-bench and the C library's fg_client_bench; each prints
`cycles_per_s=N`.

Rounds alternate client and raw, so a drift of the machine falls on both;
the figure is the median of the rounds, and the ratio is client / raw
(the issue's target: at least 0.90).
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))

import env as client_env  # noqa: E402


def programs(build, scratch):
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
        else sys.executable
    out = {"python": ([py, os.path.join(HERE, "clients", "py_bench.py")],
                      {"PYTHONPATH": os.path.join(ROOT, "clients", "python")})}
    go = shutil.which("go")
    if go:
        exe = os.path.join(scratch, "fg-bench")
        r = subprocess.run([go, "build", "-o", exe, "./cmd/fg-bench"],
                           cwd=os.path.join(ROOT, "clients", "go"),
                           env=dict(os.environ, GOFLAGS="-mod=mod",
                                    GOPROXY="off", GOTOOLCHAIN="local",
                                    GOCACHE=os.path.join(scratch, "gocache"),
                                    GOPATH=os.path.join(scratch, "gopath")),
                           capture_output=True)
        if r.returncode == 0:
            out["go"] = ([exe], {})
        else:
            print("go: the bench program did not build:\n"
                  + r.stderr.decode("utf-8", "replace"))
    for c in (os.path.join(build, "clients", "c", "fg_client_bench"),
              os.path.join(build, "clients", "c", "bench", "fg_client_bench")):
        if os.access(c, os.X_OK):
            out["c"] = ([c], {})
            break
    return out


def one(argv, extra, gateway, mode, impl, seconds):
    prefix = "app/bench-%s-" % uuid.uuid4().hex[:8]
    p = subprocess.run(argv + ["--gateway", gateway, "--lock-prefix", prefix,
                               "--seconds", str(seconds), "--mode", mode,
                               "--impl", impl],
                       env=dict(os.environ, **extra), capture_output=True,
                       timeout=seconds * 4 + 60)
    m = re.search(rb"cycles_per_s=([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError("%s %s %s: exit %d\n%s%s" % (
            argv[-1], mode, impl, p.returncode,
            p.stdout.decode("utf-8", "replace")[-800:],
            p.stderr.decode("utf-8", "replace")[-800:]))
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="python,go,c")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    env = client_env.ClientEnv(os.path.join(build, "gateway", "fencegate"),
                               s3=False).start()
    rows = []
    try:
        scratch = tempfile.mkdtemp(prefix="bench-", dir=env.dir)
        progs = programs(build, scratch)
        gateway = env.variables()["FG_TEST_GATEWAYS"].split(",")[0]
        for lang in args.only.split(","):
            if lang not in progs:
                print("%s: no bench program" % lang)
                continue
            argv, extra = progs[lang]
            for mode in ("lock", "put"):
                got = {"client": [], "raw": []}
                for _ in range(args.rounds):
                    for impl in ("client", "raw"):
                        got[impl].append(one(argv, extra, gateway, mode,
                                             impl, args.seconds))
                c = statistics.median(got["client"])
                r = statistics.median(got["raw"])
                rows.append((lang, mode, c, r, got))
                print("%-7s %-5s client %8.0f/s  raw %8.0f/s  ratio %.2f"
                      "  (rounds: client %s, raw %s)" % (
                          lang, mode, c, r, c / r if r else 0,
                          " ".join("%.0f" % x for x in got["client"]),
                          " ".join("%.0f" % x for x in got["raw"])))
    finally:
        env.stop()
    print()
    print("| language | loop | client cycles/s | bare HTTP cycles/s | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for lang, mode, c, r, _ in rows:
        print("| %s | %s | %.0f | %.0f | %.2f |" % (lang, mode, c, r,
                                                    c / r if r else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
