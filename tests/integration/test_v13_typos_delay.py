"""test_v13_typos_delay.py - contract v1.3, against the real processes (one
Redis, one gateway, open mode):

- **Typos are errors.** A body field that the call does not know is 400
  bad_request whose message names the field, on every call that reads a
  body (acquire, renew, release, break, inspect, check); the call then
  changes nothing. Every documented field is still accepted.
- **Inspect gains "delay_ms"**: what remains of a lock-delay by Redis'
  clock, 0 when none (never used, held, released, or the delay over).
- **A try-once acquire refused because of lock-delay** says so in its
  message and carries "retry_after_ms"; one refused for another reason
  (the lock is held, or waiters are queued) carries none.

Time bounds compare Redis' clock with this process's monotonic clock on
the same machine: a remaining delay read between t0 (just before the
delay started) and t1 (just after the answer) lies in
[delay - (t1 - t0), delay], give or take CLOCK_TOL_MS.
"""

import time

from harness import LOCKS, TestCase, slack

CLOCK_TOL_MS = 50


def ms(seconds):
    return int(seconds * 1000)


class TypoTests(TestCase):

    # -- helpers ------------------------------------------------------------

    def assert_names(self, r, fields, what):
        """400 bad_request whose message names every field of `fields`."""
        self.assert_bad_request(r, what)
        msg = r.json["message"]
        for f in fields:
            self.assertIn('"%s"' % f, msg, "%s: %r" % (what, msg))
        return msg

    def brk(self, name, token, **kw):
        return self.req("DELETE", LOCKS + name,
                        headers={"Fence-Break": str(token)}, **kw)

    # -- acquire ------------------------------------------------------------

    def test_acquire_with_a_typo_is_400_naming_it_and_takes_nothing(self):
        name = self.lock_name()
        r = self.acquire(name, body={"ttl_ms": 1000, "wiat_ms": 100})
        msg = self.assert_names(r, ["wiat_ms"], "acquire with wiat_ms")
        # the message says what acquire takes, so the fix is at hand
        self.assertIn("wait_ms", msg.replace('"wiat_ms"', ""))
        # every unknown field is named, not only the first
        r = self.acquire(name, body={"ttl": 1000, "wiat_ms": 100})
        self.assert_names(r, ["ttl", "wiat_ms"], "acquire with ttl, wiat_ms")
        # names are exact
        for typo in ("TTL_MS", "ttl_ms ", "Mode", "lockDelayMs"):
            self.assert_names(self.acquire(name, body={typo: 1}), [typo],
                              "acquire with %r" % typo)
        # refused before Redis: nothing was written
        self.assertFalse(self.state(name)["held"])
        self.assert_no_keys(name)

    def test_acquire_typo_wins_over_a_bad_value(self):
        # a body with a typo and a bad value: the typo is what is named
        r = self.acquire(self.lock_name(), body={"ttl_ms": 5, "wiat_ms": 1})
        self.assert_names(r, ["wiat_ms"], "acquire with ttl_ms 5 and wiat_ms")

    def test_acquire_names_the_field_never_its_value(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=10000)
        secret = g["lease"]
        r = self.acquire(name, body={"leas": secret})
        msg = self.assert_names(r, ["leas"], "re-entry with leas")
        self.assertNotIn(secret, msg)
        self.assertNotIn(secret, r.body.decode())
        s = self.state(name)
        self.assertEqual(s["holders"], 1, s)
        self.release_ok(name, g["lease"])

    def test_acquire_accepts_every_documented_field(self):
        name = self.lock_name()
        g = self.acquire(name, body={"ttl_ms": 10000, "wait_ms": 0,
                                     "mode": "exclusive", "owner": "w-7",
                                     "value": "v", "lock_delay_ms": 0})
        self.assertEqual(g.status, 200, g)
        lease = g.json["lease"]
        # re-entry: "lease" with the rest, which it ignores or applies
        r = self.acquire(name, body={"lease": lease, "ttl_ms": 10000,
                                     "wait_ms": 0, "mode": "exclusive",
                                     "owner": "w-7", "value": "v2",
                                     "lock_delay_ms": 0})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["holds"], 2)
        s = self.state(name)
        self.assertEqual((s["owner"], s["value"]), ("w-7", "v2"), s)
        self.release_ok(name, lease)
        self.release_ok(name, lease)
        # an empty body and {} stay the defaults
        self.assertEqual(self.req("POST", LOCKS + name).status, 200)

    # -- renew --------------------------------------------------------------

    def test_renew_with_a_typo_is_400_naming_it_and_changes_nothing(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        r = self.renew(name, g["lease"], tll_ms=500)
        msg = self.assert_names(r, ["tll_ms"], "renew with tll_ms")
        self.assertIn("ttl_ms", msg.replace('"tll_ms"', ""))
        self.assertNotIn(g["lease"], msg)
        # the lease still runs on its 60 s, not shortened to 500 ms
        self.assertGreater(self.state(name)["ttl_ms"], 30000)
        # a field of another call is a typo here too
        self.assert_names(self.renew(name, g["lease"], mode="shared"),
                          ["mode"], "renew with mode")
        # the documented fields are accepted
        r = self.renew(name, g["lease"], ttl_ms=20000, value="x")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["ttl_ms"], 20000)
        self.release_ok(name, g["lease"])

    # -- release and break --------------------------------------------------

    def test_release_with_a_body_field_is_400_naming_it_and_releases_nothing(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        hdr = {"Fence-Lease": g["lease"]}
        r = self.req("DELETE", LOCKS + name, headers=hdr,
                     body={"lease": g["lease"]})
        msg = self.assert_names(r, ["lease"], "release with a lease field")
        self.assertIn("Fence-Lease", msg)
        self.assertNotIn(g["lease"], msg)
        # without the header: the field is still what is named
        r = self.req("DELETE", LOCKS + name, body={"lease": g["lease"]})
        self.assert_names(r, ["lease"], "release with only a lease field")
        self.assert_bad_request(self.req("DELETE", LOCKS + name, headers=hdr,
                                         raw="lease=x"),
                                "release with a body that is not JSON")
        self.assertTrue(self.state(name)["held"])
        # {} is no field at all
        r = self.req("DELETE", LOCKS + name, headers=hdr, body={})
        self.assertEqual(r.status, 204, r)
        self.assertFalse(self.state(name)["held"])

    def test_break_with_a_body_field_is_400_naming_it_and_breaks_nothing(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        r = self.brk(name, g["token"], body={"token": g["token"]})
        msg = self.assert_names(r, ["token"], "break with a token field")
        self.assertIn("Fence-Break", msg)
        s = self.state(name)
        self.assertTrue(s["held"], s)
        self.assertEqual(s["token"], g["token"])
        r = self.brk(name, g["token"], body={})
        self.assertEqual(r.status, 204, r)
        self.assertFalse(self.state(name)["held"])

    # -- inspect ------------------------------------------------------------

    def test_inspect_with_a_body_field_is_400_pointing_at_the_query(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        t0 = time.monotonic()
        # an observe whose wait_ms went into the body would answer at
        # once, as if nothing was asked: it is refused instead
        r = self.req("GET", LOCKS + name,
                     body={"wait_ms": 2000, "after": g["token"]})
        msg = self.assert_names(r, ["wait_ms", "after"], "inspect with a body")
        self.assertIn("query", msg)
        self.assertLess(time.monotonic() - t0, slack(1.0))
        r = self.req("GET", LOCKS + name, body={})
        self.assertEqual(r.status, 200, r)
        self.release_ok(name, g["lease"])

    # -- check --------------------------------------------------------------

    def test_check_with_a_typo_is_400_naming_it(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        r = self.req("POST", "/_fence/v1/check",
                     body={"seqencer": g["sequencer"]})
        msg = self.assert_names(r, ["seqencer"], "check with seqencer")
        self.assertNotIn(g["sequencer"], msg)
        r = self.req("POST", "/_fence/v1/check",
                     body={"sequencer": g["sequencer"], "token": g["token"]})
        self.assert_names(r, ["token"], "check with a token field")
        self.assertTrue(self.check_ok(g["sequencer"])["valid"])
        self.release_ok(name, g["lease"])

    def test_a_long_or_odd_field_name_is_shown_quoted_and_cut(self):
        name = self.lock_name()
        long_name = "x" * 300
        r = self.acquire(name, body={long_name: 1})
        self.assert_bad_request(r, "a 300-byte field name")
        msg = r.json["message"]
        self.assertIn('"' + "x" * 64 + '..."', msg)
        self.assertNotIn("x" * 65, msg)
        r = self.acquire(name, body={'a"b\nc\u00e9': 1})
        self.assert_bad_request(r, "a field name with a quote and a newline")
        self.assertIn('"a\\"b\\u000ac\u00e9"', r.json["message"])
        self.assert_no_keys(name)


class DelayTests(TestCase):
    """Inspect's delay_ms and a try-once acquire's retry_after_ms."""

    def brk(self, name, token):
        r = self.req("DELETE", LOCKS + name,
                     headers={"Fence-Break": str(token)})
        self.assertEqual(r.status, 204, r)

    def assert_remaining(self, got, delay_ms, t0, t1, what):
        """got is what remains of a delay of delay_ms started after t0 and
        read before t1 (monotonic seconds)."""
        self.assertIsInstance(got, int, what)
        self.assertLessEqual(got, delay_ms, what)
        self.assertGreaterEqual(got, delay_ms - ms(t1 - t0) - CLOCK_TOL_MS,
                                "%s: %d ms left of %d, %.3f s after it "
                                "started" % (what, got, delay_ms, t1 - t0))

    def test_inspect_delay_ms_is_0_when_there_is_no_delay(self):
        name = self.lock_name()
        self.assertEqual(self.state(name)["delay_ms"], 0)       # never used
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=60000)
        s = self.state(name)
        self.assertEqual((s["held"], s["delay_ms"]), (True, 0), s)
        self.release_ok(name, g["lease"])     # a release ends it at once
        s = self.state(name)
        self.assertEqual((s["held"], s["delay_ms"]), (False, 0), s)

    def test_inspect_delay_ms_counts_down_a_break_and_is_0_after(self):
        delay = 1500
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=delay)
        t0 = time.monotonic()
        self.brk(name, g["token"])
        s = self.state(name)
        t1 = time.monotonic()
        self.assertFalse(s["held"], s)
        self.assertEqual((s["ttl_ms"], s["token"]), (0, g["token"]), s)
        self.assertGreater(s["delay_ms"], 0, s)
        self.assert_remaining(s["delay_ms"], delay, t0, t1, "after the break")
        first = s["delay_ms"]
        # it only goes down, and reaches 0 when the delay is over
        seen = []

        def over():
            d = self.state(name)["delay_ms"]
            seen.append(d)
            return d == 0
        self.wait_for(over, delay / 1000 + slack(2.0), "delay_ms to reach 0")
        self.assertGreaterEqual(time.monotonic() - t0, delay / 1000 - 0.05,
                                "delay_ms reached 0 before the delay ended")
        self.assertEqual(seen, sorted(seen, reverse=True), seen)
        self.assertLessEqual(seen[0], first)
        # and the lock is anyone's then
        self.acquire_ok(name, ttl_ms=5000)
        self.assertEqual(self.state(name)["delay_ms"], 0)

    def test_inspect_delay_ms_after_an_expiry(self):
        ttl, delay = 200, 2000
        name = self.lock_name()
        t0 = time.monotonic()
        self.acquire_ok(name, ttl_ms=ttl, lock_delay_ms=delay)
        self.wait_for(lambda: not self.state(name)["held"],
                      slack(3.0), "the grant to expire")
        s = self.state(name)
        t1 = time.monotonic()
        # the delay counts from the expiry, which is after t0 + ttl
        self.assert_remaining(s["delay_ms"], delay, t0 + ttl / 1000, t1,
                              "after the expiry")
        self.assertGreater(s["delay_ms"], 0, s)

    def test_observe_answer_carries_delay_ms(self):
        delay = 3000
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=delay)
        # with after=token, the observer answers only once the grant has
        # ended: it parks if it comes before the break, and answers at once
        # if after; either way its answer is the state in lock-delay
        t0 = time.monotonic()
        obs = self.call("GET", name + "?wait_ms=20000&after=%d" % g["token"],
                        timeout=slack(25.0))
        self.brk(name, g["token"])
        r = obs.result(slack(10.0))
        t1 = time.monotonic()
        self.assertEqual(r.status, 200, r)
        self.assertFalse(r.json["held"], r)
        self.assert_remaining(r.json["delay_ms"], delay, t0, t1,
                              "the observer's answer")

    def test_try_once_during_lock_delay_says_so_with_retry_after_ms(self):
        delay = 1500
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=delay)
        t0 = time.monotonic()
        self.brk(name, g["token"])
        for mode in ("exclusive", "shared"):
            r = self.acquire(name, body={"wait_ms": 0, "mode": mode})
            t1 = time.monotonic()
            self.assert_error(r, 409, "lock_held", "try-once %s" % mode)
            self.assertIn("lock-delay", r.json["message"], r)
            self.assertIn("retry_after_ms", r.json, r)
            self.assert_remaining(r.json["retry_after_ms"], delay, t0, t1,
                                  "retry_after_ms (%s)" % mode)
            self.assertGreater(r.json["retry_after_ms"], 0, r)
        # retry_after_ms is honest: not granted before it has passed,
        # granted once it has
        t_ref = time.monotonic()
        r = self.acquire(name, body={})
        self.assert_error(r, 409, "lock_held")
        left = r.json["retry_after_ms"]
        got = {}

        def granted():
            a = self.acquire(name, body={"ttl_ms": 5000})
            if a.status == 200:
                got["at"] = time.monotonic()
                return True
            self.assert_error(a, 409, "lock_held")
            self.assertLessEqual(a.json["retry_after_ms"], left, a)
            return False
        self.wait_for(granted, left / 1000 + slack(2.0),
                      "a grant after retry_after_ms")
        self.assertGreaterEqual(got["at"] - t_ref,
                                (left - CLOCK_TOL_MS) / 1000,
                                "granted before retry_after_ms had passed")
        self.assertGreater(self.state(name)["token"], g["token"])

    def test_a_refusal_for_another_reason_has_no_retry_after_ms(self):
        delay = 60000
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=delay)
        # held: refused because of its holder
        r = self.acquire(name, body={"wait_ms": 0})
        self.assert_error(r, 409, "lock_held", "held")
        self.assertNotIn("retry_after_ms", r.json, r)
        self.assertNotIn("lock-delay", r.json["message"], r)
        # in lock-delay with a waiter queued: the waiter is next, so the
        # end of the delay is no time to retry
        self.brk(name, g["token"])
        # queued long enough to still be there for the try-once below
        w = self.waiter(name, wait_ms=int(slack(3.0) * 1000), ttl_ms=5000)
        self.wait_waiters(name, 1)
        r = self.acquire(name, body={"wait_ms": 0})
        self.assert_error(r, 409, "lock_held", "in lock-delay with a waiter")
        self.assertNotIn("retry_after_ms", r.json, r)
        # the waiter gives up within its wait_ms: the delay alone is left
        self.assert_error(w.result(slack(10.0)), 409, "lock_held",
                          "the waiter's timeout")
        self.wait_waiters(name, 0)
        r = self.acquire(name, body={"wait_ms": 0})
        self.assert_error(r, 409, "lock_held", "in lock-delay alone")
        self.assertGreater(r.json["retry_after_ms"], delay - 30000, r)
