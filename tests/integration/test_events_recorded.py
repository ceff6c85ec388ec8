"""test_events_recorded.py - the events only the gateway sees (contract
v1.5), as GET /_fence/v1/events shows them: a grant whose lease ran out is
`expired` (its token and who), a renewal of a lease that holds nothing is
`lease_lost`, stale-token writes are `refused`, folded per lock and code
per second with their count, their path without the query, and a write no
lock could be found for is none (an event is a lock's); nothing with
`events = no` (read straight from the one Redis' stream: nothing is there
at all).
"""

import http.client
import json
import math
import time
import urllib.parse

import s3env
from harness import TestCase, single_redis, slack, wait_until
from test_s3_mode import S3Base

STREAM = "fg:{!ev}:s"


def fields_of(entry):
    """A stream entry [id, [f1, v1, ...]] as (id, {f: v})."""
    eid, flat = entry
    eid = eid.decode() if isinstance(eid, bytes) else eid
    flat = [x.decode() if isinstance(x, bytes) else x for x in flat]
    return eid, dict(zip(flat[0::2], flat[1::2]))


def api_events(case, prefix):
    """Every event under prefix the gateway shows, oldest first, page by
    page to the end."""
    out, after = [], None
    while True:
        q = "prefix=%s&limit=1000" % urllib.parse.quote(prefix, safe="")
        if after:
            q += "&after=" + after
        r = case.req("GET", "/_fence/v1/events?" + q)
        case.assertEqual(r.status, 200, r)
        out += r.json["events"]
        nx = r.json["next"]
        if nx is None or nx == after:
            return out
        after = nx


class EventsCase(TestCase):

    def events(self, lock, kind=None):
        """The events of `lock` (of `kind`), oldest first."""
        return [e for e in api_events(self, lock) if e["lock"] == lock and
                (kind is None or e["kind"] == kind)]

    def wait_events(self, lock, kind, pred, timeout, what):
        got = wait_until(lambda: (lambda es: es if pred(es) else None)(
            self.events(lock, kind)), slack(timeout))
        self.assertTrue(got, "%s: %r" % (what, self.events(lock)))
        return got


