#!/usr/bin/env python3
"""run.py - the fencegate benchmark: one run for every target of the
project, ending with one summary table (figure | fencegate | peer | ratio |
target | met/missed) printed as Markdown and written as JSON.

    bench/run.py [--bin PATH] [--profile] [--skip-fencegate] [--skip-proxy]
                 [--only GROUPS] [--out DIR] [--json PATH]

--only (or ONLY=) runs some groups of rows: a comma list of base, auth and
tls; the default runs them all. --bin defaults to build/gateway/fencegate
under the repository root; nothing is built. --out is the directory the
summary goes to (summary.md, summary.json; default build/bench/<run id>
under the repository root), --json another path for the JSON.

The servers are the integration suite's (tests/integration: RedisServer,
Gateway, storage.Nginx, topology.RedisCluster), with the benchmark's own
peers (bench/peers.py: the nginx reverse proxies and etcd) beside them, all
on free loopback ports and stopped by PID on every way out. The knobs are
environment variables; bench/README.md lists them and says how every figure
is measured.

Exit status: 1 when a fencegate did not stay up to the end of its runs, or
the cluster, replica, auth or TLS ones did not start, or the setup failed
(the table is printed all the same once the runs started); 2 on a bad
argument or knob; 0 otherwise, whatever was missed.
"""

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import topology  # noqa: E402
from harness import SetupError  # noqa: E402
from measure import (NPROC, Meter, RedisHook, errs_of, kfmt, kids,  # noqa: E402
                     num, prefixed, rss_kb)
from peers import BenchStore, Etcd, ProxyNginx, nginx_version  # noqa: E402
from summary import Row, markdown, ratio, verdict, write_json  # noqa: E402

HR = "-" * 72

# name -> default; every one a whole number but the ones in TEXT_KNOBS
KNOBS = [
    ("FG_LOOPS", str(NPROC)), ("WRK_THREADS", "2"), ("CONNS", "32"),
    ("DURATION", "10"), ("LAT_DURATION", "5"), ("PACE_MS", "5"),
    ("WARMUP", "2"), ("GET_ROUNDS", "2"), ("PUT_ROUNDS", "2"),
    ("STORE_WORKERS", "1"), ("REDIS_N", "400000"), ("WAITERS", "10000"),
    ("WAITER_LOCKS", "10"), ("HANDOFF_WAITERS", "1000"),
    ("HANDOFF_ROUNDS", "500"), ("CALLS_N", "20000"), ("CALLS_PUTS", "10000"),
    ("OBJ_SIZE", "1024"), ("BIG_MB", "1024"), ("RSS_EVERY", "0.2"),
    ("FG_MAX_CONN", "16384"), ("FG_MAX_WAITERS", "20000"),
    ("NAME_RING", "4096"), ("BIN_WAIT", "120"), ("PERF_FREQ", "999"),
    ("PROFILE_RUNS", "get-nginx-proxy-r1 get-fencegate-r1 cycles-fencegate"),
    ("KEEP_TMP", "0"), ("ACK_N", "5000"), ("PUBSUB_N", "200000"),
    ("PUBSUB_CLIENTS", "8"), ("PUBSUB_PIPELINE", "16"), ("SYNC_FILES", "300"),
    ("SYNC_ROUNDS", "3"), ("AUTH_PRINCIPALS", "200"), ("AUTH_ROUNDS", "4"),
    ("TLS_ROUNDS", "4"), ("STORE_DIR", "/dev/shm"), ("PROFILE", "0"),
    ("ONLY", ""),
]
TEXT_KNOBS = {"RSS_EVERY", "PROFILE_RUNS", "STORE_DIR", "ONLY", "KEEP_TMP",
              "PROFILE"}
GROUPS = ("base", "auth", "tls")


class Knobs:
    pass


def die(msg, code=1):
    print("run.py: " + msg, file=sys.stderr, flush=True)
    raise SystemExit(code)


def read_knobs():
    k = Knobs()
    if os.environ.get("FG_THREADS"):
        die("FG_THREADS is gone: set FG_LOOPS (fencegate's --threads, and "
            "the nginx proxy's workers)", 2)
    for name, default in KNOBS:
        v = os.environ.get(name, "") or default
        if name not in TEXT_KNOBS:
            if not v.isdigit():
                die("%s must be a whole number, not '%s'" % (name, v), 2)
            v = int(v)
        setattr(k, name, v)
    try:
        k.RSS_EVERY = float(k.RSS_EVERY)
    except ValueError:
        die("RSS_EVERY must be a number of seconds, not '%s'" % k.RSS_EVERY, 2)
    if not (k.FG_LOOPS >= 1 and k.WRK_THREADS >= 1 and
            k.CONNS >= k.WRK_THREADS and k.CONNS % k.WRK_THREADS == 0 and
            k.AUTH_PRINCIPALS >= 2):
        die("need FG_LOOPS >= 1, WRK_THREADS >= 1, CONNS a multiple of "
            "WRK_THREADS (wrk gives each thread CONNS/WRK_THREADS), and "
            "AUTH_PRINCIPALS >= 2", 2)
    k.NOBJ = k.CONNS   # one object (and, for fenced PUTs, one lock) per connection
    return k


class Bench:
    """The state of one run: the knobs, the servers, the figures."""

    def __init__(self, k, args):
        self.k = k
        self.a = args
        self.only = [g for g in k.ONLY.split(",") if g] if k.ONLY else []
        self.runid = "%d-%d" % (time.time(), os.getpid())
        self.t_start = time.time()
        self.xfg_died = []     # the other fencegates that died or did not start
        self.fg = None
        self.fg_ok = False
        self.fg_died = ""
        self.proxy_ok = False
        self.redis = self.store = self.nproxy = self.etcd = None
        self.io = {}           # label -> RESULT line (merged ones too)
        self.f = {}            # the figures of the summary
        self.rows = []
        self.log = []

    def want(self, g):
        return not self.only or g in self.only

    def say(self, *parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)

    def hr(self):
        self.say(HR)

    # ---- small HTTP ------------------------------------------------------

    def http(self, url, method="GET", body=None, headers=None,
             ssl_context=None, timeout=30.0):
        """(status, body bytes) of one request, (None, b"") when nothing
        answered."""
        import http.client
        import urllib.parse
        u = urllib.parse.urlsplit(url)
        if u.scheme == "https":
            c = http.client.HTTPSConnection(u.hostname, u.port,
                                            timeout=timeout,
                                            context=ssl_context)
        else:
            c = http.client.HTTPConnection(u.hostname, u.port,
                                           timeout=timeout)
        try:
            c.request(method, u.path + ("?" + u.query if u.query else ""),
                      body=body, headers=dict(headers or {}))
            r = c.getresponse()
            return r.status, r.read()
        except (OSError, http.client.HTTPException):
            return None, b""
        finally:
            c.close()

    def acquire(self, base, name, ttl_ms, headers=None, ssl_context=None):
        """(sequencer, lease, answer) of an acquire; (None, None, answer)."""
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        code, body = self.http(base + harness.LOCKS + name, "POST",
                               json.dumps({"ttl_ms": ttl_ms}).encode(), h,
                               ssl_context)
        try:
            d = json.loads(body)
            return d["sequencer"], d["lease"], (code, body)
        except (ValueError, KeyError, TypeError):
            return None, None, (code, body)

    def release(self, base, name, lease, headers=None, ssl_context=None):
        h = {"Fence-Lease": lease or ""}
        h.update(headers or {})
        return self.http(base + harness.LOCKS + name, "DELETE", None, h,
                         ssl_context)

    # ---- fencegates ------------------------------------------------------

    def fg_flags(self, level):
        k = self.k
        return ["--threads", str(k.FG_LOOPS), "--max-connections",
                str(k.FG_MAX_CONN), "--max-waiters", str(k.FG_MAX_WAITERS),
                "--log-level", level]

    def start_fg(self, name, redis, extra=(), headers=None, tls=None):
        """Another fencegate with the main one's flags (but --log-level
        warn) on the storage; then one acquire + release on it (the acquire
        tried again for up to 5 s while it finds its Redis). None when it
        does not answer or the smoke fails (then it is stopped)."""
        g = harness.Gateway(redis, self.store.port,
                            self.fg_flags("warn") + list(extra))
        g.name = name
        if tls:
            import ssl
            g.ssl_context = ssl.create_default_context(cafile=tls)
        scheme = "https" if tls else "http"
        g.url = "%s://127.0.0.1:%d" % (scheme, g.port)
        try:
            g.start(timeout=15.0)
        except SetupError as e:
            self.say("  !! %s did not start: %s" % (name, str(e).splitlines()[0]))
            self.quote_log(g)
            g.stop()
            return None
        smoke = "fgbench-smoke-" + self.runid
        got = {}

        def try_acquire():
            got["r"] = self.acquire(g.url, smoke, 30000, headers,
                                    g.ssl_context)
            return got["r"][1] is not None or not g.alive()
        harness.wait_until(try_acquire, 5.0, 0.1)
        sq, lease, (code, body) = got["r"]
        rel = self.release(g.url, smoke, lease, headers, g.ssl_context) \
            if lease else (None, b"")
        if code == 200 and lease and rel[0] == 204:
            self.say("%-13s pid %d  %s  (--redis %s%s; --threads %d); smoke: "
                     "acquire -> 200, release -> 204"
                     % (name, g.proc.pid, g.url, harness.redis_url(redis),
                        " " + " ".join(extra) if extra else "",
                        self.k.FG_LOOPS))
            return g
        self.say("  !! %s: smoke acquire -> %s %s; release -> %s %s"
                 % (name, code, show(body), rel[0], show(rel[1])))
        self.quote_log(g)
        g.stop()
        return None

    def quote_log(self, g, n=20):
        self.say("     its log:")
        for line in gw_log(g)[-n:]:
            self.say("     " + line)

    def xfg_done(self, g, phase):
        """Note a death, stop it, and quote what it logged."""
        if not g.alive():
            self.say("  !! %s (pid %d) died during %s; last log lines:"
                     % (g.name, g.proc.pid, phase))
            for line in gw_log(g)[-20:]:
                self.say("     " + line)
            self.xfg_died.append("%s during %s" % (g.name, phase))
        g.stop()
        lines = gw_log(g)
        if lines:
            self.say("  %s logged %d line(s) at level warn or above; the "
                     "first ones:" % (g.name, len(lines)))
            for line in lines[:5]:
                self.say("     " + line[:200])
        else:
            self.say("  %s logged nothing at level warn or above" % g.name)

    def fg_alive(self, phase):
        if self.fg_ok and not self.fg.alive():
            self.say("!! fencegate (pid %d) died during %s; last log lines:"
                     % (self.fg.proc.pid, phase))
            for line in gw_log(self.fg)[-20:]:
                self.say("   " + line)
            self.fg_ok = False
            self.fg_died = phase

    # ---- wrk -------------------------------------------------------------

    def report_cycles(self, label, r):
        run = self.m.runs[label]
        self.say("  cycles/s %s   (%s cycles in %s s; per-request p50 %s ms, "
                 "p99 %s ms)" % (r.get("cps"), r.get("cycles"), r.get("secs"),
                                 r.get("req_p50_ms"), r.get("req_p99_ms")))
        self.say("  errors: app %s, http>=400 %s, socket connect/read/write/"
                 "timeout %s/%s/%s/%s" % tuple(r.get(x) for x in (
                     "app_errors", "http_ge400", "sock_connect", "sock_read",
                     "sock_write", "sock_timeout")))
        self.say("  CPU s (context switches voluntary/involuntary):"
                 + run.cpu_line())
        for line in run.text.splitlines():
            if line.startswith("ERRKINDS ") and line[9:].strip():
                self.say("  error kinds: " + line[9:])
            if line.startswith("ERRSAMPLE ") and line[10:].strip():
                self.say("  first error: " + line[10:])

    def io_run(self, label, subj, url, method, tokens="", hdr="", pace="",
               threads=None, conns=None, duration=None, path=None):
        k = self.k
        threads = threads or k.WRK_THREADS
        args = [label, method, path or self.p_path, k.NOBJ, threads,
                k.OBJ_SIZE]
        if tokens or hdr or pace:
            args += [tokens, hdr]
        if pace:
            args.append(pace)
        r = self.m.wrk(label, subj, os.path.join(HERE, "object_io.lua"), url,
                       args, threads=threads, conns=conns, duration=duration)
        self.io[label] = r
        if not r:
            return
        self.say("  %-28s %9s req/s   p50 %7s ms  p99 %7s ms   (%s requests; "
                 "http>=400 %s, socket c/r/w/t %s/%s/%s/%s)" % (
                     label, r["rps"], r["req_p50_ms"], r["req_p99_ms"],
                     r["requests"], r["http_ge400"], r["sock_connect"],
                     r["sock_read"], r["sock_write"], r["sock_timeout"]))
        self.say("  %-28s CPU s:%s" % ("", self.m.runs[label].cpu_line()))

    def io_merge(self, out, parts):
        got = [self.io[l] for l in parts if self.io.get(l)]
        if not got:
            self.io[out] = None
            return
        n = len(got)
        line = {"rounds": str(n)}
        for key in ("rps", "ok_rps"):
            line[key] = "%.1f" % (sum(float(g[key]) for g in got) / n)
        for key in ("req_p50_ms", "req_p99_ms"):
            line[key] = "%.3f" % (sum(float(g[key]) for g in got) / n)
        for key in ("requests", "http_ge400", "sock_connect", "sock_read",
                    "sock_write", "sock_timeout"):
            line[key] = str(sum(int(float(g[key])) for g in got))
        self.io[out] = line
        if n > 1:
            self.say("  %-28s %9s req/s   p50 %7s ms  p99 %7s ms   (mean of "
                     "%d rounds)" % (out, line["rps"], line["req_p50_ms"],
                                     line["req_p99_ms"], n))

    def iof(self, label, key):
        r = self.io.get(label)
        return r.get(key) if r else None

    def sum_errs(self, labels):
        return sum(errs_of(self.io.get(l)) for l in labels if self.io.get(l))

    def redis_report(self, hook, label, ops, unit, nodes):
        """Redis CPU per op (per node and in all) and each node's FCALL
        calls; (per-node list, total, share list)."""
        if not ops:
            self.say("  Redis CPU per %s: no %s completed" % (unit, unit))
            return None, None, None
        ds, fcs, ff_t = [], [], 0
        for name, port in nodes:
            ds.append(hook.delta(label, port))
            c, f = hook.calls(label, port, ("fcall", "fcall_ro"))
            fcs.append(c)
            ff_t += f
        ftot = sum(fcs)
        us = ["-" if d is None else "%.1f" % (d / ops * 1e6) for d in ds]
        tot = None if None in ds else "%.1f" % (sum(ds) / ops * 1e6)
        share = ["%.0f%%" % (c / ftot * 100 if ftot else 0) for c in fcs]
        self.say("  Redis CPU per %s (INFO cpu, used_cpu_sys + used_cpu_user, "
                 "over the run): %s%s" % (unit, ", ".join(
                     "%s %s" % (n, "-" if u == "-" else u + " us")
                     for (n, _), u in zip(nodes, us)),
                     "; all nodes %s us" % tot if tot else ""))
        self.say("  FCALL calls in the run: %s; %.2f per %s, %d failed" % (
            ", ".join("%s %d (%.1f%%)" % (n, c, c / ftot * 100 if ftot else 0)
                      for (n, _), c in zip(nodes, fcs)),
            ftot / ops, unit, ff_t))
        return us, tot, share


