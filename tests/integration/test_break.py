"""test_break.py - contract v1.2, "Break", against the real processes (one
Redis, an nginx WebDAV store, two gateways in front; open mode, so no
rights are asked):

    DELETE /_fence/v1/locks/{name}
    Fence-Break: <token>

ends the grant of that token as if it had expired: every holder of it
(shared ones too) loses it, its running writes are aborted on whichever
gateway runs them and never applied by the store, its lock-delay counts
from the break (a try-once acquire is refused until it passes, a waiter is
granted when it ends), and with no lock-delay the next waiter is granted at
once; 204. Another token, a free lock or one in lock-delay: 409
stale_token with "token" and "current". Fence-Break with Fence-Lease, a
value that is not a decimal token below 2^53, or two Fence-Break headers:
400 bad_request, and nothing changes.
"""

import time
import uuid

from harness import LOCKS, slack
from storage import StoreTestCase
from test_lease_truth import StreamedPut, transfers_in_flight

MARGIN_MS = 250          # the gateway's default fence-margin-ms
STREAM_S = 6.0           # how long the broken grant's upload would run
# Waiters' ticks come every waiter-liveness-ms / 3 at the latest: 20 s
# here, so a waiter granted about when a break's lock-delay ends was woken
# by the break, not by its gateway's own pace.
LIVENESS_MS = 60000