class RecordedTests(EventsCase):

    # one loop: a second's refusals are folded by the loop that saw them
    gateway_flags = ("--threads", "1")

    def test_a_lease_that_ran_out_is_expired_with_its_token_and_holder(self):
        name = self.lock_name("exp")
        g = self.acquire_ok(name, ttl_ms=300, owner="job-7")
        # the maintenance thread asks at the lease's end plus 100 ms, once
        # a second
        es = self.wait_events(name, "expired", lambda es: len(es) >= 1, 5.0,
                              "an expired event")
        self.assertEqual(len(es), 1, es)
        e = es[0]
        self.assertEqual(e["token"], g["token"])
        self.assertEqual(e["owner"], "job-7")
        self.assertEqual(e["client"], "127.0.0.1")
        self.assertRegex(e["gateway"], r"^[0-9a-f]{16}$")
        self.assertIsNone(e["principal"])   # open mode: no principal
        self.assertEqual(e["detail"], {})
        self.assertNotIn(g["lease"], json.dumps(e))
        self.assertNotIn(g["sequencer"], json.dumps(e))

    def test_a_released_lease_is_not_expired(self):
        name, later = self.lock_name("rel"), self.lock_name("later")
        g = self.acquire_ok(name, ttl_ms=300)
        self.release_ok(name, g["lease"])
        # a lease that ends after it: the check that finds this one gone
        # came after the released one's end too
        self.acquire_ok(later, ttl_ms=300)
        self.wait_events(later, "expired", lambda es: len(es) >= 1, 5.0,
                         "the later lease's expired event")
        self.assertEqual(self.events(name, "expired"), [])

    def test_a_renewal_of_a_lost_lease_is_lease_lost(self):
        name = self.lock_name("lost")
        g = self.acquire_ok(name, ttl_ms=30000)
        self.release_ok(name, g["lease"])
        r = self.renew(name, g["lease"], ttl_ms=30000)
        self.assertEqual(r.status, 410, r)
        self.assertEqual(r.json["error"], "lease_expired")
        es = self.wait_events(name, "lease_lost", lambda es: len(es) >= 1,
                              2.0, "a lease_lost event")
        self.assertEqual(len(es), 1, es)
        self.assertEqual(es[0]["client"], "127.0.0.1")
        self.assertIsNone(es[0]["token"])   # Redis tells none for a lost lease
        self.assertNotIn(g["lease"], json.dumps(es[0]))
        # a renewal that holds is no event: one lost after it, on the
        # one loop, is appended after anything it would have appended
        h = self.acquire_ok(name, ttl_ms=30000)
        self.assertEqual(self.renew(name, h["lease"], ttl_ms=30000).status, 200)
        self.release_ok(name, h["lease"])
        other = self.lock_name("after")
        self.assertEqual(self.renew(other, "no-such-lease").status, 410)
        self.wait_events(other, "lease_lost", lambda es: len(es) >= 1, 2.0,
                         "the later lease_lost event")
        self.assertEqual(len(self.events(name, "lease_lost")), 1)

    def test_stale_writes_are_refused_folded_with_their_count(self):
        name = self.lock_name("stale")
        old = self.acquire_ok(name, ttl_ms=30000)
        self.release_ok(name, old["lease"])
        new = self.acquire_ok(name, ttl_ms=30000)
        self.addCleanup(self.release, name, new["lease"])
        n = 40
        # one connection: one loop sees them all
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port,
                                          timeout=slack(10.0))
        t0 = time.monotonic()
        try:
            for i in range(n):
                conn.request("PUT", "/%s?X-Amz-Signature=secret%d" % (name, i),
                             body=b"x", headers={
                                 "Fencing-Token": old["sequencer"]})
                r = conn.getresponse()
                r.read()
                self.assertEqual(r.status, 409)
        finally:
            conn.close()
        spent = time.monotonic() - t0
        # the last fold is sent when its second ends
        es = self.wait_events(
            name, "refused",
            lambda es: sum(e["detail"]["count"] for e in es) >= n,
            3.0, "refusals counting %d" % n)
        details = [e["detail"] for e in es]
        self.assertEqual(sum(d["count"] for d in details), n, details)
        # at most two events a second: the second's first, and its fold
        seconds = math.ceil(spent) + 1
        self.assertLessEqual(len(es), 2 * seconds, details)
        self.assertLess(len(es), n, "folded: %r" % details)
        for e, d in zip(es, details):
            self.assertEqual(d["code"], "stale_token")
            self.assertEqual(d["method"], "PUT")
            self.assertEqual(d["path"], "/" + name)
            self.assertGreaterEqual(d["count"], 1)
            self.assertEqual(e["token"], old["token"])
            self.assertEqual(e["client"], "127.0.0.1")
            self.assertNotIn("secret", json.dumps(e))
            self.assertNotIn(old["sequencer"], json.dumps(e))
        # a first refusal is sent at the end of its turn, not held for
        # the second: the first event is there with count 1
        self.assertEqual(details[0]["count"], 1)

    def test_a_write_no_lock_could_be_found_for_is_no_event(self):
        name = self.lock_name("nolock")
        path = "/" + name + "/a%20b"   # its lock would hold a space
        r = self.req("PUT", path, raw=b"x")
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json["error"], "bad_lock_name")
        # a lost renewal after it, on the one loop, is appended after
        # anything the refusal's turn would have appended
        other = self.lock_name("after")
        self.assertEqual(self.renew(other, "no-such-lease").status, 410)
        self.wait_events(other, "lease_lost", lambda es: len(es) >= 1, 2.0,
                         "the later lease_lost event")
        self.assertEqual([e for e in api_events(self, "")
                          if e["kind"] == "refused" and
                          e["detail"].get("path") == path], [])

    def test_metrics_say_nothing_was_dropped(self):
        r = self.req("GET", "/_fence/v1/metrics")
        self.assertEqual(r.status, 200)
        self.assertIn("fencegate_events_dropped_total 0\n",
                      r.body.decode())