def show(b):
    """The first 200 bytes of an answer, on one line."""
    if isinstance(b, bytes):
        b = b[:200].decode("utf-8", "replace")
    return b[:200].replace("\r", " ").replace("\n", " ")


def gw_log(g):
    """What a gateway logged (the harness's own "###" line left out)."""
    try:
        with open(g.logpath, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [l for l in text.splitlines() if l.strip() and
            not l.startswith("### ")]


def first_line(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return ((p.stdout or p.stderr).splitlines() or ["?"])[0]


# ---------------------------------------------------------------------------
# the sections of the run, in order


def est_minutes(B):
    k = B.k
    w = k.WARMUP + k.DURATION + 1
    t = 0
    sync = k.SYNC_FILES * k.SYNC_ROUNDS // 10 if shutil.which("rclone") else 0
    if B.want("base"):
        t += ((5 + 3 * k.GET_ROUNDS + 3 * k.PUT_ROUNDS) * w
              + 6 * (k.WARMUP + k.LAT_DURATION + 1) + 30 + 2 * k.REDIS_N // 40000
              + 2 * k.ACK_N // 2000 + (2 * k.CALLS_N + k.CALLS_PUTS) // 4000
              + k.WAITERS // 400 + k.HANDOFF_ROUNDS // 50 + k.BIG_MB // 100
              + 2 * k.PUBSUB_N // 100000 + sync)
    if B.want("auth"):
        t += 4 * k.AUTH_ROUNDS * w + 10
    if B.want("tls"):
        t += 4 * k.TLS_ROUNDS * w + 10
    return (t + 30) // 60


def fs_type(path):
    p = subprocess.run(["df", "--output=fstype", path], capture_output=True,
                       text=True)
    return (p.stdout.split() or ["?"])[-1]


def mb_free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // (1024 * 1024)


def header(B):
    k = B.k
    B.say("fencegate benchmark  (%s)" % time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                      time.gmtime()))
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    B.say("machine: %d cores, %s %s; %s" % (NPROC, platform.system(),
                                            platform.release(), model))
    rv = " ".join(first_line(["redis-server", "--version"]).split()[:3])
    tools = "tools: %s;" % rv
    if B.want("base"):
        tools += " etcd %s;" % Etcd.version()
    tools += " %s; Python %s" % (" ".join(first_line(["wrk", "--version"])
                                         .split()[:2]), platform.python_version())
    if B.want("tls"):
        tools += "; " + " ".join(first_line(["openssl", "version"]).split()[:2])
    B.say(tools)
    B.say("groups of rows: %s; expected length about %d min (the summary says "
          "how long it took)" % (k.ONLY or "base,auth,tls", est_minutes(B)))
    B.say("load: wrk -t%d -c%d for every HTTP run, %ds warm-up + %ds measured; "
          "fencegate --threads %d, nginx proxy %d worker(s), storage nginx %d "
          "worker(s)" % (k.WRK_THREADS, k.CONNS, k.WARMUP, k.DURATION,
                         k.FG_LOOPS, k.FG_LOOPS, k.STORE_WORKERS))
    with open("/proc/loadavg") as f:
        la = " ".join(f.read().split()[:3])
    B.say("temp dir on: %s (etcd WAL fsyncs there); load average at start: %s"
          % (fs_type(B.tmp), la))
    B.say("storage root: %s (%s; %d MB free)" % (B.store_fs, B.dav,
                                                 mb_free(B.store_root)))
    if B.store_note:
        B.say("!! " + B.store_note)
    B.say("summary: %s and %s" % (B.md_path, B.json_path))


def perf_check(B):
    B.perf_ok = False
    B.perf_why = ""
    if not B.k.PROFILE:
        return
    data = os.path.join(B.tmp, "perf-check.data")
    log = os.path.join(B.tmp, "perf-check.log")
    with open(log, "wb") as f:
        p = subprocess.run(["perf", "record", "-a", "-F", str(B.k.PERF_FREQ),
                            "-o", data, "--", "sleep", "0.2"], stdout=f,
                           stderr=subprocess.STDOUT)
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "-q",
                          "--sort", "comm"], capture_output=True, text=True) \
        if p.returncode == 0 else None
    paranoid = "?"
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = f.read().strip()
    except OSError:
        pass
    if rep is not None and rep.stdout.strip():
        B.perf_ok = True
        ev = first_line(["perf", "evlist", "-i", data])
        B.say("profiles: perf %s records system-wide (-a -F %d, event %s) "
              "during: %s (perf_event_paranoid %s)" % (
                  first_line(["perf", "--version"]).split()[-1],
                  B.k.PERF_FREQ, ev, B.k.PROFILE_RUNS, paranoid))
        B.m.profile_runs = set(B.k.PROFILE_RUNS.split())
    else:
        with open(log, errors="replace") as f:
            B.perf_why = " ".join(f.read().split())[:300]
        B.say("profiles: perf cannot record here (perf_event_paranoid %s: %s); "
              "falling back to CPU seconds and context switches per process "
              "(printed for every run anyway)" % (paranoid, B.perf_why))
    if os.path.exists(data):
        os.unlink(data)


def start_servers(B):
    k = B.k
    B.redis = harness.RedisServer().start()
    B.m.track("redis", B.redis.proc.pid)
    B.say("redis-server  pid %d  127.0.0.1:%d" % (B.redis.proc.pid,
                                                  B.redis.port))
    if B.want("base"):
        B.etcd = Etcd().start()
        B.m.track("etcd", B.etcd.proc.pid)
        B.say("etcd          pid %d  %s  (JSON gateway at %s/)"
              % (B.etcd.proc.pid, B.etcd.url(), B.etcd.api))
    if not B.a.skip_proxy:
        B.store = BenchStore(B.store_root, k.STORE_WORKERS).start()
        B.m.track("nginx-store", B.store.proc.pid)
        B.say("nginx storage pid %d  %s  (WebDAV, %d worker(s); %s)"
              % (B.store.proc.pid, B.store.url(), k.STORE_WORKERS,
                 nginx_version()))
        if B.want("base"):
            B.nproxy = ProxyNginx("nginx-proxy", k.FG_LOOPS,
                                  B.store.port).start()
            B.m.track("nginx-proxy", B.nproxy.proc.pid)
            if B.nproxy.workers != k.FG_LOOPS:
                die("the nginx proxy runs %d worker process(es), not "
                    "FG_LOOPS=%d" % (B.nproxy.workers, k.FG_LOOPS))
            B.say("nginx proxy   pid %d  %s  (proxy_pass to the storage, "
                  "upstream keepalive 64, reuseport; %d worker process(es), "
                  "checked)" % (B.nproxy.proc.pid, B.nproxy.url(),
                                B.nproxy.workers))
        B.proxy_ok = True
    if not B.a.skip_fencegate and B.want("base"):
        start_main_fg(B)
    B.hr()