class BreakTests(StoreTestCase):

    store_gateways = 2
    store_flags = ("--forward-token", "yes",
                   "--waiter-liveness-ms", str(LIVENESS_MS))

    def setUp(self):
        super().setUp()
        self.use_shared()
        self.gw1, self.gw2 = self.env.gateways

    # -- helpers ------------------------------------------------------------

    def brk(self, lock, token, gw=None, headers=()):
        """DELETE with Fence-Break: token (anything, sent as str)."""
        hdrs = [("Fence-Break", str(token))] + list(headers)
        return self.send("DELETE", LOCKS + lock, headers=hdrs, gw=gw)

    def assert_stale(self, r, token, current, what):
        self.assert_error(r, 409, "stale_token", what)
        self.assertEqual(r.json.get("token"), token, r)
        self.assertIn("current", r.json, r)
        self.assertEqual(r.json["current"], current, r)

    @staticmethod
    def log_text(gw):
        with open(gw.logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_line(self, gw, lock):
        """The gateway's log line that says lock's grant was broken."""
        for ln in self.log_text(gw).splitlines():
            if "lock %s:" % lock in ln and "broken" in ln:
                return ln
        return None

    def applied_puts(self, path):
        return [(e.test_id, e.token) for e in
                self.store.log_for(path=path, method="PUT") if e.applied]

    # -- a break ends the grant -------------------------------------------

    def test_break_ends_a_held_exclusive_grant(self):
        path = self.obj("x")
        lock = self.lock_of(path)
        a = self.grant(path, ttl_ms=60000)
        r = self.brk(lock, a["token"], gw=self.gw2)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        # logged by the gateway that broke it: the lock, the token and
        # the principal ("-" in open mode), never the lease
        line = self.wait_for(lambda: self.log_line(self.gw2, lock),
                             slack(2.0), "the break's log line")
        self.assertIn(str(a["token"]), line)
        self.assertIn("principal -", line)
        self.assertNotIn(a["lease"], self.log_text(self.gw2))
        s = self.state(lock)
        self.assertFalse(s["held"], s)
        self.assertEqual((s["holders"], s["ttl_ms"]), (0, 0), s)
        self.assertEqual(s["token"], a["token"], s)
        # the old lease holds nothing
        self.assert_error(self.renew(lock, a["lease"]), 410, "lease_expired",
                          "renew of the broken lease")
        self.assert_error(self.release(lock, a["lease"]), 410,
                          "lease_expired", "release of the broken lease")
        self.assert_error(self.acquire(lock, body={"lease": a["lease"]}), 410,
                          "lease_expired", "re-entry of the broken lease")
        # a write with the old sequencer is refused before the store
        w = self.put(path, b"after the break\n", a["sequencer"])
        self.assert_error(w, 409, "stale_token", "write under the broken grant")
        self.assertEqual(w.json.get("token"), a["token"], w)
        self.assert_never_reached_nginx(w, "the write under the broken grant")
        self.assertFalse(self.check_ok(a["sequencer"])["valid"])
        # no lock-delay: the lock is anyone's at once, under a newer token
        b = self.grant(path, ttl_ms=5000)
        self.assertGreater(b["token"], a["token"])
        self.put_ok(path, b"B\n", b["sequencer"])

    def test_break_of_a_shared_grant_ends_every_holder(self):
        lock = self.lock_name()
        holders = [self.acquire_ok(lock, mode="shared", ttl_ms=60000,
                                   gw=gw) for gw in (self.gw1, self.gw2,
                                                     self.gw1)]
        tok = holders[0]["token"]
        self.assertEqual({h["token"] for h in holders}, {tok})
        self.assertEqual(self.state(lock)["holders"], 3)
        r = self.brk(lock, tok)
        self.assertEqual(r.status, 204, r)
        s = self.state(lock)
        self.assertFalse(s["held"], s)
        self.assertEqual(s["holders"], 0, s)
        for h in holders:
            self.assert_error(self.renew(lock, h["lease"]), 410,
                              "lease_expired", "a shared holder's renewal")
        g = self.acquire_ok(lock, ttl_ms=5000)
        self.assertGreater(g["token"], tok)

    # -- refusals -----------------------------------------------------------

    def test_another_token_is_409_stale_token_and_changes_nothing(self):
        lock = self.lock_name()
        a = self.acquire_ok(lock, ttl_ms=60000)
        tok = a["token"]
        for other in (tok - 1, tok + 1, 1):
            r = self.brk(lock, other)
            self.assert_stale(r, other, tok, "a break of token %d" % other)
        s = self.state(lock)
        self.assertTrue(s["held"], s)
        self.assertEqual(s["token"], tok, s)
        r = self.renew(lock, a["lease"])
        self.assertEqual(r.status, 200, r)

    def test_break_of_a_free_lock_is_409_stale_token(self):
        never = self.lock_name()
        self.assert_stale(self.brk(never, 1234), 1234, None,
                          "a break of a lock never used")
        self.assert_no_keys(never)
        lock = self.lock_name()
        a = self.acquire_ok(lock)
        self.release_ok(lock, a["lease"])
        self.assert_stale(self.brk(lock, a["token"]), a["token"], a["token"],
                          "a break of a released grant")

    def test_fence_break_with_fence_lease_is_400_and_changes_nothing(self):
        lock = self.lock_name()
        a = self.acquire_ok(lock, ttl_ms=60000)
        r = self.brk(lock, a["token"], headers=[("Fence-Lease", a["lease"])])
        self.assert_bad_request(r, "Fence-Break with Fence-Lease")
        s = self.state(lock)
        self.assertTrue(s["held"], s)
        self.assertEqual(s["holders"], 1, s)
        self.release_ok(lock, a["lease"])

    def test_a_value_that_is_not_a_token_is_400(self):
        lock = self.lock_name()
        a = self.acquire_ok(lock, ttl_ms=60000)
        tok = a["token"]
        for v in ("", "abc", "-1", "+%d" % tok, "%d.0" % tok, "0x10",
                  "%d " % tok + "1", str(2 ** 53), str(2 ** 64),
                  "1" * 30):
            r = self.brk(lock, v)
            self.assert_bad_request(r, "Fence-Break: %r" % v)
        # two headers, even both naming the grant
        r = self.send("DELETE", LOCKS + lock,
                      headers=[("Fence-Break", str(tok)),
                               ("Fence-Break", str(tok))])
        self.assert_bad_request(r, "two Fence-Break headers")
        self.assertTrue(self.state(lock)["held"])
        # the largest token is a token: merely not this grant's
        self.assert_stale(self.brk(lock, 2 ** 53 - 1), 2 ** 53 - 1, tok,
                          "a break of 2^53 - 1")
        self.assertEqual(self.brk(lock, tok).status, 204)

    # -- lock-delay and waiters -------------------------------------------

    def test_lock_delay_counts_from_the_break(self):
        delay = 1.5
        lock = self.lock_name()
        a = self.acquire_ok(lock, ttl_ms=60000,
                            lock_delay_ms=int(delay * 1000))
        t0 = time.monotonic()
        r = self.brk(lock, a["token"])
        self.assertEqual(r.status, 204, r)
        first = self.acquire(lock, body={"ttl_ms": 5000})
        self.assert_error(first, 409, "lock_held",
                          "a try-once acquire right after the break")
        # in lock-delay the lock is nobody's: the token no longer breaks
        self.assert_stale(self.brk(lock, a["token"]), a["token"], a["token"],
                          "a second break during lock-delay")
        got = {}

        def granted():
            g = self.acquire(lock, body={"ttl_ms": 5000})
            if g.status == 200:
                got["at"], got["g"] = time.monotonic(), g.json
                return True
            self.assert_error(g, 409, "lock_held", "during lock-delay")
            return False
        self.wait_for(granted, delay + slack(2.0),
                      "a try-once acquire to be granted after lock-delay")
        self.assertGreaterEqual(got["at"] - t0, delay - 0.02,
                                "granted %.3f s after the break, within "
                                "its lock-delay" % (got["at"] - t0))
        self.assertGreater(got["g"]["token"], a["token"])

    def test_with_lock_delay_0_a_blocked_waiter_is_granted_at_once(self):
        lock = self.lock_name()
        a = self.acquire_ok(lock, ttl_ms=60000, gw=self.gw1)
        w = self.waiter(lock, gw=self.gw1, wait_ms=20000, ttl_ms=5000)
        self.wait_waiters(lock, 1)
        t0 = time.monotonic()
        r = self.brk(lock, a["token"], gw=self.gw2)
        self.assertEqual(r.status, 204, r)
        g = w.result(slack(10.0))
        self.assertEqual(g.status, 200, g)
        self.assertGreater(g.json["token"], a["token"])
        self.assertLess(w.t_end - t0, slack(1.0),
                        "the waiter was granted %.2f s after the break"
                        % (w.t_end - t0))
        self.release_ok(lock, g.json["lease"])

    def test_with_lock_delay_a_blocked_waiter_is_granted_when_it_ends(self):
        delay = 1.0
        lock = self.lock_name()
        a = self.acquire_ok(lock, ttl_ms=60000, gw=self.gw1,
                            lock_delay_ms=int(delay * 1000))
        w = self.waiter(lock, gw=self.gw1, wait_ms=30000, ttl_ms=5000)
        self.wait_waiters(lock, 1)
        t0 = time.monotonic()
        r = self.brk(lock, a["token"], gw=self.gw2)
        self.assertEqual(r.status, 204, r)
        g = w.result(30.0 + slack(10.0))
        self.assertEqual(g.status, 200, g)
        self.assertGreater(g.json["token"], a["token"])
        self.assertGreaterEqual(w.t_end - t0, delay - 0.02,
                                "the waiter was granted within the "
                                "break's lock-delay")
        self.assertLess(w.t_end - t0, delay + slack(1.5),
                        "the waiter was granted %.2f s after the break, "
                        "not when its lock-delay of %.1f s ended"
                        % (w.t_end - t0, delay))
        self.release_ok(lock, g.json["lease"])

    # -- a running write ---------------------------------------------------

    def test_a_break_on_another_gateway_aborts_the_running_write(self):
        old, new = "older-" + uuid.uuid4().hex[:8], "newer-" + uuid.uuid4().hex[:8]
        path = self.obj("stream")
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=60000)
        before = transfers_in_flight(self.gw1)
        reading = self.store.bodies_being_read()
        every = 0.1
        put = StreamedPut(self.gw1.port, path, a["sequencer"], old, b"A",
                          int(STREAM_S / every) + 1, every)
        self.addCleanup(put.close)
        self.wait_for(lambda: transfers_in_flight(self.gw1) > before,
                      slack(2.0), "gateway 1 to admit A's streamed PUT")
        # admitted is not yet at nginx: the break must find A's body on
        # its way into the store, so that the store's log shows its end
        self.wait_for(lambda: self.store.bodies_being_read() > reading,
                      slack(5.0), "nginx to begin reading A's body")
        kind, resp, _ = put.answer(0)
        self.assertEqual(kind, "nothing", "A's upload ended before the "
                         "break: %s %r" % (kind, resp))

        t_break_wall = time.time()
        r = self.brk(lock, a["token"], gw=self.gw2)
        self.assertEqual(r.status, 204, r)

        # nginx saw A's upload end, unapplied, within the margin
        logged = self.store.wait_log(slack(3.0), test_id=old)
        self.assertEqual(len(logged), 1, "nginx never saw A's upload end: %r"
                         % logged)
        self.assertFalse(logged[0].applied, "nginx applied the write of "
                         "the broken grant: %r" % logged[0])
        self.assertLess(float(logged[0].msec),
                        t_break_wall + MARGIN_MS / 1000.0 + slack(1.5),
                        "A's upload was not aborted by the break")
        # A's client hears: 409 stale_token, or its connection closes
        kind, resp, _ = put.answer(STREAM_S + slack(5.0))
        self.assertNotEqual(kind, "nothing", "A's upload got no answer "
                            "after its grant was broken")
        if kind == "answer":
            self.assert_error(resp, 409, "stale_token", "A's write")
            self.assertEqual(resp.json.get("token"), a["token"], resp)

        # the next holder writes at once, through the other gateway
        b = self.grant(path, gw=self.gw2, ttl_ms=30000)
        newer = b"written by B under token %d\n" % b["token"]
        w = self.put(path, newer, b["sequencer"], gw=self.gw2, test_id=new,
                     timeout=STREAM_S + slack(15.0))
        self.assertIn(w.status, (201, 204), "B's PUT: %r" % w)
        self.assertLess(w.elapsed, MARGIN_MS / 1000.0 + slack(1.0),
                        "B's write waited %.2f s for the broken grant's "
                        "upload" % w.elapsed)
        # and A's bytes never land, even once its client has sent them all
        put.thread.join(STREAM_S + slack(5.0))
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=new))
        self.assertEqual(self.applied_puts(path), [(new, b["token"])])
        self.assert_stored(path, newer, "after A's client finished")
