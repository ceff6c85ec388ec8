"""test_request_path.py - behaviour of the request path that no other test pins
down, and that moving the gateway's code between modules could break
unseen. Each test judges by what the store, Redis, the clients and the
access log saw.

1. A release that reaches a fenced write after its admission and before
   its transfer is going: a PUT admitted behind `Expect: 100-continue`
   whose client has sent no body byte yet, and a COPY whose admission
   waits on the storage's answer to its PROPFIND probe, so that the
   release's message reaches the gateway before the write's transfer
   exists. Neither write is applied (the COPY never even reaches the
   store), each client is answered 409 stale_token, and the next holder's
   write goes through at once.
2. The subscriber connection cut (`CLIENT KILL TYPE pubsub`) while a
   blocked acquire waits and a fenced upload runs: once the gateway has
   subscribed again, a release still wakes the waiter and a break still
   aborts the upload; and what was published while it could not hear
   (the gateway stopped, so the messages are lost for sure) is caught up
   when it subscribes again.
3. SIGTERM with --drain-timeout-ms 0, a parked waiter, a check held in
   Redis (CLIENT PAUSE WRITE) and a proxied body streaming: the waiter is
   answered 503, the held check is not left hanging, the upload is never
   applied, the process exits 0 within a bound, with no sanitizer report.
   (A drain that lets them finish is test_drain.py's.)
4. The access log's JSON line for each decision of the proxy (pass,
   checked, admitted, token_required, malformed_token, forged_token,
   wrong_lock, stale_token), every field compared with only the time,
   the durations and the gateway's id masked, and the fence counters each
   request moves.
"""

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import harness
from harness import LOCKS, RespClient, TestCase, slack, tamper, wait_until
from origins import StandIn
from storage import RawRequest, StoreTestCase

MARGIN_MS = 250          # the gateway's default fence-margin-ms
# How soon a release must reach what waits on it. A grant or an abort
# travels as one message; with --waiter-liveness-ms 60000 a waiter's own
# tick comes only every 20 s, and a running write's deadline is 30 s
# away, so nothing but the message (or the catch-up after a new
# subscription) meets this bound.
WAKE_S = 1.0
LIVENESS_MS = 60000


# ---------------------------------------------------------------------------
# Redis: every node, wherever the suite runs one redis-server or a cluster


def node_ports(redis):
    """The ports of every Redis process behind `redis`."""
    nodes = getattr(redis, "nodes", None)
    if nodes is not None:
        return [n.port for n in nodes if n.alive()]
    return [redis.port]


def node_port_of(redis, lock):
    """The port of the Redis that serves lock `lock`."""
    if hasattr(redis, "owner_of"):
        return redis.owner_of(lock).port
    return redis.port


def node_command(port, *args):
    with RespClient(port) as c:
        return c.command(*args)


def client_list(port, *filters):
    """CLIENT LIST of one node, each client a dict of its fields."""
    text = node_command(port, "CLIENT", "LIST", *filters).decode()
    return [dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            for line in text.splitlines()]


def subscribers(redis):
    """{(node port, client id)} of every Pub/Sub connection."""
    return {(p, c["id"]) for p in node_ports(redis)
            for c in client_list(p, "TYPE", "pubsub")}


def gateway_channels(redis):
    """Every gateway channel (fg:gw:<loop>) someone is subscribed to."""
    out = set()
    for p in node_ports(redis):
        out |= {ch.decode() for ch in
                node_command(p, "PUBSUB", "CHANNELS", "fg:gw:*")}
    return out


def kill_subscribers(redis):
    """CLIENT KILL TYPE pubsub on every node; how many were killed."""
    return sum(node_command(p, "CLIENT", "KILL", "TYPE", "pubsub")
               for p in node_ports(redis))


def recorded_writes(redis, lock):
    """How many admitted writes lock `lock` records (its F set)."""
    return redis.command("ZCARD", "fg:{%s}:f" % lock)


# ---------------------------------------------------------------------------
# the gateway seen from outside


def local_ports(proc, remote_ports):
    """Local ports of the process's TCP connections to any of
    `remote_ports`."""
    return harness.tcp_local_ports(proc.pid, remote_ports)


