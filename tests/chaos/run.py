#!/usr/bin/env python3
"""run.py - the seeded fault-injection ("chaos") run: the hunter for bugs
in what a lease means, under Redis and gateway faults.

    python3 tests/chaos/run.py --bin PATH [--seed N] [--seconds S]
                               [--clients N] [--keep-tmp]

It starts one redis-server, one nginx WebDAV store and two fencegates on
that Redis (tests/integration/harness.py and storage.py, imported), then
for S seconds runs several client processes (client.py) that acquire,
renew longer and shorter, re-enter, release and write through both
gateways on a few contended locks, while this process injects faults on a
seeded schedule: a busy script stalling Redis past the gateways' Redis
timeout, CLIENT PAUSE (WRITE and ALL), CLIENT KILL of the gateways' normal
and Pub/Sub connections, Redis SIGKILLed and restarted empty, a gateway
SIGSTOPped for longer than the clients' TTLs. Clients also vanish mid-body.

Then, from nginx's access log (which logs a request when nginx finished
it, with $msec, the X-Test-Id of the write and the token the gateway
forwarded) and the clients' records, it checks per lock (each lock guards
one object):

  order      the writes nginx applied are in non-decreasing token order,
             and each carries the token of the grant it was sent under;
  late       no write was applied after its grant's lease ended (by expiry,
             a shortening renewal or re-entry, or the last release) plus
             the fence margin plus a measurement slack;
  acked      every write answered 2xx was applied;
  refused    no write refused before its body was asked for, and no write
             whose client vanished mid-body (or never sent its body), was
             applied;
  content    the stored object is the body of the last write applied;
  orphans    once the faults have stopped and every client has released
             what it holds (or given it up), the lock becomes free within
             a second of what the abandoned grants' TTLs explain: a grant
             nobody received (an acquire answered 503 whose grant happened
             anyway) must not hold it for its TTL;

plus that both gateways survived (no crash, no sanitizer report) and that
every client finished. Each check prints "ok <check> (<counts>)" or
"FAIL <check>: <the history that shows it>"; the last line is exactly
"N passed, N failed" and the exit status is 1 on any failure, a crash of
this runner included (it then still prints the count line).

The seed (printed first; default from the clock) fixes the fault schedule
and every client's choices, so `--seed N` replays the same workload and
faults; timing on a loaded machine still varies. A hard overall bound
(--seconds plus about 90 s) kills everything this run started.

Invariants: every process it starts is registered with harness.spawn and
stopped by PID at the end whatever happens; a stopped gateway is always
continued; no check waits for a failure to go away (no retry loops); every
time bound has its slack stated where it is set.
"""

import argparse
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import storage  # noqa: E402
from client import body_of  # noqa: E402

# --- gateway settings --------------------------------------------------------

REDIS_TIMEOUT_MS = 300      # short, so that stalls and pauses exceed it
FENCE_MARGIN_MS = 250       # fencegate's default, passed explicitly
WAITER_LIVENESS_MS = 2000   # the least sensible value: a stopped gateway's
                            # waiters are skipped soon after it is stopped

# --- checker slack (every bound below states why it is what it is) -----------

# "late": a write is late when nginx logged it after
#     lease_end_upper + margin + LATE_SLACK,
# where lease_end_upper is the *latest* the lease can have ended by what the
# client was told: the time the client *received* the answer of the grant's
# last successful acquire/renewal/re-entry plus its ttl_ms (the grant or
# renewal happened in Redis before the answer arrived; shortening ones
# included), or, if earlier, the time the answer arrived of the release
# that took its last hold or of a call answered 410 (the lease had ended).
# A grant with a renewal or re-entry that got no definite answer (503, no
# answer) has no known end, and its writes are not judged. fencegate promises
# a write finishes by the lease's end (send deadline = end - margin, then the
# answer is awaited for at most the margin), so the margin allowed on top is
# a whole extra margin for nginx to apply a body it got in time, even on a
# loaded machine. nginx's $msec is the wall clock with a millisecond
# resolution, read from nginx's cached time (never later than the real
# time); clients read the same wall clock. LATE_SLACK covers the rounding
# and the time between nginx applying the PUT and logging it.
LATE_SLACK_S = 0.1