def start_main_fg(B):
    k = B.k
    B.fg = g = harness.Gateway(B.redis.port, B.store.port if B.store else 9,
                               B.fg_flags("error"))
    g.name = "fencegate"
    g.url = "http://127.0.0.1:%d" % g.port
    try:
        g.start(timeout=15.0)
    except SetupError as e:
        B.say("run.py: fencegate did not start: " + str(e))
        raise SystemExit(1)
    B.m.track("fencegate", g.proc.pid)
    loops = None
    code, body = B.http(g.url + "/_fence/v1/metrics")
    for line in body.decode("utf-8", "replace").splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "fencegate_event_loops":
            loops = int(float(f[1]))
    if loops is not None and loops != k.FG_LOOPS:
        die("fencegate reports %d event loops, not FG_LOOPS=%d"
            % (loops, k.FG_LOOPS))
    B.say("fencegate     pid %d  %s  (--threads %d --max-connections %d "
          "--max-waiters %d; fd limit %d); %d threads, %s event loop(s)"
          % (g.proc.pid, g.url, k.FG_LOOPS, k.FG_MAX_CONN, k.FG_MAX_WAITERS,
             resource.getrlimit(resource.RLIMIT_NOFILE)[0],
             len(os.listdir("/proc/%d/task" % g.proc.pid)),
             loops if loops is not None else "? (no fencegate_event_loops "
             "metric)"))
    name = "fgbench-smoke-" + B.runid
    sq, lease, (code, body) = B.acquire(g.url, name, 30000)
    ins = B.http(g.url + harness.LOCKS + name)
    rel = B.release(g.url, name, lease) if lease else (None, b"")
    B.say("smoke: POST -> %s %s" % (code, body.decode("utf-8", "replace")))
    B.say("smoke: GET  -> %s -> %s" % (ins[1].decode("utf-8", "replace"),
                                      ins[0]))
    B.say("smoke: DELETE (Fence-Lease) -> %s %s" % (rel[0], show(rel[1])))
    if code == 200 and lease and rel[0] == 204:
        B.fg_ok = True
    else:
        B.say("smoke test FAILED: skipping the fencegate measurements")


def redis_floor(B):
    k = B.k
    B.say("[redis floor] redis-benchmark -c %d -n %d -r 100000 (no "
          "pipelining), same redis-server" % (k.CONNS, k.REDIS_N))
    sha = B.redis.command("SCRIPT", "LOAD", "if redis.call('get',KEYS[1])=="
                          "ARGV[1] then return redis.call('del',KEYS[1]) "
                          "else return 0 end").decode()

    def rb(*cmd):
        out = B.m.call(["redis-benchmark", "-h", "127.0.0.1", "-p",
                        str(B.redis.port), "-c", str(k.CONNS), "-n",
                        str(k.REDIS_N), "-r", "100000", "--csv"] + list(cmd),
                       os.path.join(B.tmp, "rb-%s.txt" % cmd[0]))
        return csv_row(out)
    s = rb("set", "fg:bench:__rand_int__", "x", "nx", "px", "30000")
    e = rb("evalsha", sha, "1", "fg:bench:__rand_int__", "x")
    if not s or not e:
        die("redis-benchmark gave no figures")
    B.f["floor"] = "%.1f" % (1 / (1 / float(s[1]) + 1 / float(e[1])))
    B.say("  SET NX PX 30000 : %s req/s   (p50 %s ms, p99 %s ms)" % (s[1], s[4], s[6]))
    B.say("  EVALSHA release : %s req/s   (p50 %s ms, p99 %s ms)" % (e[1], e[4], e[6]))
    B.say("  floor = 1/(1/set + 1/evalsha) = %s cycles/s" % B.f["floor"])
    B.redis.command("EVAL", "local n=0 for _,k in ipairs(redis.call('keys',"
                    "'fg:bench:*')) do n=n+redis.call('del',k) end return n",
                    "0")
    B.redis.command("SCRIPT", "FLUSH")
    B.hr()


def csv_row(out):
    """The fields of the second line of redis-benchmark --csv, or None."""
    import csv
    rows = list(csv.reader(out.splitlines()))
    return rows[1] if len(rows) > 1 and len(rows[1]) > 6 else None


def cycles(B):
    k = B.k
    lua = os.path.join(HERE, "fence_cycle.lua")
    if B.fg_ok:
        B.say("[lock cycles, fencegate] wrk -t%d -c%d; each wrk thread goes "
              "round %d lock names of its own; cycle = POST acquire (200) + "
              "DELETE release (204)" % (k.WRK_THREADS, k.CONNS, k.NAME_RING))
        hook = RedisHook([B.redis.port])
        B.m.hooks = [hook]
        r = B.m.wrk("cycles-fencegate", "fencegate", lua, B.fg.url,
                    ["fgb-" + B.runid, k.NAME_RING])
        B.m.hooks = []
        if r:
            B.report_cycles("cycles-fencegate", r)
            B.f["fg_cps"] = r["cps"]
            B.f["fg_cyc_errs"] = errs_of(r)
            _, B.f["one_rus"], _ = B.redis_report(
                hook, "cycles-fencegate", int(r["cycles"]), "cycle",
                [("redis", B.redis.port)])
        B.fg_alive("the cycle benchmark")
        B.hr()
    B.say("[lock cycles, etcd] wrk -t%d -c%d; one lease per wrk thread "
          "(granted before, TTL 600, reused), each thread goes round %d lock "
          "names of its own; cycle = %s/lock/lock + %s/lock/unlock"
          % (k.WRK_THREADS, k.CONNS, k.NAME_RING, B.etcd.api, B.etcd.api))
    leases = []
    for _ in range(k.WRK_THREADS):
        lid = B.etcd.grant(600)
        if not lid:
            die("etcd granted no lease")
        leases.append(lid)
    r = B.m.wrk("cycles-etcd", "etcd", os.path.join(HERE, "etcd_cycle.lua"),
                B.etcd.url(), ["fgb-" + B.runid, B.etcd.api, ",".join(leases),
                               k.NAME_RING])
    if r:
        B.report_cycles("cycles-etcd", r)
        B.f["etcd_cps"] = r["cps"]
        B.f["etcd_errs"] = errs_of(r)
    B.hr()


def cluster(B):
    """Lock cycles on a three-master Redis Cluster, then PUBLISH against
    SPUBLISH on it."""
    k = B.k
    B.say("[redis cluster] three cluster-enabled redis-server masters (no "
          "replicas, --save '' --appendonly no), redis-cli --cluster create "
          "--cluster-replicas 0")
    cl = topology.RedisCluster(masters=3, replicas=0)
    try:
        cl.start()
    except SetupError as e:
        B.say("  !! the cluster did not start: " + " ".join(str(e).split())[:400])
        B.xfg_died.append("the cluster did not start")
        return
    names = ["redis-c%d" % (i + 1) for i in range(3)]
    nodes = list(zip(names, [n.port for n in cl.nodes]))
    pids = [n.proc.pid for n in cl.nodes]
    for (name, port), n in zip(nodes, cl.nodes):
        B.say("%-13s pid %d  127.0.0.1:%d (bus %d), slots %s" % (
            name, n.proc.pid, port, n.bus_port, ",".join(
                "%d-%d" % (a, b) for a, b, p, _ in cl.refresh_slots()
                if p == port)))
    B.say("  cluster_state:ok on all three nodes")
    try:
        if not B.a.skip_fencegate:
            g = B.start_fg("fg-cluster", cl.url())
            if g is None:
                B.xfg_died.append("fg-cluster did not start")
            else:
                B.say("[lock cycles, 3-master cluster] the load of [lock "
                      "cycles, fencegate] (wrk -t%d -c%d, fence_cycle.lua, "
                      "ring of %d names per wrk thread) on fg-cluster; Redis "
                      "figures from each node" % (k.WRK_THREADS, k.CONNS,
                                                  k.NAME_RING))
                B.m.only(list(zip(names, pids)) + [("fg-cluster", g.proc.pid)])
                hook = RedisHook([p for _, p in nodes])
                B.m.hooks = [hook]
                r = B.m.wrk("cycles-cluster", "fg-cluster",
                            os.path.join(HERE, "fence_cycle.lua"), g.url,
                            ["fgk-" + B.runid, k.NAME_RING])
                B.m.hooks = []
                B.m.back()
                if r:
                    B.report_cycles("cycles-cluster", r)
                    B.f["cl_cps"] = r["cps"]
                    B.f["cl_errs"] = errs_of(r)
                    us, tot, share = B.redis_report(
                        hook, "cycles-cluster", int(r["cycles"]), "cycle",
                        nodes)
                    B.f["cl_rus"] = tot
                    if us:
                        B.f["cl_per"] = " / ".join(
                            "%s %s" % (u, s) for u, s in zip(us, share))
                B.xfg_done(g, "the cluster cycle benchmark")
        B.hr()
        pubsub(B, cl, nodes, pids)
    finally:
        cl.stop()
    B.hr()


def pubsub(B, cl, nodes, pids):
    """Redis CPU per message of PUBLISH (subscriber on another node) and
    of SPUBLISH (subscriber on the owner), both sent to the channel's
    owner by redis-benchmark."""
    k = B.k
    ch = "fg:bench:ps-" + B.runid
    owner = cl.nodes[0].port
    try:
        topology.node_command(owner, "SPUBLISH", ch, "probe")
    except harness.RespError as e:
        if str(e).startswith("MOVED"):
            owner = int(str(e).rsplit(":", 1)[1])
    other = cl.nodes[0].port if owner != cl.nodes[0].port else cl.nodes[1].port
    name_of = dict((p, n) for n, p in nodes)
    slot = topology.keyslot(ch)
    B.say("[cluster pub/sub] redis-benchmark -c %d -P %d -n %d '<cmd> %s msg' "
          "(slot %d, owner %s); one subscriber; Redis CPU from INFO cpu of all "
          "three nodes around each run" % (k.PUBSUB_CLIENTS, k.PUBSUB_PIPELINE,
                                           k.PUBSUB_N, ch, slot, name_of[owner]))
    for label, cmd, sport, key in (("pubsub-publish", "PUBLISH", other, "pub"),
                                   ("pubsub-spublish", "SPUBLISH", owner,
                                    "spub")):
        kind = "ssubscribe" if cmd == "SPUBLISH" else "subscribe"
        count = os.path.join(B.tmp, label + ".count")
        sub_out = os.path.join(B.tmp, label + ".sub")
        with open(sub_out, "wb") as f:
            sp = harness.spawn([sys.executable, os.path.join(
                HERE, "subscribe_count.py"), str(sport), kind, ch, count],
                stdout=f, stderr=subprocess.STDOUT)

        def ready():
            with open(sub_out, "rb") as f:
                return f.read().startswith(b"ready") or sp.poll() is not None
        harness.wait_until(ready, 5.0, 0.05)
        with open(sub_out, "rb") as f:
            if not f.read().startswith(b"ready"):
                B.say("  !! the %s subscriber did not start" % kind)
                harness.stop_process(sp)
                continue
        B.m.only(list(zip([n for n, _ in nodes], pids))
                 + [("subscriber", sp.pid)])
        hook = RedisHook([p for _, p in nodes])
        B.m.hooks = [hook]
        run = B.m.cmd(label, "", "redis-benchmark", [
            "redis-benchmark", "-h", "127.0.0.1", "-p", str(owner), "-c",
            str(k.PUBSUB_CLIENTS), "-n", str(k.PUBSUB_N), "-P",
            str(k.PUBSUB_PIPELINE), "--csv", cmd, ch, "msg"])
        B.m.hooks = []
        B.m.back()
        # the last messages reach the subscriber: its node's output buffers
        # for pub/sub clients empty out (the count is written on SIGTERM)
        harness.wait_until(lambda: pubsub_drained(sport), 5.0, 0.02)
        harness.stop_process(sp)
        try:
            with open(count) as f:
                got = f.read().strip()
        except OSError:
            got = "?"
        row = csv_row(run.text)
        rps = row[1] if row else None
        per, tot = [], 0.0
        for n, p in nodes:
            d = hook.delta(label, p)
            per.append("-" if d is None else "%.2f" % (d / k.PUBSUB_N * 1e6))
            tot = None if d is None or tot is None else tot + d
        us = None if tot is None else "%.2f" % (tot / k.PUBSUB_N * 1e6)
        B.f["ps_%s_us" % key] = us
        B.f["ps_%s_nodes" % key] = "/".join(per)
        B.say("  %s to %s, %s on %s: %d messages at %s/s, subscriber received "
              "%s; Redis CPU us per message: %s%s" % (
                  cmd, name_of[owner], kind, name_of[sport], k.PUBSUB_N,
                  rps or "?", got, ", ".join("%s %s" % (n, u) for (n, _), u
                                             in zip(nodes, per)),
                  "; all nodes %s" % us if us else ""))
        if not rps:
            B.say("  redis-benchmark gave no figure: " + show(run.text))
        B.say("  CPU s (context switches voluntary/involuntary):"
              + run.cpu_line())


