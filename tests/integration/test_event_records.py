"""test_event_records.py - contract v1.5, what the lock calls record: a
gateway with `events` on (the default) appends, in the lock function that
did it, one entry per grant, release and break to the lock's stream
(fg:{!ev}:s on one Redis; on a Cluster the stream of the lock's own slot,
fg:{!evT}:s), each with the lock, its token, the client, the gateway's
id and, for a grant, its mode and ttl; never a lease. With `events no`
nothing is appended. Read here from Redis itself: the events API that
serves them is tested where it is served.
"""

import json
import re

import harness
from harness import LOCKS, TestCase

GATEWAY_ID_RE = re.compile(r"^[0-9a-f]{16}$")


def stream_of(name):
    """The stream lock `name`'s events go to (lockcore/evkeys.c)."""
    if not harness.cluster_mode():
        return "fg:{!ev}:s"
    import topology
    slot = topology.keyslot("fg:{%s}:s" % name)
    t = 0
    while topology.keyslot("!ev%d" % t) != slot:
        t += 1
    return "fg:{!ev%d}:s" % t


def text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


class EventRecordTests(TestCase):

    def entries(self, name):
        """The entries of lock `name`, oldest first, as dicts (the stream
        holds other locks' entries too)."""
        out = []
        raw = self.redis.command("XRANGE", stream_of(name), "-", "+") or []
        for _id, fv in raw:
            fv = [text(x) for x in fv]
            e = dict(zip(fv[0::2], fv[1::2]))
            self.assertEqual(len(e) * 2, len(fv), "a field given twice")
            if e.get("l") == name:
                out.append(e)
        return out

    def assert_no_lease(self, entries, *leases):
        for e in entries:
            for v in e.values():
                for lease in leases:
                    self.assertNotIn(lease, v, e)

    def test_a_grant_and_its_release_are_recorded_with_their_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=7000, owner="job 1")
        self.release_ok(name, g["lease"])
        es = self.entries(name)
        self.assertEqual([e["k"] for e in es], ["granted", "released"], es)
        for e in es:
            self.assertEqual(e["t"], str(g["token"]), e)
            self.assertEqual(e["o"], "job 1", e)
            self.assertEqual(e["c"], "127.0.0.1", e)
            self.assertRegex(e["g"], GATEWAY_ID_RE)
            self.assertNotIn("p", e, "open mode: no principal")
        self.assertEqual(json.loads(es[0]["d"]),
                         {"mode": "exclusive", "ttl_ms": 7000})
        self.assertNotIn("d", es[1])
        self.assert_no_lease(es, g["lease"])

    def test_renewal_and_reentry_record_nothing(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=7000)
        r = self.renew(name, g["lease"], ttl_ms=9000)
        self.assertEqual(r.status, 200, r)
        self.assertEqual([e["k"] for e in self.entries(name)], ["granted"])

    def test_a_waiter_handed_the_lock_is_granted_after_the_release(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=7000)
        w = self.waiter(name, wait_ms=10000, ttl_ms=5000, mode="exclusive")
        self.wait_waiters(name, 1)
        self.release_ok(name, g["lease"])
        r = w.result(harness.slack(10.0))
        self.assertEqual(r.status, 200, r)
        es = self.entries(name)
        self.assertEqual([e["k"] for e in es],
                         ["granted", "released", "granted"], es)
        self.assertEqual(es[2]["t"], str(r.json["token"]))
        self.assertEqual(json.loads(es[2]["d"]),
                         {"mode": "exclusive", "ttl_ms": 5000,
                          "waited": True})
        # the gateway's id, as the grant before it (not the id of the
        # loop whose channel the waiter was told on)
        self.assertEqual(es[2]["g"], es[0]["g"])
        self.assert_no_lease(es, g["lease"], r.json["lease"])

    def test_a_break_is_recorded(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=7000, mode="shared")
        r = self.req("DELETE", LOCKS + name,
                     headers=[("Fence-Break", str(g["token"]))])
        self.assertEqual(r.status, 204, r)
        es = self.entries(name)
        self.assertEqual([e["k"] for e in es], ["granted", "broken"], es)
        self.assertEqual(es[1]["t"], str(g["token"]))
        self.assertEqual(json.loads(es[0]["d"]),
                         {"mode": "shared", "ttl_ms": 7000})
        self.assert_no_lease(es, g["lease"])


class EventsOffTests(TestCase):

    gateway_flags = ("--events", "no")

    def test_nothing_is_recorded(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=7000)
        self.release_ok(name, g["lease"])
        raw = self.redis.command("XRANGE", stream_of(name), "-", "+") or []
        self.assertEqual([x for x in raw if text(x[1][3]) == name], [])
