#!/usr/bin/env python3
"""fencegate blocked-waiter benchmarks (driven by bench/run.py).

  waiters  N connections, each with one blocking acquire queued behind a
           lock the script holds; once fencegate's inspect shows every
           waiter queued, read fencegate's VmRSS from /proc/<pid>/status.
  handoff  W waiters queued on one lock; repeatedly release the current
           holder's lease and time DELETE sent -> next waiter's 200 received.

Raw HTTP/1.1 over asyncio Protocols (one keep-alive connection per client).
Prints "KEY=VALUE" lines; run.py picks up the ones starting with RESULT_.
"""
import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections import deque

API = "/_fence/v1/locks/"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class HTTPError(Exception):
    pass


class Conn(asyncio.Protocol):
    """One HTTP/1.1 keep-alive client connection; requests may be queued
    (pipelined) but the benches send one at a time per connection.
    Every completed response is (status, headers, body, t_arrival), where
    t_arrival is perf_counter() when the bytes completing it were read."""

    def __init__(self, host):
        self.host = host
        self.transport = None
        self.buf = bytearray()
        self.pending = deque()
        self.closed = False
        self.on_response = None  # optional callback(resp) before the future

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True
        while self.pending:
            f = self.pending.popleft()
            if not f.done():
                f.set_exception(HTTPError("connection closed: %r" % (exc,)))

    def data_received(self, data):
        t = time.perf_counter()
        self.buf += data
        while self.pending:
            r = self._parse()
            if r is None:
                break
            f = self.pending.popleft()
            resp = r + (t,)
            if not f.done():
                f.set_result(resp)

    def _parse(self):
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(buf[:end]).decode("latin-1").split("\r\n")
        parts = head[0].split(" ", 2)
        status = int(parts[1])
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        pos = end + 4
        if "content-length" in headers:
            n = int(headers["content-length"])
            if len(buf) < pos + n:
                return None
            body = bytes(buf[pos:pos + n])
            del buf[:pos + n]
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = bytearray()
            p = pos
            while True:
                e = buf.find(b"\r\n", p)
                if e < 0:
                    return None
                size = int(bytes(buf[p:e]).split(b";")[0], 16)
                if size == 0:
                    e2 = buf.find(b"\r\n\r\n", e)  # end of (optional) trailers
                    if e2 < 0:
                        return None
                    del buf[:e2 + 4]
                    body = bytes(body)
                    break
                if len(buf) < e + 2 + size + 2:
                    return None
                body += buf[e + 2:e + 2 + size]
                p = e + 2 + size + 2
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
            del buf[:pos]
        else:
            return None  # read-until-close bodies are not expected here
        return (status, headers, body)

    def send(self, method, path, headers=None, body=None, ctype="application/json"):
        if self.closed or self.transport is None:
            raise HTTPError("connection closed")
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % self.host]
        if headers:
            for k, v in headers.items():
                lines.append("%s: %s" % (k, v))
        data = b""
        if body is not None:
            data = body.encode() if isinstance(body, str) else body
            lines.append("Content-Type: %s" % ctype)
            lines.append("Content-Length: %d" % len(data))
        elif method in ("POST", "PUT"):
            lines.append("Content-Length: 0")
        f = asyncio.get_running_loop().create_future()
        self.pending.append(f)
        t0 = time.perf_counter()
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        return f, t0

    async def req(self, method, path, headers=None, body=None, timeout=30, ctype="application/json"):
        f, _ = self.send(method, path, headers, body, ctype)
        return await asyncio.wait_for(f, timeout)

    def close(self):
        if self.transport is not None:
            self.transport.abort()


async def connect(host, port):
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(lambda: Conn("%s:%d" % (host, port)), host, port)
    return proto


def rss_kb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:", "Threads:")):
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0])
    try:
        out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        out["fds"] = -1
    return out


def waiter_count(doc):
    w = doc.get("waiters")
    if isinstance(w, list):
        return len(w)
    if isinstance(w, dict):
        return int(w.get("count", len(w)))
    return int(w or 0)


async def inspect(ctl, name):
    st, _, body, _ = await ctl.req("GET", API + name)
    if st != 200:
        raise HTTPError("GET %s%s -> %d %s" % (API, name, st, body[:200]))
    return json.loads(body)


async def acquire_now(ctl, name, ttl_ms):
    st, _, body, _ = await ctl.req("POST", API + name, body=json.dumps({"ttl_ms": ttl_ms}))
    if st != 200:
        raise HTTPError("POST %s%s -> %d %s" % (API, name, st, body[:300]))
    return json.loads(body)


async def release(ctl, name, lease):
    st, _, body, _ = await ctl.req("DELETE", API + name, headers={"Fence-Lease": lease})
    return st, body