def pubsub_drained(port):
    """No pub/sub client of the node at port has output waiting."""
    try:
        text = topology.node_command(port, "CLIENT", "LIST", "TYPE", "pubsub")
    except (OSError, harness.RespError):
        return True
    for line in text.decode("utf-8", "replace").splitlines():
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if f.get("obl", "0") != "0" or f.get("oll", "0") != "0":
            return False
    return True


def replica_ack(B):
    """A primary and one replica; a fencegate on the primary with
    --redis-replicas 0, then 1: a sequential acquire + release loop, then
    the cycle load."""
    k = B.k
    B.say("[replica acknowledgement] a primary and one replica (--replicaof) "
          "on loopback; fencegate on the primary with --redis-replicas 0, "
          "then --redis-replicas 1 --redis-replicas-timeout-ms 1000")
    B.f["ack"] = ack = {0: {}, 1: {}}
    B.f["ack_errs"] = 0
    pri = harness.RedisServer()
    rep = None
    try:
        pri.start()
        rep = harness.RedisServer(extra_args=["--replicaof", "127.0.0.1",
                                              str(pri.port)]).start()
    except SetupError as e:
        B.say("  !! " + str(e).splitlines()[0])
        B.xfg_died.append("the replica did not start")
        pri.stop()
        if rep:
            rep.stop()
        B.hr()
        return

    def online():
        try:
            i = topology.node_info(pri.port, "replication")
        except (OSError, harness.RespError):
            return None
        return i.get("slave0") if "state=online" in i.get("slave0", "") else None
    s0 = harness.wait_until(online, 20.0, 0.1)
    if not s0:
        B.say("  !! the replica did not come online within 20 s")
        B.xfg_died.append("the replica did not come online")
        rep.stop()
        pri.stop()
        B.hr()
        return
    B.say("redis-pri     pid %d  127.0.0.1:%d; redis-rep pid %d  127.0.0.1:%d, "
          "slave0:%s" % (pri.proc.pid, pri.port, rep.proc.pid, rep.port, s0))
    try:
        for r in (0, 1):
            extra = ["--redis-replicas", str(r)]
            if r == 1:
                extra += ["--redis-replicas-timeout-ms", "1000"]
            g = B.start_fg("fg-ack%d" % r, pri.port, extra)
            if g is None:
                B.xfg_died.append("fg-ack%d did not start" % r)
                continue
            B.m.only([("redis-pri", pri.proc.pid), ("redis-rep", rep.proc.pid),
                      (g.name, g.proc.pid)])
            B.say("[replica ack, --redis-replicas %d] sequential: %d acquire + "
                  "release cycles on one connection (after 200 untimed)"
                  % (r, k.ACK_N))
            run = B.m.cmd("ack%d-seq" % r, g.name, "python3", [
                sys.executable, os.path.join(HERE, "acquire_latency.py"),
                "--port", str(g.port), "--n", str(k.ACK_N), "--prefix",
                "fga%d-%s-" % (r, B.runid)])
            res = prefixed(run.text, "RESULT_")
            if res.get("N"):
                ack[r].update(res)
                run.result = {"cycles": res["N"]}
                B.f["ack_errs"] += int(res.get("ERRORS") or 0)
                B.say("  acquire p50 %s us, p99 %s us, mean %s us; release p50 "
                      "%s us, p99 %s us; %s cycles at %s/s; errors %s" % tuple(
                          res.get(x) for x in (
                              "ACQ_P50_US", "ACQ_P99_US", "ACQ_MEAN_US",
                              "REL_P50_US", "REL_P99_US", "N", "CPS",
                              "ERRORS")))
                if res.get("ERRSAMPLE"):
                    B.say("  first error: " + res["ERRSAMPLE"])
            else:
                B.say("  the sequential loop gave no figures: "
                      + " ".join(run.text.splitlines()[-3:]))
                B.f["ack_errs"] += 1
            B.say("  CPU s (context switches voluntary/involuntary):"
                  + run.cpu_line())
            B.say("[replica ack, --redis-replicas %d] cycles: the load of "
                  "[lock cycles, fencegate]; Redis figures from the primary "
                  "and the replica" % r)
            hook = RedisHook([pri.port, rep.port])
            B.m.hooks = [hook]
            label = "cycles-ack%d" % r
            res = B.m.wrk(label, g.name, os.path.join(HERE, "fence_cycle.lua"),
                          g.url, ["fga%d-%s" % (r, B.runid), k.NAME_RING])
            B.m.hooks = []
            B.m.back()
            if res:
                B.report_cycles(label, res)
                ack[r]["cycles_cps"] = res["cps"]
                B.f["ack_errs"] += errs_of(res)
                B.redis_report(hook, label, int(res["cycles"]), "cycle",
                               [("redis-pri", pri.port),
                                ("redis-rep", rep.port)])
                waits, _ = hook.calls(label, pri.port, ("wait",))
                B.say("  WAIT calls on the primary: %d (%.2f per cycle)"
                      % (waits, waits / max(1, int(res["cycles"]))))
            else:
                B.f["ack_errs"] += 1
            B.xfg_done(g, "the replica acknowledgement runs")
    finally:
        rep.stop()
        pri.stop()
    B.hr()


SCRIPT_ROWS = ("evalsha", "eval", "fcall", "evalsha_ro", "eval_ro",
               "fcall_ro")


def pin(cpus, pids):
    """Every thread of every pid (and of its children) to those CPUs."""
    for p in pids:
        for q in kids(p):
            try:
                for t in os.listdir("/proc/%d/task" % q):
                    os.sched_setaffinity(int(t), cpus)
            except OSError:
                pass


