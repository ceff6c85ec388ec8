"""test_lease_truth.py - contract v1.1.1, "clarifications found in use",
against the real processes:

- Every end of a lease ends its writes. A renewal or a re-entry that moves
  a lease's end earlier ends the grant's running writes by the new end, on
  whichever gateway runs them: the next holder is granted and writes
  within the short ttl plus the fence margin, not at the old deadline, and
  the older upload is never applied by the store (nginx's access log and
  data dir). A renewal that moves the end later still keeps a running
  write alive past its first end.
- An answer that was lost leaves nothing behind. A lock call sent to a
  Redis that is stalled past the gateway's redis-timeout-ms (a busy script,
  CLIENT PAUSE) is answered 503 lock_store_unavailable; once Redis answers
  again, whatever that call did in Redis is undone within about a second:
  the grant made for nobody is given back (and counted in
  fencegate_lock_given_back_total), and the waiter queued for nobody never
  keeps the lock from the next client.
"""

import re
import select
import socket
import threading
import time
import uuid

import harness
from harness import LOCKS, RespClient, TestCase, slack, wait_until
from storage import StoreTestCase

MARGIN_MS = 250          # the gateway's default fence-margin-ms
SHORT_MS = 100           # the shortened lease (the smallest ttl_ms)
STREAM_S = 6.0           # how long the older upload would run if let run
REDIS_TIMEOUT_MS = 300   # --redis-timeout-ms of the lost-answer gateways
STALL_MS = 1500          # how long Redis is kept from answering


# ---------------------------------------------------------------------------
# helpers

def metric_sum(gw, family, labels=None):
    """The sum of every sample of a Prometheus counter/gauge `family` in
    the gateway's /_fence/v1/metrics (0 when absent); `labels`, a dict,
    keeps only samples that carry these label values."""
    r = gw.request("GET", "/_fence/v1/metrics")
    if r.status != 200:
        raise AssertionError("GET /_fence/v1/metrics: %r" % r)
    total = 0.0
    pat = re.compile(r"^%s(\{[^}]*\})?\s+(\S+)" % re.escape(family))
    for line in r.body.decode("utf-8", "replace").splitlines():
        m = pat.match(line)
        if not m:
            continue
        if labels:
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
            if any(got.get(k) != v for k, v in labels.items()):
                continue
        total += float(m.group(2))
    return total


def redis_command_conns(gw, redis_port):
    """Local ports of the gateway process's TCP connections to Redis."""
    return harness.tcp_local_ports(gw.proc.pid, {redis_port})


def kill_command_conns(redis, gw):
    """CLIENT KILLs the gateway's command connections (not its Pub/Sub
    ones); returns how many."""
    ports = redis_command_conns(gw, redis.port)
    n = 0
    with RespClient(redis.port) as c:
        for line in c.command("CLIENT", "LIST").decode().splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            port = int(f["addr"].rsplit(":", 1)[1])
            if port in ports and f["sub"] == "0" and f["psub"] == "0":
                c.command("CLIENT", "KILL", "ID", f["id"])
                n += 1
    return n


def transfers_in_flight(gw):
    """Upstream transfers the gateway runs now (a fenced write is one only
    once it was admitted)."""
    return metric_sum(gw, "fencegate_upstream_transfers")