# "orphans": the contract (v1.1.1) gives a grant made for an answer that was
# lost one second, after Redis answers again, to be given back. The check
# starts counting when the faults have stopped and every client has exited,
# so that second has usually passed already; ORPHAN_SLACK covers the
# polling interval and the inspect round trips on a loaded 2-core machine.
ORPHAN_GRACE_S = 1.0
ORPHAN_SLACK_S = 0.5
ORPHAN_POLL_S = 0.05
# An abandoned grant whose lease the clients cannot bound closer than this
# after the end leaves its lock unjudged rather than make the run wait.
ORPHAN_LONGEST_WAIT_S = 10.0

# Faults after which a release or a shortening reaches a running write late
# by design (docs/safety.md 6.6: the gateway learns of it by a Pub/Sub
# message; a stopped gateway, a killed subscription, a restarted Redis or a
# Redis busy in a script delivers it late; the write then ends at its own
# deadline). A late write that only a release or a shortening made late, and
# that such a fault overlapped, is reported as excused, not as a failure.
MESSAGE_DELAYING = ("stall", "kill-pubsub", "redis-restart", "gateway-stop")

CLIENTS = 5
LOCK_COUNT = 3
DEFAULT_SECONDS = 60
HARD_BOUND_EXTRA_S = 90     # on top of --seconds: setup, drain, checks

# --- output -------------------------------------------------------------------


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, name, counts):
        self.passed += 1
        print("ok %s (%s)" % (name, counts))
        sys.stdout.flush()

    def fail(self, name, history):
        self.failed += 1
        print("FAIL %s: %s" % (name, history))
        sys.stdout.flush()

    def check(self, name, violations, counts, limit=5):
        if violations:
            shown = "\n    ".join(violations[:limit])
            more = "" if len(violations) <= limit else \
                "\n    ... and %d more" % (len(violations) - limit)
            self.fail(name, "%d violation(s) (%s)\n    %s%s"
                      % (len(violations), counts, shown, more))
        else:
            self.ok(name, counts)


T_START = time.time()


def rel(t):
    """A wall-clock time as seconds since the run started, for printing."""
    return "t+%.3f" % (t - T_START) if t is not None else "t?"


def say(text):
    print(text)
    sys.stdout.flush()

# --- the environment ----------------------------------------------------------


class World:
    """redis-server + nginx + two gateways; every process via harness.spawn."""

    def __init__(self, extra_flags=()):
        self.key, key_path = storage.new_key_file()
        # busy-reply-threshold high: a stalling script makes Redis silent
        # (a hung Redis, as the gateways see it), not answer -BUSY
        self.redis = harness.RedisServer(
            extra_args=["--busy-reply-threshold", "30000"])
        self.nginx = storage.Nginx()
        flags = ["--redis-timeout-ms", str(REDIS_TIMEOUT_MS),
                 "--fence-margin-ms", str(FENCE_MARGIN_MS),
                 "--waiter-liveness-ms", str(WAITER_LIVENESS_MS),
                 "--forward-token", "yes", "--key-file", key_path,
                 "--threads", "2"] + list(extra_flags)
        self.gateways = [harness.Gateway(self.redis.port, self.nginx.port,
                                         flags) for _ in range(2)]

    def start(self):
        self.redis.start()
        self.nginx.start()
        for g in self.gateways:
            g.start()
        for g in self.gateways:
            if not g.wait_healthy(harness.slack(10.0)):
                raise harness.SetupError("gateway on port %d not healthy:\n%s"
                                         % (g.port, g.log_tail()))

    def stop(self):
        reports = []
        for g in self.gateways:
            if g.proc is not None:
                try:
                    g.proc.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
            g.stop()
            r = g.sanitizer_report()
            if r:
                reports.append("gateway %d: %s" % (g.port, r))
        self.nginx.stop()
        self.redis.stop()
        return reports

# --- faults -------------------------------------------------------------------

