"""test_semantics.py - "More lock semantics" of the contract and the rules
around tokens: re-entry, token growth, shared mode, lock-delay, leader
election values, observe (long-poll inspect), idle forgetting."""

import threading
import time

from harness import (LOCKS, TestCase, metric_value, random_lease, slack,
                     wait_lock_free, wait_metric, wait_state)


class ReentryTests(TestCase):

    def test_reentry_with_live_lease_returns_same_token_and_holds_2(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.acquire_ok(name, lease=g["lease"])
        self.assertEqual(r["token"], g["token"])
        self.assertEqual(r["holds"], 2)
        self.assertEqual(r["mode"], "exclusive")
        self.assertEqual(r["name"], name)
        r3 = self.acquire_ok(name, lease=g["lease"])
        self.assertEqual(r3["holds"], 3)
        self.assertEqual(r3["token"], g["token"])
        s = self.state(name)
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["holders"], 1)

    def test_reentry_keeps_the_lease_it_was_given(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.acquire_ok(name, lease=g["lease"])
        self.assertEqual(r.get("lease", g["lease"]), g["lease"])

    def test_each_release_undoes_one_hold_and_lock_is_free_at_zero(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.acquire_ok(name, lease=g["lease"])
        self.acquire_ok(name, lease=g["lease"])
        for left in (2, 1):
            self.release_ok(name, g["lease"])
            s = self.state(name)
            self.assertIs(s["held"], True, "after release, %d holds left"
                          % left)
            self.assertEqual(s["token"], g["token"])
            self.assert_error(self.acquire(name, body={}), 409, "lock_held")
        self.release_ok(name, g["lease"])
        self.assertIs(self.state(name)["held"], False)
        self.assert_error(self.release(name, g["lease"]), 410,
                          "lease_expired")

    def test_reentry_with_expired_lease_returns_410_lease_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        self.assert_error(self.acquire(name, body={"lease": g["lease"]}), 410,
                          "lease_expired")
        self.assertFalse(self.state(name)["held"])

    def test_reentry_with_released_lease_returns_410_lease_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        self.assert_error(self.acquire(name, body={"lease": g["lease"]}), 410,
                          "lease_expired")
        self.assertFalse(self.state(name)["held"])

    def test_reentry_with_expired_lease_while_other_holds_returns_410(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        g2 = self.acquire_ok(name)
        self.assert_error(self.acquire(name, body={"lease": g1["lease"]}),
                          410, "lease_expired")
        s = self.state(name)
        self.assertEqual(s["token"], g2["token"])
        self.assertEqual(s["holders"], 1)

    def test_reentry_with_never_issued_lease_returns_410(self):
        name = self.lock_name()
        self.assert_error(self.acquire(name, body={"lease": random_lease()}),
                          410, "lease_expired")
        self.assertFalse(self.state(name)["held"])

    def test_reentry_with_lease_of_another_lock_returns_410(self):
        a, b = self.lock_name("a"), self.lock_name("b")
        ga = self.acquire_ok(a)
        self.assert_error(self.acquire(b, body={"lease": ga["lease"]}), 410,
                          "lease_expired")
        self.assertFalse(self.state(b)["held"])

    def test_reentry_resets_expiry_to_now_plus_ttl_ms(self):
        name = self.lock_name()
        ttl_s = slack(1.0)       # the re-entry comes well within it
        t0 = time.monotonic()
        g = self.acquire_ok(name, ttl_ms=int(ttl_s * 1000))
        # the cause: the re-entry comes a while after the grant, so the
        # expiry it sets differs from the grant's
        time.sleep(ttl_s / 4)
        r = self.acquire_ok(name, lease=g["lease"],
                            ttl_ms=int(3 * ttl_s * 1000))
        t_r = time.monotonic()
        self.assertEqual(r["holds"], 2)
        # the cause: the time of the first grant's expiry must pass, the
        # lock still held through it
        time.sleep(max(0.0, t0 + ttl_s + 0.2 - time.monotonic()))
        s = self.state(name)      # past the first grant's expiry
        self.assertIs(s["held"], True, s)
        self.assertGreater(s["ttl_ms"], int(ttl_s * 1000))
        self.assertLessEqual(s["ttl_ms"], int(3 * ttl_s * 1000))
        # the re-entry's end: free by its ttl_ms after it, as before, but
        # seen as soon as it is
        self.wait_for(lambda: self.state(name)["held"] is False,
                      max(0.0, t_r + 3 * ttl_s + 0.2 - time.monotonic()),
                      "the re-entry's lease to end by its ttl_ms")

    def test_reentry_is_granted_even_with_waiters_queued(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=10000)
        w = self.waiter(name, wait_ms=5000)
        self.wait_waiters(name, 1)
        r = self.acquire_ok(name, lease=g["lease"])
        self.assertEqual(r["holds"], 2)
        self.release_ok(name, g["lease"])
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(w.done, "waiter granted while a hold remained")
        self.release_ok(name, g["lease"])
        resp = w.result(slack(3.0))
        self.assertEqual(resp.status, 200, resp)
        self.assertGreater(resp.json["token"], g["token"])

    def test_reentry_of_shared_lease_keeps_token_and_holder_count(self):
        name = self.lock_name()
        a = self.acquire_ok(name, mode="shared")
        b = self.acquire_ok(name, mode="shared")
        r = self.acquire_ok(name, mode="shared", lease=a["lease"])
        self.assertEqual(r["holds"], 2)
        self.assertEqual(r["token"], a["token"])
        self.assertEqual(self.state(name)["holders"], 2)
        self.release_ok(name, b["lease"])
        self.release_ok(name, a["lease"])
        self.assertTrue(self.state(name)["held"])
        self.release_ok(name, a["lease"])
        self.assertFalse(self.state(name)["held"])


class TokenTests(TestCase):

    def test_tokens_strictly_increase_across_grants_of_one_name(self):
        name = self.lock_name()
        tokens = []
        for _ in range(8):
            g = self.acquire_ok(name)
            tokens.append(g["token"])
            self.release_ok(name, g["lease"])
        for a, b in zip(tokens, tokens[1:]):
            self.assertGreater(b, a, tokens)
        for t in tokens:
            self.assert_token(t)

    def test_token_increases_after_expiry(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        g2 = self.acquire_ok(name, ttl_ms=150)
        self.assertGreater(g2["token"], g1["token"])

    def test_sequencer_checks_valid_only_for_the_current_grant(self):
        name = self.lock_name()
        seqs = []
        for _ in range(3):
            g = self.acquire_ok(name)
            seqs.append(g["sequencer"])
            self.release_ok(name, g["lease"])
        g = self.acquire_ok(name)
        self.assertIs(self.check_ok(g["sequencer"])["valid"], True)
        for s in seqs:
            self.assertEqual(self.check_ok(s)["reason"], "stale")

    def test_concurrent_acquire_release_never_grants_two_exclusive_holders(self):
        name = self.lock_name()
        inside = []
        overlap = []
        tokens = []
        errors = []
        lock = threading.Lock()

        def worker():
            for _ in range(4):
                try:
                    r = self.gw.request("POST", LOCKS + name,
                                        body={"wait_ms": 20000,
                                              "ttl_ms": 20000},
                                        timeout=slack(40.0))
                    if r.status != 200:
                        errors.append(repr(r))
                        return
                    with lock:
                        if inside:
                            overlap.append(r.json["token"])
                        inside.append(1)
                        tokens.append(r.json["token"])
                    # the cause: a holder stays inside a while, so a second
                    # holder granted meanwhile is seen as an overlap
                    time.sleep(0.005)
                    with lock:
                        inside.pop()
                    rr = self.gw.request("DELETE", LOCKS + name,
                                         headers={"Fence-Lease":
                                                  r.json["lease"]})
                    if rr.status != 204:
                        errors.append(repr(rr))
                        return
                except Exception as e:
                    errors.append(repr(e))
                    return

        ts = [threading.Thread(target=worker, daemon=True) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(slack(60.0))
        self.assertEqual(errors, [])
        self.assertEqual(overlap, [])
        self.assertEqual(len(tokens), 24)
        self.assertEqual(len(set(tokens)), 24, "a token was issued twice")
        self.assertEqual(self.state(name)["waiters"], 0)
        self.assertFalse(self.state(name)["held"])


class SharedModeTests(TestCase):

    def test_shared_holders_of_one_period_get_the_same_token(self):
        name = self.lock_name()
        gs = [self.acquire_ok(name, mode="shared") for _ in range(4)]
        self.assertEqual(len({g["token"] for g in gs}), 1)
        self.assertEqual(len({g["lease"] for g in gs}), 4)
        for g in gs:
            self.assertEqual(g["mode"], "shared")
            self.assertEqual(g["holds"], 1)
        s = self.state(name)
        self.assertEqual(s["holders"], 4)
        self.assertEqual(s["mode"], "shared")
        self.assertEqual(s["token"], gs[0]["token"])
        for g in gs:
            self.assertIs(self.check_ok(g["sequencer"])["valid"], True)

    def test_renew_of_a_shared_lease_keeps_the_shared_token(self):
        name = self.lock_name()
        a = self.acquire_ok(name, mode="shared", ttl_ms=300)
        b = self.acquire_ok(name, mode="shared", ttl_ms=300)
        r = self.renew(name, a["lease"], ttl_ms=5000)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["token"], a["token"])
        s = wait_state(self, name, lambda s: s["holders"] < 2,
                       "b's 300 ms lease to run out")
        self.assertTrue(s["held"])
        self.assertEqual(s["holders"], 1)
        self.assertEqual(s["token"], a["token"])
        self.assert_error(self.renew(name, b["lease"]), 410, "lease_expired")

    def test_exclusive_try_fails_while_shared_is_held(self):
        name = self.lock_name()
        self.acquire_ok(name, mode="shared")
        self.assert_error(self.acquire(name, body={"mode": "exclusive"}),
                          409, "lock_held")

    def test_shared_try_fails_while_exclusive_is_held(self):
        name = self.lock_name()
        self.acquire_ok(name)
        self.assert_error(self.acquire(name, body={"mode": "shared"}), 409,
                          "lock_held")

    def test_lock_stays_held_until_the_last_shared_holder_releases(self):
        name = self.lock_name()
        a = self.acquire_ok(name, mode="shared")
        b = self.acquire_ok(name, mode="shared")
        self.release_ok(name, a["lease"])
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["holders"], 1)
        self.assert_error(self.acquire(name, body={}), 409, "lock_held")
        self.assert_error(self.release(name, a["lease"]), 410,
                          "lease_expired")
        self.release_ok(name, b["lease"])
        self.assertFalse(self.state(name)["held"])
        self.acquire_ok(name)

    def test_new_shared_period_gets_a_greater_token(self):
        name = self.lock_name()
        a = self.acquire_ok(name, mode="shared")
        self.release_ok(name, a["lease"])
        b = self.acquire_ok(name, mode="shared")
        self.assertGreater(b["token"], a["token"])
        self.assertEqual(self.check_ok(a["sequencer"])["reason"], "stale")

    def test_shared_holders_expire_individually(self):
        name = self.lock_name()
        short = self.acquire_ok(name, mode="shared", ttl_ms=200)
        long_ = self.acquire_ok(name, mode="shared", ttl_ms=10000)
        s = wait_state(self, name, lambda s: s["holders"] < 2,
                       "the 200 ms shared lease to run out")
        self.assertTrue(s["held"])
        self.assertEqual(s["holders"], 1)
        self.assertEqual(s["token"], long_["token"])
        self.assert_error(self.release(name, short["lease"]), 410,
                          "lease_expired")
        self.assertIs(self.check_ok(long_["sequencer"])["valid"], True)

    def test_shared_try_after_queued_exclusive_waiter_gets_409_no_barging(self):
        name = self.lock_name()
        s1 = self.acquire_ok(name, mode="shared")
        x = self.waiter(name, wait_ms=5000)
        self.wait_waiters(name, 1)
        self.assert_error(self.acquire(name, body={"mode": "shared",
                                                   "wait_ms": 0}),
                          409, "lock_held")
        st = self.state(name)
        self.assertEqual(st["holders"], 1)
        self.assertEqual(st["waiters"], 1)
        self.release_ok(name, s1["lease"])
        self.assertEqual(x.result(slack(3.0)).status, 200)

    def test_shared_waiter_behind_exclusive_waiter_is_granted_after_it(self):
        name = self.lock_name()
        s1 = self.acquire_ok(name, mode="shared")
        x = self.waiter(name, wait_ms=8000)
        self.wait_waiters(name, 1)
        s2 = self.waiter(name, mode="shared", wait_ms=8000)
        self.wait_waiters(name, 2)
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(s2.done, "shared waiter barged past an exclusive "
                                  "waiter")
        self.release_ok(name, s1["lease"])
        xr = x.result(slack(3.0))
        self.assertEqual(xr.status, 200, xr)
        self.assertEqual(xr.json["mode"], "exclusive")
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(s2.done, "shared waiter granted during exclusive")
        self.release_ok(name, xr.json["lease"])
        sr = s2.result(slack(3.0))
        self.assertEqual(sr.status, 200, sr)
        self.assertEqual(sr.json["mode"], "shared")
        self.assertGreater(sr.json["token"], xr.json["token"])
        self.assertGreater(xr.json["token"], s1["token"])

    def test_release_of_exclusive_grants_a_run_of_shared_waiters_together(self):
        name = self.lock_name()
        x = self.acquire_ok(name)
        sa = self.waiter(name, mode="shared", wait_ms=8000)
        self.wait_waiters(name, 1)
        sb = self.waiter(name, mode="shared", wait_ms=8000)
        self.wait_waiters(name, 2)
        x2 = self.waiter(name, mode="exclusive", wait_ms=8000)
        self.wait_waiters(name, 3)
        self.release_ok(name, x["lease"])
        ra, rb = sa.result(slack(3.0)), sb.result(slack(3.0))
        self.assertEqual((ra.status, rb.status), (200, 200))
        self.assertEqual(ra.json["token"], rb.json["token"])
        self.assertGreater(ra.json["token"], x["token"])
        s = self.state(name)
        self.assertEqual(s["holders"], 2)
        self.assertEqual(s["mode"], "shared")
        self.assertEqual(s["waiters"], 1)
        self.assertFalse(x2.done)
        self.release_ok(name, ra.json["lease"])
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(x2.done, "exclusive waiter granted while a shared "
                                  "holder remained")
        self.release_ok(name, rb.json["lease"])
        r2 = x2.result(slack(3.0))
        self.assertEqual(r2.status, 200)
        self.assertGreater(r2.json["token"], ra.json["token"])


class LockDelayTests(TestCase):

    def test_lock_delay_blocks_regrant_after_expiry_until_it_has_passed(self):
        name = self.lock_name()
        ttl, delay = 300, 1000
        t_req = time.monotonic()
        self.acquire_ok(name, ttl_ms=ttl, lock_delay_ms=delay)
        t_resp = time.monotonic()
        s = wait_lock_free(self, name)
        self.assertFalse(s["held"], s)
        self.assert_error(self.acquire(name, body={}), 409, "lock_held",
                          "during lock-delay")
        first_ok = None
        while time.monotonic() < t_resp + (ttl + delay) / 1000 + slack(1.5):
            r = self.acquire(name, body={"wait_ms": 0})
            if r.status == 200:
                first_ok = time.monotonic()
                break
            self.assert_error(r, 409, "lock_held")
            time.sleep(0.05)
        self.assertIsNotNone(first_ok, "never granted after lock-delay")
        self.assertGreaterEqual(first_ok - t_req, (ttl + delay) / 1000 - 0.05,
                                "granted before expiry + lock-delay")

    def test_lock_delay_does_not_apply_after_release(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=5000, lock_delay_ms=60000)
        self.release_ok(name, g["lease"])
        r = self.acquire(name, body={})
        self.assertEqual(r.status, 200, r)

    def test_lock_delay_holds_back_a_waiter_until_it_has_passed(self):
        name = self.lock_name()
        ttl, delay = 300, 800
        t_req = time.monotonic()
        self.acquire_ok(name, ttl_ms=ttl, lock_delay_ms=delay)
        w = self.waiter(name, wait_ms=10000)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        dt = w.t_end - t_req
        self.assertGreaterEqual(dt, (ttl + delay) / 1000 - 0.05)
        self.assertLess(dt, (ttl + delay) / 1000 + slack(1.0))

    def test_lock_delay_of_0_allows_regrant_right_after_expiry(self):
        name = self.lock_name()
        self.acquire_ok(name, ttl_ms=200, lock_delay_ms=0)
        wait_lock_free(self, name)
        self.assertEqual(self.acquire(name, body={}).status, 200)

    def test_lock_delay_shows_lock_free_but_not_grantable(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=200, lock_delay_ms=3000)
        s = wait_lock_free(self, name)
        self.assertIs(s["held"], False)
        self.assertEqual(s["token"], g["token"])
        self.assert_error(self.acquire(name, body={"mode": "shared"}), 409,
                          "lock_held")


class LockDelayDefaultTests(TestCase):
    gateway_flags = ("--lock-delay-ms", "800")

    def test_lock_delay_ms_flag_sets_the_default_lock_delay(self):
        name = self.lock_name()
        t_req = time.monotonic()
        self.acquire_ok(name, ttl_ms=200)
        wait_lock_free(self, name)
        self.assert_error(self.acquire(name, body={}), 409, "lock_held")
        ok = self.wait_for(lambda: self.acquire(name, body={}).status == 200
                           and time.monotonic(), slack(3.0),
                           "grant after the default lock-delay", 0.05)
        self.assertGreaterEqual(ok - t_req, 0.95)

    def test_explicit_lock_delay_ms_0_overrides_the_default(self):
        name = self.lock_name()
        self.acquire_ok(name, ttl_ms=200, lock_delay_ms=0)
        wait_lock_free(self, name)
        self.assertEqual(self.acquire(name, body={}).status, 200)


class ValueTests(TestCase):
    """Leader election: acquire carries "value", renew proclaims a new one."""

    def test_value_given_on_acquire_is_shown_by_inspect(self):
        name = self.lock_name()
        self.acquire_ok(name, value="leader-1 at 10.0.0.1:80")
        self.assertEqual(self.state(name)["value"], "leader-1 at 10.0.0.1:80")

    def test_value_round_trips_json_escapes_and_unicode(self):
        name = self.lock_name()
        v = 'q"uote\\back\nnl\ttab \u00e9\u20ac \U0001F600 {"j":1}'
        self.acquire_ok(name, value=v)
        self.assertEqual(self.state(name)["value"], v)

    def test_renew_with_value_replaces_the_value(self):
        name = self.lock_name()
        g = self.acquire_ok(name, value="v1")
        r = self.renew(name, g["lease"], value="v2")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.state(name)["value"], "v2")

    def test_renew_without_value_keeps_the_value(self):
        name = self.lock_name()
        g = self.acquire_ok(name, value="v1")
        self.assertEqual(self.renew(name, g["lease"], ttl_ms=5000).status, 200)
        self.assertEqual(self.state(name)["value"], "v1")

    def test_value_of_4096_bytes_is_accepted_on_acquire_and_renew(self):
        name = self.lock_name()
        v = "a" * 4096
        g = self.acquire_ok(name, value=v)
        self.assertEqual(self.state(name)["value"], v)
        w = "b" * 4096
        self.assertEqual(self.renew(name, g["lease"], value=w).status, 200)
        self.assertEqual(self.state(name)["value"], w)

    def test_value_of_4097_bytes_on_acquire_returns_400_and_writes_nothing(self):
        name = self.lock_name()
        r = self.acquire(name, body={"value": "a" * 4097})
        self.assert_bad_request(r)
        self.assert_no_keys(name)

    def test_value_of_4097_bytes_on_renew_returns_400_and_keeps_old_value(self):
        name = self.lock_name()
        g = self.acquire_ok(name, value="keep")
        r = self.renew(name, g["lease"], value="b" * 4097)
        self.assert_bad_request(r)
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["value"], "keep")

    def test_renew_with_value_by_a_stale_lease_returns_410_and_keeps_value(self):
        name = self.lock_name()
        g = self.acquire_ok(name, value="real")
        self.assert_error(self.renew(name, random_lease(), value="usurper"),
                          410, "lease_expired")
        self.assertEqual(self.state(name)["value"], "real")
        self.release_ok(name, g["lease"])

    def test_release_resigns_leadership(self):
        name = self.lock_name()
        g = self.acquire_ok(name, value="me")
        self.release_ok(name, g["lease"])
        s = self.state(name)
        self.assertFalse(s["held"])
        c = self.acquire_ok(name, value="next")
        self.assertEqual(self.state(name)["value"], "next")
        self.assertGreater(c["token"], g["token"])


class ObserveTests(TestCase):
    """GET /_fence/v1/locks/N?wait_ms=W&after=T"""

    def observe(self, name, wait_ms, after):
        return self.call("GET", LOCKS + name + "?wait_ms=%d&after=%d"
                         % (wait_ms, after), timeout=wait_ms / 1000 + 10)

    def test_observe_answers_at_once_when_token_differs_from_after(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.inspect(name, query="?wait_ms=5000&after=%d"
                         % (g["token"] - 1))
        self.assertEqual(r.status, 200, r)
        self.assertLess(r.elapsed, slack(1.0))
        self.assertEqual(r.json["token"], g["token"])
        self.assertTrue(r.json["held"])

    def test_observe_answers_after_wait_ms_with_current_state_when_nothing_changes(self):
        name = self.lock_name()
        g = self.acquire_ok(name, value="leader")
        r = self.inspect(name, query="?wait_ms=700&after=%d" % g["token"])
        self.assertEqual(r.status, 200, r)
        self.assertGreaterEqual(r.elapsed, 0.65)
        self.assertLess(r.elapsed, 0.7 + slack(1.5))
        self.assertTrue(r.json["held"])
        self.assertEqual(r.json["token"], g["token"])
        self.assertEqual(r.json["name"], name)
        self.assertEqual(r.json.get("value"), "leader")

    def test_observe_answers_as_soon_as_the_holder_releases(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        parked = metric_value(self.gw, "fencegate_waiters", kind="observe")
        c = self.observe(name, 10000, g["token"])
        wait_metric(self.gw, "fencegate_waiters", parked + 1, slack(3.0),
                    kind="observe")
        self.assertFalse(c.done, "observe answered before anything changed")
        t_rel = time.monotonic()
        self.release_ok(name, g["lease"])
        r = c.result(slack(3.0))
        self.assertEqual(r.status, 200, r)
        self.assertFalse(r.json["held"])
        self.assertLess(c.t_end - t_rel, slack(1.0))

    def test_observe_answers_when_the_grant_expires(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=500)
        t0 = time.monotonic()
        c = self.observe(name, 10000, g["token"])
        r = c.result(slack(5.0))
        self.assertEqual(r.status, 200, r)
        self.assertFalse(r.json["held"])
        self.assertLess(c.t_end - t0, 0.5 + slack(1.0))

    def test_observe_answers_when_a_new_grant_changes_the_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=10000)
        parked = metric_value(self.gw, "fencegate_waiters", kind="observe")
        c = self.observe(name, 10000, g["token"])
        wait_metric(self.gw, "fencegate_waiters", parked + 1, slack(3.0),
                    kind="observe")
        # the holder is replaced in one step: release, re-acquire
        self.release_ok(name, g["lease"])
        g2 = self.acquire_ok(name)
        r = c.result(slack(3.0))
        self.assertEqual(r.status, 200, r)
        # it saw either the release or the new grant, never the old state
        self.assertTrue(not r.json["held"] or r.json["token"] == g2["token"],
                        r.json)

    def test_observe_on_new_token_of_held_lock_reports_new_holder(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name)
        self.release_ok(name, g1["lease"])
        g2 = self.acquire_ok(name, value="new-leader")
        r = self.inspect(name, query="?wait_ms=3000&after=%d" % g1["token"])
        self.assertLess(r.elapsed, slack(1.0))
        self.assertEqual(r.json["token"], g2["token"])
        self.assertEqual(r.json["value"], "new-leader")

    def test_many_observers_are_all_answered_on_release(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        parked = metric_value(self.gw, "fencegate_waiters", kind="observe")
        cs = [self.observe(name, 10000, g["token"]) for _ in range(8)]
        wait_metric(self.gw, "fencegate_waiters", parked + 8, slack(3.0),
                    kind="observe")
        self.release_ok(name, g["lease"])
        for c in cs:
            r = c.result(slack(3.0))
            self.assertEqual(r.status, 200)
            self.assertFalse(r.json["held"])


class IdleForgetTests(TestCase):
    gateway_flags = ("--idle-forget-ms", "400")

    def keys_gone(self, name):
        return lambda: self.redis.lock_keys(name) == []

    def test_released_lock_leaves_no_redis_keys_after_idle_forget_ms(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=5000)
        self.assertNotEqual(self.redis.lock_keys(name), [])
        self.release_ok(name, g["lease"])
        self.wait_for(self.keys_gone(name), slack(3.0),
                      "keys of %s to be forgotten" % name)

    def test_expired_lock_leaves_no_redis_keys_after_ttl_plus_idle_forget_ms(self):
        name = self.lock_name()
        self.acquire_ok(name, ttl_ms=300)
        self.wait_for(self.keys_gone(name), slack(3.0),
                      "keys of %s to be forgotten" % name)

    def test_held_lock_is_never_forgotten(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=3000)
        # the cause: more than idle-forget-ms (400) passes while the lock
        # is held; no event marks a forgetting that does not happen
        time.sleep(0.4 + 0.3)
        self.assertNotEqual(self.redis.lock_keys(name), [])
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(self.renew(name, g["lease"]).status, 200)

    def test_forgotten_lock_inspects_with_null_token_and_next_token_is_greater(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        self.wait_for(self.keys_gone(name), slack(3.0), "forgetting")
        s = self.state(name)
        self.assertIsNone(s["token"])
        self.assertFalse(s["held"])
        g2 = self.acquire_ok(name)
        self.assertGreater(g2["token"], g["token"])

    def test_sequencer_of_forgotten_lock_is_not_valid(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        self.wait_for(self.keys_gone(name), slack(3.0), "forgetting")
        b = self.check_ok(g["sequencer"])
        self.assertIs(b["valid"], False)
        self.assertIn(b["reason"], ("expired", "stale"))

    def test_all_keys_of_a_lock_start_with_fg_and_carry_its_hash_tag(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=10000, value="v", owner="o")
        w = self.waiter(name, wait_ms=5000)
        self.wait_waiters(name, 1)
        keys = self.redis.lock_keys(name)
        self.assertNotEqual(keys, [])
        for k in keys:
            self.assertTrue(k.startswith("fg:"), k)
            self.assertIn("{%s}" % name, k)
        self.release_ok(name, g["lease"])
        r = w.result(slack(3.0))
        self.release_ok(name, r.json["lease"])
        self.wait_for(self.keys_gone(name), slack(3.0), "forgetting")

    def test_lock_whose_waiter_timed_out_is_forgotten_too(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=10000)
        w = self.waiter(name, wait_ms=300)
        self.assertEqual(w.result(slack(5.0)).status, 409)
        self.release_ok(name, g["lease"])
        self.wait_for(self.keys_gone(name), slack(3.0),
                      "keys of %s to be forgotten" % name)

    def test_queued_waiter_keeps_the_lock_remembered(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=1500)
        w = self.waiter(name, wait_ms=5000)
        self.wait_waiters(name, 1)
        r = w.result(slack(5.0))
        self.assertEqual(r.status, 200, r)
        self.assertGreater(r.json["token"], g["token"])