class StreamedPut:
    """A PUT with a Content-Length body that the test sends slowly: the
    head and the first piece at once, then one piece every `every` s from
    a thread, until the body is whole or a send fails (the gateway closed).
    The answer is read on the main thread while the body is still going."""

    def __init__(self, port, path, sequencer, test_id, label, pieces,
                 every, piece_size=1024):
        self.parts = []
        for i in range(pieces):
            line = b"%s part %04d\n" % (label, i)
            self.parts.append((line * (piece_size // len(line) + 1))
                              [:piece_size])
        self.body = b"".join(self.parts)
        self.every = every
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=30.0)
        head = ("PUT %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                "Content-Length: %d\r\nFencing-Token: %s\r\n"
                "X-Test-Id: %s\r\n\r\n"
                % (path, port, len(self.body), sequencer, test_id))
        self.sock.sendall(head.encode("latin-1") + self.parts[0])
        self.t_start = time.monotonic()
        self.sent_all_at = None
        self.send_failed_at = None
        self.buf = b""
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        for p in self.parts[1:]:
            if self._stop.wait(self.every):
                return
            try:
                self.sock.sendall(p)
            except OSError:
                self.send_failed_at = time.monotonic()
                return
        self.sent_all_at = time.monotonic()

    def close(self):
        self._stop.set()
        try:
            self.sock.close()
        except OSError:
            pass
        self.thread.join(5.0)

    def answer(self, timeout):
        """Waits up to `timeout` s for the gateway's final answer. Returns
        ("answer", Reply, t) for a whole response, ("closed", None, t) when
        the connection ended without one, ("nothing", None, None) when
        nothing came in time (the write is still running)."""
        end = time.monotonic() + timeout
        while True:
            got = self._parse()
            if got is not None:
                return "answer", got, time.monotonic()
            left = end - time.monotonic()
            if left <= 0:
                return "nothing", None, None
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                continue
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                got = self._parse(closed=True)
                if got is not None:
                    return "answer", got, time.monotonic()
                return "closed", None, time.monotonic()
            self.buf += data

    def _parse(self, closed=False):
        while True:
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            if not sep:
                return None
            status, hdrs, _ = harness.parse_raw(head + b"\r\n\r\n")
            if status is not None and 100 <= status < 200:
                self.buf = rest   # an interim answer: skip it
                continue
            n = int(hdrs.get("content-length", "0") or 0)
            if len(rest) < n and not closed:
                return None
            return harness.Response(status or 0, "", list(hdrs.items()),
                                    rest[:n], time.monotonic() - self.t_start)


# ---------------------------------------------------------------------------
# 1. every end of a lease ends its writes


class ShortenedLeaseEndsWritesTests(StoreTestCase):
    """One redis-server, one nginx WebDAV store, two gateways in front
    (--forward-token yes, so nginx's log shows each write's token). A's
    streamed PUT always runs through gateway 1; the call that shortens its
    lease goes to gateway 1 or 2."""

    store_gateways = 2

    def setUp(self):
        super().setUp()
        self.use_shared()
        self.gw1, self.gw2 = self.env.gateways
        tag = uuid.uuid4().hex[:8]
        self.OLD, self.NEW = "older-" + tag, "newer-" + tag

    def applied_puts(self, path):
        return [(e.test_id, e.token) for e in
                self.store.log_for(path=path, method="PUT") if e.applied]

    def start_stream(self, path, grant, label, seconds, every=0.1):
        """A's upload through gateway 1, admitted before this returns."""
        before = transfers_in_flight(self.gw1)
        put = StreamedPut(self.gw1.port, path, grant["sequencer"], self.OLD,
                          label, int(seconds / every) + 1, every)
        self.addCleanup(put.close)
        self.wait_for(lambda: transfers_in_flight(self.gw1) > before,
                      slack(2.0), "gateway 1 to admit A's streamed PUT")
        kind, resp, _ = put.answer(0)
        self.assertEqual(kind, "nothing", "A's upload ended before the test "
                         "could act on it: %s %r" % (kind, resp))
        return put

    def shorten(self, lock, lease, how, via, ttl_ms):
        if how == "renew":
            r = self.renew(lock, lease, gw=via, ttl_ms=ttl_ms)
        else:
            r = self.acquire(lock, body={"lease": lease, "ttl_ms": ttl_ms},
                             gw=via)
        self.assertEqual(r.status, 200, "%s with ttl_ms %d: %r"
                         % (how, ttl_ms, r))
        self.assertEqual(r.json.get("ttl_ms"), ttl_ms, r)
        return r

    def shortened_lease_ends_the_write(self, how, via):
        path = self.obj(how)
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=60000)
        put = self.start_stream(path, a, b"A", STREAM_S)
        t_short = time.monotonic()
        t_short_wall = time.time()
        self.shorten(lock, a["lease"], how, via, SHORT_MS)
        # B queues for the lock right away, on the gateway of the renewal
        waiter = self.call("POST", LOCKS + lock,
                           body={"ttl_ms": 30000, "wait_ms": 20000}, gw=via,
                           timeout=slack(30.0))
        bound = (SHORT_MS + MARGIN_MS) / 1000.0 + slack(1.5)
        # B is granted within the short ttl plus the margin
        g = waiter.result(slack(30.0))
        self.assertEqual(g.status, 200, g)
        b = g.json
        self.assertGreater(b["token"], a["token"])
        self.assertLess(waiter.t_end - t_short,
                        (SHORT_MS + MARGIN_MS) / 1000.0 + slack(1.0),
                        "B was granted only %.2f s after A's lease was "
                        "shortened to %d ms" % (waiter.t_end - t_short,
                                                SHORT_MS))

        # B's fenced write goes at once: it does not wait for A's upload
        newer = b"written by B under token %d\n" % b["token"]
        w = self.put(path, newer, b["sequencer"], gw=via, test_id=self.NEW,
                     timeout=STREAM_S + slack(15.0))
        self.assertIn(w.status, (201, 204), "B's PUT: %r" % w)
        self.assertLess(w.elapsed, MARGIN_MS / 1000.0 + slack(1.0),
                        "B's write waited %.2f s for A's upload under the "
                        "shortened lease" % w.elapsed)

        # nginx: A's upload ended unapplied, by the new end of its lease;
        # only B's write was applied, and the object holds B's data
        old = self.store.wait_log(slack(3.0), test_id=self.OLD)
        self.assertEqual(len(old), 1, "nginx never saw A's upload end: %r"
                         % old)
        self.assertFalse(old[0].applied, "nginx applied A's write under the "
                         "shortened lease: %r" % old[0])
        self.assertLess(float(old[0].msec), t_short_wall + bound,
                        "A's upload was not aborted by the new end of its "
                        "lease")
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=self.NEW))
        self.assertEqual(self.applied_puts(path), [(self.NEW, b["token"])])
        self.assert_stored(path, newer, "after B's write")
        # A's client is told: an error answer or a closed connection, never
        # its 201 (a client still sending its body hears once the gateway
        # has read it or closes, as at a release)
        kind, resp, _ = put.answer(STREAM_S + slack(5.0))
        self.assertNotEqual(kind, "nothing", "A's upload got no answer at "
                            "all after its lease was shortened by a %s" % how)
        if kind == "answer":
            self.assert_error(resp, 409, "stale_token",
                              "A's write under the shortened lease")
            self.assertEqual(resp.json.get("token"), a["token"], resp)
        # and still so once A's client has sent (or given up on) the rest
        put.thread.join(STREAM_S + slack(5.0))
        # a window for a late apply of A's upload to reach nginx's log: no
        # event marks its absence
        time.sleep(slack(0.3))
        self.assertEqual(self.applied_puts(path), [(self.NEW, b["token"])],
                         "nginx applied A's upload after B's write")
        self.assert_stored(path, newer, "after A's client finished")

    def test_renewal_to_a_shorter_ttl_ends_the_running_write_and_the_next_holder_writes_at_once(self):
        self.shortened_lease_ends_the_write("renew", self.gw1)

    def test_reentry_with_a_shorter_ttl_ends_the_running_write_and_the_next_holder_writes_at_once(self):
        self.shortened_lease_ends_the_write("reenter", self.gw1)

    def test_renewal_to_a_shorter_ttl_on_another_gateway_ends_the_write_running_on_the_first(self):
        self.shortened_lease_ends_the_write("renew", self.gw2)

    def test_reentry_with_a_shorter_ttl_on_another_gateway_ends_the_write_running_on_the_first(self):
        self.shortened_lease_ends_the_write("reenter", self.gw2)

    @harness.single_redis("kills one gateway's connections on the one redis-server")
    def test_shortened_lease_ends_the_write_even_when_its_gateway_cannot_ask_redis_again(self):
        """The message that says the lease got shorter carries how soon it
        ends: the write's deadline moves at once, even when its gateway's
        next call to Redis fails (its command connections were just cut)."""
        path = self.obj("cut")
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=60000)
        put = self.start_stream(path, a, b"A", STREAM_S)
        self.assertGreater(kill_command_conns(self.env.redis, self.gw1), 0)
        t_short_wall = time.time()
        self.shorten(lock, a["lease"], "renew", self.gw2, SHORT_MS)
        g = self.acquire(lock, body={"ttl_ms": 30000, "wait_ms": 20000},
                         gw=self.gw2, timeout=slack(30.0))
        self.assertEqual(g.status, 200, g)
        b = g.json
        newer = b"written by B under token %d\n" % b["token"]
        w = self.put(path, newer, b["sequencer"], gw=self.gw2,
                     test_id=self.NEW, timeout=STREAM_S + slack(15.0))
        self.assertIn(w.status, (201, 204), "B's PUT: %r" % w)
        old = self.store.wait_log(slack(3.0), test_id=self.OLD)
        self.assertEqual(len(old), 1, "nginx never saw A's upload end")
        self.assertFalse(old[0].applied, "nginx applied A's write under the "
                         "shortened lease: %r" % old[0])
        self.assertLess(float(old[0].msec), t_short_wall +
                        (SHORT_MS + MARGIN_MS) / 1000.0 + slack(1.5))
        kind, resp, _ = put.answer(STREAM_S + slack(5.0))
        if kind == "answer":
            self.assert_error(resp, 409, "stale_token", "A's write")
        put.thread.join(STREAM_S + slack(5.0))
        self.assertEqual(self.applied_puts(path), [(self.NEW, b["token"])])
        self.assert_stored(path, newer, "after A's client finished")

    def longer_lease_keeps_the_write(self, how, via):
        # the upload starts well within the lease, and the lengthening call
        # and its message to gw1 must come before the first lease ends:
        # on a loaded machine, with a sanitized build, that can take seconds
        ttl_ms = int(slack(4000))
        stream_s = ttl_ms / 1000.0 + 2.0
        path = self.obj(how)
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=ttl_ms)
        t_a = time.monotonic()
        put = self.start_stream(path, a, b"A", stream_s)   # running now
        # lengthened well past the upload's end, whatever the slack
        self.shorten(lock, a["lease"], how, via, ttl_ms + int(slack(6000)))
        kind, resp, t_ans = put.answer(stream_s + slack(5.0))
        self.assertEqual(kind, "answer", "A's upload under the lengthened "
                         "lease got no answer (%s)" % kind)
        self.assertEqual(resp.status, 201, "A's write under the lengthened "
                         "lease: %r" % resp)
        put.thread.join(slack(2.0))
        self.assertIsNotNone(put.sent_all_at, "A's body was not sent whole")
        self.assertGreater(t_ans - t_a, ttl_ms / 1000.0,
                           "the upload did not outlive the first lease")
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=self.OLD))
        self.assertEqual(self.applied_puts(path), [(self.OLD, a["token"])])
        self.assert_stored(path, put.body, "A's write")

    def test_renewal_to_a_longer_ttl_keeps_a_running_write_alive_past_its_first_end(self):
        self.longer_lease_keeps_the_write("renew", self.gw1)

    def test_reentry_with_a_longer_ttl_on_another_gateway_keeps_a_running_write_alive_past_its_first_end(self):
        self.longer_lease_keeps_the_write("reenter", self.gw2)


