"""test_lock_api.py - the rows of the contract's Lock API table, one
behaviour per test: acquire, renew, release, inspect, check, health, and
the HTTP envelope around them (404/405/413, error bodies)."""

import base64
import json
import os
import re
import time

import harness
from harness import (LOCKS, TestCase, random_lease, slack, tamper,
                     wait_lock_free)

SEQ_CHARS_RE = re.compile(r"^[\x21-\x7e]+$")   # header-safe, no spaces


# ---------------------------------------------------------------------------


class AcquireTests(TestCase):

    def test_acquire_free_lock_returns_200_with_name_lease_token_mode_ttl_sequencer_holds(self):
        name = self.lock_name()
        r = self.acquire(name, body={"ttl_ms": 5000})
        self.assertEqual(r.status, 200, r)
        b = r.json
        for k in ("name", "lease", "token", "mode", "ttl_ms", "sequencer",
                  "holds"):
            self.assertIn(k, b, r)
        self.assertEqual(b["name"], name)
        self.assertEqual(b["mode"], "exclusive")
        self.assertEqual(b["ttl_ms"], 5000)
        self.assertEqual(b["holds"], 1)
        self.assert_lease(b["lease"])
        self.assert_token(b["token"])
        self.assertIsInstance(b["sequencer"], str)
        self.assertRegex(b["sequencer"], SEQ_CHARS_RE)

    def test_acquire_with_empty_object_defaults_to_ttl_30000_exclusive(self):
        b = self.acquire_ok(self.lock_name())
        self.assertEqual(b["ttl_ms"], 30000)
        self.assertEqual(b["mode"], "exclusive")
        self.assertEqual(b["holds"], 1)

    def test_acquire_without_body_defaults_to_ttl_30000_exclusive(self):
        name = self.lock_name()
        r = self.req("POST", LOCKS + name)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["ttl_ms"], 30000)
        self.assertEqual(r.json["mode"], "exclusive")
        self.assertTrue(self.state(name)["held"])

    def test_acquire_of_held_lock_with_wait_ms_0_returns_409_lock_held(self):
        name = self.lock_name()
        self.acquire_ok(name)
        r = self.acquire(name, body={"wait_ms": 0})
        self.assert_error(r, 409, "lock_held")

    def test_acquire_of_held_lock_without_wait_ms_tries_once_and_returns_409_at_once(self):
        name = self.lock_name()
        self.acquire_ok(name)
        r = self.acquire(name, body={})
        self.assert_error(r, 409, "lock_held")
        self.assertLess(r.elapsed, slack(1.0))

    def test_acquire_409_leaves_holder_token_and_ttl_unchanged(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=20000)
        self.assert_error(self.acquire(name, body={"ttl_ms": 100}), 409,
                          "lock_held")
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["holders"], 1)
        self.assertEqual(s["waiters"], 0)
        self.assertGreater(s["ttl_ms"], 15000)
        self.release_ok(name, g["lease"])

    def test_acquire_accepts_ttl_ms_at_bounds_100_and_3600000(self):
        a = self.acquire_ok(self.lock_name(), ttl_ms=100)
        self.assertEqual(a["ttl_ms"], 100)
        b = self.acquire_ok(self.lock_name(), ttl_ms=3600000)
        self.assertEqual(b["ttl_ms"], 3600000)

    def test_acquire_accepts_wait_ms_at_bounds_0_and_300000_on_free_lock(self):
        self.acquire_ok(self.lock_name(), wait_ms=0)
        r = self.acquire(self.lock_name(), body={"wait_ms": 300000})
        self.assertEqual(r.status, 200, r)
        self.assertLess(r.elapsed, slack(2.0))

    def test_acquire_accepts_owner_text(self):
        b = self.acquire_ok(self.lock_name(), owner="worker-7 on host-a")
        self.assertEqual(b["holds"], 1)

    def test_acquire_accepts_explicit_exclusive_mode(self):
        b = self.acquire_ok(self.lock_name(), mode="exclusive")
        self.assertEqual(b["mode"], "exclusive")

    def test_acquire_shared_mode_returns_mode_shared(self):
        b = self.acquire_ok(self.lock_name(), mode="shared")
        self.assertEqual(b["mode"], "shared")
        self.assertEqual(b["holds"], 1)

    def test_acquire_gives_distinct_leases_and_sequencers_per_grant(self):
        name = self.lock_name()
        leases, seqs = set(), set()
        for _ in range(6):
            g = self.acquire_ok(name)
            self.assert_lease(g["lease"])
            leases.add(g["lease"])
            seqs.add(g["sequencer"])
            self.release_ok(name, g["lease"])
        self.assertEqual(len(leases), 6)
        self.assertEqual(len(seqs), 6)

    def test_acquire_token_is_json_integer_below_2_pow_53(self):
        r = self.acquire(self.lock_name(), body={})
        self.assertEqual(r.status, 200, r)
        self.assert_token(r.json["token"])
        # a JSON integer literal, not 1.0 or "1"
        self.assertRegex(r.body.decode(), r'"token"\s*:\s*\d+\s*[,}]')

    def test_acquire_name_is_everything_after_locks_prefix_including_slashes(self):
        base = self.lock_name()
        b = self.acquire_ok(base + "/orders/42")
        self.assertEqual(b["name"], base + "/orders/42")
        self.assertTrue(self.state(base + "/orders/42")["held"])
        # the parent and child names are different locks
        self.assertFalse(self.state(base + "/orders")["held"])
        self.assertFalse(self.state(base + "/orders/42/x")["held"])
        self.acquire_ok(base + "/orders")
        self.acquire_ok(base + "/orders/42/x")

    def test_acquire_accepts_every_allowed_name_character(self):
        base = self.lock_name()
        for suffix in ("/ABCXYZabcxyz0189", "/._~-", "/a..b", "/.hidden",
                       "/...", "/a/.b/c.", "/~", "/-", "/_", "/x.y~z-w_v"):
            name = base + suffix
            r = self.acquire(name, body={})
            self.assertEqual(r.status, 200, "%s: %r" % (name, r))
            self.assertEqual(r.json["name"], name)
            self.assertEqual(self.state(name)["name"], name)
            self.release_ok(name, r.json["lease"])

    def test_acquire_accepts_name_of_255_bytes(self):
        name = self.lock_name()
        name = name + "/" + "n" * (254 - len(name))
        self.assertEqual(len(name), 255)
        b = self.acquire_ok(name)
        self.assertEqual(b["name"], name)
        self.assertTrue(self.state(name)["held"])
        self.release_ok(name, b["lease"])

    def test_acquire_different_lock_names_are_independent(self):
        a, b = self.lock_name("a"), self.lock_name("b")
        self.acquire_ok(a)
        self.acquire_ok(b)
        self.assertTrue(self.state(a)["held"])
        self.assertTrue(self.state(b)["held"])

    def test_lock_expires_after_ttl_and_is_granted_again_with_greater_token(self):
        name = self.lock_name()
        # long enough for the second acquire to come within it when loaded
        ttl_s = slack(1.0)
        g1 = self.acquire_ok(name, ttl_ms=int(ttl_s * 1000))
        t_g1 = time.monotonic()
        self.assert_error(self.acquire(name, body={}), 409, "lock_held")
        # free by its ttl_ms (and 150 ms) after the grant, as before, but
        # seen as soon as it is
        s = wait_lock_free(self, name, max(0.0, t_g1 + ttl_s + 0.15
                                           - time.monotonic()))
        self.assertFalse(s["held"], s)
        g2 = self.acquire_ok(name)
        self.assertGreater(g2["token"], g1["token"])

    def test_concurrent_try_acquires_grant_exactly_one(self):
        name = self.lock_name()
        calls = [self.call("POST", name, body={"wait_ms": 0})
                 for _ in range(16)]
        results = [c.result(slack(10.0)) for c in calls]
        codes = sorted(r.status for r in results)
        self.assertEqual(codes.count(200), 1, codes)
        self.assertEqual(codes.count(409), 15, codes)


