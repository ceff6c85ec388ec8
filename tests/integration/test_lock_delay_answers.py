"""test_lock_delay_answers.py - what a lock-delay looks like to a client
(contract v1.3), against the real processes (one Redis, one gateway, open
mode):

- **Inspect's "delay_ms"**: what remains of a lock-delay by Redis' clock,
  0 when none (never used, held, released, or the delay over).
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