# ---------------------------------------------------------------------------
# 2. an answer that was lost leaves nothing behind

BUSY_SCRIPT = """
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local stop = now() + tonumber(ARGV[1]) * 1000
while now() < stop do end
return 1
"""


class BusyScript:
    """EVAL of a Lua busy loop of `ms` ms, sent on its own connection
    without waiting for its reply: Redis answers nobody until it ends."""

    def __init__(self, port, ms):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=ms / 1000.0 + 30.0)
        args = [b"EVAL", BUSY_SCRIPT.encode(), b"0", str(ms).encode()]
        out = b"*%d\r\n" % len(args)
        for a in args:
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        self.t_sent = time.monotonic()
        self.t_end = None

    def wait_end(self):
        """Reads the script's reply: the moment Redis answers again."""
        buf = b""
        while not buf.endswith(b"\r\n"):
            data = self.sock.recv(4096)
            if not data:
                raise AssertionError("Redis closed the busy script's "
                                     "connection: %r" % buf)
            buf += data
        self.t_end = time.monotonic()
        if not buf.startswith(b":1"):
            raise AssertionError("the busy script failed: %r" % buf)
        return self.t_end

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def redis_answers_within(port, seconds):
    """Does Redis answer a PING within `seconds`? (The PING is left queued
    when it does not.)"""
    s = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    try:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        r, _, _ = select.select([s], [], [], seconds)
        return bool(r)
    finally:
        s.close()