STALL_SCRIPT = """
local function now() local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local stop = now() + tonumber(ARGV[1]) * 1000
while now() < stop do end
return 1
"""


class Injector:
    """Injects faults on a schedule drawn from the seed until stop_at."""

    KINDS = (("stall", 3), ("pause-write", 2), ("pause-all", 2),
             ("kill-normal", 2), ("kill-pubsub", 2), ("redis-restart", 1),
             ("gateway-stop", 2))

    def __init__(self, world, seed, stop_at):
        self.world = world
        self.rng = random.Random(seed * 1000 + 999)
        self.stop_at = stop_at
        self.faults = []       # dicts: kind, t0, t1, detail, gw
        self.errors = []

    def control(self, *args, timeout=5.0):
        with harness.RespClient(self.world.redis.port, timeout=timeout) as c:
            return c.command(*args)

    def run(self):
        while True:
            gap = self.rng.uniform(1.5, 4.0)
            kinds, weights = zip(*self.KINDS)
            kind = self.rng.choices(kinds, weights)[0]
            dur = {"stall": self.rng.uniform(0.5, 2.0),
                   "pause-write": self.rng.uniform(0.5, 2.0),
                   "pause-all": self.rng.uniform(0.5, 2.0),
                   "gateway-stop": self.rng.uniform(3.5, 4.5)}.get(kind, 0.3)
            which = self.rng.randrange(2)
            if time.time() + gap + dur + 0.5 > self.stop_at:
                break
            time.sleep(gap)   # the fault schedule: quiet time between faults
            try:
                self.inject(kind, dur, which)
            except Exception as e:   # a fault that could not be injected
                self.errors.append("%s at %s: %r" % (kind, rel(time.time()),
                                                     e))
                say("  fault %s could not be injected: %r" % (kind, e))

    def note(self, kind, t0, detail, gw=None):
        """Prints a fault as it is injected; done() records its end."""
        f = dict(kind=kind, t0=t0, t1=None, detail=detail, gw=gw)
        self.faults.append(f)
        say("  %s fault %-13s %s" % (rel(t0), kind, detail))
        return f

    def inject(self, kind, dur, which):
        t0 = time.time()
        ms = int(dur * 1000)
        if kind == "stall":
            f = self.note(kind, t0, "busy script for %d ms" % ms)
            try:
                self.control("EVAL", STALL_SCRIPT, "0", str(ms),
                             timeout=dur + 10)
            finally:
                f["t1"] = time.time()
        elif kind in ("pause-write", "pause-all"):
            mode = "WRITE" if kind == "pause-write" else "ALL"
            f = self.note(kind, t0, "CLIENT PAUSE %d %s" % (ms, mode))
            try:
                self.control("CLIENT", "PAUSE", str(ms), mode)
                time.sleep(dur)   # the fault lasts this long
            finally:
                f["t1"] = time.time()
        elif kind in ("kill-normal", "kill-pubsub"):
            ctype = "normal" if kind == "kill-normal" else "pubsub"
            f = self.note(kind, t0, "CLIENT KILL TYPE %s SKIPME yes" % ctype)
            try:
                n = self.control("CLIENT", "KILL", "TYPE", ctype, "SKIPME",
                                 "yes")
                f["detail"] += ": %s connection(s)" % n
            finally:
                f["t1"] = time.time()
        elif kind == "redis-restart":
            f = self.note(kind, t0, "SIGKILL, restart empty on port %d"
                          % self.world.redis.port)
            try:
                self.world.redis = self.world.redis.restart_empty()
            finally:
                f["t1"] = time.time()
        elif kind == "gateway-stop":
            g = self.world.gateways[which]
            f = self.note(kind, t0, "gateway :%d SIGSTOP for %d ms"
                          % (g.port, ms), gw=g.port)
            g.proc.send_signal(signal.SIGSTOP)
            try:
                time.sleep(dur)   # the fault lasts this long
            finally:
                g.proc.send_signal(signal.SIGCONT)
                f["t1"] = time.time()

    def overlapping(self, kinds, t0, t1, gw=None):
        """Faults of these kinds whose interval meets [t0, t1] (a
        gateway-stop only when it stopped gateway gw, if given)."""
        out = []
        for f in self.faults:
            end = f["t1"] if f["t1"] is not None else f["t0"]
            if f["kind"] not in kinds or end < t0 or f["t0"] > t1:
                continue
            if f["kind"] == "gateway-stop" and gw is not None and \
                    f["gw"] != gw:
                continue
            out.append(f)
        return out