def redis_calls(B):
    """Redis's own account of the time it spent in fencegate's scripts:
    phases of only acquires, only releases, only fenced PUTs."""
    k = B.k
    B.rc = rc = {}
    cpus = sorted(os.sched_getaffinity(0))
    note = "not pinned (one core)"
    rest = None
    if len(cpus) > 1:
        rest = set(cpus[:-1])
        pin({cpus[-1]}, [B.redis.proc.pid])
        pin(rest, [B.fg.proc.pid, B.store.proc.pid])
        note = ("Redis pinned to CPU %d, fencegate, the storage and the client "
                "to CPU %s" % (cpus[-1], ",".join(map(str, sorted(rest)))))
    B.say("[redis cpu per call] CONFIG RESETSTAT, then INFO commandstats after "
          "each phase; script rows: evalsha, eval, fcall; %d acquires of "
          "distinct locks, %d releases of them, %d fenced %d-byte PUTs on %d "
          "objects (locks acquired before the phase); exact counts, %d "
          "connections; %s" % (k.CALLS_N, k.CALLS_N, k.CALLS_PUTS, k.OBJ_SIZE,
                               k.NOBJ, k.CONNS, note))
    calls = os.path.join(HERE, "fence_calls.py")
    base = ["--port", str(B.fg.port), "--conns", str(k.CONNS)]

    def client(args, out):
        argv = [sys.executable, calls] + args + base
        kw = {}
        if rest:
            kw["preexec_fn"] = lambda: os.sched_setaffinity(0, rest)
        with open(os.path.join(B.tmp, out), "wb") as f:
            p = harness.spawn(argv, stdout=f, stderr=subprocess.STDOUT, **kw)
        p.wait()
        harness.stop_process(p)
        with open(os.path.join(B.tmp, out), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def phase(name, args):
        B.redis.command("CONFIG", "RESETSTAT")
        from measure import commandstats, redis_cpu
        c0 = redis_cpu(B.redis.port)
        out = client(args, "calls-%s.log" % name)
        c1 = redis_cpu(B.redis.port)
        st = commandstats(B.redis.port)
        res = prefixed(out, "RESULT_")
        if res.get("FATAL") or not res.get("OK"):
            B.say("  %s failed: %s" % (name, res.get("FATAL") or " ".join(
                out.splitlines()[-3:])))
            return False
        d = rc[name] = {"ok": int(res["OK"]), "errs": res.get("ERRORS"),
                        "pcpu": None if c0 is None or c1 is None else c1 - c0}
        d["scalls"] = int(sum(v.get("calls", 0) for c, v in st.items()
                              if c in SCRIPT_ROWS))
        d["susec"] = int(sum(v.get("usec", 0) for c, v in st.items()
                             if c in SCRIPT_ROWS))
        others = sorted(((int(v.get("calls", 0)), c) for c, v in st.items()
                         if c not in SCRIPT_ROWS and not c.startswith(
                             ("info", "config"))), reverse=True)
        d["ocalls"] = sum(n for n, _ in others)
        d["inner"] = ", ".join("%s %.2f" % (c, n / d["scalls"] if d["scalls"]
                                            else 0) for n, c in others[:6])
        sample = res.get("ERRSAMPLE")
        B.say("  %s: %s ok, %s failed in %ss over %d connections; Redis: script "
              "calls %d, script usec %d, other commands %d%s" % (
                  name, res["OK"], res.get("ERRORS"), res.get("SECS"), k.CONNS,
                  d["scalls"], d["susec"], d["ocalls"],
                  "; first failure: " + sample if sample else ""))
        return True

    grants = os.path.join(B.tmp, "calls-grants.txt")
    objs = os.path.join(B.tmp, "calls-objs.txt")
    ok = (phase("acquire", ["acquire", "--n", str(k.CALLS_N), "--prefix",
                            "fgc-%s-" % B.runid, "--out", grants])
          and phase("release", ["release", "--in", grants]))
    if ok:
        out = client(["acquire", "--n", str(k.NOBJ), "--prefix",
                      "fgc-%s/obj-" % B.runid, "--out", objs], "calls-objs.log")
        ok = bool(prefixed(out, "RESULT_").get("OK")) and \
            not prefixed(out, "RESULT_").get("FATAL")
        ok = ok and phase("put", ["put", "--in", objs, "--n",
                                  str(k.CALLS_PUTS), "--size", str(k.OBJ_SIZE)])
        if ok:
            client(["release", "--in", objs], "calls-objs-release.log")
    if rest:
        pin(set(cpus), [B.redis.proc.pid, B.fg.proc.pid, B.store.proc.pid])
    B.calls_ok = ok
    if not ok:
        B.say("  (the Redis CPU section did not complete; see above)")
    B.fg_alive("the Redis CPU phases")
    B.hr()


def waiters(B):
    k = B.k
    w = os.path.join(HERE, "fence_waiters.py")
    B.say("[waiters] %d connections, each one blocking acquire {\"wait_ms\":"
          "120000,\"ttl_ms\":30000} on %d held locks (%d each)"
          % (k.WAITERS, k.WAITER_LOCKS, k.WAITERS // k.WAITER_LOCKS))
    out = B.m.call([sys.executable, w, "waiters", "--port", str(B.fg.port),
                    "--pid", str(B.fg.proc.pid), "--prefix", "fgw-" + B.runid,
                    "--n", str(k.WAITERS), "--locks", str(k.WAITER_LOCKS)],
                   os.path.join(B.tmp, "waiters.txt"))
    quote_other(B, out)
    B.wres = prefixed(out, "RESULT_WAITERS_")
    if B.wres.get("FATAL"):
        B.say("  waiter test failed: " + B.wres["FATAL"])
    B.fg_alive("the waiter test")
    B.hr()
    B.say("[handoff] %d waiters queued on one lock; %d timed releases (after 20 "
          "untimed): DELETE sent -> next waiter's 200 received; each granted "
          "waiter re-queues at once" % (k.HANDOFF_WAITERS, k.HANDOFF_ROUNDS))
    out = B.m.call([sys.executable, w, "handoff", "--port", str(B.fg.port),
                    "--prefix", "fgh-" + B.runid, "--n", str(k.HANDOFF_WAITERS),
                    "--rounds", str(k.HANDOFF_ROUNDS)],
                   os.path.join(B.tmp, "handoff.txt"))
    quote_other(B, out)
    B.hres = prefixed(out, "RESULT_HANDOFF_")
    if B.hres.get("FATAL"):
        B.say("  handoff test failed: " + B.hres["FATAL"])
    if B.hres.get("ERRSAMPLE"):
        B.say("  first handoff error: " + B.hres["ERRSAMPLE"])
    B.fg_alive("the handoff test")
    B.hr()


def quote_other(B, out):
    """A helper's lines that are not its RESULT_ ones, indented."""
    for line in out.splitlines():
        if not line.startswith("RESULT_"):
            B.say(" " + line)


def latency_runs(B, tag, what, store, nproxy, fg, put_fg, tokens, **opts):
    """One GET and one PUT run (fenced through fencegate) against each
    target: the storage direct, the nginx proxy, fencegate; runs named
    get<tag>-<target>, put<tag>-<target>."""
    for t, subj, url in (("direct", "nginx-store", store),
                         ("nginx-proxy", "nginx-proxy", nproxy)):
        B.io_run("get%s-%s" % (tag, t), subj, url, "GET", **opts)
        B.io_run("put%s-%s" % (tag, t), subj, url, "PUT", **opts)
    if B.fg_ok:
        B.io_run("get%s-fencegate" % tag, "fencegate", fg, "GET", **opts)
        if put_fg:
            B.io_run("put%s-fencegate-fenced" % tag, "fencegate", fg, "PUT",
                     tokens, **opts)
        B.fg_alive(what)

def proxy(B):
    """1 KiB GETs and PUTs: direct, through the nginx proxy, through
    fencegate (fenced), rounds in alternating order; then one connection,
    then paced."""
    k = B.k
    store, nproxy = B.store.url(), B.nproxy.url()
    fg = B.fg.url if B.fg_ok else None
    B.p_path = "/fgp-%s/obj-" % B.runid
    B.say("[proxy] %d-byte objects, wrk -t%d -c%d, %d objects (each wrk thread "
          "takes its own in turn); direct = storage nginx %s, nginx-proxy = %s, "
          "fencegate = %s" % (k.OBJ_SIZE, k.WRK_THREADS, k.CONNS, k.NOBJ, store,
                              nproxy, B.fg.url if B.fg else "-"))
    rss0 = rss_kb(B.fg.proc.pid) if B.fg_ok else None
    obj = b"x" * k.OBJ_SIZE
    bad = 0
    for i in range(k.NOBJ):
        code, body = B.http(store + B.p_path + str(i), "PUT", obj)
        if code not in (201, 204):
            bad += 1
            if bad == 1:
                B.say("  pre-create PUT %s%d -> %s %s" % (B.p_path, i, code,
                                                         show(body)))
    B.say("  pre-created %d/%d objects %s{0..%d} directly on the storage"
          % (k.NOBJ - bad, k.NOBJ, B.p_path, k.NOBJ - 1))
    if bad:
        die("could not create the objects on the storage")

    def probe(base):
        code, body = B.http(base + B.p_path + "0")
        return "%s %d B" % (code or "000", len(body))
    B.say("  smoke: GET %s0 direct -> %s, nginx-proxy -> %s" % (
        B.p_path, probe(store), probe(nproxy)))
    if fg:
        B.say("  smoke: GET %s0 via fencegate -> %s" % (B.p_path, probe(fg)))

    B.say("[proxy GET] %d round(s), the order reversed every other round"
          % k.GET_ROUNDS)
    for r in range(1, k.GET_ROUNDS + 1):
        order = ["direct", "nginx-proxy", "fencegate"]
        if r % 2 == 0:
            order.reverse()
        for t in order:
            if t == "direct":
                B.io_run("get-direct-r%d" % r, "nginx-store", store, "GET")
            elif t == "nginx-proxy":
                B.io_run("get-nginx-proxy-r%d" % r, "nginx-proxy", nproxy, "GET")
            elif B.fg_ok:
                B.io_run("get-fencegate-r%d" % r, "fencegate", fg, "GET")
                B.fg_alive("the GET benchmark")
    for t in ("direct", "nginx-proxy", "fencegate"):
        B.io_merge("get-" + t, ["get-%s-r%d" % (t, r)
                                for r in range(1, k.GET_ROUNDS + 1)])

    B.say("[proxy PUT] each request PUTs an object of its wrk thread's; via "
          "fencegate fenced: own lock per object, acquired before the runs; %d "
          "round(s), the order reversed every other round" % k.PUT_ROUNDS)
    put_fg = False
    tokens = os.path.join(B.tmp, "tokens.txt")
    leases = []
    if B.fg_ok:
        with open(tokens, "w") as tf:
            for i in range(k.NOBJ):
                sq, ls, (code, body) = B.acquire(fg, B.p_path[1:] + str(i),
                                                 600000)
                if not ls:
                    B.say("  acquire %s%d failed: %s" % (B.p_path[1:], i,
                                                        show(body)))
                    break
                tf.write("%d %s\n" % (i, sq))
                leases.append((i, ls, sq))
        if len(leases) == k.NOBJ:
            code, body = B.http(fg + B.p_path + "0", "PUT", obj)
            B.say("  smoke: PUT %s0 via fencegate without Fencing-Token -> %s %s"
                  % (B.p_path, code, show(body)))
            code, body = B.http(fg + B.p_path + "0", "PUT", obj,
                                {"Fencing-Token": leases[0][2]})
            B.say("  smoke: PUT %s0 via fencegate with its sequencer  -> %s %s"
                  % (B.p_path, code, show(body)))
            put_fg = True
    for r in range(1, k.PUT_ROUNDS + 1):
        order = ["direct", "nginx-proxy", "fencegate-fenced"]
        if r % 2 == 0:
            order.reverse()
        for t in order:
            if t == "direct":
                B.io_run("put-direct-r%d" % r, "nginx-store", store, "PUT")
            elif t == "nginx-proxy":
                B.io_run("put-nginx-proxy-r%d" % r, "nginx-proxy", nproxy, "PUT")
            elif put_fg and B.fg_ok:
                B.io_run("put-fencegate-fenced-r%d" % r, "fencegate", fg, "PUT",
                         tokens)
                B.fg_alive("the fenced PUT benchmark")
    for t in ("direct", "nginx-proxy", "fencegate-fenced"):
        B.io_merge("put-" + t, ["put-%s-r%d" % (t, r)
                                for r in range(1, k.PUT_ROUNDS + 1)])

    # the added latency with nothing queued, then concurrent but paced
    B.say("[proxy latency] one connection (wrk -t1 -c1), %ds each: GET, then "
          "PUT (fenced via fencegate)" % k.LAT_DURATION)
    latency_runs(B, "1", "the one-connection runs", store, nproxy, fg, put_fg,
                 tokens, threads=1, conns=1, duration=k.LAT_DURATION)
    B.say("[proxy latency, paced] wrk -t%d -c%d, each connection waiting %d ms "
          "after an answer (at most %d req/s offered), %ds each: GET, then PUT "
          "(fenced via fencegate)" % (k.WRK_THREADS, k.CONNS, k.PACE_MS,
                                      k.CONNS * 1000 // k.PACE_MS,
                                      k.LAT_DURATION))
    latency_runs(B, "p", "the paced runs", store, nproxy, fg, put_fg, tokens,
                 duration=k.LAT_DURATION, pace=k.PACE_MS)
    if B.fg_ok and leases:
        try:
            size = os.path.getsize(B.store.file_of(B.p_path + "0"))
        except OSError:
            size = "missing"
        B.say("  after the runs: %s0 on the storage is %s bytes (expected %d)"
              % (B.p_path, size, k.OBJ_SIZE))
        rel_bad = 0
        for i, ls, _ in leases:
            code, body = B.release(fg, B.p_path[1:] + str(i), ls)
            if code != 204:
                rel_bad += 1
                if rel_bad == 1:
                    B.say("  release %s%d -> %s %s" % (B.p_path[1:], i, code,
                                                      show(body)))
        B.say("  released %d/%d object locks" % (len(leases) - rel_bad,
                                                 len(leases)))
    if B.fg_ok:
        B.f["rss_p0"] = rss0
        B.f["rss_p1"] = rss_kb(B.fg.proc.pid)
        B.say("  fencegate VmRSS before -> after the 1 KiB runs (with "
              "warm-ups): %s -> %s kB" % (rss0 or "?", B.f["rss_p1"] or "?"))
    B.hr()


class RssSampler:
    """A process's VmRSS every `every` s on a thread of its own; the peak."""

    def __init__(self, pid, every):
        import threading
        self.pid, self.every = pid, every
        self.samples = []
        self.done = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.done.is_set():
            v = rss_kb(self.pid)
            if v is None:
                return
            self.samples.append(v)
            self.done.wait(self.every)

    def stop(self):
        self.done.set()
        self.t.join()
        v = rss_kb(self.pid)   # one more sample after the transfer
        if v is not None:
            self.samples.append(v)
        return max(self.samples) if self.samples else None


def stream(B):
    """BIG_MB fenced PUT and GET through a fresh fencegate, its VmRSS
    sampled; the same direct to the storage."""
    k = B.k
    free = mb_free(B.store_root)
    if free < k.BIG_MB + 64:
        B.say("!! [stream] skipped: the storage (%s) has %d MB free, below "
              "BIG_MB=%d plus 64 (STORE_DIR chooses another place)"
              % (B.store_fs, free, k.BIG_MB))
        B.hr()
        return
    g = harness.Gateway(B.redis.port, B.store.port, B.fg_flags("error"))
    g.name = "fencegate-stream"
    g.url = "http://127.0.0.1:%d" % g.port
    try:
        g.start(timeout=15.0)
    except SetupError as e:
        B.say("!! second fencegate did not start: " + str(e))
        return
    B.say("fencegate (streaming) pid %d  %s  (fresh; same flags, Redis and "
          "storage)" % (g.proc.pid, g.url))
    nbytes = k.BIG_MB * 1024 * 1024
    path = "/fgp-%s/big" % B.runid
    B.say("[stream] %d MiB body (sparse file, zeros): fenced PUT through "
          "fencegate, then GET back through fencegate; fencegate VmRSS sampled "
          "every %ss; direct to the storage for comparison"
          % (k.BIG_MB, k.RSS_EVERY))
    big = os.path.join(B.tmp, "big.bin")
    with open(big, "wb") as f:
        f.truncate(nbytes)

    def curl(label, args):
        """One transfer by curl (the client the MB/s are measured with):
        (status, bytes moved, seconds), status None when it failed."""
        out = B.m.call(["curl", "-s", "-o", os.path.join(B.tmp, label +
                                                         ".body"),
                        "--max-time", "900", "-w",
                        "%{http_code} %{size_upload} %{size_download} "
                        "%{time_total}"] + args,
                       os.path.join(B.tmp, label + ".curl"))
        f = out.split()
        if len(f) != 4 or not f[0].isdigit() or f[0] == "000":
            return None, 0, 0.0
        return int(f[0]), int(f[1]) or int(f[2]), float(f[3])

    def put(url, headers=None):
        h = []
        for name, v in (headers or {}).items():
            h += ["-H", "%s: %s" % (name, v)]
        code, n, secs = curl("bigput", ["-T", big] + h + [url])
        try:
            with open(os.path.join(B.tmp, "bigput.body"), "rb") as f:
                body = f.read()
        except OSError:
            body = b""
        return code, body, secs

    def get(url):
        return curl("bigget", [url])

    def mbps(n, secs):
        return "%.1f" % (n / secs / 1e6) if secs > 0 else None
    ok = True
    sq, ls, (code, body) = B.acquire(g.url, path[1:], 600000)
    if not ls:
        B.say("  acquire %s failed: %s" % (path[1:], show(body)))
    else:
        idle = rss_kb(g.proc.pid)
        B.say("  fencegate idle VmRSS: %s kB" % idle)
        s = RssSampler(g.proc.pid, k.RSS_EVERY)
        code, body, secs = put(g.url + path, {"Fencing-Token": sq})
        peak = s.stop()
        try:
            stored = os.path.getsize(B.store.file_of(path))
        except OSError:
            stored = "missing"
        B.say("  PUT via fencegate (fenced): -> %s %s ; %d B sent in %.3f s; "
              "stored %s B; VmRSS peak %s kB (%d samples)" % (
                  code, show(body), nbytes, secs, stored, peak,
                  len(s.samples)))
        if code in (201, 204):
            if stored == nbytes:
                B.f["big_put_mbps"] = mbps(nbytes, secs)
            else:
                B.say("  !! stored size differs from the body")
        if peak and idle:
            B.f["big_put_grow"] = "%.1f" % ((peak - idle) / 1024)
        if not g.alive():
            B.say("!! fencegate (streaming, pid %d) died during the 1 GiB PUT"
                  % g.proc.pid)
            ok = False
        if ok and B.f.get("big_put_mbps"):
            idle2 = rss_kb(g.proc.pid)
            s = RssSampler(g.proc.pid, k.RSS_EVERY)
            code, down, secs = get(g.url + path)
            peak = s.stop()
            B.say("  GET via fencegate: -> %s ; %d B received in %.3f s; VmRSS "
                  "before %s kB, peak %s kB (%d samples)" % (
                      code, down, secs, idle2, peak, len(s.samples)))
            if code == 200 and down == nbytes:
                B.f["big_get_mbps"] = mbps(down, secs)
            if peak and idle2:
                B.f["big_get_grow"] = "%.1f" % ((peak - idle2) / 1024)
            if not g.alive():
                B.say("!! fencegate (streaming, pid %d) died during the 1 GiB "
                      "GET" % g.proc.pid)
                ok = False
        # the fenced object goes before the direct copy comes: the storage,
        # in memory, holds one of them at a time
        if ok:
            code, body = B.http(g.url + path, "DELETE", None,
                                {"Fencing-Token": sq})
            B.say("  DELETE %s via fencegate (fenced) -> %s %s"
                  % (path, code, show(body)))
            B.say("  release %s -> %s" % (path[1:], B.release(g.url, path[1:],
                                                              ls)[0]))
    if B.store.exists(path):
        B.say("  !! %s still on the storage after the DELETE" % path)
        os.unlink(B.store.file_of(path))
    code, _, secs = put(B.store.url() + path + "-direct")
    if code in (201, 204):
        B.f["big_d_put_mbps"] = mbps(nbytes, secs)
    code, down, secs = get(B.store.url() + path + "-direct")
    if code == 200 and down == nbytes:
        B.f["big_d_get_mbps"] = mbps(down, secs)
    B.say("  direct to the storage: PUT %s MB/s, GET %s MB/s" % (
        B.f.get("big_d_put_mbps") or "-", B.f.get("big_d_get_mbps") or "-"))
    B.http(B.store.url() + path + "-direct", "DELETE")
    os.unlink(big)
    if B.store.exists(path + "-direct"):
        os.unlink(B.store.file_of(path + "-direct"))
    g.stop()
    B.hr()


def sync(B):
    k = B.k
    if not shutil.which("rclone") or not (shutil.which("apache2") or
                                          os.access("/usr/sbin/apache2",
                                                    os.X_OK)):
        B.say("== rclone sync: skipped (needs rclone and apache2: "
              "scripts/install-deps.sh)")
        return
    B.say("== rclone sync of %d files to Apache httpd mod_dav: direct vs "
          "through fencegate (fencectl lock)" % k.SYNC_FILES)
    # sync_tree.py starts its own servers (Apache among them, which must
    # reach its directories as www-data) under a temp dir of its own
    out = B.m.call([sys.executable, os.path.join(HERE, "sync_tree.py"), "--bin",
                    B.a.bin, "--files", str(k.SYNC_FILES), "--rounds",
                    str(k.SYNC_ROUNDS)], os.path.join(B.tmp, "sync.txt"))
    for line in out.splitlines():
        B.say("  " + line)
    res = prefixed(out, "RESULT_")
    B.f["sync_direct"] = res.get("DIRECT")
    B.f["sync_through"] = res.get("THROUGH")
    B.hr()


# ---------------------------------------------------------------------------
# the tables at the end


def profiles(B):
    m = B.m
    if m.profiled:
        B.say("PROFILES (perf, system-wide during the run, whose figures "
              "include its sampling; per process using 0.2 CPU s or more: its "
              "top 10 symbols by share of its own samples)")
        for label in m.profiled:
            data = os.path.join(B.tmp, label + ".perf")
            if not os.path.exists(data) or os.path.getsize(data) == 0:
                with open(os.path.join(B.tmp, label + ".perf.log"),
                          errors="replace") as f:
                    B.say("[%s] perf wrote nothing: %s" % (
                        label, " ".join(f.read().split())[:200]))
                continue
            B.say("[%s]" % label)
            procs = []
            with open(os.path.join(B.tmp, label + ".pids")) as f:
                for line in f:
                    n, pids = line.split()
                    procs.append((n, ["--pid", pids]))
            procs.append(("wrk", ["--comm", "wrk"]))
            run = m.runs[label]
            for n, filt in procs:
                c = run.cpu_of(n) if n != "wrk" else (
                    run.client[1][0] if run.client else None)
                if c is None or c < 0.2:
                    continue
                p = subprocess.run(["perf", "report", "-i", data, "--stdio",
                                    "-q", "--no-children", "--percentage",
                                    "relative", "--sort", "dso,sym"] + filt,
                                   capture_output=True, text=True)
                rows = [l.split(None, 2) for l in p.stdout.splitlines()
                        if len(l.split()) >= 3]
                by = {}
                for r in rows:
                    try:
                        by[r[1]] = by.get(r[1], 0) + float(r[0].rstrip("%"))
                    except ValueError:
                        pass
                top = sorted(by.items(), key=lambda x: -x[1])[:5]
                B.say("  %s (%.2f CPU s in the run); by object: %s" % (
                    n, c, ", ".join("%s %.1f%%" % (d, v) for d, v in top)))
                for r in rows[:10]:
                    B.say(("    %7s  %-24s %s" % (r[0], r[1], r[2]))[:120])
        B.hr()
    elif B.k.PROFILE:
        B.say("PROFILES: perf could not record here (%s); see CPU seconds and "
              "context switches per process below" % B.perf_why)
        B.hr()


def cpu_table(B):
    m = B.m
    if not m.order:
        return
    B.say("CPU SECONDS per process in each measured run (context switches, "
          "voluntary + involuntary, in brackets);")
    B.say("the last column is the CPU of the process under test per request "
          "(per cycle for lock cycles);")
    B.say("a new header starts the runs that measured another set of "
          "processes")
    prev = None
    for label in m.order:
        run = m.runs[label]
        hdr = list(run.order) + ([run.client[0]] if run.client else [])
        if hdr != prev:
            B.say("%-24s" % "run" + "".join(" %12s" % p for p in hdr)
                  + " %6s %6s  %s" % ("secs", "box%", "under test: CPU per op"))
            prev = hdr
        cells = ""
        for p in run.order:
            c = run.cpu[p]
            cells += " %12s" % ("gone" if c is None else "%.2f (%s)" % (
                c[0], kfmt(c[1] + c[2])))
        if run.client:
            c = run.client[1]
            cells += " %12s" % ("%.3f (%s)" % (c[0], kfmt(c[1] + c[2])))
        ops, unit = run.ops()
        per = "-"
        s = run.subject
        if ops and s and run.cpu_of(s) is not None:
            per = "%s %.1f us/%s" % (s, run.cpu_of(s) / ops * 1e6, unit)
        B.say("%-24s" % label + cells + " %6.1f %6s  %s" % (
            run.secs, run.box or "", per))
    B.hr()


def calls_table(B):
    if not getattr(B, "calls_ok", False):
        return
    B.say("REDIS CPU PER CALL (INFO commandstats after CONFIG RESETSTAT; "
          "script = evalsha + eval + fcall rows;")
    B.say("other = every other command's calls, those the scripts make and "
          "any sent directly, per script call;")
    B.say("process = INFO cpu, used_cpu_sys + used_cpu_user, over the phase, "
          "per op)")
    fmt = "%-12s %7s %9s %12s %11s %13s %10s  %s"
    B.say(fmt % ("phase", "ops", "calls/op", "script us/op", "us/call",
                 "process us/op", "other/call",
                 "other commands per script call (top)"))
    for ph in ("acquire", "release", "put"):
        d = B.rc[ph]
        n, sc = d["ok"], d["scalls"]
        B.say(fmt % ("fenced PUT" if ph == "put" else ph, n, "%.2f" % (sc / n),
                     "%.1f" % (d["susec"] / n),
                     "%.1f" % (d["susec"] / sc) if sc else "-",
                     "%.1f" % (d["pcpu"] / n * 1e6) if d["pcpu"] is not None
                     else "-", "%.1f" % (d["ocalls"] / sc) if sc else "-",
                     d["inner"]))
    B.hr()


def f1(v, fmt="%.1f"):
    return None if v is None else fmt % v


def base_rows(B):
    """The rows of issues 7 and 20."""
    k, f, rows = B.k, B.f, B.rows
    R = Row
    fg_get, np_get = B.iof("get-fencegate", "ok_rps"), B.iof("get-nginx-proxy",
                                                             "ok_rps")
    fg_put = B.iof("put-fencegate-fenced", "ok_rps")
    np_put = B.iof("put-nginx-proxy", "ok_rps")
    r = ratio(fg_get, np_get)
    rows.append(R("GET %d B, req/s" % k.OBJ_SIZE,
                  "wrk -t%d -c%d, mean of %d rounds of %ds, answers below 400 "
                  "per second" % (k.WRK_THREADS, k.CONNS, k.GET_ROUNDS,
                                  k.DURATION), fg_get,
                  "nginx reverse proxy", np_get, r, "x", ">= 0.9x",
                  verdict(r, ">=", 0.9)))
    r = ratio(fg_put, np_put)
    rows.append(R("fenced PUT %d B, req/s" % k.OBJ_SIZE,
                  "the same with PUTs, each with its object's Fencing-Token",
                  fg_put, "nginx reverse proxy, unfenced PUT", np_put, r, "x",
                  ">= 0.6x", verdict(r, ">=", 0.6)))
    fg_cps, etcd_cps = f.get("fg_cps"), f.get("etcd_cps")
    r = ratio(fg_cps, etcd_cps)
    rows.append(R("lock cycles/s (acquire + release)",
                  "wrk, POST acquire + DELETE release of a free lock",
                  fg_cps, "etcd %s lock API" % Etcd.version(), etcd_cps, r,
                  "x", ">= 4x", verdict(r, ">=", 4)))
    r = ratio(fg_cps, f.get("floor"))
    rows.append(R("lock cycles/s", "against redis-benchmark's SET NX PX and "
                  "EVALSHA compare-and-delete, 1/(1/a + 1/b)", fg_cps,
                  "Redis floor (SET NX + EVALSHA)", f.get("floor"), r, "%",
                  ">= 35 %", verdict(r, ">=", 0.35)))
    for suf in ("", "1", "p"):
        for m in ("get", "put"):
            t = "fencegate" if m == "get" else "fencegate-fenced"
            what = "GET" if m == "get" else "fenced PUT"
            peer = "nginx reverse proxy" if m == "get" else \
                "nginx proxy, unfenced"
            fig = {"": "%s p50 added over direct, ms",
                   "1": "%s p50 added, one connection, ms",
                   "p": "%s p50 added, c%d paced, ms" % ("%s", k.CONNS)}[suf] \
                % what
            how = {"": "mean p50 of the rounds minus direct's",
                   "1": "wrk -t1 -c1, %ds, minus direct's" % k.LAT_DURATION,
                   "p": "wrk -c%d, %d ms pause after each answer, %ds, minus "
                   "direct's" % (k.CONNS, k.PACE_MS, k.LAT_DURATION)}[suf]
            d = num(B.iof(m + suf + "-direct", "req_p50_ms"))
            n = num(B.iof(m + suf + "-nginx-proxy", "req_p50_ms"))
            g = num(B.iof(m + suf + "-" + t, "req_p50_ms"))
            add_f = f1(g - d if g is not None and d is not None else None,
                       "%.3f")
            add_n = f1(n - d if n is not None and d is not None else None,
                       "%.3f")
            rate = ""
            if suf == "p":
                rate = "; %s req/s" % (B.iof(m + suf + "-" + t, "rps") or "-")
            rows.append(R(fig, how, add_f, peer, add_n, None, "", "<= 0.5 ms",
                          verdict(add_f, "<=", 0.5), peer_text="%s %s (direct "
                          "p50 %s%s)" % (peer, add_n or "-",
                                         f1(d, "%.3f") or "-", rate)))
    rc = getattr(B, "rc", {})
    acq = rel = cyc = put = put_calls = p_cyc = p_put = None
    if getattr(B, "calls_ok", False):
        acq = "%.1f" % (rc["acquire"]["susec"] / rc["acquire"]["ok"])
        rel = "%.1f" % (rc["release"]["susec"] / rc["release"]["ok"])
        cyc = "%.1f" % (float(acq) + float(rel))
        put = "%.1f" % (rc["put"]["susec"] / rc["put"]["ok"])
        put_calls = "%.2f" % (rc["put"]["scalls"] / rc["put"]["ok"])
        if rc["acquire"]["pcpu"] is not None and \
                rc["release"]["pcpu"] is not None:
            p_cyc = "%.1f" % ((rc["acquire"]["pcpu"] / rc["acquire"]["ok"] +
                               rc["release"]["pcpu"] / rc["release"]["ok"])
                              * 1e6)
        if rc["put"]["pcpu"] is not None:
            p_put = "%.1f" % (rc["put"]["pcpu"] / rc["put"]["ok"] * 1e6)
    rows.append(R("Redis CPU per lock cycle, us", "INFO commandstats script "
                  "rows' usec per acquire + per release (CALLS_N each, Redis "
                  "pinned to a core of its own)", cyc, "", None, None, "",
                  "<= 35 us", verdict(cyc, "<=", 35), peer_text=(
                      "acquire %s + release %s; process %s" % (
                          acq or "-", rel or "-", p_cyc or "-"))))
    rows.append(R("Redis CPU per fenced PUT, us", "INFO commandstats script "
                  "rows' usec per fenced PUT (admit + finish), CALLS_PUTS PUTs",
                  put, "", None, None, "", "<= 30 us", verdict(put, "<=", 30),
                  peer_text="%s script calls per PUT; process %s" % (
                      put_calls or "-", p_put or "-")))
    lab = lambda p, n: ["%s-r%d" % (p, i) for i in range(1, n + 1)]  # noqa: E731
    m = B.m
    c_fg_get = m.cpu_us_per("fencegate", "requests",
                            lab("get-fencegate", k.GET_ROUNDS))
    c_np_get = m.cpu_us_per("nginx-proxy", "requests",
                            lab("get-nginx-proxy", k.GET_ROUNDS))
    c_fg_put = m.cpu_us_per("fencegate", "requests",
                            lab("put-fencegate-fenced", k.PUT_ROUNDS))
    c_np_put = m.cpu_us_per("nginx-proxy", "requests",
                            lab("put-nginx-proxy", k.PUT_ROUNDS))
    rows.append(R("CPU per GET, us", "utime + stime from /proc/PID/stat over "
                  "the GET rounds, per request", c_fg_get,
                  "nginx reverse proxy", c_np_get, ratio(c_fg_get, c_np_get),
                  "x", "(info)", ""))
    rows.append(R("CPU per fenced PUT, us", "the same over the PUT rounds",
                  c_fg_put, "nginx reverse proxy, unfenced", c_np_put,
                  ratio(c_fg_put, c_np_put), "x", "(info)", ""))
    h = getattr(B, "hres", {})
    rows.append(R("release -> next waiter p99 ms, %s queued" % (
        h.get("WAITERS") or "-"), "DELETE sent -> next waiter's 200 received, "
        "HANDOFF_ROUNDS timed releases", h.get("P99_MS"), "", None, None, "",
        "< 2 ms", verdict(h.get("P99_MS"), "<", 2), peer_text=(
            "p50 %s, max %s (no peer)" % (h.get("P50_MS") or "-",
                                          h.get("MAX_MS") or "-"))))
    w = getattr(B, "wres", {})
    w_mb, w_note, w_res = None, "", "n/a"
    if w.get("RSS_KB"):
        w_mb = "%.1f" % (int(w["RSS_KB"]) / 1024)
        w_note = "idle %.1f MB; queued %s/%s" % (
            int(w["BASE_RSS_KB"]) / 1024, w.get("QUEUED"), w.get("TARGET"))
        w_res = verdict(w_mb, "<", 150)
        if w.get("ALLQUEUED") != "1":
            w_res = "missed (not all queued)"
    rows.append(R("%d blocked waiters, VmRSS MB (no regress)" % k.WAITERS,
                  "fencegate's VmRSS with every waiter queued", w_mb, "", None,
                  None, "", "< 150 MB", w_res, peer_text=w_note))
    for kind, grow, mb, dmb in (("fenced PUT", "big_put_grow", "big_put_mbps",
                                 "big_d_put_mbps"),
                                ("GET", "big_get_grow", "big_get_mbps",
                                 "big_d_get_mbps")):
        rows.append(R("%d MiB %s, RSS growth MB (no regress)" % (k.BIG_MB, kind),
                      "a fresh fencegate's VmRSS peak (every RSS_EVERY s) over "
                      "its idle VmRSS", f.get(grow), "", None, None, "",
                      "< 32 MB", verdict(f.get(grow), "<", 32),
                      peer_text="%s MB/s (direct %s)" % (f.get(mb) or "-",
                                                         f.get(dmb) or "-")))
    e_fg = None
    if not B.a.skip_fencegate:
        e_fg = (f.get("fg_cyc_errs") or 0) + B.sum_errs([
            "get-fencegate", "put-fencegate-fenced", "get1-fencegate",
            "put1-fencegate-fenced", "getp-fencegate", "putp-fencegate-fenced"])
    e_peer = (f.get("etcd_errs") or 0) + B.sum_errs([
        "%s-%s" % (m_, t) for m_ in ("get", "put", "get1", "put1", "getp",
                                     "putp")
        for t in ("direct", "nginx-proxy")])
    rows.append(R("failed requests in the runs above", "errors, socket errors "
                  "and answers >= 400 counted by wrk", e_fg, "peers", e_peer,
                  None, "", "0", verdict(e_fg, "==", 0)))
    if f.get("rss_p0") and f.get("rss_p1"):
        rows.append(R("fencegate VmRSS after the 1 KiB runs, MB", "VmRSS before "
                      "and after the GET/PUT runs", "%.1f" % (f["rss_p1"] / 1024),
                      "before them", "%.1f" % (f["rss_p0"] / 1024), None, "",
                      "(info)", ""))
    if not B.a.skip_fencegate:
        rows.append(R("lock cycles, 1 Redis, cycles/s", "the lock cycles above",
                      fg_cps, "", None, 1.0 if fg_cps else None, "2", "(info)",
                      "", peer_text="Redis %s us/cycle" % (f.get("one_rus") or
                                                          "-")))
        rows.append(R("lock cycles, 3-master cluster, cycles/s", "the same load "
                      "on a fencegate on a three-master Redis Cluster",
                      f.get("cl_cps"), "", None, ratio(f.get("cl_cps"), fg_cps),
                      "2", "(info)", "", peer_text="Redis %s us/cycle, 3 nodes"
                      % (f.get("cl_rus") or "-")))
        rows.append(R("  Redis us/cycle per node, FCALL share", "INFO cpu of "
                      "each node over the run", "", "", None, None, "", "", "",
                      peer_text=f.get("cl_per") or "-"))
        ack = f.get("ack", {0: {}, 1: {}})
        a0, a1 = ack[0], ack[1]
        add = None
        if a0.get("ACQ_P50_US") and a1.get("ACQ_P50_US"):
            add = "%.0f" % (float(a1["ACQ_P50_US"]) - float(a0["ACQ_P50_US"]))
        rows.append(R("replica ack: acquire p50 added, us", "acquire_latency.py, "
                      "ACK_N sequential cycles, --redis-replicas 1 minus 0",
                      add, "", None, None, "", "(info)", "",
                      peer_text="p50 %s -> %s, p99 %s -> %s" % (
                          a0.get("ACQ_P50_US") or "-", a1.get("ACQ_P50_US") or
                          "-", a0.get("ACQ_P99_US") or "-",
                          a1.get("ACQ_P99_US") or "-")))
        rows.append(R("replica ack: cycles/s, --redis-replicas 1", "the cycle "
                      "load", a1.get("cycles_cps"), "--redis-replicas 0:",
                      a0.get("cycles_cps"), ratio(a1.get("cycles_cps"),
                                                  a0.get("cycles_cps")), "2",
                      "(info)", ""))
        rows.append(R("replica ack: sequential cycles/s, replicas 1",
                      "acquire_latency.py", a1.get("CPS"), "--redis-replicas 0:",
                      a0.get("CPS"), ratio(a1.get("CPS"), a0.get("CPS")), "2",
                      "(info)", ""))
    rows.append(R("rclone sync of %d files, s" % k.SYNC_FILES, "median of "
                  "SYNC_ROUNDS syncs through fencegate under fencectl lock "
                  "(bench/sync_tree.py)", f.get("sync_through"),
                  "direct to Apache", f.get("sync_direct"),
                  ratio(f.get("sync_through"), f.get("sync_direct")), "2",
                  "(info)", ""))
    rows.append(R("cluster PUBLISH vs SPUBLISH, Redis us/msg", "INFO cpu of the "
                  "three nodes per message, one subscriber",
                  f.get("ps_pub_us"), "SPUBLISH", f.get("ps_spub_us"),
                  ratio(f.get("ps_pub_us"), f.get("ps_spub_us")), "2",
                  "(info)", "", peer_text="SPUBLISH %s (3 nodes)" % (
                      f.get("ps_spub_us") or "-")))
    rows.append(R("  us/msg per node: PUBLISH; SPUBLISH", "", "", "", None, None,
                  "", "", "", peer_text="%s; %s" % (
                      f.get("ps_pub_nodes") or "-",
                      f.get("ps_spub_nodes") or "-")))
    if not B.a.skip_fencegate:
        e_x = (f.get("cl_errs") or 0) + (f.get("ack_errs") or 0)
        rows.append(R("failed requests, cluster and replica runs", "errors in "
                      "the cluster and replica runs", e_x, "", None, None, "",
                      "0", verdict(e_x, "==", 0)))


def summary_table(B):
    k = B.k
    title, rounds = [], []
    if B.want("base"):
        title.append("issues 7 and 20")
        rounds.append("GET x%d and PUT x%d" % (k.GET_ROUNDS, k.PUT_ROUNDS))
    if B.want("auth") or B.want("tls"):
        title.append("issue 17")
    if B.want("auth"):
        rounds.append("auth x%d" % k.AUTH_ROUNDS)
    if B.want("tls"):
        rounds.append("TLS x%d" % k.TLS_ROUNDS)
    el = int(time.time() - B.t_start)
    head = ("SUMMARY: %s targets, all from this one run  (fencegate --threads "
            "%d, nginx proxies %d worker(s);" % (", ".join(title), k.FG_LOOPS,
                                                 k.FG_LOOPS))
    head2 = ("wrk -t%d -c%d; %ds runs, rounds averaged (%s); storage root on "
             "%s; %d cores, everything on this box; %dm%ds)" % (
                 k.WRK_THREADS, k.CONNS, k.DURATION, ", ".join(rounds),
                 B.store_fs, NPROC, el // 60, el % 60))
    if B.want("base"):
        base_rows(B)
    if B.want("auth") or B.want("tls"):
        import auth_tls
        auth_tls.summary_rows(B)
    R = Row
    if not B.a.skip_fencegate:
        if B.xfg_died:
            B.rows.append(R("cluster/replica/auth/TLS fencegates up", "each "
                            "started, smoke-tested and alive at its end", "no",
                            "", None, None, "", "yes", "missed",
                            peer_text=", ".join(B.xfg_died)))
        else:
            B.rows.append(R("cluster/replica/auth/TLS fencegates up", "each "
                            "started, smoke-tested and alive at its end",
                            "yes", "", None, None, "", "yes", "met"))
    up = None
    if not B.a.skip_fencegate and B.want("base"):
        if B.fg_died:
            up = "died during " + B.fg_died
        elif not B.fg_ok:
            up = "failed its smoke test"
        B.rows.append(R("fencegate up from start to end", "the main fencegate "
                        "alive after each group of runs", "no" if up else "yes",
                        "", None, None, "", "yes", "missed" if up else "met",
                        peer_text=up or ""))
    text = "\n".join([head, head2] + (["!! " + B.store_note] if B.store_note
                                      else []) + ["", markdown(B.rows)])
    B.say("")
    B.say(text)
    os.makedirs(os.path.dirname(B.md_path), exist_ok=True)
    with open(B.md_path, "w") as f:
        f.write(text + "\n")
    os.makedirs(os.path.dirname(os.path.abspath(B.json_path)), exist_ok=True)
    write_json(B.json_path, head + " " + head2,
               [B.store_note] if B.store_note else [], B.rows, {
                   "knobs": {n: getattr(k, n) for n, _ in KNOBS},
                   "groups": k.ONLY or "base,auth,tls",
                   "seconds": el, "cores": NPROC,
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                            time.gmtime(B.t_start))})
    B.say("")
    B.say("summary written to %s (Markdown) and %s (JSON)" % (B.md_path,
                                                           B.json_path))
    code = 0
    if up:
        B.say("fencegate measurements incomplete (see above)")
        code = 1
    elif not B.a.skip_fencegate and B.xfg_died:
        B.say("cluster, replica, auth or TLS measurements incomplete: "
              + ", ".join(B.xfg_died))
        code = 1
    return code


# ---------------------------------------------------------------------------


def parse_args(k):
    ap = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Knobs (environment): " + " ".join(
            "%s=%s" % (n, d) for n, d in KNOBS) + ". bench/README.md says "
        "how each figure is measured.")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gateway",
                                                  "fencegate"),
                    help="the fencegate binary (default build/gateway/"
                    "fencegate under the repository)")
    ap.add_argument("--profile", action="store_true",
                    help="perf profiles of the runs PROFILE_RUNS names")
    ap.add_argument("--skip-fencegate", action="store_true",
                    help="no fencegate: the peers' rows only")
    ap.add_argument("--skip-proxy", action="store_true",
                    help="no storage and no nginx proxy")
    ap.add_argument("--only", default=None, help="a comma list of base, auth "
                    "and tls (ONLY=; default all)")
    ap.add_argument("--out", default=None, help="directory of the summary "
                    "(default build/bench/<run id> under the repository)")
    ap.add_argument("--json", default=None, help="the JSON summary's path "
                    "(default OUT/summary.json)")
    a = ap.parse_args()
    if a.only is not None:
        k.ONLY = a.only
    if a.profile:
        k.PROFILE = "1"
    k.PROFILE = k.PROFILE == "1"
    for g in [g for g in k.ONLY.split(",") if g]:
        if g not in GROUPS:
            die("--only takes base, auth and tls, not '%s'" % g, 2)
    a.bin = os.path.abspath(a.bin)
    return a