class LostAnswerLeavesNothingTests(TestCase):
    """A gateway with --redis-timeout-ms 300 on a redis-server of its own,
    which the test keeps from answering for 1.5 s."""

    uses_shared_env = False

    def setUp(self):
        super().setUp()
        # one event loop: one command connection, which the test opens
        # before the stall (an inspect), so that the call under test is
        # sent to Redis at once rather than held back by a connection
        # that is still being set up
        env = self.start_env(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS),
                              "--threads", "1"))
        self.env = env
        self.gw = env.gw
        self.redis = env.redis
        r = self.inspect(self.lock_name("warm-up"))
        self.assertEqual(r.status, 200, "inspect before the stall: %r" % r)

    # -- stalls -----------------------------------------------------------

    def busy_stall(self):
        """Starts a 1.5 s busy script and checks that Redis is stalled."""
        stall = BusyScript(self.redis.port, STALL_MS)
        self.addCleanup(stall.close)
        self.assertTrue(wait_until(
            lambda: not redis_answers_within(self.redis.port, 0.1),
            slack(1.0), 0.01),
            "setup: Redis still answers: the busy script did not start")
        return stall

    def client_pause(self):
        """CLIENT PAUSE 1500 ALL; returns a function that waits for the
        pause to end (a PING of the test's own is answered) and returns
        that moment."""
        with RespClient(self.redis.port) as c:
            self.assertEqual(c.command("CLIENT", "PAUSE", str(STALL_MS),
                                       "ALL"), "OK")

        def wait_end():
            with RespClient(self.redis.port,
                            timeout=STALL_MS / 1000.0 + 30.0) as c:
                self.assertEqual(c.command("PING"), "PONG")
            return time.monotonic()
        return wait_end

    # -- assertions -------------------------------------------------------

    def assert_unavailable(self, r, what):
        self.assert_error(r, 503, "lock_store_unavailable", what)
        self.assertIsNotNone(r.header("Retry-After"), "%s: 503 without "
                             "Retry-After" % what)
        self.assertLess(r.elapsed, REDIS_TIMEOUT_MS / 1000.0 + slack(1.0),
                        "%s: the 503 came later than the redis timeout"
                        % what)

    def assert_free_soon(self, name, since, what):
        """Inspect shows the lock free with no waiters within about a
        second (plus slack) of `since` (a 503 while the gateway gets back
        to Redis counts as not yet)."""
        limit = since + 1.0 + slack(1.0)
        last = {}

        def free():
            try:
                r = self.inspect(name, timeout=slack(5.0))
            except OSError as e:
                last["s"] = e
                return False
            last["s"] = r.json if r.status == 200 else r
            return r.status == 200 and not r.json["held"] and \
                r.json["waiters"] == 0
        if not wait_until(free, max(0.0, limit - time.monotonic()), 0.05):
            self.fail("%s: the lock is still not free %.1f s later (it is "
                      "left to nobody): inspect says %r"
                      % (what, time.monotonic() - since, last.get("s")))

    def _free(self, name):
        try:
            r = self.inspect(name, timeout=slack(5.0))
        except OSError:
            return False
        return r.status == 200 and not r.json["held"] and \
            r.json["waiters"] == 0

    def wait_gateway_back(self):
        """Health 200 again: the gateway has Redis back."""
        if not self.gw.wait_healthy(slack(5.0)):
            self.fail("health did not return to 200 after the stall")

    # -- tests ------------------------------------------------------------

    @harness.single_redis("stalls its redis-server with a busy script")
    def test_acquire_answered_503_during_a_busy_redis_leaves_the_lock_free_afterwards(self):
        name = self.lock_name()
        stall = self.busy_stall()
        r = self.acquire(name, body={"ttl_ms": 60000}, timeout=slack(10.0))
        self.assert_unavailable(r, "try-once acquire during the stall")
        t_back = stall.wait_end()
        self.assert_free_soon(name, t_back, "after a 503 acquire")
        g = self.acquire(name, body={"ttl_ms": 5000}, timeout=slack(5.0))
        self.assertEqual(g.status, 200, "the next acquire after the stall: "
                         "%r" % g)

    @harness.single_redis("stalls its redis-server with a busy script")
    def test_blocking_acquire_answered_503_during_a_busy_redis_never_receives_the_lock(self):
        name = self.lock_name()
        h = self.acquire_ok(name, ttl_ms=60000)
        stall = self.busy_stall()
        r = self.acquire(name, body={"ttl_ms": 60000, "wait_ms": 30000},
                         timeout=slack(10.0))
        self.assert_unavailable(r, "blocking acquire during the stall")
        stall.wait_end()
        self.wait_gateway_back()
        t_rel = time.monotonic()
        self.release_ok(name, h["lease"])
        # the lock does not go to the waiter nobody is waiting for
        self.assert_free_soon(name, t_rel, "after the holder released")
        g = self.acquire(name, body={"ttl_ms": 5000}, timeout=slack(5.0))
        self.assertEqual(g.status, 200, "the next acquire after the "
                         "release: %r" % g)
        self.assertGreater(g.json["token"], h["token"])

    @harness.single_redis("pauses its redis-server's clients")
    def test_acquire_answered_503_during_client_pause_leaves_the_lock_free_afterwards(self):
        # Redis drops a paused command whose connection closes before the
        # pause ends, so a gateway that hangs up at its timeout leaves
        # nothing here; one that keeps the connection (to learn what the
        # call did) must give the grant back all the same.
        name = self.lock_name()
        wait_end = self.client_pause()
        r = self.acquire(name, body={"ttl_ms": 60000}, timeout=slack(10.0))
        self.assert_unavailable(r, "try-once acquire during CLIENT PAUSE")
        t_back = wait_end()
        self.assert_free_soon(name, t_back, "after a 503 acquire")
        g = self.acquire(name, body={"ttl_ms": 5000}, timeout=slack(5.0))
        self.assertEqual(g.status, 200, "the next acquire after the pause: "
                         "%r" % g)

    def stopped_redis(self):
        """SIGSTOP: a stopped server reads a connection's last bytes when
        it goes on, before the close behind them, so a call the gateway
        timed out on (and hung up on) still runs then. Returns a function
        that resumes it and returns that moment."""
        self.redis.pause()
        self.addCleanup(self.redis.resume)

        def resume():
            self.redis.resume()
            return time.monotonic()
        return resume

    @harness.single_redis("stops its redis-server")
    def test_renewal_answered_503_while_redis_is_stopped_is_put_back(self):
        # the renewal runs when Redis goes on, after its 503: the lease
        # must end when it would have without it, not ten minutes later
        name = self.lock_name()
        h = self.acquire_ok(name, ttl_ms=4000)
        t_grant = time.monotonic()
        resume = self.stopped_redis()
        r = self.call("PATCH", name, body={"lease": h["lease"],
                                           "ttl_ms": 600000},
                      timeout=slack(10.0)).result(slack(10.0))
        self.assert_unavailable(r, "renewal while Redis is stopped")
        t_back = resume()
        last = {}

        def put_back():
            s = self.inspect(name, timeout=slack(5.0))
            last["s"] = s.json if s.status == 200 else s
            return s.status == 200 and (not s.json["held"] or
                                        s.json["ttl_ms"] <= 4000)
        self.assertTrue(wait_until(put_back, 1.0 + slack(1.0), 0.05),
                        "the renewal answered 503 still holds: %r"
                        % last.get("s"))
        # and the lease ends at its first expiry
        self.assert_free_soon(name, max(t_back, t_grant + 4.0),
                              "at the lease's first expiry")

    @harness.single_redis("stops its redis-server")
    def test_reentry_answered_503_while_redis_is_stopped_is_put_back(self):
        # the re-entry's hold, added when Redis goes on, goes again: one
        # release by the holder, who was told the re-entry failed, frees
        # the lock
        name = self.lock_name()
        h = self.acquire_ok(name, ttl_ms=60000)
        resume = self.stopped_redis()
        r = self.acquire(name, body={"lease": h["lease"], "ttl_ms": 600000},
                         timeout=slack(10.0))
        self.assert_unavailable(r, "re-entry while Redis is stopped")
        resume()
        self.wait_gateway_back()
        last = {}

        def put_back():
            s = self.inspect(name, timeout=slack(5.0))
            last["s"] = s.json if s.status == 200 else s
            return s.status == 200 and s.json["ttl_ms"] <= 60000
        self.assertTrue(wait_until(put_back, 1.0 + slack(1.0), 0.05),
                        "the re-entry answered 503 still holds: %r"
                        % last.get("s"))
        t_rel = time.monotonic()
        self.release_ok(name, h["lease"])
        self.assert_free_soon(name, t_rel, "after the one release")

    @harness.single_redis("stalls its redis-server with a busy script")
    def test_grant_given_back_after_a_lost_answer_is_counted_in_metrics(self):
        name = self.lock_name()
        family = "fencegate_lock_given_back_total"
        before = metric_sum(self.gw, family)
        stall = self.busy_stall()
        r = self.acquire(name, body={"ttl_ms": 60000}, timeout=slack(10.0))
        self.assert_unavailable(r, "try-once acquire during the stall")
        t_back = stall.wait_end()
        # the give-back is done once the lock is free again (not judged
        # here: the test above does)
        wait_until(lambda: self._free(name), 1.0 + slack(1.0), 0.05)
        after = metric_sum(self.gw, family)
        self.assertGreater(after, before, "%s (summed over its reason "
                           "labels) did not grow: %s -> %s"
                           % (family, before, after))


