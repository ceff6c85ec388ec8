"""test_unknown_fields.py - a body field the call does not know is an
error (contract v1.3), against the real processes (one Redis, one gateway,
open mode): 400 bad_request whose message names the field, on every call
that reads a body (acquire, renew, release, break, inspect, check); the
call then changes nothing. Every documented field is still accepted.
"""

import time

from harness import LOCKS, TestCase, slack


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