class RenewTests(TestCase):

    def test_renew_returns_200_with_name_token_ttl_ms(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=5000)
        r = self.renew(name, g["lease"], ttl_ms=8000)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["name"], name)
        self.assertEqual(r.json["token"], g["token"])
        self.assertEqual(r.json["ttl_ms"], 8000)
        self.assertNotIn("lease", r.json)

    def test_renew_extends_the_lease_past_its_original_expiry(self):
        name = self.lock_name()
        ttl_s = slack(1.0)       # the renewal comes well within it
        t0 = time.monotonic()
        g = self.acquire_ok(name, ttl_ms=int(ttl_s * 1000))
        # the cause: the renewal comes a while after the grant
        time.sleep(ttl_s / 4)
        r = self.renew(name, g["lease"], ttl_ms=int(4 * ttl_s * 1000))
        self.assertEqual(r.status, 200, r)
        # the cause: the time of the original expiry must pass, the lock
        # still held through it
        time.sleep(max(0.0, t0 + ttl_s + 0.2 - time.monotonic()))
        s = self.state(name)      # past the original expiry
        self.assertTrue(s["held"], s)
        self.assertEqual(s["token"], g["token"])
        self.assertGreater(s["ttl_ms"], 0)
        self.assertLessEqual(s["ttl_ms"], int(4 * ttl_s * 1000))

    def test_renew_without_ttl_ms_uses_the_ttl_of_the_grant(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=20000)
        # the cause: the grant's own ttl_ms runs down by a second, the least
        # that tells a renewal to 20 s from none (the bound 19000 below)
        time.sleep(1.0)
        r = self.renew(name, g["lease"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["ttl_ms"], 20000)
        # more than the grant alone would have left (20 s less the second
        # slept), with a second for the inspect to come
        s = self.state(name)
        self.assertGreater(s["ttl_ms"], 19000)
        self.assertLessEqual(s["ttl_ms"], 20000)

    def test_renew_can_shorten_the_lease(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        r = self.renew(name, g["lease"], ttl_ms=200)
        self.assertEqual(r.status, 200, r)
        wait_lock_free(self, name)   # seconds, not the 60 s of the grant

    def test_renew_keeps_the_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        for _ in range(3):
            r = self.renew(name, g["lease"], ttl_ms=10000)
            self.assertEqual(r.json["token"], g["token"])
        self.assertEqual(self.state(name)["token"], g["token"])

    def test_renew_with_never_issued_lease_returns_410_lease_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.assert_error(self.renew(name, random_lease(), ttl_ms=5000),
                          410, "lease_expired")
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])

    def test_renew_of_free_lock_returns_410_lease_expired(self):
        name = self.lock_name()
        self.assert_error(self.renew(name, random_lease()), 410,
                          "lease_expired")
        self.assertFalse(self.state(name)["held"])

    def test_renew_after_expiry_returns_410_lease_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        self.assert_error(self.renew(name, g["lease"], ttl_ms=5000), 410,
                          "lease_expired")
        self.assertFalse(self.state(name)["held"])

    def test_renew_after_release_returns_410_lease_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        self.assert_error(self.renew(name, g["lease"]), 410, "lease_expired")
        self.assertFalse(self.state(name)["held"])

    def test_renew_with_lease_of_another_lock_returns_410_lease_expired(self):
        a, b = self.lock_name("a"), self.lock_name("b")
        ga = self.acquire_ok(a)
        gb = self.acquire_ok(b, ttl_ms=5000)
        self.assert_error(self.renew(b, ga["lease"], ttl_ms=60000), 410,
                          "lease_expired")
        self.assertLessEqual(self.state(b)["ttl_ms"], 5000)
        self.assertEqual(self.state(b)["token"], gb["token"])

    def test_renew_with_old_lease_after_regrant_returns_410_and_keeps_new_holder(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        g2 = self.acquire_ok(name, ttl_ms=5000)
        self.assert_error(self.renew(name, g1["lease"], ttl_ms=60000), 410,
                          "lease_expired")
        s = self.state(name)
        self.assertEqual(s["token"], g2["token"])
        self.assertLessEqual(s["ttl_ms"], 5000)


class ReleaseTests(TestCase):

    def test_release_returns_204_without_body_and_frees_the_lock(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.release(name, g["lease"])
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        s = self.state(name)
        self.assertFalse(s["held"])
        self.assertEqual(s["holders"], 0)
        self.acquire_ok(name)

    def test_release_without_fence_lease_header_returns_400_bad_request(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.req("DELETE", LOCKS + name)
        self.assert_bad_request(r)
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])

    def test_release_takes_the_lease_without_the_whitespace_after_it(self):
        # a field value excludes the whitespace around it (RFC 9110 5.5)
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.release(name, g["lease"] + " \t ")
        self.assertEqual(r.status, 204, r)
        self.assertFalse(self.state(name)["held"])

    def test_release_with_two_fence_lease_headers_returns_400_and_lock_stays_held(self):
        # which of two leases to release is not the gateway's to guess
        name = self.lock_name()
        g = self.acquire_ok(name)
        for pair in ((g["lease"], random_lease()), (random_lease(), g["lease"]),
                     (g["lease"], g["lease"])):
            req = ("DELETE %s%s HTTP/1.1\r\nHost: x\r\nFence-Lease: %s\r\n"
                   "Fence-Lease: %s\r\nConnection: close\r\n\r\n"
                   % (LOCKS, name, pair[0], pair[1])).encode()
            raw = harness.raw_exchange(self.gw.port, req, timeout=slack(5.0))
            status, _, body = harness.parse_raw(raw)
            self.assertEqual(status, 400, raw[:300])
            self.assertEqual(json.loads(body)["error"], "bad_request", body)
            s = self.state(name)
            self.assertTrue(s["held"])
            self.assertEqual(s["token"], g["token"])

    def test_release_with_never_issued_lease_returns_410_and_lock_stays_held(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.assert_error(self.release(name, random_lease()), 410,
                          "lease_expired")
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["holders"], 1)

    def test_release_with_malformed_lease_is_rejected_and_lock_stays_held(self):
        name = self.lock_name()
        self.acquire_ok(name)
        for bad in ("x", "not a lease", "A" * 200, "%%%%"):
            r = self.release(name, bad)
            self.assertIn(r.status, (400, 410), "%r: %r" % (bad, r))
            self.assertIn(r.json.get("error"), ("bad_request",
                                                "lease_expired"))
        self.assertTrue(self.state(name)["held"])

    def test_release_with_lease_of_another_lock_returns_410_and_changes_nothing(self):
        a, b = self.lock_name("a"), self.lock_name("b")
        ga = self.acquire_ok(a)
        gb = self.acquire_ok(b)
        self.assert_error(self.release(b, ga["lease"]), 410, "lease_expired")
        self.assertTrue(self.state(a)["held"])
        self.assertTrue(self.state(b)["held"])
        self.assertEqual(self.state(b)["token"], gb["token"])

    def test_release_of_free_lock_returns_410(self):
        name = self.lock_name()
        self.assert_error(self.release(name, random_lease()), 410,
                          "lease_expired")

    def test_second_release_of_same_lease_returns_410(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        self.assert_error(self.release(name, g["lease"]), 410,
                          "lease_expired")

    def test_release_after_expiry_returns_410(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        self.assert_error(self.release(name, g["lease"]), 410,
                          "lease_expired")

    def test_release_with_expired_lease_never_releases_the_next_holder(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        g2 = self.acquire_ok(name, ttl_ms=10000)
        self.assert_error(self.release(name, g1["lease"]), 410,
                          "lease_expired")
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g2["token"])
        self.release_ok(name, g2["lease"])


class InspectTests(TestCase):

    def test_inspect_of_never_used_lock_is_free_with_null_mode_and_token(self):
        name = self.lock_name()
        r = self.inspect(name)
        self.assertEqual(r.status, 200, r)
        b = r.json
        self.assertEqual(b.get("name"), name)
        expect = {"held": False, "mode": None, "token": None, "holders": 0,
                  "waiters": 0, "ttl_ms": 0}
        for k, v in expect.items():
            self.assertIn(k, b, r)
            self.assertEqual(b[k], v, "%s: %r" % (k, b))
        self.assertNotIn("value", b)

    def test_inspect_of_never_used_lock_writes_no_redis_keys(self):
        name = self.lock_name()
        self.state(name)
        self.assert_no_keys(name)

    def test_inspect_of_held_exclusive_lock_shows_holder_token_and_remaining_ttl(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=10000)
        s = self.state(name)
        self.assertEqual(s["name"], name)
        self.assertIs(s["held"], True)
        self.assertEqual(s["mode"], "exclusive")
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["holders"], 1)
        self.assertEqual(s["waiters"], 0)
        self.assertIsInstance(s["ttl_ms"], int)
        self.assertGreater(s["ttl_ms"], 8000)
        self.assertLessEqual(s["ttl_ms"], 10000)

    def test_inspect_ttl_ms_counts_down(self):
        name = self.lock_name()
        self.acquire_ok(name, ttl_ms=10000)
        t1 = self.state(name)["ttl_ms"]
        # the cause: time passes, more than the 250 ms asserted below
        time.sleep(0.3)
        t2 = self.state(name)["ttl_ms"]
        self.assertLess(t2, t1)
        self.assertGreater(t1 - t2, 250)

    def test_inspect_never_shows_a_lease(self):
        name = self.lock_name()
        g = self.acquire_ok(name, mode="shared")
        g2 = self.acquire_ok(name, mode="shared")
        r = self.inspect(name)
        self.assertNotIn("lease", r.json)
        self.assertNotIn("leases", r.json)
        self.assertNotIn(g["lease"].encode(), r.body)
        self.assertNotIn(g2["lease"].encode(), r.body)

    def test_inspect_after_release_is_free_and_keeps_last_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        s = self.state(name)
        self.assertIs(s["held"], False)
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["holders"], 0)
        self.assertEqual(s["ttl_ms"], 0)
        self.assertIsNone(s["mode"])

    def test_inspect_after_expiry_is_free_with_ttl_0_and_keeps_last_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        s = self.state(name)
        self.assertIs(s["held"], False)
        self.assertEqual(s["ttl_ms"], 0)
        self.assertEqual(s["holders"], 0)
        self.assertEqual(s["token"], g["token"])

    def test_inspect_shows_shared_holders_count(self):
        name = self.lock_name()
        for _ in range(3):
            self.acquire_ok(name, mode="shared")
        s = self.state(name)
        self.assertEqual(s["mode"], "shared")
        self.assertEqual(s["holders"], 3)

    def test_inspect_has_no_value_when_none_was_set(self):
        name = self.lock_name()
        self.acquire_ok(name)
        self.assertNotIn("value", self.state(name))

    def test_inspect_ignores_unrelated_query_string(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        r = self.inspect(name, query="?foo=bar")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["name"], name)
        self.assertEqual(r.json["token"], g["token"])


class CheckTests(TestCase):

    def test_check_of_live_grant_is_valid_with_name_token_mode(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        b = self.check_ok(g["sequencer"])
        self.assertIs(b["valid"], True, b)
        self.assertEqual(b["name"], name)
        self.assertEqual(b["token"], g["token"])
        self.assertEqual(b["mode"], "exclusive")

    def test_check_of_shared_grant_is_valid_with_mode_shared(self):
        name = self.lock_name()
        g = self.acquire_ok(name, mode="shared")
        b = self.check_ok(g["sequencer"])
        self.assertIs(b["valid"], True, b)
        self.assertEqual(b["mode"], "shared")
        self.assertEqual(b["token"], g["token"])

    def test_check_after_release_is_invalid_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        b = self.check_ok(g["sequencer"])
        self.assertIs(b["valid"], False)
        self.assertEqual(b["reason"], "expired")

    def test_check_after_expiry_is_invalid_expired(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=150)
        wait_lock_free(self, name)
        b = self.check_ok(g["sequencer"])
        self.assertIs(b["valid"], False)
        self.assertEqual(b["reason"], "expired")

    def test_check_after_a_newer_grant_is_invalid_stale(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name)
        self.release_ok(name, g1["lease"])
        self.acquire_ok(name)
        b = self.check_ok(g1["sequencer"])
        self.assertIs(b["valid"], False)
        self.assertEqual(b["reason"], "stale")

    def test_check_stays_stale_after_the_newer_grant_also_ended(self):
        name = self.lock_name()
        g1 = self.acquire_ok(name)
        self.release_ok(name, g1["lease"])
        g2 = self.acquire_ok(name)
        self.release_ok(name, g2["lease"])
        self.assertEqual(self.check_ok(g1["sequencer"])["reason"], "stale")
        self.assertEqual(self.check_ok(g2["sequencer"])["reason"], "expired")

    def test_check_of_sequencer_with_tampered_mac_is_invalid_forged(self):
        g = self.acquire_ok(self.lock_name())
        b = self.check_ok(tamper(g["sequencer"]))
        self.assertIs(b["valid"], False)
        self.assertEqual(b["reason"], "forged")

    def test_check_of_sequencer_with_tampered_token_is_invalid_forged(self):
        g = self.acquire_ok(self.lock_name())
        s = g["sequencer"]
        tok = str(g["token"])
        self.assertIn(tok, s, "sequencer does not carry its token in "
                              "decimal; adapt the tampering")
        i = s.rindex(tok)
        for other in (g["token"] - 1, g["token"] + 1):
            forged = s[:i] + str(other) + s[i + len(tok):]
            b = self.check_ok(forged)
            self.assertIs(b["valid"], False, forged)
            self.assertEqual(b["reason"], "forged", forged)

    def test_check_of_sequencer_with_mac_of_another_lock_is_invalid_forged(self):
        ga = self.acquire_ok(self.lock_name("a"))
        gb = self.acquire_ok(self.lock_name("b"))
        pa, pb = ga["sequencer"].split("."), gb["sequencer"].split(".")
        self.assertGreater(len(pa), 1, "sequencer has no '.'-separated MAC")
        mixed = ".".join(pa[:-1] + pb[-1:])
        b = self.check_ok(mixed)
        self.assertIs(b["valid"], False)
        self.assertEqual(b["reason"], "forged")

    def test_check_of_exclusive_sequencer_relabelled_shared_is_forged(self):
        g = self.acquire_ok(self.lock_name())
        parts = g["sequencer"].split(".")
        self.assertIn("x", parts, "no mode field 'x' in the sequencer")
        parts[parts.index("x")] = "s"
        b = self.check_ok(".".join(parts))
        self.assertIs(b["valid"], False)
        self.assertEqual(b["reason"], "forged")

    def test_check_of_garbage_strings_is_invalid_malformed(self):
        for junk in ("garbage", "", "fg1.", "a.b.c.d.e", "...", "x" * 600,
                     "\u00e9\u00e8", "{}", "0"):
            b = self.check_ok(junk)
            self.assertIs(b["valid"], False, junk)
            self.assertEqual(b["reason"], "malformed", "%r: %r" % (junk, b))

    def test_check_of_truncated_sequencer_is_invalid(self):
        g = self.acquire_ok(self.lock_name())
        s = g["sequencer"]
        for cut in (s[:-1], s[:len(s) // 2], s[:3]):
            b = self.check_ok(cut)
            self.assertIs(b["valid"], False, cut)
            self.assertIn(b["reason"], ("malformed", "forged"), cut)

    def test_check_with_body_that_is_not_json_returns_400_bad_request(self):
        for raw in ("not json", "{", '{"sequencer":', "", "\x00\x01"):
            r = self.req("POST", "/_fence/v1/check", raw=raw)
            self.assert_bad_request(r, repr(raw))
        self.assert_alive()

    def test_check_with_json_that_is_not_an_object_returns_400_bad_request(self):
        for raw in ("[]", '"fg1.x"', "1", "null", "true"):
            r = self.req("POST", "/_fence/v1/check", raw=raw)
            self.assert_bad_request(r, raw)

    def test_check_with_missing_or_non_string_sequencer_is_rejected(self):
        for body in ({}, {"sequencer": 5}, {"sequencer": None},
                     {"sequencer": ["a"]}, {"seq": "x"}):
            r = self.req("POST", "/_fence/v1/check", body=body)
            if r.status == 200:
                self.assertIs(r.json["valid"], False, body)
                self.assertEqual(r.json["reason"], "malformed", body)
            else:
                self.assert_bad_request(r, repr(body))

    def test_check_of_reentered_grant_stays_valid(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.acquire_ok(name, lease=g["lease"])
        self.release_ok(name, g["lease"])
        b = self.check_ok(g["sequencer"])
        self.assertIs(b["valid"], True)
        self.release_ok(name, g["lease"])
        self.assertEqual(self.check_ok(g["sequencer"])["reason"], "expired")

    def test_check_stays_valid_across_renewals(self):
        name = self.lock_name()
        ttl_s = slack(1.0)       # each renewal comes well within it
        g = self.acquire_ok(name, ttl_ms=int(ttl_s * 1000))
        for _ in range(3):
            # the cause: the renewals are spread over the lease
            time.sleep(ttl_s / 4)
            self.assertEqual(self.renew(name, g["lease"]).status, 200)
        self.assertIs(self.check_ok(g["sequencer"])["valid"], True)

    def test_check_writes_nothing_for_a_never_used_lock(self):
        g = self.acquire_ok(self.lock_name())
        # a forged sequencer naming another, never used lock
        other = self.lock_name("other")
        parts = g["sequencer"].split(".")
        if len(parts) == 5:
            parts[1] = base64.urlsafe_b64encode(other.encode()) \
                .rstrip(b"=").decode()
            b = self.check_ok(".".join(parts))
            self.assertIs(b["valid"], False)
            self.assertEqual(b["reason"], "forged")
        self.assert_no_keys(other)


class HealthAndEnvelopeTests(TestCase):

    def test_health_is_200_redis_up_upstream_up_when_both_are_up(self):
        r = self.health()
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json.get("redis"), "up", r)
        self.assertEqual(r.json.get("upstream"), "up", r)

    def test_json_responses_carry_content_type_application_json(self):
        name = self.lock_name()
        rs = [self.health(), self.acquire(name, body={}),
              self.acquire(name, body={}), self.inspect(name),
              self.req("GET", "/_fence/v1/nope"),
              self.req("POST", "/_fence/v1/check", body={"sequencer": "x"})]
        for r in rs:
            ct = r.header("Content-Type") or ""
            self.assertTrue(ct.startswith("application/json"),
                            "Content-Type %r on %r" % (ct, r))

    def test_unknown_paths_under_fence_prefix_return_404_not_found(self):
        for method in ("GET", "POST"):
            for path in ("/_fence/v1/nope", "/_fence/v1/", "/_fence/",
                         "/_fence/v2/locks/a", "/_fence/v1/checkx",
                         "/_fence/v1/health/x", "/_fence/v1/check/x",
                         "/_fence/v1/lock/a", "/_fence/v1/locksx/a",
                         "/_fence/x/y/z"):
                r = self.req(method, path, body={} if method == "POST"
                             else None)
                self.assert_error(r, 404, "not_found", "%s %s" % (method,
                                                                  path))

    def test_wrong_method_on_known_path_returns_405_method_not_allowed(self):
        name = self.lock_name()
        for method, path in (("PUT", LOCKS + name), ("POST", "/_fence/v1/health"),
                             ("DELETE", "/_fence/v1/health"),
                             ("GET", "/_fence/v1/check"),
                             ("DELETE", "/_fence/v1/check"),
                             ("PUT", "/_fence/v1/check"),
                             ("PATCH", "/_fence/v1/check")):
            r = self.req(method, path, body={} if method != "GET" else None)
            self.assert_error(r, 405, "method_not_allowed",
                              "%s %s" % (method, path))
        self.assert_no_keys(name)

    def test_405_response_lists_allowed_methods_in_allow_header(self):
        name = self.lock_name()
        r = self.req("PUT", LOCKS + name, body={})
        self.assertEqual(r.status, 405, r)
        allow = r.header("Allow") or ""
        got = {m.strip() for m in allow.split(",")}
        for m in ("GET", "POST", "PATCH", "DELETE"):
            self.assertIn(m, got, "Allow: %r" % allow)
        r = self.req("POST", "/_fence/v1/health", body={})
        self.assertIn("GET", r.header("Allow") or "")

    def test_body_over_64_kib_returns_413_payload_too_large(self):
        name = self.lock_name()
        body = b'{"ttl_ms":5000' + b" " * (64 * 1024 + 1 - 15) + b"}"
        self.assertEqual(len(body), 64 * 1024 + 1)
        r = self.req("POST", LOCKS + name, raw=body)
        self.assert_error(r, 413, "payload_too_large")
        self.assert_no_keys(name)
        self.assert_alive()

    def test_body_of_exactly_64_kib_is_accepted(self):
        name = self.lock_name()
        body = b'{"ttl_ms":5000' + b" " * (64 * 1024 - 15) + b"}"
        self.assertEqual(len(body), 64 * 1024)
        r = self.req("POST", LOCKS + name, raw=body)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["ttl_ms"], 5000)

    def test_body_over_64_kib_on_renew_and_check_returns_413(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        big = json.dumps({"lease": g["lease"], "pad": "p" * 70000})
        self.assert_error(self.req("PATCH", LOCKS + name, raw=big), 413,
                          "payload_too_large")
        big = json.dumps({"sequencer": g["sequencer"], "pad": "p" * 70000})
        self.assert_error(self.req("POST", "/_fence/v1/check", raw=big), 413,
                          "payload_too_large")
        self.assertTrue(self.state(name)["held"])

    def test_huge_declared_content_length_is_refused_with_413_without_reading_it(self):
        name = self.lock_name()
        req = ("POST %s%s HTTP/1.1\r\nHost: x\r\nContent-Type: "
               "application/json\r\nContent-Length: 1000000000\r\n\r\n{"
               % (LOCKS, name)).encode()
        t0 = time.monotonic()
        raw = harness.raw_exchange(self.gw.port, req, timeout=slack(5.0))
        status, _, body = harness.parse_raw(raw)
        self.assertEqual(status, 413, raw[:300])
        self.assertLess(time.monotonic() - t0, slack(3.0))
        self.assertEqual(json.loads(body)["error"], "payload_too_large")
        self.assert_no_keys(name)
        self.assert_alive()

    def test_chunked_body_over_64_kib_is_refused(self):
        name = self.lock_name()
        chunk = b" " * 8192
        req = ("POST %s%s HTTP/1.1\r\nHost: x\r\nContent-Type: "
               "application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
               % (LOCKS, name)).encode()
        req += b"1\r\n{\r\n"
        for _ in range(9):
            req += b"%x\r\n%s\r\n" % (len(chunk), chunk)
        req += b"1\r\n}\r\n0\r\n\r\n"
        raw = harness.raw_exchange(self.gw.port, req, timeout=slack(5.0))
        status = harness.status_of(raw)
        # 413, or the connection closed without an answer; never a grant
        self.assertIn(status, (413, None), raw[:300])
        self.assert_no_keys(name)
        self.assert_alive()

    def test_error_bodies_have_error_code_and_message(self):
        name = self.lock_name()
        self.acquire_ok(name)
        for r, code in ((self.acquire(name, body={}), "lock_held"),
                        (self.req("GET", "/_fence/v1/zzz"), "not_found"),
                        (self.acquire(name, body={"ttl_ms": 1}), "bad_request"),
                        (self.release(name, random_lease()), "lease_expired"),
                        (self.req("GET", LOCKS + "a//b"), "bad_lock_name")):
            b = r.json
            self.assertEqual(b.get("error"), code, r)
            self.assertRegex(b["error"], r"^[a-z][a-z0-9_]*$")
            self.assertIsInstance(b.get("message"), str)
            self.assertTrue(b["message"].strip())

    def test_keep_alive_connection_serves_several_requests(self):
        import http.client
        name = self.lock_name()
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port,
                                          timeout=10)
        try:
            for method, path, body in (
                    ("GET", "/_fence/v1/health", None),
                    ("POST", LOCKS + name, b"{}"),
                    ("GET", LOCKS + name, None),
                    ("POST", LOCKS + name, b"{}")):
                conn.request(method, path, body=body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                self.assertIn(r.status, (200, 409))
        finally:
            conn.close()
        self.assertTrue(self.state(name)["held"])


# ---------------------------------------------------------------------------
# bad input: every rejected request gets its 4xx JSON error, the server
# stays up, and nothing is written to Redis for the lock.

NOT_INTEGERS = ["1.5", "1e3", "1E3", '"1000"', "true", "false", "1000.0",
                "[1000]", "{}", "-0.0", '""']
TTL_OUT_OF_RANGE = ["99", "0", "-1", "3600001", "4294967296", "4294967396",
                    "9223372036854775807", "9223372036854775808",
                    "18446744073709551616", "-9223372036854775808",
                    "1" + "0" * 30]
WAIT_OUT_OF_RANGE = ["-1", "300001", "4294967296", "18446744073709551616",
                     "-9223372036854775808"]
NON_OBJECTS = ["[]", '"x"', "1", "null", "true", "[{}]", "3.5"]
MALFORMED = ["{", '{"ttl_ms":}', "nope", '{"ttl_ms":1000,}',
             "{'ttl_ms':1000}", "\x00", '{"ttl_ms":1000}garbage',
             '{"ttl_ms":1000}{}', '{"ttl_ms" 1000}', "{]",
             b'{"owner":"\xff\xfe"}']


class BadInputTests(TestCase):

    def _acquire_rejected(self, raw, status=400, code="bad_request"):
        name = self.lock_name()
        r = self.req("POST", LOCKS + name, raw=raw)
        self.assert_error(r, status, code, "body %r" % (raw,))
        self.assertTrue(self.gw.alive(), "fencegate died on %r" % (raw,))
        self.assert_no_keys(name)

    def test_acquire_with_malformed_json_returns_400_and_writes_nothing(self):
        for raw in MALFORMED:
            self._acquire_rejected(raw)
        self.assert_alive()

    def test_acquire_with_non_object_body_returns_400_and_writes_nothing(self):
        for raw in NON_OBJECTS:
            self._acquire_rejected(raw)
        self.assert_alive()

    def test_acquire_with_non_integer_ttl_ms_returns_400(self):
        for lit in NOT_INTEGERS + ["null"]:
            self._acquire_rejected('{"ttl_ms":%s}' % lit)
        self.assert_alive()

    def test_acquire_with_ttl_ms_out_of_range_returns_400(self):
        for lit in TTL_OUT_OF_RANGE:
            self._acquire_rejected('{"ttl_ms":%s}' % lit)
        self.assert_alive()

    def test_acquire_with_non_integer_wait_ms_returns_400(self):
        for lit in NOT_INTEGERS + ["null"]:
            self._acquire_rejected('{"wait_ms":%s}' % lit)
        self.assert_alive()

    def test_acquire_with_wait_ms_out_of_range_returns_400(self):
        for lit in WAIT_OUT_OF_RANGE:
            self._acquire_rejected('{"wait_ms":%s}' % lit)
        self.assert_alive()

    def test_acquire_with_unknown_or_non_string_mode_returns_400(self):
        for lit in ('"both"', '""', '"EXCLUSIVE"', '"Shared"', '"read"',
                    "1", "true", '["shared"]', "{}"):
            self._acquire_rejected('{"mode":%s}' % lit)
        self.assert_alive()

    def test_acquire_with_non_string_owner_returns_400(self):
        for lit in ("1", "true", "{}", '["a"]'):
            self._acquire_rejected('{"owner":%s}' % lit)

    def test_acquire_with_non_string_value_returns_400(self):
        for lit in ("1", "true", "{}", '["a"]'):
            self._acquire_rejected('{"value":%s}' % lit)

    def test_acquire_with_non_string_lease_returns_400(self):
        for lit in ("1", "true", "{}", '["a"]'):
            self._acquire_rejected('{"lease":%s}' % lit)

    def test_acquire_with_bad_lock_delay_ms_returns_400(self):
        for lit in ["-1", "1.5", '"10"', "true", "[]", "4294967296",
                    "18446744073709551616"]:
            self._acquire_rejected('{"lock_delay_ms":%s}' % lit)

    def test_acquire_with_duplicate_keys_does_not_crash(self):
        name = self.lock_name()
        r = self.req("POST", LOCKS + name,
                     raw='{"ttl_ms":1000,"ttl_ms":2000}')
        self.assertIn(r.status, (200, 400), r)
        if r.status == 200:
            self.assertIn(r.json["ttl_ms"], (1000, 2000))
            self.release_ok(name, r.json["lease"])
        else:
            self.assertEqual(r.json["error"], "bad_request")
            self.assert_no_keys(name)
        self.assert_alive()

    def test_rejected_acquire_of_held_lock_leaves_it_unchanged(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=20000)
        for raw in ('{"ttl_ms":1.5}', "[]", "{", '{"mode":"both"}',
                    '{"wait_ms":-1}', '{"lease":5}'):
            r = self.req("POST", LOCKS + name, raw=raw)
            self.assert_bad_request(r, raw)
        s = self.state(name)
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["holders"], 1)
        self.assertEqual(s["waiters"], 0)
        self.assertGreater(s["ttl_ms"], 15000)

    def _renew_rejected(self, name, g, raw):
        r = self.req("PATCH", LOCKS + name, raw=raw)
        self.assert_bad_request(r, "renew body %r" % (raw,))
        self.assertTrue(self.gw.alive(), "fencegate died on %r" % (raw,))

    def test_renew_with_bad_body_returns_400_and_keeps_the_lease(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=20000)
        lease = json.dumps(g["lease"])
        bodies = list(MALFORMED) + NON_OBJECTS + [
            "{}", '{"ttl_ms":5000}', '{"lease":5}', '{"lease":null}',
            '{"lease":[%s]}' % lease]
        bodies += ['{"lease":%s,"ttl_ms":%s}' % (lease, lit)
                   for lit in NOT_INTEGERS + TTL_OUT_OF_RANGE]
        bodies += ['{"lease":%s,"value":%s}' % (lease, lit)
                   for lit in ("1", "true", "{}")]
        for raw in bodies:
            self._renew_rejected(name, g, raw)
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertGreater(s["ttl_ms"], 10000)
        self.assertEqual(self.renew(name, g["lease"], ttl_ms=5000).status,
                         200)
        self.assert_alive()

    def test_observe_with_bad_query_parameters_returns_400(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        for q in ("?wait_ms=abc", "?wait_ms=-1", "?wait_ms=300001",
                  "?wait_ms=1.5", "?wait_ms=18446744073709551616",
                  "?wait_ms=100&after=abc", "?wait_ms=100&after=1.5"):
            r = self.inspect(name, query=q, timeout=slack(5.0))
            self.assert_bad_request(r, q)
        self.assertEqual(self.state(name)["token"], g["token"])
        self.assert_alive()


BAD_NAMES = ["", "a//b", "a/./b", "../x", "x/..", ".", "..", "a/", "/a",
             "a/../b", "./a", "%2e%2e/x", "%2E%2E", "%zz", "a%00b", "a%20b",
             "a%", "a%2", "a:b", "a*b", "{a}", "a%7Bb%7D", "%C3%A9", "a\\b",
             "a;b", "a,b", "a@b", "a+b", "a=b", "a!b", "a$b", "a'b", "a(b)",
             "a|b", 'a"b', "a<b>", "a^b", "a`b", "a[b]", "x" * 256,
             "a/" + "b" * 254]


class BadNameTests(TestCase):

    def _each_bad_name(self, method, **kw):
        import urllib.parse
        for n in BAD_NAMES:
            r = self.req(method, LOCKS + n, **kw)
            self.assert_error(r, 400, "bad_lock_name",
                              "%s name %r" % (method, n))
            self.assertTrue(self.gw.alive(), "fencegate died on %r" % n)
            for form in {n, urllib.parse.unquote(n)}:
                if form:
                    self.assert_no_keys(form)
        self.assert_all_key_tags_valid()
        self.assert_alive()

    def test_acquire_with_bad_lock_name_returns_400_bad_lock_name(self):
        self._each_bad_name("POST", body={})

    def test_inspect_with_bad_lock_name_returns_400_bad_lock_name(self):
        self._each_bad_name("GET")

    def test_renew_with_bad_lock_name_returns_400_bad_lock_name(self):
        self._each_bad_name("PATCH", body={"lease": random_lease()})

    def test_release_with_bad_lock_name_returns_400_bad_lock_name(self):
        self._each_bad_name("DELETE",
                            headers={"Fence-Lease": random_lease()})

    def test_name_of_256_bytes_is_rejected_but_255_accepted(self):
        base = self.lock_name()
        ok = base + "/" + "n" * (254 - len(base))
        self.assertEqual(self.acquire(ok, body={}).status, 200)
        r = self.acquire(ok + "n", body={})
        self.assert_error(r, 400, "bad_lock_name")
        self.assert_no_keys(ok + "n")