@harness.single_redis("kills the gateway's connections and calls the scripts on the one redis-server")
class ConfirmNotSentTests(TestCase):
    """With redis-replicas, a waiter's grant is confirmed (renewal + WAIT)
    before it is answered. A confirmation that cannot even be sent (the
    command connection was just cut) answers 503, and the grant goes
    back: it is not held by nobody for its TTL."""

    def test_waiter_whose_confirmation_cannot_be_sent_leaves_the_lock_free(self):
        from test_lease_scripts import acquire_args, functions, keys
        env = self.start_env(("--redis-replicas", "1", "--threads", "1"))
        gw, redis = env.gw, env.redis
        name = self.lock_name()
        self.inspect(name, gw=gw)  # the gateway loads the library
        fn = functions(redis)
        holder = "H" * 22
        r = redis.command("FCALL", fn["acquire"], 4, *keys(name), 60000, name,
                          *acquire_args(holder))
        self.assertEqual(r[0], b"granted", r)
        waiter = self.call("POST", LOCKS + name,
                           body={"ttl_ms": 60000, "wait_ms": 20000}, gw=gw)
        self.assertTrue(wait_until(
            lambda: redis.command("ZCARD", keys(name)[1]) == 1, slack(3.0)),
            "the blocking acquire was never queued")
        self.assertGreater(kill_command_conns(redis, gw), 0)
        r = redis.command("FCALL", fn["release"], 4, *keys(name), 60000, name,
                          holder, 250)
        self.assertEqual(r[0], b"granted", r)  # handed to the waiter
        g = waiter.result(slack(10.0))
        self.assertEqual(g.status, 503, g)
        self.assertEqual(g.json.get("error"), "lock_store_unavailable", g)

        def free():
            r = self.inspect(name, gw=gw)
            return r.status == 200 and not r.json["held"]
        self.assertTrue(wait_until(free, 1.0 + slack(1.0), 0.05),
                        "the waiter's grant outlived its 503: %r"
                        % self.inspect(name, gw=gw).json)