def check_tools(B):
    need = ["redis-server", "redis-cli", "wrk", "curl"]
    if B.want("base"):
        need += ["redis-benchmark", "etcd"]
    if not B.a.skip_proxy:
        need.append("nginx")
    if B.want("tls"):
        need.append("openssl")
    if B.k.PROFILE:
        need.append("perf")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    for t in need:
        if not shutil.which(t, path=path):
            die("%s not found (scripts/install-deps.sh --bench installs the "
                "tools)" % t)
    b = B.a.bin
    if not B.a.skip_fencegate and not os.access(b, os.X_OK):
        print("run.py: waiting up to %ds for %s to appear" % (B.k.BIN_WAIT, b),
              file=sys.stderr)
        harness.wait_until(lambda: os.access(b, os.X_OK), B.k.BIN_WAIT, 0.5)
    if not B.a.skip_fencegate and not os.access(b, os.X_OK):
        die("no fencegate binary at %s (build it first, or pass --bin PATH / "
            "--skip-fencegate)" % b)


def setup_dirs(B):
    k = B.k
    B.tmp = tempfile.mkdtemp(prefix="fencegate-bench.",
                             dir=os.environ.get("TMPDIR", "/tmp"))
    harness.Config.tmp_root = os.path.join(B.tmp, "servers")
    os.makedirs(harness.Config.tmp_root)
    harness.Config.bin = B.a.bin
    harness.Config.log_level = None
    out = B.a.out or os.path.join(ROOT, "build", "bench", B.runid)
    B.md_path = os.path.join(out, "summary.md")
    B.json_path = os.path.abspath(B.a.json) if B.a.json else \
        os.path.join(out, "summary.json")
    B.store_note = ""
    try:
        B.store_root = tempfile.mkdtemp(prefix="fencegate-bench-store.",
                                        dir=k.STORE_DIR)
    except OSError:
        B.store_note = ("STORE_DIR %s cannot be written: the storage is on "
                        "the disk, under %s" % (k.STORE_DIR, B.tmp))
        B.store_root = tempfile.mkdtemp(prefix="store.", dir=B.tmp)
    B.dav = os.path.join(B.store_root, "dav")
    B.store_fs = fs_type(B.store_root)
    if B.store_fs != "tmpfs":
        note = ("the storage's root is on %s, not tmpfs: its own writes add "
                "to every PUT and hide the proxy's cost (STORE_DIR chooses)"
                % B.store_fs)
        B.store_note = B.store_note + "; " + note if B.store_note else note
        print("run.py: WARNING: " + B.store_note, file=sys.stderr)