async def open_many(host, port, n, parallel, on_conn):
    """Opens n connections, at most `parallel` connects in flight."""
    sem = asyncio.Semaphore(parallel)
    conns = [None] * n
    errors = []

    async def one(i):
        async with sem:
            for attempt in range(5):
                try:
                    c = await asyncio.wait_for(connect(host, port), 10)
                    conns[i] = c
                    on_conn(i, c)
                    return
                except (OSError, asyncio.TimeoutError) as e:
                    err = e
                    await asyncio.sleep(0.2 * (attempt + 1))
            errors.append("%d: %r" % (i, err))

    await asyncio.gather(*(one(i) for i in range(n)))
    return conns, errors


async def wait_queued(ctl, names, want_each, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        counts = [waiter_count(await inspect(ctl, n)) for n in names]
        if counts != last:
            log("  queued: %d / %d" % (sum(counts), want_each * len(names)))
            last = counts
        if all(c >= want_each for c in counts):
            return counts, True
        if time.monotonic() > deadline:
            return counts, False
        await asyncio.sleep(0.25)


# ---------------------------------------------------------------- waiters

async def bench_waiters(a):
    host, port = a.host, a.port
    names = ["%s-w%d" % (a.prefix, i) for i in range(a.locks)]
    per = a.n // a.locks
    total = per * a.locks
    ctl = await connect(host, port)
    holders = {}
    for n in names:
        holders[n] = (await acquire_now(ctl, n, a.hold_ttl_ms))["lease"]
    await asyncio.sleep(0.2)
    base = rss_kb(a.pid)
    log("  baseline fencegate: VmRSS %d kB, %d fds" % (base["VmRSS"], base["fds"]))

    early = []  # responses to blocking acquires while the locks are held
    body = json.dumps({"wait_ms": a.wait_ms, "ttl_ms": 30000})

    def on_conn(i, c):
        f, _ = c.send("POST", API + names[i % a.locks], body=body)
        f.add_done_callback(lambda f, i=i: early.append((i, f.exception() or f.result()[0],
                                                         None if f.exception() else f.result()[2][:200])))

    t0 = time.monotonic()
    conns, cerr = await open_many(host, port, total, a.parallel, on_conn)
    t_open = time.monotonic() - t0
    log("  opened %d connections in %.1fs (%d connect failures)" % (total - len(cerr), t_open, len(cerr)))
    if cerr:
        log("  first connect failure: %s" % cerr[0])
    counts, ok = await wait_queued(ctl, names, per, a.queue_timeout)
    t_q = time.monotonic() - t0
    await asyncio.sleep(0.5)
    m = rss_kb(a.pid)
    log("  all queued=%s after %.1fs; fencegate VmRSS %d kB (peak %d), threads %d, fds %d"
        % (ok, t_q, m["VmRSS"], m["VmHWM"], m["Threads"], m["fds"]))
    if early:
        log("  %d blocking acquires answered while the lock was held; first: %r" % (len(early), early[0]))
    print("RESULT_WAITERS_TARGET=%d" % total)
    print("RESULT_WAITERS_QUEUED=%d" % sum(counts))
    print("RESULT_WAITERS_ALLQUEUED=%d" % (1 if ok else 0))
    print("RESULT_WAITERS_CONNFAIL=%d" % len(cerr))
    print("RESULT_WAITERS_EARLY=%d" % len(early))
    print("RESULT_WAITERS_RSS_KB=%d" % m["VmRSS"])
    print("RESULT_WAITERS_HWM_KB=%d" % m["VmHWM"])
    print("RESULT_WAITERS_BASE_RSS_KB=%d" % base["VmRSS"])
    print("RESULT_WAITERS_FDS=%d" % m["fds"])
    print("RESULT_WAITERS_QUEUE_SECS=%.1f" % t_q)
    sys.stdout.flush()

    # Clean-up, and a hygiene check: waiters that hang up must leave the queue.
    for c in conns:
        if c is not None:
            c.close()
    t1 = time.monotonic()
    left = None
    while time.monotonic() - t1 < a.drain_timeout:
        await asyncio.sleep(0.5)
        left = 0
        for n in names:
            left += waiter_count(await inspect(ctl, n))
        if left == 0:
            break
    log("  after closing all waiter connections: %s waiters still listed (%.1fs)"
        % (left, time.monotonic() - t1))
    print("RESULT_WAITERS_LEFT_AFTER_CLOSE=%s" % left)
    bad = []
    for n in names:
        st, b = await release(ctl, n, holders[n])
        if st != 204:
            bad.append("DELETE %s -> %d %s" % (n, st, b[:200]))
    if bad:
        log("  releasing the holders: %s" % bad[0])
    print("RESULT_WAITERS_RELEASE_ERRORS=%d" % len(bad))
    ctl.close()


# ---------------------------------------------------------------- handoff

def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    # nearest rank
    k = max(0, min(len(sorted_vals) - 1, math.ceil(p / 100.0 * len(sorted_vals)) - 1))
    return sorted_vals[k]


async def bench_handoff(a):
    host, port = a.host, a.port
    name = "%s-h" % a.prefix
    ctl = await connect(host, port)
    first = await acquire_now(ctl, name, a.hold_ttl_ms)
    cur = first["lease"]
    grants = asyncio.Queue()
    stats = {"nonok": 0, "nonok_sample": None, "dropped": 0}
    body = json.dumps({"wait_ms": a.wait_ms, "ttl_ms": 30000})

    def arm(i, c):
        # one blocking acquire; when it answers, hand the grant to the
        # measuring loop and queue again at the tail right away
        try:
            f, _ = c.send("POST", API + name, body=body)
        except HTTPError:
            stats["dropped"] += 1
            return
        f.add_done_callback(lambda f, i=i, c=c: done(i, c, f))

    def done(i, c, f):
        if f.cancelled() or f.exception() is not None:
            stats["dropped"] += 1
            return
        st, _, b, t = f.result()
        if st == 200:
            grants.put_nowait((json.loads(b)["lease"], t, i))
        else:
            stats["nonok"] += 1
            if stats["nonok_sample"] is None:
                stats["nonok_sample"] = "%d %s" % (st, b[:200])
        arm(i, c)

    conns, cerr = await open_many(host, port, a.n, a.parallel, arm)
    counts, ok = await wait_queued(ctl, [name], a.n - len(cerr), a.queue_timeout)
    if not ok:
        log("  only %d of %d waiters queued" % (counts[0], a.n))
    if not grants.empty():
        log("  %d grants arrived before any release" % grants.qsize())
    lat = []
    errors = 0
    err_sample = None
    total = a.warmup + a.rounds
    for r in range(total):
        f, t0 = ctl.send("DELETE", API + name, headers={"Fence-Lease": cur})
        try:
            lease, t1, _ = await asyncio.wait_for(grants.get(), a.grant_timeout)
        except asyncio.TimeoutError:
            errors += 1
            st, _, b, _ = await asyncio.wait_for(f, 30)
            err_sample = "round %d: DELETE -> %d %s; no waiter granted within %.0fs" % (
                r, st, b[:200], a.grant_timeout)
            log("  " + err_sample)
            break
        st, _, b, _ = await asyncio.wait_for(f, 30)
        if st != 204:
            errors += 1
            if err_sample is None:
                err_sample = "round %d: DELETE -> %d %s" % (r, st, b[:200])
        if r >= a.warmup:
            lat.append((t1 - t0) * 1000.0)
        cur = lease
    lat.sort()
    q = waiter_count(await inspect(ctl, name))
    if lat:
        log("  %d handoffs: p50 %.3f ms  p90 %.3f  p99 %.3f  max %.3f  (waiters still queued: %d)"
            % (len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[-1], q))
    if stats["nonok"]:
        log("  %d blocking acquires answered non-200; first: %s" % (stats["nonok"], stats["nonok_sample"]))
    print("RESULT_HANDOFF_WAITERS=%d" % counts[0])
    print("RESULT_HANDOFF_N=%d" % len(lat))
    print("RESULT_HANDOFF_P50_MS=%.3f" % pct(lat, 50))
    print("RESULT_HANDOFF_P90_MS=%.3f" % pct(lat, 90))
    print("RESULT_HANDOFF_P99_MS=%.3f" % pct(lat, 99))
    print("RESULT_HANDOFF_MAX_MS=%.3f" % (lat[-1] if lat else float("nan")))
    print("RESULT_HANDOFF_ERRORS=%d" % (errors + stats["nonok"] + len(cerr)))
    if err_sample:
        print("RESULT_HANDOFF_ERRSAMPLE=%s" % err_sample.replace("\n", " "))
    sys.stdout.flush()
    for c in conns:
        if c is not None:
            c.close()
    await asyncio.sleep(0.5)
    await release(ctl, name, cur)
    ctl.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["waiters", "handoff"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, help="fencegate's pid (waiters: RSS)")
    p.add_argument("--prefix", default="fgbench")
    p.add_argument("--n", type=int, default=10000, help="waiter connections")
    p.add_argument("--locks", type=int, default=10, help="waiters: locks to spread over")
    p.add_argument("--wait-ms", type=int, default=120000)
    p.add_argument("--hold-ttl-ms", type=int, default=600000, help="ttl of the script's own holds")
    p.add_argument("--parallel", type=int, default=256, help="connects in flight")
    p.add_argument("--queue-timeout", type=float, default=90)
    p.add_argument("--drain-timeout", type=float, default=15)
    p.add_argument("--rounds", type=int, default=500)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--grant-timeout", type=float, default=5)
    a = p.parse_args()
    if a.mode == "waiters" and not a.pid:
        p.error("waiters needs --pid")
    try:
        asyncio.run(bench_waiters(a) if a.mode == "waiters" else bench_handoff(a))
    except Exception as e:  # report, never hang the driver
        print("RESULT_%s_FATAL=%s" % (a.mode.upper(), repr(e).replace("\n", " ")))
        log("  %s failed: %r" % (a.mode, e))
        sys.exit(1)


if __name__ == "__main__":
    main()