def stopped(proc):
    """Is the process in the stopped state (SIGSTOP took effect)?"""
    try:
        with open("/proc/%d/stat" % proc.pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
FENCE_FAMILIES = ("fencegate_fence_admitted_total",
                  "fencegate_fence_refused_total")


def metrics(gw):
    """{(family, ((label, value), ...)): value} of every sample."""
    r = gw.request("GET", "/_fence/v1/metrics")
    if r.status != 200:
        raise AssertionError("GET /_fence/v1/metrics: %r" % r)
    out = {}
    for line in r.body.decode().splitlines():
        m = SAMPLE_RE.match(line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"',
                                             m.group(3) or "")))
            out[(m.group(1), labels)] = float(m.group(4))
    return out


def fence_deltas(before, after):
    """{(family, labels): delta} of the fence counters that moved."""
    out = {}
    for k in set(before) | set(after):
        if k[0] in FENCE_FAMILIES:
            d = after.get(k, 0.0) - before.get(k, 0.0)
            if d:
                out[k] = d
    return out


class Drip:
    """A chunked upload the test paces: a first chunk at once, then a small
    one every `every` s from a thread, until stop() or a send error."""

    def __init__(self, port, path, headers, first, every=0.05):
        self.rq = RawRequest(port, "PUT", path, headers + [
            ("Transfer-Encoding", "chunked")])
        self.every = every
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.rq.send_chunk(first)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        i = 0
        while not self._stop.wait(self.every):
            i += 1
            try:
                with self._lock:
                    self.rq.send_chunk(b"drip %06d\n" % i)
            except OSError:
                return

    def stop(self):
        self._stop.set()
        self.thread.join(5.0)

    def finish(self):
        """Stops dripping, ends the body (if the gateway still reads) and
        returns the gateway's answer, or None when it closed instead."""
        self.stop()
        try:
            with self._lock:
                self.rq.send_chunk(b"last\n")
                self.rq.end_chunks()
        except OSError:
            pass
        return self.rq.read_response(slack(5.0))

    def close(self):
        self.stop()
        self.rq.close()


# ---------------------------------------------------------------------------
# a gateway in front of nginx