# --- the clients' records -----------------------------------------------------


class History:
    """Everything the clients recorded, indexed for the checks."""

    def __init__(self, paths):
        self.records = []
        for p in paths:
            try:
                with open(p, encoding="utf-8") as f:
                    for line in f:
                        try:
                            self.records.append(json.loads(line))
                        except ValueError:
                            pass   # a line cut short by a killed client
            except FileNotFoundError:
                pass
        self.records.sort(key=lambda r: r.get("t0") or 0)
        self.grants = {}   # gid -> acquire record (200 only)
        self.by_grant = {}  # gid -> records of that grant, by t0
        self.writes = {}   # tid -> the write's end record (or its start)
        self.acquires = {}  # gid -> acquire record whatever its answer
        for r in self.records:
            op = r["op"]
            if op == "acquire":
                self.acquires[r["grant"]] = r
                if r["status"] == 200:
                    self.grants[r["grant"]] = r
            if op == "write-start":
                self.writes.setdefault(r["tid"], r)
            elif op == "write":
                self.writes[r["tid"]] = r
            if "grant" in r:
                self.by_grant.setdefault(r["grant"], []).append(r)

    def count(self, op, pred=lambda r: True):
        return sum(1 for r in self.records if r["op"] == op and pred(r))

    def lease_end(self, gid):
        """(end_upper, cause, moved_earlier, uncertain) of grant gid: the
        latest wall time its lease can have ended by what its client was
        told, the record that set it, whether that record moved the end
        earlier (a shortening renewal or re-entry, or a release), and
        whether a renewal or re-entry got no definite answer (then the end
        is unknown: it may have been applied, later)."""
        acq = self.grants[gid]
        end = acq["t1"] + acq["ttl"] / 1000.0
        cause, earlier, holds, uncertain = acq, False, 1, False
        for r in self.by_grant.get(gid, []):
            op, st = r["op"], r.get("status")
            new = None
            if op in ("renew", "reenter"):
                if st == 200:
                    new = r["t1"] + r["ttl"] / 1000.0
                    if op == "reenter":
                        holds = r.get("holds") or holds + 1
                elif st is None or st >= 500:
                    uncertain = True
                elif st == 410:          # the lease had ended already
                    new = min(end, r["t1"])
            elif op == "release" and st in (204, 410):
                holds = holds - 1 if st == 204 else 0
                if holds <= 0:
                    new = min(end, r["t1"])
            if new is not None and new != end:
                earlier = new < end
                end, cause = new, r
        return end, cause, earlier, uncertain

    def describe_grant(self, gid, upto=None):
        lines = []
        for r in self.by_grant.get(gid, []):
            if upto is not None and r["t0"] > upto:
                break
            lines.append(describe(r))
        return "; ".join(lines)


def describe(r):
    op = r["op"]
    s = "%s %s" % (rel(r.get("t0")), op)
    if op.startswith("write"):
        s += " %s" % r.get("tid")
        if op == "write":
            s += "[%s%s sent %s/%s]" % (r.get("kind"),
                                        " admitted" if r.get("admitted")
                                        else "", r.get("sent"), r.get("size"))
    if r.get("ttl") is not None:
        s += " ttl=%s" % r["ttl"]
    if op == "acquire":
        s += " wait=%s" % r.get("wait_ms")
    if "status" in r:
        s += " -> %s%s" % (r["status"], ("/" + r["error"]) if r.get("error")
                           else "")
        if r.get("err"):
            s += " (%s)" % r["err"]
    if r.get("t1") is not None:
        s += " at %s" % rel(r["t1"])
    if r.get("gw") is not None:
        s += " via :%s" % r["gw"]
    return s

# --- checks -------------------------------------------------------------------


