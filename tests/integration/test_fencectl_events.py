"""test_fencectl_events.py - `fencectl events [PREFIX] [--follow]` (contract
v1.5) with the real fencectl, gateway and Redis: a line per event under
the prefix, oldest first, with its kind, lock, token, who and a refusal's
code, method, path and count; --json one event object per line; --follow
prints an event that happens after it started; more than a page of
events is printed whole, each once, in order; no lease ever printed; an
unreachable gateway is an error within --timeout.

The events are made by what the gateway records itself (a renewal of a
lost lease, a stale write) and by the lock functions (grants, releases),
and the test waits until the API shows them before it asks fencectl, so
that what is printed does not depend on when an append reached Redis.
"""

import http.client
import json
import time

from harness import slack
from test_events_recorded import api_events
from test_fencectl import EXIT_UNAVAILABLE, FencectlTestCase


class EventsTests(FencectlTestCase):

    gateway_flags = ("--threads", "1")

    def prefix(self):
        n = self.lock_name()
        return n[:n.rindex("/") + 1]

    def shown(self, lock, kind):
        return [e for e in api_events(self, lock)
                if e["lock"] == lock and e["kind"] == kind]

    def wait_shown(self, lock, kind):
        self.wait_for(lambda: self.shown(lock, kind), slack(3.0),
                      "a %s event of %s" % (kind, lock))

    def lose_a_lease(self, name):
        g = self.acquire_ok(name, ttl_ms=30000)
        self.release_ok(name, g["lease"])
        r = self.renew(name, g["lease"], ttl_ms=30000)
        self.assertEqual(r.status, 410, r)
        self.wait_shown(name, "lease_lost")
        return g

    def refuse_a_write(self, name):
        old = self.acquire_ok(name, ttl_ms=30000)
        self.release_ok(name, old["lease"])
        new = self.acquire_ok(name, ttl_ms=30000)
        r = self.req("PUT", "/" + name + "?secret=1", raw=b"x",
                     headers={"Fencing-Token": old["sequencer"]})
        self.assertEqual(r.status, 409, r)
        self.release_ok(name, new["lease"])
        self.wait_shown(name, "refused")
        return old, new

    def test_events_prints_a_line_per_event_under_the_prefix(self):
        p = self.prefix()
        lost = self.lose_a_lease(p + "a")
        old, new = self.refuse_a_write(p + "b")
        self.lose_a_lease(p[:-1] + "-not/a")   # beside p, not under it
        rc, out, err = self.fc("events", p)
        self.assertEqual(rc, 0, err)
        mine = [l for l in out.splitlines()
                if l.split()[1] in ("lease_lost", "refused")]
        self.assertEqual([(l.split()[1], l.split()[2]) for l in mine],
                         [("lease_lost", p + "a"), ("refused", p + "b")],
                         out)
        for l in out.splitlines():
            self.assertTrue(l.split()[2].startswith(p), l)
            self.assertRegex(l.split()[0],
                             r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        lost_line, refused_line = mine
        self.assertIn(" token=- ", lost_line)
        self.assertIn(" client=127.0.0.1", lost_line)
        self.assertIn(" token=%d " % old["token"], refused_line)
        self.assertIn(" code=stale_token method=PUT path=/%sb count=1"
                      % p, refused_line)
        for g in (lost, old, new):
            self.assertNotIn(g["lease"], out)
            self.assertNotIn(g["sequencer"], out)
        self.assertNotIn("secret", out)

    def test_events_json_prints_one_object_per_line(self):
        p = self.prefix()
        self.lose_a_lease(p + "a")
        self.refuse_a_write(p + "b")
        rc, out, err = self.fc("--json", "events", p)
        self.assertEqual(rc, 0, err)
        evs = [json.loads(l) for l in out.splitlines()]
        mine = [e for e in evs if e["kind"] in ("lease_lost", "refused")]
        self.assertEqual([(e["kind"], e["lock"]) for e in mine],
                         [("lease_lost", p + "a"), ("refused", p + "b")])
        for e in evs:
            self.assertEqual(set(e), {"id", "at", "kind", "lock", "token",
                                      "principal", "owner", "client",
                                      "gateway", "detail"}, e)
        self.assertEqual(mine[1]["detail"]["count"], 1)
        self.assertIsNone(mine[0]["token"])

    def test_events_follow_prints_what_happens_after_it_started(self):
        p = self.prefix()
        self.lose_a_lease(p + "before")
        bg = self.start("events", p, "--follow")
        # what was there is printed first
        self.wait_for(lambda: p + "before" in bg.out(), slack(5.0),
                      "the earlier event to be printed")
        self.lose_a_lease(p + "after")
        self.wait_for(lambda: p + "after" in bg.out(), slack(5.0),
                      "the later event to be printed")
        lines = bg.out().splitlines()
        self.assertEqual([l.split()[2] for l in lines
                          if l.split()[1] == "lease_lost"],
                         [p + "before", p + "after"], lines)
        self.assertIsNone(bg.proc.poll(), "--follow ended: %r" % bg.err())

    def test_events_follows_the_pages_to_the_end_in_order(self):
        p = self.prefix()
        name = p + "many"
        n = 1000 + 37   # more than one page (at most 1000 an answer)
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port,
                                          timeout=slack(10.0))
        try:
            body = json.dumps({"lease": "no-such-lease"}).encode()
            for _ in range(n):
                conn.request("PATCH", "/_fence/v1/locks/" + name, body=body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                self.assertEqual(r.status, 410)
        finally:
            conn.close()
        self.wait_for(lambda: len(self.shown(name, "lease_lost")) == n,
                      slack(5.0), "%d lease_lost events" % n)
        rc, out, err = self.fc("--json", "events", p, timeout=slack(30.0))
        self.assertEqual(rc, 0, err)
        evs = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(len(evs), n, err)
        self.assertTrue(all(e["lock"] == name for e in evs))

        def key(e):
            ms, seq = e["id"].split(".")[0].split("-")
            return int(ms), int(seq)
        ids = [key(e) for e in evs]
        self.assertEqual(ids, sorted(set(ids)), "each once, oldest first")
        rc, out, err = self.fc("events", p, timeout=slack(30.0))
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out.splitlines()), n)

    def test_events_of_an_unreachable_gateway_fail_within_the_timeout(self):
        env = self.env_for()
        env["FENCEGATE_URL"] = "http://127.0.0.1:1"
        t0 = time.monotonic()
        rc, out, err = self.fc("--timeout", "2s", "events", env=env)
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertIn("cannot read events", err)
        self.assertEqual(out, "")
        self.assertLess(time.monotonic() - t0, slack(5.0))