class NginxPinnedTests(StoreTestCase):
    """Two gateways (--forward-token yes, so nginx's log shows each write's
    token) on one Redis in front of one nginx."""

    store_gateways = 2
    store_flags = ("--forward-token", "yes",
                   "--waiter-liveness-ms", str(LIVENESS_MS))

    def setUp(self):
        super().setUp()
        self.use_shared()
        self.gw1, self.gw2 = self.env.gateways
        for g in self.env.gateways:
            self.ready(g)
        tag = uuid.uuid4().hex[:8]
        self.OLD, self.NEW = "older-" + tag, "newer-" + tag

    def ready(self, g):
        """The gateway has found Redis (a cluster's slot map takes a
        moment after the start) and the store."""
        self.assertTrue(g.wait_healthy(slack(10.0)), "the gateway did not "
                        "get ready: " + g.log_tail())

    def applied(self, path):
        return [(e.test_id, e.token) for e in
                self.store.log_for(path=path, method="PUT") if e.applied]

    def wait_admitted(self, lock):
        """The write is admitted: Redis records it under its lock."""
        self.wait_for(lambda: recorded_writes(self.redis, lock) == 1,
                      slack(3.0), "the write to be recorded in Redis")

    # -- 1. a release between admission and transfer ----------------------

    def test_release_after_a_put_is_admitted_and_before_its_body_is_sent_ends_it_unapplied_and_the_next_holder_writes(self):
        path = self.obj("expect")
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=30000)
        body = b"older body, never to be applied\n" * 4096
        rq = RawRequest(self.gw1.port, "PUT", path, [
            ("Content-Length", str(len(body))), ("Expect", "100-continue"),
            ("Fencing-Token", a["sequencer"]), ("X-Test-Id", self.OLD)])
        self.addCleanup(rq.close)
        # 100 Continue: the gateway admitted the write and asks for its
        # body (a refused write is answered without one)
        head = rq.read_head(slack(5.0))
        self.assertIsNotNone(head, "no answer to the Expect")
        self.assertEqual(head[0], 100, "expected 100 Continue, got %r"
                         % (head,))
        self.wait_admitted(lock)

        # the grant ends before one byte of the body was sent
        t_rel = time.monotonic()
        self.release_ok(lock, a["lease"], gw=self.gw2)
        b = self.grant(path, gw=self.gw2, ttl_ms=30000)
        self.assertGreater(b["token"], a["token"])
        newer = b"written by the next holder\n"
        w = self.put(path, newer, b["sequencer"], gw=self.gw2,
                     test_id=self.NEW, timeout=slack(10.0))
        self.assertIn(w.status, (201, 204), "the next holder's PUT: %r" % w)
        self.assertLess(time.monotonic() - t_rel,
                        MARGIN_MS / 1000.0 + slack(1.0),
                        "the next holder's write waited for the released "
                        "one")

        # the older client sends its body now, and is told it was stale
        try:
            rq.send(body)
        except OSError:
            pass
        r = rq.read_response(slack(5.0))
        self.assertIsNotNone(r, "the released write got no answer")
        self.assert_error(r, 409, "stale_token", "the released PUT")
        self.assertEqual(r.json.get("token"), a["token"], r)
        self.assertEqual(r.json.get("current"), b["token"], r)

        # nginx applied the newer write only; the older one, if it saw it
        # at all, ended unapplied
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=self.NEW))
        for e in self.store.log_for(test_id=self.OLD):
            self.assertFalse(e.applied, "nginx applied the released PUT: %r"
                             % e)
        self.assertEqual(self.applied(path), [(self.NEW, b["token"])])
        self.assert_stored(path, newer, "after the released PUT's answer")

    # -- 2. the subscriber connection cut -----------------------------------

    def waiter_and_upload(self):
        """A blocked acquire parked on gateway 1, and a fenced upload
        running through gateway 1 and reaching nginx. Returns (lock the
        waiter waits for, its holder's grant, the waiter, path, the
        upload's grant, the upload)."""
        wlock = self.lock_name("waited")
        hold = self.acquire_ok(wlock, gw=self.gw1, ttl_ms=30000)
        waiter = self.waiter(wlock, gw=self.gw1, wait_ms=20000, ttl_ms=5000)
        self.wait_waiters(wlock, 1, gw=self.gw1)

        path = self.obj("running")
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=30000)
        spooled = set(self.store.body_temp_files())
        # more than nginx keeps in memory: it spools the body to a file,
        # which shows the upload reached it
        up = Drip(self.gw1.port, path, [("Fencing-Token", a["sequencer"]),
                                        ("X-Test-Id", self.OLD)],
                  b"older part 1\n" * 8192)
        self.addCleanup(up.close)
        self.wait_admitted(lock)
        self.wait_for(lambda: set(self.store.body_temp_files()) - spooled,
                      slack(5.0), "the upload to reach nginx")
        return wlock, hold, waiter, path, a, up

    def assert_aborted(self, path, up, token, since_wall, what):
        """nginx saw the upload end unapplied within WAKE_S of
        `since_wall`; its client is told 409 stale_token or closed."""
        old = self.store.wait_log(WAKE_S + slack(2.0), test_id=self.OLD)
        self.assertEqual(len(old), 1, "%s: nginx never saw the upload end"
                         % what)
        self.assertFalse(old[0].applied, "%s: nginx applied the upload: %r"
                         % (what, old[0]))
        self.assertLess(float(old[0].msec), since_wall + WAKE_S + slack(1.0),
                        "%s: the upload ended only %.2f s later"
                        % (what, float(old[0].msec) - since_wall))
        r = up.finish()
        if r is not None:
            self.assert_error(r, 409, "stale_token", what)
            self.assertEqual(r.json.get("token"), token, r)
        self.assert_absent(path, what)

    def test_after_the_subscriber_is_killed_and_back_a_release_wakes_the_waiter_and_a_break_aborts_the_upload(self):
        wlock, hold, waiter, path, a, up = self.waiter_and_upload()
        channels = gateway_channels(self.redis)
        subs = subscribers(self.redis)
        self.assertTrue(channels, "no gateway subscribed to its channel")
        self.assertGreater(kill_subscribers(self.redis), 0)
        # every gateway subscribed again, on new connections
        self.wait_for(lambda: gateway_channels(self.redis) >= channels and
                      not subscribers(self.redis) & subs, slack(5.0),
                      "the gateways to subscribe again")

        t_rel = time.monotonic()
        self.release_ok(wlock, hold["lease"], gw=self.gw2)
        r = waiter.result(WAKE_S + slack(5.0))
        self.assertEqual(r.status, 200, "the waiter: %r" % r)
        self.assertGreater(r.json["token"], hold["token"])
        self.assertLess(waiter.t_end - t_rel, WAKE_S + slack(1.0),
                        "the release reached the waiter only %.2f s later"
                        % (waiter.t_end - t_rel))

        t_brk = time.time()
        b = self.req("DELETE", LOCKS + self.lock_of(path), gw=self.gw2,
                     headers={"Fence-Break": str(a["token"])})
        self.assertEqual(b.status, 204, "the break: %r" % b)
        self.assert_aborted(path, up, a["token"], t_brk, "after the break")

    def test_what_is_published_while_the_gateway_cannot_hear_is_caught_up_when_it_subscribes_again(self):
        wlock, hold, waiter, path, a, up = self.waiter_and_upload()
        self.assertTrue(gateway_channels(self.redis),
                        "no gateway subscribed to its channel")
        # gateway 1 stopped, its subscription cut: it cannot subscribe
        # again, so the messages of what follows never reach it
        self.gw1.pause()
        self.addCleanup(self._resume, self.gw1)
        self.wait_for(lambda: stopped(self.gw1.proc), slack(2.0),
                      "SIGSTOP to take effect")
        self.assertGreater(kill_subscribers(self.redis), 0)
        self.release_ok(wlock, hold["lease"], gw=self.gw2)
        self.release_ok(self.lock_of(path), a["lease"], gw=self.gw2)

        t_cont = time.monotonic()
        t_cont_wall = time.time()
        self.gw1.resume()
        r = waiter.result(WAKE_S + slack(5.0))
        self.assertEqual(r.status, 200, "the waiter: %r" % r)
        self.assertGreater(r.json["token"], hold["token"])
        self.assertLess(waiter.t_end - t_cont, WAKE_S + slack(1.0),
                        "the waiter heard of its grant only %.2f s after "
                        "its gateway went on" % (waiter.t_end - t_cont))
        self.assert_aborted(path, up, a["token"], t_cont_wall,
                            "after the release it did not hear")

    @staticmethod
    def _resume(g):
        try:
            g.resume()
        except (ProcessLookupError, AttributeError):
            pass

    # -- 3. SIGTERM ------------------------------------------------------

    def test_sigterm_answers_the_waiter_503_never_applies_the_streaming_upload_and_exits_0(self):
        # the shared gateways' key file: with one, the gateway's
        # maintenance thread writes no key to Redis, which the pause below
        # would hold (and its exit with it) for up to redis-timeout-ms
        i = self.gw1.flags.index("--key-file")
        # drain-timeout-ms 0: what is in flight at the stop is ended at
        # once, as at a lease's end
        g = self.start_gateway(self.redis.port, self.store.port, [
            "--forward-token", "yes", "--waiter-liveness-ms",
            str(LIVENESS_MS), "--redis-timeout-ms", "20000",
            "--drain-timeout-ms", "0",
            "--key-file", self.gw1.flags[i + 1]])
        self.ready(g)
        # a waiter parked
        wlock = self.lock_name("waited")
        self.acquire_ok(wlock, gw=g, ttl_ms=30000)
        waiter = self.waiter(wlock, gw=g, wait_ms=20000, ttl_ms=5000)
        self.wait_waiters(wlock, 1, gw=g)
        # an upload streaming to nginx
        path = self.obj("streaming")
        lock = self.lock_of(path)
        a = self.grant(path, gw=g, ttl_ms=30000)
        spooled = set(self.store.body_temp_files())
        up = Drip(g.port, path, [("Fencing-Token", a["sequencer"]),
                                 ("X-Test-Id", self.OLD)],
                  b"older part 1\n" * 8192)
        self.addCleanup(up.close)
        self.wait_admitted(lock)
        self.wait_for(lambda: set(self.store.body_temp_files()) - spooled,
                      slack(5.0), "the upload to reach nginx")
        # a check held in Redis: the server of its lock runs no script
        # (every lock script writes) until unpaused
        clock = self.lock_name("checked")
        c = self.acquire_ok(clock, gw=g, ttl_ms=30000)
        node = node_port_of(self.redis, clock)
        self.assertEqual(node_command(node, "CLIENT", "PAUSE", "30000",
                                      "WRITE"), "OK")
        self.addCleanup(node_command, node, "CLIENT", "UNPAUSE")
        check = self.call("POST", "/_fence/v1/check",
                          body={"sequencer": c["sequencer"]}, gw=g,
                          timeout=slack(30.0))
        mine = local_ports(g.proc, set(node_ports(self.redis)))

        def held():
            return [cl for cl in client_list(node)
                    if int(cl["addr"].rsplit(":", 1)[1]) in mine
                    and cl.get("cmd") == "fcall" and "b" in cl["flags"]]
        self.wait_for(held, slack(5.0), "the check to be held in Redis")
        self.assertFalse(check.done, "the check was answered while Redis "
                         "held it: %r" % check.resp)

        t_term = time.monotonic()
        g.proc.send_signal(signal.SIGTERM)
        w = waiter.result(slack(5.0))
        # 503 with Retry-After and an error code (which code is not
        # pinned: contract v1.3 names one of its own for a stop)
        self.assertEqual(w.status, 503, "the parked waiter: %r" % w)
        self.assertIsInstance(w.json.get("error"), str, w)
        self.assertIsNotNone(w.header("Retry-After"), w.header_list)
        self.assertLess(waiter.t_end - t_term, slack(2.0),
                        "the waiter was answered %.2f s after SIGTERM"
                        % (waiter.t_end - t_term))
        # the held check is not left hanging: answered 503, or its
        # connection closed, as the process goes
        check.join(slack(5.0))
        self.assertFalse(check.is_alive(), "the check held in Redis was "
                         "left hanging after SIGTERM")
        if check.resp is not None:
            self.assertEqual(check.resp.status, 503, "the held check: %r"
                             % check.resp)
        try:
            rc = g.proc.wait(slack(5.0))
        except subprocess.TimeoutExpired:
            self.fail("fencegate did not exit within %.1f s of SIGTERM"
                      % slack(5.0))
        g.stopped_rc = rc
        self.assertEqual(rc, 0, "fencegate's exit code after SIGTERM")
        self.assertLess(time.monotonic() - t_term, slack(5.0))
        report = g.sanitizer_report()
        self.assertIsNone(report, "sanitizer report:\n%s" % report)

        # nginx: the upload ended unapplied; nothing of it was stored
        old = self.store.wait_log(slack(3.0), test_id=self.OLD)
        self.assertEqual(len(old), 1, "nginx never saw the upload end")
        self.assertFalse(old[0].applied, "nginx applied the upload cut off "
                         "by the shutdown: %r" % old[0])
        up.stop()
        self.assert_absent(path, "after the shutdown")