def check_all(tally, world, inj, hist, locks, entries, final_state):
    margin = FENCE_MARGIN_MS / 1000.0
    by_tid = {}
    for e in entries:
        by_tid.setdefault(e.test_id, []).append(e)
    for name in locks:
        path = "/" + name
        log = [e for e in entries if e.path == path and e.method == "PUT"]
        applied = [e for e in log if e.applied]
        writes = [w for w in hist.writes.values() if w["path"] == path]

        # order: applied writes in non-decreasing token order; each with
        # the token of the grant its client sent it under
        bad, excused, top = [], [], None
        for e in applied:
            w = hist.writes.get(e.test_id)
            if w is None:
                bad.append("applied write %r is in no client's records" % e)
                continue
            if e.token != w["token"]:
                bad.append("%s applied at %s with token %s forwarded, but "
                           "it was sent under token %s"
                           % (e.test_id, rel(float(e.msec)), e.token,
                              w["token"]))
            if top is not None and e.token is not None and e.token < top[0]:
                older = top[1]
                ow = hist.writes.get(older.test_id, {})
                faults = inj.overlapping(("redis-restart",), ow.get("t0", 0),
                                         float(e.msec))
                text = ("%s (token %s) applied at %s after %s (token %s) "
                        "applied at %s. Older: %s. Its grant: %s. Newer: %s. "
                        "Its grant: %s"
                        % (e.test_id, e.token, rel(float(e.msec)),
                           older.test_id, older.token,
                           rel(float(older.msec)), describe(w),
                           hist.describe_grant(w["grant"]), describe(ow),
                           hist.describe_grant(ow.get("grant"))))
                if faults:
                    # docs/safety.md 9: a restart that loses the write
                    # records leaves ordering to timing until the gateways
                    # recheck their running writes
                    excused.append(text)
                else:
                    bad.append(text)
            if e.token is not None and (top is None or e.token >= top[0]):
                top = (e.token, e)
        tally.check("order %s" % name, bad,
                    "%d applied writes, %d tokens, %d excused by a Redis "
                    "restart (safety.md 9)"
                    % (len(applied), len({e.token for e in applied}),
                       len(excused)))
        for x in excused[:3]:
            say("    excused: " + x)

        # late: no write applied after its lease ended plus the margin
        bad, excused, judged, unjudged = [], [], 0, 0
        for e in applied:
            w = hist.writes.get(e.test_id)
            if w is None or w["grant"] not in hist.grants:
                continue
            end, cause, earlier, uncertain = hist.lease_end(w["grant"])
            if uncertain:
                unjudged += 1
                continue
            judged += 1
            at = float(e.msec)
            over = at - (end + margin + LATE_SLACK_S)
            if over <= 0:
                continue
            text = ("%s (token %s) applied at %s, %.3f s after its lease "
                    "ended at the latest (%s, by %s) plus the %d ms margin "
                    "and %d ms slack. The write: %s. Its grant: %s"
                    % (e.test_id, e.token, rel(at), at - end, rel(end),
                       cause["op"], FENCE_MARGIN_MS, LATE_SLACK_S * 1000,
                       describe(w), hist.describe_grant(w["grant"])))
            regrants = [g for g in hist.grants.values()
                        if g["lock"] == name and g["token"] > w["token"]
                        and g["t1"] < at]
            if regrants:
                text += ". The lock was granted again before it was " \
                    "applied: %s" % describe(regrants[0])
            newer = [x for x in applied if x.token is not None and
                     e.token is not None and x.token > e.token and
                     float(x.msec) < at]
            if newer:
                text += ". Applied before it under a newer token: %r" \
                    % newer[:3]
            faults = inj.overlapping(MESSAGE_DELAYING, cause["t0"], at,
                                     gw=w.get("gw")) if earlier else []
            if faults:
                excused.append(text + " [message-delaying fault: %s]"
                               % ", ".join("%s at %s" % (f["kind"],
                                                         rel(f["t0"]))
                                           for f in faults))
            else:
                bad.append(text)
        tally.check("late %s" % name, bad,
                    "%d applied writes judged, %d not judged (a renewal "
                    "without a definite answer), %d excused by a "
                    "message-delaying fault (safety.md 6.6)"
                    % (judged, unjudged, len(excused)))
        for x in excused[:3]:
            say("    excused: " + x)

        # acked: every write answered 2xx is applied
        bad, n = [], 0
        for w in writes:
            if w["op"] == "write" and w.get("status") is not None and \
                    200 <= w["status"] < 300:
                n += 1
                if not any(e.applied for e in by_tid.get(w["tid"], [])):
                    bad.append("%s answered %s but nginx logged %r. The "
                               "write: %s. Its grant: %s"
                               % (w["tid"], w["status"],
                                  by_tid.get(w["tid"], []), describe(w),
                                  hist.describe_grant(w["grant"])))
        tally.check("acked %s" % name, bad,
                    "%d acknowledged writes, all applied" % n)

        # refused: refused before the body was asked for -> never reached
        # nginx; vanished or body never sent -> never applied
        # (a refusal leaves no log line at all, but a write admitted and
        # then aborted before its client was asked for the body, e.g. by a
        # gateway stopped in between, can leave a line for the head nginx
        # got; the client cannot tell the two apart, so such a line is
        # counted, and only an applied one is a violation)
        bad, refused, cut, traces = [], 0, 0, 0
        for w in writes:
            if w["op"] != "write":
                continue
            hits = by_tid.get(w["tid"], [])
            if not w.get("admitted") and w.get("status") is not None:
                refused += 1
                traces += bool(hits)
                if any(e.applied for e in hits):
                    bad.append("%s was refused (%s) before its body was "
                               "asked for, but nginx applied it: %r. The "
                               "write: %s. Its grant: %s"
                               % (w["tid"], w["status"], hits, describe(w),
                                  hist.describe_grant(w["grant"])))
            elif w.get("sent", 0) < w.get("size", 0):
                cut += 1
                if any(e.applied for e in hits):
                    bad.append("%s sent %s of %s bytes, but nginx applied "
                               "it: %r. The write: %s"
                               % (w["tid"], w.get("sent"), w.get("size"),
                                  hits, describe(w)))
        tally.check("refused %s" % name, bad,
                    "%d refused writes not applied (%d left an unapplied "
                    "line), %d cut short (vanished or never sent) not "
                    "applied" % (refused, traces, cut))

        # content: the stored object is the last applied write
        stored = world.nginx.read(path)
        if applied:
            last = applied[-1]
            w = hist.writes.get(last.test_id)
            want = body_of(last.test_id, w["size"]) if w else None
            if stored != want:
                tally.fail("content %s" % name,
                           "stored object (%s bytes, starts %r) is not the "
                           "last applied write %s" % (
                               None if stored is None else len(stored),
                               (stored or b"")[:40], last.test_id))
            else:
                tally.ok("content %s" % name, "last of %d applied writes: %s"
                         % (len(applied), last.test_id))
        else:
            tally.check("content %s" % name,
                        [] if stored is None else
                        ["an object is stored but no write was applied"],
                        "no write applied, no object")

        # orphans: the lock becomes free once nothing explains it
        st = final_state[name]
        if st["unjudged"]:
            tally.ok("orphans %s" % name, "not judged: %s"
                     % st["unjudged"])
        elif st["free_at"] is not None:
            tally.ok("orphans %s" % name, "free %.2f s after the clients "
                     "finished; allowed until %s (%d abandoned grants)"
                     % (st["free_at"] - st["t_quiet"], rel(st["deadline"]),
                        st["abandoned"]))
        else:
            s = st["last"] or {}
            owner = s.get("owner")
            acq = hist.acquires.get(owner)
            tally.fail("orphans %s" % name,
                       "%sstill held at %s, %.2f s after every client had "
                       "finished, %.2f s past the bound (the abandoned "
                       "grants' TTLs explain it until %s; %.1f s grace and "
                       "%.1f s slack after that): %s. The grant's acquire: %s"
                       % ("held by a grant no client received: "
                          if acq and acq.get("status") != 200 else "",
                          rel(st["checked_at"]),
                          st["checked_at"] - st["t_quiet"],
                          st["checked_at"] - st["deadline"],
                          rel(st["explained"]), ORPHAN_GRACE_S,
                          ORPHAN_SLACK_S, json.dumps(s, sort_keys=True),
                          describe(acq) if acq else "(owner %r recorded by "
                          "no client)" % owner))