def raise_fd_limit(k):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < k.WAITERS + 512:
        print("run.py: warning: open-file limit %d is below WAITERS+512; the "
              "waiter test may fail" % resource.getrlimit(
                  resource.RLIMIT_NOFILE)[0], file=sys.stderr)


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def main():
    k = read_knobs()
    a = parse_args(k)
    B = Bench(k, a)
    check_tools(B)
    raise_fd_limit(k)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    setup_dirs(B)
    B.m = Meter(B.tmp, B.say, k)
    code = 1
    try:
        header(B)
        perf_check(B)
        B.hr()
        try:
            start_servers(B)
        except SetupError as e:
            die(str(e))
        if B.want("base"):
            redis_floor(B)
            cycles(B)
            cluster(B)
            if not a.skip_fencegate:
                replica_ack(B)
            if B.fg_ok and B.proxy_ok:
                redis_calls(B)
            if B.fg_ok:
                waiters(B)
            if B.proxy_ok:
                proxy(B)
                if not a.skip_fencegate:
                    stream(B)
            if not a.skip_fencegate:
                sync(B)
        if B.want("auth") or B.want("tls"):
            import auth_tls
            if a.skip_fencegate or not B.proxy_ok:
                B.say("== auth and TLS rows: skipped (they need a fencegate and "
                      "the storage: no --skip-fencegate, no --skip-proxy)")
            else:
                if B.want("auth"):
                    auth_tls.auth_rows(B)
                    B.hr()
                if B.want("tls"):
                    auth_tls.tls_rows(B)
                    B.hr()
        profiles(B)
        cpu_table(B)
        calls_table(B)
        code = summary_table(B)
    except KeyboardInterrupt:
        code = 130
    finally:
        harness.stop_all()
        if k.KEEP_TMP == "1":
            print("(logs kept in %s, the storage in %s)" % (B.tmp,
                                                           B.store_root))
        else:
            shutil.rmtree(B.store_root, ignore_errors=True)
            shutil.rmtree(B.tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
