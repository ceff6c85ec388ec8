#!/usr/bin/env python3
"""script_cost.py - Redis CPU per lock script call, through a real gateway.

    python3 bench/script_cost.py --bin build/gateway/fencegate [-n 20000] [--rounds 5]
                                 [--clients K] [--ttl-ms MS] [--events yes|no]

Starts a private redis-server, a stand-in upstream and one fencegate (the
integration harness's; Redis pinned to one core, the rest to the others, so
that preemption does not count as Redis time), then per round runs three
phases on fresh statistics (CONFIG RESETSTAT), twice:

  acquire  n acquires of distinct free locks
  release  n releases of those grants
  put      n fenced PUTs, each acquired beforehand (outside the phase):
           one admit, then one finish once the write is over

The first pass reads INFO commandstats only: usec_per_call of the script
calls (EVALSHA or FCALL) per phase, "put" being admit and finish together.
The second pass also logs every command (slowlog-log-slower-than 0; Redis 7
logs the commands a script runs, before the script), which splits "put"
into admit and finish and counts the Redis commands each script ran; the
log costs Redis a little itself. Prints every round, then medians over the
rounds, and last the two figures the targets are about: per lock cycle
(acquire + release) and per fenced PUT (admit + finish), from the first
pass, with the logged pass's split beside them. Measures Redis only, never
the gateway or the upstream; the machine should be otherwise idle.

By default one connection sends one call at a time, so Redis waits between
calls and each call starts with cold caches: the dearest case. --clients K
spreads each phase over K connections sending at once, as a loaded Redis
sees them; a call then costs less (warm caches, several calls per wake-up).
Report which one a figure is.

Leases are 10 minutes long by default. A release with little of its
lease left (at most an eighth of the gateway's idle-forget-ms, 75 s by
default) runs one command fewer; --ttl-ms 30000 (bench/run.py's lock
cycles) measures that case.
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import harness  # noqa: E402

LOCKS = "/_fence/v1/locks/"


class OneWriteUpstream(harness.UpstreamHandler):
    """200 to everything, the response in one write (a head and a body in
    two small writes would wait for a delayed ACK on every request)."""

    def _answer(self):
        harness.read_request_body(self)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                         b"Content-Type: text/plain\r\n\r\nok\n")

    do_PUT = do_GET = do_POST = do_DELETE = _answer

# EVALSHA <sha> 4 <4 keys> <args>: the script by its argument count.
EVAL_ARITY = {3 + 4 + 16: "acquire", 3 + 4 + 5: "renew", 3 + 4 + 4: "release",
              3 + 4 + 6: "admit", 3 + 4 + 2: "inspect"}


def script_of(args):
    cmd = args[0].decode().lower()
    if cmd == "fcall":   # fg_<script>_<version>
        return args[1].decode()[3:].rsplit("_", 1)[0]
    if cmd in ("eval", "function"):
        return "(load)"   # a script's first run, or loading the library
    if cmd == "evalsha":
        if len(args) == 3 + 4 + 3:   # check (a token) or finish (a write id)
            return "check" if args[-1].isdigit() else "finish"
        return EVAL_ARITY.get(len(args), "argc%d" % len(args))
    return None


# What the scripts call (anything else in the log is a top-level command).
SCRIPT_COMMANDS = {"time", "hmget", "hget", "hgetall", "hset", "hdel",
                   "hincrby", "pexpire", "zadd", "zrem", "zrange", "zscore",
                   "zremrangebyscore", "publish", "xadd"}


class Conn:
    """One keep-alive HTTP connection to the gateway."""

    def __init__(self, port):
        self.port = port
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def req(self, method, path, body=None, headers=None):
        hdrs = dict(headers or {})
        data = None
        if isinstance(body, bytes):
            data = body
        elif body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.c.request(method, path, body=data, headers=hdrs)
                r = self.c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                if attempt:
                    raise
                self.c.close()
                self.c = http.client.HTTPConnection("127.0.0.1", self.port,
                                                    timeout=10)


def info_commandstats(redis):
    raw = redis.command("INFO", "commandstats").decode()
    out = {}
    for line in raw.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, rest = line[8:].partition(":")
        kv = dict(p.split("=") for p in rest.split(","))
        out[name] = (int(kv["calls"]), int(kv["usec"]))
    return out


class Phase:
    """Redis' log of one phase. Redis 7 logs the commands a script runs
    before the script itself, so each script call is credited with the
    commands logged since the previous top-level command."""

    def __init__(self, redis, logged):
        self.redis = redis
        self.logged = logged
        self.per = {}     # script -> [calls, usec, inner commands]
        self.inner = {}   # script -> {command: calls}
        redis.command("CONFIG", "SET", "slowlog-log-slower-than",
                      "0" if logged else "-1")
        redis.command("CONFIG", "RESETSTAT")
        redis.command("SLOWLOG", "RESET")

    def drain(self):
        if not self.logged:
            return
        log = self.redis.command("SLOWLOG", "GET", "-1")
        self.redis.command("SLOWLOG", "RESET")
        pending = []
        for entry in reversed(log):
            args = entry[3]
            s = script_of(args)
            if s is None:
                c = args[0].decode().lower()
                if c in SCRIPT_COMMANDS:
                    pending.append(c)
                else:
                    pending = []
                continue
            p = self.per.setdefault(s, [0, 0, 0])
            p[0] += 1
            p[1] += entry[2]
            p[2] += len(pending)
            d = self.inner.setdefault(s, {})
            for c in pending:
                d[c] = d.get(c, 0) + 1
            pending = []

    def calls(self):
        stats = info_commandstats(self.redis)
        self.cmdstat = {k: stats[k] for k in ("evalsha", "fcall", "fcall_ro")
                        if k in stats}
        return sum(c for c, _ in self.cmdstat.values())

    def finish(self, expect):
        deadline = time.monotonic() + 10
        while self.calls() < expect and time.monotonic() < deadline:
            time.sleep(0.05)
        self.drain()
        return self


DRAIN_EVERY = 500

# The targets. A lock cycle is the acquire phase's call plus the
# release phase's; a fenced PUT is the put phase's two calls (admit and
# finish), its statistics being their mean.
TARGETS = (("per lock cycle (acquire + release)", ("acquire", "release"), 35),
           ("per fenced PUT (admit + finish)", ("admit", "finish"), 30))
PHASE_OF = {"acquire": "acquire", "release": "release", "admit": "put",
            "finish": "put"}
PER_PHASE = {"acquire": 1, "release": 1, "put": 2}


def each(port, n, clients, fn, ph):
    """fn(conn, i) for i in range(n): in order over one connection, or
    spread over `clients` connections at once (Redis then runs calls back
    to back, as under load; the log is drained once at the end)."""
    if clients <= 1:
        conn = Conn(port)
        for i in range(n):
            fn(conn, i)
            if ph is not None and i % DRAIN_EVERY == 0:
                ph.drain()
        return
    errors = []

    def worker(k):
        try:
            conn = Conn(port)
            for i in range(k, n, clients):
                fn(conn, i)
        except BaseException as e:   # reported by the caller's thread
            errors.append(e)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def run_round(env, n, tag, logged, clients, ttl_ms):
    redis, gw = env.redis, env.gw
    results = {}
    leases = [None] * n

    def acquire(conn, i):
        st, body = conn.req("POST", LOCKS + "m%s/a%d" % (tag, i),
                            {"ttl_ms": ttl_ms})
        if st != 200:
            raise SystemExit("acquire: %d %r" % (st, body))
        leases[i] = json.loads(body)["lease"]

    def release(conn, i):
        st, body = conn.req("DELETE", LOCKS + "m%s/a%d" % (tag, i),
                            headers={"Fence-Lease": leases[i]})
        if st != 204:
            raise SystemExit("release: %d %r" % (st, body))

    seqs = [None] * n

    def grant(conn, i):
        st, body = conn.req("POST", LOCKS + "m%s/p%d" % (tag, i),
                            {"ttl_ms": ttl_ms})
        if st != 200:
            raise SystemExit("acquire: %d %r" % (st, body))
        seqs[i] = json.loads(body)["sequencer"]

    def put(conn, i):
        st, body = conn.req("PUT", "/m%s/p%d" % (tag, i), b"x",
                            headers={"Fencing-Token": seqs[i]})
        if st != 200:
            raise SystemExit("put: %d %r" % (st, body))

    ph = Phase(redis, logged)
    each(gw.port, n, clients, acquire, ph)
    results["acquire"] = ph.finish(n)
    ph = Phase(redis, logged)
    each(gw.port, n, clients, release, ph)
    results["release"] = ph.finish(n)
    each(gw.port, n, clients, grant, None)
    ph = Phase(redis, logged)
    each(gw.port, n, clients, put, ph)
    results["put"] = ph.finish(2 * n)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=1,
                    help="connections sending at once (1: one call at a "
                    "time, Redis idle between calls)")
    ap.add_argument("--ttl-ms", type=int, default=600000,
                    help="the leases' ttl (a lease released with at most "
                    "an eighth of the gateway's idle-forget-ms left "
                    "releases with one command fewer)")
    ap.add_argument("--events", choices=("yes", "no"), default="yes",
                    help="the gateway's events setting (yes, the "
                    "default: the lock scripts append to the event "
                    "stream)")
    a = ap.parse_args()
    harness.Config.bin = os.path.abspath(a.bin)
    env = harness.Env(("--events", a.events))
    env.upstream = harness.Upstream(env.upstream.port, OneWriteUpstream)
    env.start()
    # Redis alone on the last core, the rest elsewhere: a script's duration
    # is wall time inside Redis, so preemption would count as CPU.
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(env.redis.proc.pid, {cpus[-1]})
        for pid in (os.getpid(), env.gw.proc.pid):
            os.sched_setaffinity(pid, set(cpus[:-1]))
    try:
        # every entry of a phase fits in the log when it is drained only
        # at the end (--clients above 1): a fenced PUT logs about nine
        # (admit and its five commands, finish and its two), and the
        # phase's INFO polls add some
        env.redis.command("CONFIG", "SET", "slowlog-max-len",
                          str(max(100000, 12 * a.n)))
        print("%d connection(s) sending at once" % a.clients)
        us, cmds, tot = {}, {}, {}
        for r in range(a.rounds):
            print("round %d" % (r + 1))
            for logged in (False, True):
                res = run_round(env, a.n, "%d%d-%s" % (r, logged,
                                                      os.urandom(2).hex()),
                                logged, a.clients, a.ttl_ms)
                for name, ph in res.items():
                    for k, (c, u) in ph.cmdstat.items():
                        if not logged:
                            tot.setdefault(name, []).append(u / c)
                        print("  %-8s %s: %d calls %.2f us/call%s"
                              % (name, k, c, u / c,
                                 " (logged)" if logged else ""))
                    for s, (c, u, k) in sorted(ph.per.items()):
                        if s == "(load)":
                            continue
                        us.setdefault(s, []).append(u / c)
                        cmds.setdefault(s, []).append(k / c)
                        print("  %-8s %-8s %6d calls %7.2f us/call, %5.2f "
                              "commands/call: %s"
                              % (name, s, c, u / c, k / c,
                                 " ".join("%s=%.2f" % (x, v / c) for x, v in
                                          sorted(ph.inner[s].items()))))
        print("median over %d rounds" % a.rounds)
        print("  us of Redis CPU per script call, statistics only "
              "(put: admit and finish together):")
        for name, v in tot.items():
            print("    %-8s %7.2f   (%s)" % (name, statistics.median(v),
                                             " ".join("%.2f" % x for x in v)))
        print("  per script, every command logged (the log adds a little):")
        for s, v in sorted(us.items()):
            print("    %-8s %7.2f us  %5.2f commands   (us: %s)"
                  % (s, statistics.median(v), statistics.median(cmds[s]),
                     " ".join("%.2f" % x for x in v)))
        print("  what the targets are about (us of Redis CPU):")
        med = {k: statistics.median(v) for k, v in tot.items()}
        logged = {k: statistics.median(v) for k, v in us.items()}
        for label, parts, target in TARGETS:
            stat = sum(med.get(p, 0) * PER_PHASE[p] for p in
                       {PHASE_OF[x] for x in parts})
            split = " + ".join("%s %.2f" % (x, logged.get(x, 0))
                               for x in parts)
            print("    %-36s %7.2f   target <= %d   (logged: %s)"
                  % (label, stat, target, split))
    finally:
        env.stop()


if __name__ == "__main__":
    main()