def final_orphan_poll(world, hist, locks, t_quiet):
    """Polls inspect until each lock is free or its deadline passes; the
    result per lock for check_all()."""
    out = {}
    for name in locks:
        explained = t_quiet
        abandoned = 0
        unjudged = []
        for r in hist.records:
            if r["op"] not in ("abandon", "unreleased") or r["lock"] != name:
                continue
            abandoned += 1
            end, _, _, uncertain = hist.lease_end(r["grant"])
            if uncertain:
                unjudged.append("%s %s with a renewal of unknown outcome"
                                % (r["op"], r["grant"]))
            elif end > t_quiet + ORPHAN_LONGEST_WAIT_S:
                unjudged.append("%s %s explains it until %s"
                                % (r["op"], r["grant"], rel(end)))
            explained = max(explained, end)
        out[name] = dict(t_quiet=t_quiet, abandoned=abandoned,
                         explained=explained,
                         unjudged=unjudged, free_at=None, last=None,
                         deadline=explained + ORPHAN_GRACE_S + ORPHAN_SLACK_S,
                         checked_at=None)
    pending = set(locks)
    gws = world.gateways
    i = 0
    while pending:
        now = time.time()
        for name in sorted(pending):
            st = out[name]
            i += 1
            g = gws[i % len(gws)]
            try:
                r = g.request("GET", harness.LOCKS + name, timeout=5.0)
                body = r.json if r.status == 200 else {"status": r.status}
            except (OSError, AssertionError) as e:
                body = {"error": repr(e)}
            st["last"] = body
            st["checked_at"] = time.time()
            if body.get("held") is False:
                st["free_at"] = st["checked_at"]
                pending.discard(name)
            elif st["unjudged"] or now > st["deadline"]:
                pending.discard(name)
        time.sleep(ORPHAN_POLL_S)
    return out

