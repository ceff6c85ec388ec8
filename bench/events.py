#!/usr/bin/env python3
"""events.py - what the event stream (contract v1.5) costs, in one run.

    bench/events.py [--bin build/gateway/fencegate] [--rounds 5]
                    [--duration 8] [--delays 400] [--readers 10000] [--quick]

Three figures, each against a real redis-server and real gateways (the
integration harness's), on free loopback ports:

  lock cycles   wrk -t2 -c32 with bench/fence_cycle.lua (POST acquire +
                DELETE release of a fresh name), against one gateway
                started with `--events yes` and one with `--events no` on
                the same Redis, rounds alternated (on, off, on, ...), the
                median cycles/s of each and their ratio (target >= 0.95);
                beside them Redis' CPU per cycle (INFO commandstats: every
                command's usec over the round, per cycle) and the
                gateway's, so that the difference is seen where it goes.
  event delay   one SSE reader on /_fence/v1/events (prefix of this run);
                one acquire at a time, each of a fresh lock, released once
                its event came: from the moment the acquire was sent to the
                moment the reader holds its `granted` event, p50 and p99
                (and the same from the acquire's answer).
  idle readers  N readers that open an SSE stream and read nothing more:
                the gateway's RSS (VmRSS) before they connect and once all
                of them have their stream's head, per reader; and the Redis
                commands the gateway sends in 5 s while they all wait
                (zero is the aim: the follower's one blocking read is the
                only call).

The figures mean something only on an otherwise idle machine: wrk, the
gateway and Redis share its cores. --quick shortens every part (2 rounds
of 3 s, 100 delays, 1000 readers): it only shows that everything runs.
"""

import argparse
import asyncio
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import harness  # noqa: E402

LOCKS = "/_fence/v1/locks/"


def say(msg=""):
    print(msg, flush=True)


class OneWriteUpstream(harness.UpstreamHandler):
    """200 to everything (the lock cycles never reach it)."""

    def _answer(self):
        harness.read_request_body(self)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                         b"Content-Type: text/plain\r\n\r\nok\n")

    do_PUT = do_GET = do_POST = do_DELETE = _answer


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def commandstats(redis):
    raw = redis.command("INFO", "commandstats").decode()
    calls = usec = 0
    per = {}
    for line in raw.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, rest = line[8:].partition(":")
        kv = dict(p.split("=") for p in rest.split(","))
        per[name] = int(kv["calls"])
        calls += int(kv["calls"])
        usec += int(kv["usec"])
    return calls, usec, per