@single_redis("reads the one Redis' event stream directly")
class NotRecordedTests(EventsCase):

    gateway_flags = ("--events", "no", "--threads", "1")

    def expired_total(self):
        body = self.req("GET", "/_fence/v1/metrics").body.decode()
        for line in body.splitlines():
            if line.startswith("fencegate_lock_lease_expired_total "):
                return int(float(line.split()[1]))
        self.fail("no fencegate_lock_lease_expired_total")

    def test_nothing_is_recorded_with_events_off(self):
        name = self.lock_name("off")
        before = self.expired_total()
        old = self.acquire_ok(name, ttl_ms=30000)
        self.release_ok(name, old["lease"])
        g = self.acquire_ok(name, ttl_ms=300)
        self.assertEqual(self.renew(name, old["lease"]).status, 410)
        r = self.req("PUT", "/" + name, raw=b"x",
                     headers={"Fencing-Token": old["sequencer"]})
        self.assertEqual(r.status, 409, r)
        # the check at the lease's end found it gone (and would have
        # recorded it), well after the turns of the calls above
        self.assertTrue(wait_until(lambda: self.expired_total() > before,
                                   slack(5.0)), "the expiry to be counted")
        self.assertEqual(self.redis.command("EXISTS", STREAM), 0)
        self.assertNotEqual(g["token"], old["token"])


def refusals(case, pred):
    """The refused events the gateway shows that pred(event) takes."""
    return [e for e in api_events(case, "")
            if e["kind"] == "refused" and pred(e)]


class S3RecordedTests(S3Base):
    """S3 mode: a presigned URL carries its credentials, its signature and
    its sequencer in the query; a refusal's event has none of them."""

    extra_config = ("threads 1",)

    def test_a_refused_presigned_write_is_recorded_without_its_query(self):
        b = self.make_bucket()
        lock, path = "%s/up" % b, "/%s/up" % b
        stale, cur = self.stale_and_current(lock)
        t = s3env.presign("PUT", path, self.host(), token=stale)
        self.assertIn("X-Amz-Signature=", t)
        r = s3env.send(self.gw.port, "PUT", t, {
            "Host": self.host(), "Content-Length": "1"}, b"x")
        self.assertStale(r, stale, cur)
        es = wait_until(lambda: refusals(self, lambda e: e["lock"] == lock),
                        slack(2.0))
        self.assertTrue(es, "a refused event of %s" % lock)
        self.assertEqual(len(es), 1, es)
        d = es[0]["detail"]
        self.assertEqual((d["code"], d["method"], d["path"], d["count"]),
                         ("stale_token", "PUT", path, 1))
        self.assertEqual(es[0]["token"], int(stale.split(".")[3]))
        text = json.dumps(es[0])
        for secret in ("X-Amz", "Signature", s3env.CLIENT_KEY, stale, cur):
            self.assertNotIn(secret, text)

    def test_a_bucket_write_no_route_guards_is_no_event(self):
        new = self.bucket("n")
        r = self.s3("PUT", "/" + new, token=self.sequencer(new))
        self.assertFenceError(r, 403, "FenceSubtreeUnguarded")
        # a lost renewal after it, on the one loop, is appended after
        # anything the refusal's turn would have appended
        other = "%s/after" % new
        self.assertEqual(self.renew(other, "no-such-lease").status, 410)
        self.assertTrue(wait_until(lambda: [
            e for e in api_events(self, other) if e["kind"] == "lease_lost"],
            slack(2.0)), "the later lease_lost event")
        self.assertEqual(refusals(self, lambda e: e["detail"].get("path")
                                  == "/" + new), [])