# --- the run ------------------------------------------------------------------


def run(args, tally):
    seed = args.seed
    tmp = harness.tmp_root()
    run_tag = "%x" % (seed % 0xffffff)
    locks = ["chaos-%s/o%d" % (run_tag, i) for i in range(LOCK_COUNT)]
    world = World()
    state = {"world": world}
    try:
        world.start()
        ports = ",".join(str(g.port) for g in world.gateways)
        say("redis :%d, nginx :%d, gateways %s; redis timeout %d ms, fence "
            "margin %d ms, waiter liveness %d ms; %d clients on %s for %d s"
            % (world.redis.port, world.nginx.port, ports, REDIS_TIMEOUT_MS,
               FENCE_MARGIN_MS, WAITER_LIVENESS_MS, args.clients,
               ",".join(locks), args.seconds))
        stop_at = time.time() + args.seconds
        outs = [os.path.join(tmp, "client-%d.jsonl" % i)
                for i in range(args.clients)]
        procs = [harness.spawn([sys.executable,
                                os.path.join(HERE, "client.py"), str(i),
                                str(seed), "%.3f" % stop_at, outs[i], ports,
                                ",".join(locks)],
                               stderr=open(outs[i] + ".stderr", "wb"))
                 for i in range(args.clients)]
        inj = Injector(world, seed, stop_at)
        state["inj"] = inj
        try:
            inj.run()
        finally:
            for g in world.gateways:
                g.proc.send_signal(signal.SIGCONT)
        say("  %s faults stopped" % rel(time.time()))

        # clients: each releases what it holds after stop_at; a blocking
        # acquire may still be waiting (wait_ms <= 2.5 s) and a final
        # release retries for 8 s at most
        client_bound = stop_at + 30.0
        stuck = []
        for i, p in enumerate(procs):
            try:
                p.wait(max(0.1, client_bound - time.time()))
            except Exception:
                stuck.append(i)
                harness.kill_process(p)
        t_quiet = time.time()
        say("  %s every client finished" % rel(t_quiet))
        errs = []
        for i, p in enumerate(procs):
            if p.returncode != 0:
                with open(outs[i] + ".stderr", "rb") as f:
                    errs.append("client %d exited %s: %s"
                                % (i, p.returncode,
                                   f.read()[-1500:].decode("utf-8",
                                                           "replace")))
        hist = History(outs)
        for i in range(args.clients):
            if not any(r["op"] == "done" and r["cid"] == i
                       for r in hist.records):
                errs.append("client %d did not finish%s" % (
                    i, " (killed after 30 s)" if i in stuck else ""))
        final = final_orphan_poll(world, hist, locks, t_quiet)
        # a window: nginx logs a request when it ends, a little after its
        # client saw the end; nothing here orders the two
        time.sleep(0.3)
        entries = [e for e in world.nginx.log()]
        summarize(hist, inj, entries)
        tally.check("clients finished", errs, "%d clients" % args.clients)
        tally.check("faults injected", inj.errors,
                    "%d faults" % len(inj.faults))
        check_all(tally, world, inj, hist, locks, entries, final)
        dead = ["gateway %d exited %s: %s" % (g.port, g.proc.returncode,
                                              g.log_tail(20))
                for g in world.gateways if not g.alive()]
    finally:
        reports = world.stop()
    tally.check("gateways survived", dead + reports,
                "2 gateways alive to the end, no sanitizer report")