def pct(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


# -- lock cycles ------------------------------------------------------------

def wrk_cycles(gw, prefix, duration, tmp):
    lua = os.path.join(HERE, "fence_cycle.lua")
    out = subprocess.run(
        ["wrk", "-t2", "-c32", "-d%ds" % duration, "--timeout", "10s",
         "-s", lua, "http://127.0.0.1:%d" % gw.port, "--", prefix, "4096"],
        capture_output=True, text=True, timeout=duration + 60)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            kv = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
            return kv
    with open(os.path.join(tmp, prefix + ".txt"), "w") as f:
        f.write(out.stdout + out.stderr)
    return None


def cycles(env, on, off, a, tmp):
    say("[lock cycles] wrk -t2 -c32, %d s a round, %d rounds each, "
        "alternated; cycle = POST acquire + DELETE release" %
        (a.duration, a.rounds))
    got = {"on": [], "off": []}
    rcpu = {"on": [], "off": []}
    gcpu = {"on": [], "off": []}
    for g, name in ((on, "on"), (off, "off")):   # warm-up
        wrk_cycles(g, "warm-%s-%s" % (name, os.urandom(2).hex()), 2, tmp)
    for r in range(a.rounds):
        for g, name in ((on, "on"), (off, "off")) if r % 2 == 0 else \
                ((off, "off"), (on, "on")):
            env.redis.command("CONFIG", "RESETSTAT")
            c0 = cpu_s(g.proc.pid)
            res = wrk_cycles(g, "c%d%s-%s" % (r, name, os.urandom(2).hex()),
                             a.duration, tmp)
            c1 = cpu_s(g.proc.pid)
            _, usec, _ = commandstats(env.redis)
            if not res or not float(res.get("cycles", 0)):
                say("  round %d events %s: no result" % (r + 1, name))
                continue
            n = float(res["cycles"])
            cps = n / float(res.get("secs", a.duration))
            got[name].append(cps)
            rcpu[name].append(usec / n)
            gcpu[name].append((c1 - c0) * 1e6 / n)
            say("  round %d events %-3s %8.0f cycles/s  redis %5.1f us/cycle"
                "  gateway %5.1f us/cycle  errors %s"
                % (r + 1, name, cps, usec / n, (c1 - c0) * 1e6 / n,
                   res.get("app_errors", "?")))
    if not got["on"] or not got["off"]:
        return None
    m = {k: statistics.median(v) for k, v in got.items()}
    return {"on": m["on"], "off": m["off"], "ratio": m["on"] / m["off"],
            "redis_on": statistics.median(rcpu["on"]),
            "redis_off": statistics.median(rcpu["off"]),
            "gw_on": statistics.median(gcpu["on"]),
            "gw_off": statistics.median(gcpu["off"])}


# -- event delay ------------------------------------------------------------

class SseReader(threading.Thread):
    """One SSE stream; hands each event's (arrival, json) to a queue."""

    def __init__(self, port, prefix):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(("GET /_fence/v1/events?prefix=%s HTTP/1.1\r\n"
                           "Host: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                           "\r\n" % prefix).encode())
        self.got = {}   # lock -> arrival (monotonic) of its granted event
        self.cv = threading.Condition()
        self.head = None
        self.stop = False

    def run(self):
        buf = b""
        while not self.stop:
            try:
                d = self.sock.recv(65536)
            except OSError:
                return
            if not d:
                return
            now = time.monotonic()
            buf += d
            if self.head is None:
                if b"\r\n\r\n" not in buf:
                    continue
                self.head, buf = buf.split(b"\r\n\r\n", 1)
            # chunked or not, the event lines are found by their prefix
            for line in buf.split(b"\n"):
                if line.startswith(b"data:"):
                    try:
                        e = json.loads(line[5:].strip())
                    except ValueError:
                        continue
                    if e.get("kind") == "granted":
                        with self.cv:
                            self.got.setdefault(e.get("lock"), now)
                            self.cv.notify_all()
            buf = buf[buf.rfind(b"\n") + 1:]

    def wait_for(self, lock, timeout):
        with self.cv:
            self.cv.wait_for(lambda: lock in self.got, timeout)
            return self.got.get(lock)


def delays(gw, n):
    prefix = "evd-%s/" % os.urandom(3).hex()
    rd = SseReader(gw.port, prefix)
    rd.start()
    c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    from_send, from_answer, lost = [], [], 0
    for i in range(n):
        name = "%sl%d" % (prefix, i)
        t0 = time.monotonic()
        c.request("POST", LOCKS + name, body=b'{"ttl_ms":30000}',
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read() or b"{}")
        t1 = time.monotonic()
        got = rd.wait_for(name, 5.0)
        if got is None:
            lost += 1
        else:
            from_send.append((got - t0) * 1000)
            from_answer.append((got - t1) * 1000)
        c.request("DELETE", LOCKS + name,
                  headers={"Fence-Lease": body.get("lease", "")})
        c.getresponse().read()
    rd.stop = True
    rd.sock.close()
    return from_send, from_answer, lost


# -- idle readers -----------------------------------------------------------

async def open_readers(port, n, prefix, last_id):
    sem = asyncio.Semaphore(200)
    conns = []
    # from the stream's end: a reader without Last-Event-ID reads the
    # whole retained history first, which is not what is measured here
    req = ("GET /_fence/v1/events?prefix=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Accept: text/event-stream\r\nLast-Event-ID: %s\r\n\r\n"
           % (prefix, last_id)).encode()

    async def one():
        async with sem:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(req)
            await w.drain()
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 60)
            conns.append((r, w, head))

    await asyncio.gather(*(one() for _ in range(n)))
    return conns


def idle_readers(env, gw, n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 1024:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 4096),
                                                    hard))
    newest = env.redis.command("XREVRANGE", "fg:{!ev}:s", "+", "-",
                               "COUNT", "1")
    last_id = newest[0][0].decode() if newest else "0-0"
    before = rss_kib(gw.proc.pid)
    loop = asyncio.new_event_loop()
    conns = loop.run_until_complete(open_readers(
        gw.port, n, "idle-%s/" % os.urandom(3).hex(), last_id))
    ok = sum(1 for _, _, h in conns if h.startswith(b"HTTP/1.1 200"))
    # every stream's first read (Redis, from its Last-Event-ID) is done
    # once the gateway has read no stream's history for a second (the
    # gateways' health probes and this INFO go on all the while)
    def history_reads():
        per = commandstats(env.redis)[2]
        return sum(per.get(k, 0) for k in ("xrange", "xrevrange",
                                           "xinfo|stream"))
    quiet = 0
    prev = history_reads()
    while quiet < 2:
        time.sleep(0.5)
        cur = history_reads()
        quiet = quiet + 1 if cur == prev else 0
        prev = cur
    after = rss_kib(gw.proc.pid)
    c0, _, p0 = commandstats(env.redis)
    time.sleep(5)
    c1, _, p1 = commandstats(env.redis)
    during = {k: p1.get(k, 0) - p0.get(k, 0) for k in p1
              if p1.get(k, 0) - p0.get(k, 0) > 0 and k != "info"}
    for _, w, _ in conns:
        w.close()
    loop.run_until_complete(asyncio.sleep(0.5))
    loop.close()
    return ok, before, after, during


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build",
                                                  "gateway", "fencegate"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--delays", type=int, default=400)
    ap.add_argument("--readers", type=int, default=10000)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.duration, a.delays, a.readers = 2, 3, 100, 1000
    harness.Config.bin = os.path.abspath(a.bin)
    # every reader is a descriptor of the gateway too (it inherits this)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (min(hard, max(soft, a.readers + 4096)), hard))
    env = harness.Env(gateway_flags=[
        ["--events", "yes", "--threads", "2",
         "--max-connections", str(a.readers + 1024)],
        ["--events", "no", "--threads", "2"]])
    env.upstream = harness.Upstream(env.upstream.port, OneWriteUpstream)
    tmp = harness.tmp_root()
    env.start()
    on, off = env.gateways
    rows = []
    try:
        c = cycles(env, on, off, a, tmp)
        if c:
            rows.append(("lock cycles/s", "%.0f" % c["on"], "%.0f" % c["off"],
                         "%.2f" % c["ratio"], ">= 0.95",
                         "met" if c["ratio"] >= 0.95 else "missed"))
            rows.append(("Redis CPU us per cycle", "%.1f" % c["redis_on"],
                         "%.1f" % c["redis_off"],
                         "%.2f" % (c["redis_on"] / c["redis_off"]), "", ""))
            rows.append(("gateway CPU us per cycle", "%.1f" % c["gw_on"],
                         "%.1f" % c["gw_off"],
                         "%.2f" % (c["gw_on"] / c["gw_off"]), "", ""))
        say("\n[event delay] one SSE reader, %d acquires one at a time, "
            "each of a fresh lock" % a.delays)
        fs, fa, lost = delays(on, a.delays)
        say("  from the acquire sent: p50 %.2f ms, p99 %.2f ms; from its "
            "answer: p50 %.2f ms, p99 %.2f ms; %d of %d never came within "
            "5 s" % (pct(fs, 50), pct(fs, 99), pct(fa, 50), pct(fa, 99),
                     lost, a.delays))
        rows.append(("event delay p50 ms (acquire sent to SSE reader)",
                     "%.2f" % pct(fs, 50), "-", "", "", ""))
        rows.append(("event delay p99 ms", "%.2f" % pct(fs, 99), "-", "",
                     "", ""))
        say("\n[idle readers] %d SSE streams opened, then left waiting"
            % a.readers)
        ok, before, after, during = idle_readers(env, on, a.readers)
        per = (after - before) / max(ok, 1)
        say("  %d of %d streams answered 200; gateway RSS %.1f MiB before, "
            "%.1f MiB with them: %.1f KiB per reader; Redis commands in 5 s "
            "of waiting: %s" % (ok, a.readers, before / 1024.0,
                                after / 1024.0, per,
                                json.dumps(during, sort_keys=True)))
        rows.append(("gateway RSS KiB per idle SSE reader", "%.1f" % per,
                     "-", "", "", ""))
        rows.append(("Redis commands in 5 s with %d readers idle" % ok,
                     str(sum(during.values())), "-", "", "", ""))
    finally:
        env.stop()
    say("\n| figure | events on | events off | on / off | target | |")
    say("|---|---|---|---|---|---|")
    for r in rows:
        say("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
