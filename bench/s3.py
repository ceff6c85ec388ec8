#!/usr/bin/env python3
"""s3.py - S3 mode against its peers, in one run: a real radosgw straight,
nginx in front of it passing requests through (Host kept, so the client's
signature still holds), and fencegate in S3 mode (it checks the client's
signature, the sequencer in the session token of each PUT, and signs
again) when the binary given has that mode.

    bench/s3.py [--bin build/gateway/fencegate] [--quick] [--workers N]
                [--conns C] [--duration S] [--upload-mb MB]

Per target:
  GET req/s     1 KiB objects, presigned GETs replayed by wrk
  PUT req/s     1 KiB presigned PUTs (UNSIGNED-PAYLOAD); through fencegate
                each object's URL carries, in X-Amz-Security-Token, the
                sequencer of the lock guarding it (BUCKET/KEY), acquired
                from the gateway's lock API before the run; through nginx
                and straight to radosgw they are not fenced
  CPU us/req    the gateway's utime + stime (/proc/PID/stat, nginx's
                workers included) over the measured run, per request;
                radosgw's own the same way
  RSS growth    the gateway's peak RSS during a multipart upload (1 GiB,
                16 MiB parts, Debian's boto3) less its RSS before it
and every figure's ratio to nginx's pass-through.

The presigned URLs are made by Debian's botocore (/usr/bin/python3), valid
for the whole run, each with X-Amz-Security-Token (the session token). wrk
replays them as they are: the objects are bench/obj-0 .. obj-N-1, wrk
thread t takes those whose number is t modulo the threads.

Everything starts on free loopback ports in a temp dir (the integration
suite's harness: rgw.Rgw, harness.RedisServer, harness.Gateway, and
bench/peers.py's nginx) and is stopped by PID at the end, however the run
ends. Needs ceph-mon, ceph-osd, radosgw, nginx, redis-server, wrk and
python3-boto3 (scripts/install-deps.sh --bench). --quick: a few seconds a
cell and a 128 MiB upload; the figures then only show that it all runs.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import rgw  # noqa: E402
import s3clients  # noqa: E402
from harness import SetupError  # noqa: E402
from measure import Meter, kids, rss_kb, errs_of  # noqa: E402
from peers import ProxyNginx  # noqa: E402

ACCESS_KEY = "AKIABENCHSTORE000001"     # the store's user
SECRET = "benchstoresecret/0123456789abcdefghijklm"
GW_KEY = "AKIABENCHGATEWAY0001"         # what clients of fencegate sign with
GW_SECRET = "benchgatewaysecret/0123456789abcdefghij"
BUCKET = "bench"
OBJ_BYTES = 1024
PART_BYTES = 16 << 20
# a session token for the unfenced targets: the store takes it unread, and
# the URL is as long as a fenced one
DUMMY_TOKEN = "fg1.unfenced"

PRESIGN = r'''
import json, sys
import boto3
from botocore.config import Config
a = json.load(sys.stdin)
clients = {}
for method, key, token in a["urls"]:
    c = clients.get(token)
    if c is None:
        c = clients[token] = boto3.session.Session(
            aws_access_key_id=a["key"], aws_secret_access_key=a["secret"],
            aws_session_token=token, region_name="us-east-1").client(
            "s3", endpoint_url=a["endpoint"],
            config=Config(s3={"addressing_style": "path"},
                          signature_version="s3v4"))
    op = {"GET": "get_object", "PUT": "put_object"}[method]
    print(c.generate_presigned_url(op, Params={"Bucket": a["bucket"], "Key": key},
                                   ExpiresIn=a["expires"]))
'''

UPLOAD = r'''
import json, sys, time
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
a = json.loads(sys.argv[1])
s3 = boto3.session.Session(
    aws_access_key_id=a["key"], aws_secret_access_key=a["secret"],
    aws_session_token=a["token"], region_name="us-east-1").client(
    "s3", endpoint_url=a["endpoint"],
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
t0 = time.monotonic()
s3.upload_file(a["path"], a["bucket"], a["object"], Config=TransferConfig(
    multipart_threshold=a["part"], multipart_chunksize=a["part"], max_concurrency=4))
secs = time.monotonic() - t0
head = s3.head_object(Bucket=a["bucket"], Key=a["object"])
s3.delete_object(Bucket=a["bucket"], Key=a["object"])
print("RESULT secs=%.3f bytes=%d" % (secs, head["ContentLength"]))
'''

# wrk: replays presigned URLs (one a line of URLS-FILE, scheme and host
# left off), GET or PUT with a SIZE-byte body; prints object_io.lua's
# RESULT line.
LUA = r'''
local threads = {}
local next_id = 0
function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end
local reqs = {}
local nreq = 0
local k = 0
function init(args)
   local path, method, nthreads = args[2], args[3], tonumber(args[4])
   local size = tonumber(args[5] or "0")
   local body = nil
   if method == "PUT" then body = string.rep("x", size) end
   local f = io.open(path, "r")
   if not f then io.stderr:write("cannot open " .. path .. "\n") os.exit(2) end
   local i = 0
   for line in f:lines() do
      if i % nthreads == id then
         nreq = nreq + 1
         reqs[nreq] = wrk.format(method, line, nil, body)
      end
      i = i + 1
   end
   f:close()
   if nreq == 0 then io.stderr:write("no URL for thread " .. id .. "\n") os.exit(2) end
end
function request()
   k = k % nreq + 1
   return reqs[k]
end
function done(summary, latency, requests)
   local secs = summary.duration / 1e6
   local e = summary.errors
   local ok = summary.requests - e.status
   io.write(string.format("RESULT requests=%d secs=%.3f rps=%.1f ok_rps=%.1f app_errors=0 sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d http_ge400=%d req_p50_ms=%.3f req_p99_ms=%.3f req_max_ms=%.3f bytes=%d\n",
      summary.requests, secs, summary.requests / secs, ok / secs, e.connect, e.read, e.write,
      e.timeout, e.status, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
      latency.max / 1000, summary.bytes))
end
'''


class Knobs:
    WRK_THREADS = 2
    CONNS = 16
    DURATION = 10
    WARMUP = 2


class S3Nginx(ProxyNginx):
    """ProxyNginx passing S3 requests through as they came: the client's
    Host (which it signed) kept, request and response bodies streamed."""

    LOCATION = "\n".join((
        "\t\tlocation / {",
        "\t\t\tproxy_pass http://fgb_store;",
        "\t\t\tproxy_http_version 1.1;",
        "\t\t\tproxy_set_header Connection \"\";",
        "\t\t\tproxy_set_header Host $http_host;",
        "\t\t\tproxy_request_buffering off;",
        "\t\t\tproxy_buffering off;",
        "\t\t}"))


def say(msg=""):
    print(msg, flush=True)


def has_s3_mode(exe):
    try:
        p = subprocess.run([exe, "--help"], capture_output=True, timeout=10)
    except OSError:
        return False
    return b"upstream-api" in p.stdout + p.stderr


def private_file(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


class Target:
    """One column: where the clients send (port), the process whose CPU
    and memory are the gateway's (pid; None straight to the store), and
    the session token of each object's PUT (token_of)."""

    def __init__(self, name, port, pid=None, fenced=False):
        self.name = name
        self.port = port
        self.pid = pid
        self.fenced = fenced
        self.tokens = {}          # object key -> sequencer (fencegate)
        self.figures = {}

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def token_of(self, key):
        return self.tokens.get(key, DUMMY_TOKEN)