def summarize(hist, inj, entries):
    kinds = {}
    for f in inj.faults:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    say("faults injected: %s" % (", ".join("%s %d" % kv for kv in
                                           sorted(kinds.items())) or "none"))
    ops = {}
    for r in hist.records:
        op = r["op"]
        if op == "write-start":
            continue
        key = op
        if op == "write":
            key = "write/%s" % r["kind"]
        st = r.get("status")
        key += " %s" % ("-" if st is None and "status" in r else st) \
            if "status" in r else ""
        ops[key] = ops.get(key, 0) + 1
    say("operations: %s" % ", ".join("%s %d" % kv
                                     for kv in sorted(ops.items())))
    say("nginx logged %d PUTs, %d applied"
        % (sum(1 for e in entries if e.method == "PUT"),
           sum(1 for e in entries if e.method == "PUT" and e.applied)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="the fencegate binary")
    ap.add_argument("--seed", type=int, default=None,
                    help="replay this seed (default: from the clock)")
    ap.add_argument("--seconds", type=int, default=DEFAULT_SECONDS,
                    help="how long the clients and faults run (%d)"
                    % DEFAULT_SECONDS)
    ap.add_argument("--clients", type=int, default=CLIENTS)
    ap.add_argument("--keep-tmp", action="store_true",
                    help="keep the temporary directory (logs, records)")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1000000007
    say("chaos seed %d (replay: run.py --bin ... --seed %d --seconds %d)"
        % (args.seed, args.seed, args.seconds))
    harness.Config.bin = os.path.abspath(args.bin)
    harness.Config.slow = float(os.environ.get("FG_TEST_SLOW") or 1.0)
    tmp = harness.tmp_root()
    tally = Tally()

    def bound():
        say("!!! the run passed its hard bound of %d s: killing everything"
            % (args.seconds + HARD_BOUND_EXTRA_S))
        harness.kill_all_now()
    watchdog = threading.Timer(args.seconds + HARD_BOUND_EXTRA_S, bound)
    watchdog.daemon = True
    watchdog.start()

    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        run(args, tally)
    except BaseException:
        tally.fail("runner", "the run crashed (seed %d):\n%s"
                   % (args.seed, traceback.format_exc()))
    finally:
        watchdog.cancel()
        harness.stop_all()
        if args.keep_tmp:
            say("records and logs kept in " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say("seed %d" % args.seed)
    print("%d passed, %d failed" % (tally.passed, tally.failed))
    sys.exit(1 if tally.failed else 0)


if __name__ == "__main__":
    main()