# ---------------------------------------------------------------------------
# a gateway in front of a stand-in store


class StandInPinnedTests(TestCase):
    """One gateway with one event loop and a JSON access log, in front of
    a stand-in store: it answers 200 "upstream ok", and a PROPFIND 404
    (nothing there), held while a test's gate (a threading.Event) is
    not set."""

    access_log = None

    @classmethod
    def shared_env(cls):
        env = TestCase._envs.get(cls)
        if env is not None and env.healthy():
            return env
        if env is not None:
            env.stop()
            del TestCase._envs[cls]
        d = tempfile.mkdtemp(prefix="access-", dir=harness.tmp_root())
        cls.access_log = os.path.join(d, "access.log")
        # one loop: the COPY test orders messages on its one channel
        store = StandIn()
        store.on("PROPFIND", status=404, body=b"")
        env = harness.Env(["--access-log", cls.access_log, "--threads", "1",
                           "--waiter-liveness-ms", str(LIVENESS_MS)],
                          origin=store).start()
        TestCase._envs[cls] = env
        return env

    def setUp(self):
        super().setUp()
        self.up = self.env.upstream
        tag = uuid.uuid4().hex[:8]
        self.OLD, self.NEW = "older-" + tag, "newer-" + tag

    def sent(self):
        """(method, path, X-Test-Id) of every request the store got."""
        return [(x["method"], x["path"], x["test_id"])
                for x in self.up.records]

    # -- 1. a release before the write's transfer exists -----------------

    def test_release_while_a_copy_waits_on_its_probe_means_it_is_never_forwarded_and_the_next_holder_copies(self):
        src = "/" + self.lock_name("src")
        dlock = self.lock_name("dst")
        dst = "/" + dlock
        gate = threading.Event()
        self.up.on("PROPFIND", status=404, body=b"", hold=gate)
        self.addCleanup(gate.set)
        d = self.acquire_ok(dlock, ttl_ms=30000)
        copy = self.call("COPY", src, gw=self.gw, timeout=slack(30.0),
                         headers={"Destination": dst,
                                  "Destination-Fencing-Token": d["sequencer"],
                                  "X-Test-Id": self.OLD})
        # admitted (recorded in Redis), and the store is asked whether
        # the Destination is a collection: the transfer waits on that
        self.wait_for(lambda: ("PROPFIND", dst, self.OLD) in self.sent(),
                      slack(5.0), "the COPY's probe to reach the store")
        self.assertEqual(recorded_writes(self.redis, dlock), 1,
                         "the COPY was not admitted before its probe")
        # The release tells the gateway's one loop, on its channel, that
        # the COPY's grant ended. A waiter on that loop granted by a later
        # release of the same lock is told on the same channel, after it:
        # once the waiter has its grant, the loop has taken in the end of
        # the COPY's grant, and the probe is still unanswered, so the
        # COPY's transfer does not exist yet.
        self.release_ok(dlock, d["lease"])
        h = self.acquire_ok(dlock, ttl_ms=30000)
        waiter = self.waiter(dlock, wait_ms=20000, ttl_ms=30000)
        self.wait_waiters(dlock, 1)
        self.release_ok(dlock, h["lease"])
        g = waiter.result(WAKE_S + slack(5.0))
        self.assertEqual(g.status, 200, "the waiter: %r" % g)
        n = g.json
        self.assertGreater(n["token"], h["token"])
        self.assertFalse(copy.done, "the COPY was answered before its "
                         "probe: %r" % copy.resp)
        gate.set()
        r = copy.result(slack(10.0))
        self.assert_error(r, 409, "stale_token", "the released COPY")
        self.assertEqual(r.json.get("token"), d["token"], r)
        self.assertNotIn(("COPY", src, self.OLD), self.sent(),
                         "the released COPY reached the store")

        # the waiter, now the holder, copies at once: the released COPY,
        # never begun, holds nothing up
        t0 = time.monotonic()
        r2 = self.req("COPY", src, timeout=slack(10.0),
                      headers={"Destination": dst,
                               "Destination-Fencing-Token": n["sequencer"],
                               "X-Test-Id": self.NEW})
        self.assertEqual(r2.status, 200, "the next holder's COPY: %r" % r2)
        self.assertLess(time.monotonic() - t0, MARGIN_MS / 1000.0 +
                        slack(1.0))
        copies = [rec for rec in self.sent() if rec[0] == "COPY" and
                  rec[1] == src]
        self.assertEqual(copies, [("COPY", src, self.NEW)],
                         "the store saw other COPYs than the next "
                         "holder's")

    # -- 4. golden access-log lines ---------------------------------------

    def log_lines(self):
        return [json.loads(l) for l in harness.complete_lines(self.access_log)]

    def line_for(self, path, method):
        """The access line of the one request to `path`, once written."""
        def find():
            got = [l for l in self.log_lines()
                   if l["path"] == path and l["method"] == method]
            return got if got else None
        got = wait_until(find, slack(5.0))
        self.assertIsNotNone(got, "no access line for %s %s"
                             % (method, path))
        self.assertEqual(len(got), 1, got)
        return got[0]

    def golden(self, method, path, expect, deltas, headers=None, body=None):
        """Sends one request; its access line must be `expect` exactly
        (time, gateway and the *_ms fields masked, a null kept null), and
        the fence counters must move by `deltas` exactly."""
        before = metrics(self.gw)
        r = self.req(method, path, raw=body, headers=headers or {})
        line = self.line_for(path, method)
        after = metrics(self.gw)
        self.assertRegex(line.pop("time"),
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertRegex(line.pop("gateway"), r"^[0-9a-f]{16}$")
        for k in ("duration_ms", "admission_ms", "upstream_ms"):
            v = line.get(k)
            if v is not None:
                self.assertIsInstance(v, (int, float), (k, line))
                self.assertGreaterEqual(v, 0, (k, line))
                line[k] = "<ms>"
        full = {"client": "127.0.0.1", "method": method, "path": path,
                "principal": None, "completed": True,
                "bytes_out": len(r.body), "duration_ms": "<ms>"}
        full.update(expect)
        self.assertEqual(line, full, "the access line of %s %s (answered "
                         "%r)" % (method, path, r))
        want = {("fencegate_fence_%s_total" % fam, ((lab, val),)): n
                for (fam, lab, val), n in deltas.items()}
        self.assertEqual(fence_deltas(before, after), want,
                         "the fence counters %s %s moved" % (method, path))
        return r

    def refused(self, code, status, lock, token, **more):
        """The line of a write refused with `code` before its body."""
        out = {"endpoint": "proxy_write", "status": status, "error": code,
               "decision": code, "lock": lock, "token": token,
               "upstream_status": None, "bytes_in": 0,
               "admission_ms": "<ms>", "upstream_ms": None}
        out.update(more)
        return out

    def test_access_log_lines_and_fence_counters_of_every_decision(self):
        # one lock (and path) per decision: each line is found by its path
        L = {d: self.lock_name(d) for d in (
            "pass", "checked", "admitted", "token_required",
            "malformed_token", "forged_token", "wrong_lock", "other",
            "stale_token")}
        g = {d: self.acquire_ok(L[d], ttl_ms=30000)
             for d in ("checked", "admitted", "forged_token", "other")}
        old = self.acquire_ok(L["stale_token"], ttl_ms=30000)
        self.release_ok(L["stale_token"], old["lease"])
        new = self.acquire_ok(L["stale_token"], ttl_ms=30000)

        def tok(grant):
            return {"Fencing-Token": grant["sequencer"]}
        ok = len(b"upstream ok\n")
        read_line = {"endpoint": "proxy_read", "status": 200,
                       "error": None, "upstream_status": 200, "bytes_in": 0,
                       "bytes_out": ok, "upstream_ms": "<ms>"}

        with self.subTest(decision="pass"):
            self.golden("GET", "/" + L["pass"], dict(
                read_line, decision="pass", lock=None, token=None,
                admission_ms=None), {})
        with self.subTest(decision="checked"):
            self.golden("GET", "/" + L["checked"], dict(
                read_line, decision="checked", lock=L["checked"],
                token=g["checked"]["token"], admission_ms="<ms>"),
                {("admitted", "kind", "read"): 1}, headers=tok(g["checked"]))
        with self.subTest(decision="admitted"):
            self.golden("PUT", "/" + L["admitted"], {
                "endpoint": "proxy_write", "status": 200, "error": None,
                "decision": "admitted", "lock": L["admitted"],
                "token": g["admitted"]["token"], "upstream_status": 200,
                "bytes_in": 5, "bytes_out": ok, "admission_ms": "<ms>",
                "upstream_ms": "<ms>"},
                {("admitted", "kind", "write"): 1},
                headers=tok(g["admitted"]), body=b"data\n")
        cases = (
            ("token_required", 428, {}, None, {}),
            ("malformed_token", 400, {"Fencing-Token": "fg1.nonsense"},
             None, {}),
            ("forged_token", 403,
             {"Fencing-Token": tamper(g["forged_token"]["sequencer"])},
             None, {}),
            ("wrong_lock", 403, tok(g["other"]), g["other"]["token"], {}),
            ("stale_token", 409, tok(old), old["token"],
             {"current": new["token"]}),
        )
        for code, status, hdrs, token, more in cases:
            with self.subTest(decision=code):
                self.golden("PUT", "/" + L[code],
                            self.refused(code, status, L[code], token,
                                         **more),
                            {("refused", "reason", code): 1},
                            headers=hdrs, body=b"refused\n")