class Bench:
    def __init__(self, args):
        self.a = args
        self.k = Knobs()
        self.k.CONNS = args.conns
        self.k.DURATION = args.duration
        self.k.WARMUP = args.warmup
        self.k.WRK_THREADS = args.threads
        self.tmp = tempfile.mkdtemp(prefix="fgb-s3-")
        harness.Config.tmp_root = self.tmp
        harness.Config.bin = os.path.abspath(args.bin) if args.bin else None
        self.meter = Meter(self.tmp, say, self.k)
        self.targets = []
        self.lua = os.path.join(self.tmp, "s3_presigned.lua")
        with open(self.lua, "w") as f:
            f.write(LUA)

    # -- servers ------------------------------------------------------

    def start(self):
        a = self.a
        n = a.objects
        size = a.upload_mb << 20
        t0 = time.monotonic()
        # what the uploads leave waits for radosgw's garbage collection:
        # room for all three
        self.store = rgw.Rgw(memstore_bytes=3 * size + (1 << 30),
                             log_requests=False).start()
        self.store.add_user("bench", ACCESS_KEY, SECRET)
        say("radosgw %s: up in %.1f s" % (self.store.endpoint,
                                         time.monotonic() - t0))
        self.meter.track("radosgw", self.store.procs["rgw"].pid)
        self.targets.append(Target("radosgw", self.store.port))

        self.nginx = S3Nginx("nginx-s3", a.workers, self.store.port).start()
        self.meter.track("nginx", self.nginx.proc.pid)
        self.targets.append(Target("nginx", self.nginx.port,
                                   self.nginx.proc.pid))

        self.gw = None
        if a.bin and has_s3_mode(a.bin):
            self.redis = harness.RedisServer().start()
            creds = private_file(os.path.join(self.tmp, "s3-credentials"),
                                 "%s %s bench\n" % (GW_KEY, GW_SECRET))
            up = private_file(os.path.join(self.tmp, "upstream-s3"),
                              "%s\n%s\n" % (ACCESS_KEY, SECRET))
            self.gw = harness.Gateway(
                self.redis.port, self.store.port,
                ["--upstream-api", "s3", "--s3-credentials", creds,
                 "--upstream-s3-credentials", up, "--s3-region", "us-east-1",
                 "--threads", str(a.workers)]).start()
            self.meter.track("fencegate", self.gw.proc.pid)
            self.meter.track("redis", self.redis.proc.pid)
            t = Target("fencegate", self.gw.port, self.gw.proc.pid,
                       fenced=True)
            self.targets.append(t)
            say("fencegate %s in S3 mode (%d threads)" % (t.endpoint, a.workers))
        elif a.bin:
            say("fencegate %s has no S3 mode (its --help names no "
                "upstream-api): its column is left out" % a.bin)

        # the bucket, and the objects the GETs read
        self.store_put(None, b"")
        body = b"x" * OBJ_BYTES
        for i in range(n):
            self.store_put("obj-%d" % i, body)

    def store_put(self, key, body):
        """PUT /BUCKET/KEY (KEY None: the bucket) straight to the store."""
        path = "/" + BUCKET if key is None else "/%s/%s" % (BUCKET, key)
        h = s3clients.sigv4_headers("PUT", "127.0.0.1:%d" % self.store.port,
                                    path, ACCESS_KEY, SECRET, body=body)
        c = http.client.HTTPConnection("127.0.0.1", self.store.port,
                                       timeout=30)
        try:
            c.request("PUT", path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            if r.status != 200:
                raise SetupError("PUT %s: %d %r" % (path, r.status,
                                                     data[:300]))
        finally:
            c.close()

    def acquire(self, t, name):
        ttl = int((self.a.duration + self.a.warmup) * 4 + 600) * 1000
        r = self.gw.request("POST", harness.LOCKS + name,
                            body={"ttl_ms": ttl})
        if r.status != 200:
            raise SetupError("acquire %s: %r" % (name, r))
        return r.json["sequencer"]

    # -- load ---------------------------------------------------------

    def presign(self, t, method, keys, name):
        fenced = t.fenced and method == "PUT"
        gw = t.name == "fencegate"
        urls = [(method, k, t.token_of(k) if fenced else DUMMY_TOKEN)
                for k in keys]
        a = dict(key=GW_KEY if gw else ACCESS_KEY,
                 secret=GW_SECRET if gw else SECRET,
                 endpoint=t.endpoint, bucket=BUCKET, urls=urls,
                 expires=min(7 * 86400, int(self.a.duration * 20 + 3600)))
        p = subprocess.run([s3clients.DEBIAN_PYTHON, "-I", "-c", PRESIGN],
                           input=json.dumps(a).encode(), capture_output=True,
                           timeout=120)
        if p.returncode != 0:
            raise SetupError("presigning with Debian's botocore failed:\n%s"
                             % p.stderr.decode()[-2000:])
        path = os.path.join(self.tmp, "%s-%s.urls" % (t.name, name))
        with open(path, "w") as f:
            for u in p.stdout.decode().split():
                s = urllib.parse.urlsplit(u)
                f.write("%s?%s\n" % (s.path, s.query))
        return path

    def wrk(self, t, label, method, urls):
        r = self.meter.wrk(label, t.name if t.pid else None, self.lua,
                           t.endpoint, [label, urls, method,
                                        self.k.WRK_THREADS, OBJ_BYTES])
        if not r:
            return None
        run = self.meter.runs[label]
        reqs = int(float(r["requests"]))
        out = {"rps": float(r["ok_rps"]), "errors": errs_of(r),
               "p50_ms": float(r["req_p50_ms"]),
               "p99_ms": float(r["req_p99_ms"])}
        for n in ("radosgw", t.name, "redis"):
            c = run.cpu_of(n) if n in run.cpu else None
            if c is not None and reqs:
                out["cpu_us_" + n] = c / reqs * 1e6
        if out["errors"]:
            say("  %s: %d answers >= 400 or socket errors of %d requests"
                % (label, out["errors"], reqs))
        return out

    def rss_of(self, pid):
        return sum(rss_kb(p) or 0 for p in kids(pid))

    def upload(self, t, path):
        """The multipart upload of `path` through t; (seconds, the
        gateway's RSS growth in KiB, radosgw's)."""
        token = DUMMY_TOKEN
        gw = t.name == "fencegate"
        key = "big-%s.bin" % t.name
        if t.fenced:
            token = self.acquire(t, "%s/%s" % (BUCKET, key))
        watch = {"gw": t.pid, "rgw": self.store.procs["rgw"].pid}
        watch = {n: p for n, p in watch.items() if p}
        base = {n: self.rss_of(p) for n, p in watch.items()}
        peak = dict(base)
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for n, p in watch.items():
                    peak[n] = max(peak[n], self.rss_of(p))
                stop.wait(0.02)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        a = dict(key=GW_KEY if gw else ACCESS_KEY,
                 secret=GW_SECRET if gw else SECRET, token=token,
                 endpoint=t.endpoint, bucket=BUCKET, object=key, path=path,
                 part=PART_BYTES)
        try:
            p = subprocess.run([s3clients.DEBIAN_PYTHON, "-I", "-c", UPLOAD,
                                json.dumps(a)], capture_output=True,
                               timeout=max(600, self.a.upload_mb))
        finally:
            stop.set()
            th.join()
        text = p.stdout.decode()
        if p.returncode != 0 or "RESULT" not in text:
            say("  upload through %s failed (exit %d): %s"
                % (t.name, p.returncode, p.stderr.decode()[-1500:]))
            return None
        secs = float(text.split("secs=")[1].split()[0])
        return (secs, peak.get("gw", 0) - base.get("gw", 0) if t.pid else None,
                peak["rgw"] - base["rgw"])

    def run(self):
        a = self.a
        keys = ["obj-%d" % i for i in range(a.objects)]
        big = os.path.join(self.tmp, "big.bin")
        with open(big, "wb") as f:
            # a sparse file: zeros read back, nothing written to the disk
            f.truncate(a.upload_mb << 20)
        for t in self.targets:
            say("\n%s (%s)" % (t.name, t.endpoint))
            if t.fenced:
                for k in keys:
                    t.tokens[k] = self.acquire(t, "%s/%s" % (BUCKET, k))
            get = self.wrk(t, t.name + "-get", "GET",
                           self.presign(t, "GET", keys, "get"))
            put = self.wrk(t, t.name + "-put", "PUT",
                           self.presign(t, "PUT", keys, "put"))
            t.figures["get"] = get
            t.figures["put"] = put
            for what, f in (("GET", get), ("PUT", put)):
                if f:
                    say("  %s 1 KiB: %.0f req/s, p50 %.2f ms, p99 %.2f ms; "
                        "CPU us/req: %s" % (
                            what, f["rps"], f["p50_ms"], f["p99_ms"],
                            ", ".join("%s %.0f" % (n[7:], v)
                                      for n, v in sorted(f.items())
                                      if n.startswith("cpu_us_"))))
            up = self.upload(t, big)
            t.figures["upload"] = up
            if up:
                say("  multipart upload of %d MiB in %d MiB parts: %.1f s, "
                    "RSS growth: gateway %s, radosgw %.0f MiB"
                    % (a.upload_mb, PART_BYTES >> 20, up[0],
                       "-" if up[1] is None else "%.1f MiB" % (up[1] / 1024),
                       up[2] / 1024))
        self.table()

    # -- the table ----------------------------------------------------

    def table(self):
        cols = self.targets
        nginx = next(t for t in cols if t.name == "nginx")

        def val(t, what, field):
            f = t.figures.get(what)
            if what == "upload":
                if not f:
                    return None
                return {"secs": f[0], "gw_rss": f[1], "rgw_rss": f[2]}[field]
            return None if not f else f.get(field)

        rows = [
            ("GET 1 KiB req/s", "get", "rps", "%.0f"),
            ("PUT 1 KiB req/s (fencegate fenced)", "put", "rps", "%.0f"),
            ("GET p99 ms", "get", "p99_ms", "%.2f"),
            ("PUT p99 ms", "put", "p99_ms", "%.2f"),
            ("gateway CPU us/GET", "get", "cpu_us_gw", "%.1f"),
            ("gateway CPU us/PUT", "put", "cpu_us_gw", "%.1f"),
            ("radosgw CPU us/GET", "get", "cpu_us_radosgw", "%.1f"),
            ("radosgw CPU us/PUT", "put", "cpu_us_radosgw", "%.1f"),
            ("redis CPU us/PUT", "put", "cpu_us_redis", "%.1f"),
            ("%d MiB multipart upload s" % self.a.upload_mb, "upload", "secs",
             "%.1f"),
            ("gateway RSS growth MiB, that upload", "upload", "gw_rss",
             "%.1f"),
        ]

        def cell(t, what, field):
            if field == "cpu_us_gw":
                if not t.pid:
                    return None
                field = "cpu_us_" + t.name
            v = val(t, what, field)
            if field == "gw_rss" and v is not None:
                v /= 1024
            return v

        head = ["figure"] + [t.name for t in cols] + \
            ["%s / nginx" % t.name for t in cols if t is not nginx]
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "---|" * len(head)]
        for label, what, field, fmt in rows:
            vals = [cell(t, what, field) for t in cols]
            nv = cell(nginx, what, field)
            out = [label] + ["-" if v is None else fmt % v for v in vals]
            for t, v in zip(cols, vals):
                if t is nginx:
                    continue
                out.append("-" if v is None or not nv else "%.2f" % (v / nv))
            lines.append("| " + " | ".join(out) + " |")
        say("\n" + "\n".join(lines))
        say("\n%d connections, %d wrk threads, %d s a run after %d s of "
            "warm-up; %d objects; nginx %d workers%s"
            % (self.k.CONNS, self.k.WRK_THREADS, self.k.DURATION,
               self.k.WARMUP, self.a.objects, self.a.workers,
               ", fencegate %d threads" % self.a.workers if self.gw else ""))

    def stop(self):
        harness.stop_all()
        if os.environ.get("KEEP_TMP"):
            say("kept %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "gateway",
                                                 "fencegate"),
                   help="fencegate binary (its column only when it has S3 "
                        "mode)")
    p.add_argument("--quick", action="store_true",
                   help="3 s a cell, 1 s warm-up, a 128 MiB upload")
    p.add_argument("--workers", type=int, default=2,
                   help="nginx workers and fencegate threads (2)")
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument("--duration", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--objects", type=int, default=64)
    p.add_argument("--upload-mb", type=int, default=None)
    a = p.parse_args()
    a.duration = a.duration or (3 if a.quick else 10)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 2)
    a.upload_mb = a.upload_mb or (128 if a.quick else 1024)
    if not shutil.which("wrk"):
        sys.exit("wrk not found (scripts/install-deps.sh --bench installs it)")
    b = Bench(a)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        b.start()
        b.run()
    except SetupError as e:
        say("setup failed: %s" % e)
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 1
    finally:
        b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
