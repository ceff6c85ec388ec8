"""test_apache_origin.py - fencegate in front of Apache httpd with mod_dav
(apache.py), the strictest common WebDAV origin: writes, COPY and MOVE
(whose Destination Apache takes only as an absolute URI), collections
under a route lock, a 201's Location, and a stale write that never reaches
it. The same behaviour as in front of nginx, proven on an origin nobody on
the project wrote."""

import uuid

import matrix
from apache import apache_behind_gateway
from harness import LOCKS, TestCase, slack, wait_until
from storage import send

TREE = "tree-%s" % uuid.uuid4().hex[:6]


@matrix.pin("starts its own Apache httpd", origin="apache")
class ApacheOriginTests(TestCase):
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.apache, self.gw = apache_behind_gateway(
            self, "route /%s/ %s\n" % (TREE, TREE))
        self.tag = uuid.uuid4().hex[:8]

    def path(self, name):
        return "/%s-%s" % (self.tag, name)

    def grant(self, lock):
        r = self.gw.request("POST", LOCKS + lock.strip("/"),
                            body={"ttl_ms": 30000})
        self.assertEqual(r.status, 200, r)
        return r.json

    def req(self, method, path, body=None, headers=(), token=None):
        tid = uuid.uuid4().hex
        h = list(headers) + [("X-Test-Id", tid)]
        if token:
            h.append(("Fencing-Token", token))
        r = send(self.gw.port, method, path, body, h, slack(10.0), False)
        r.test_id = tid
        return r

    def upstream_uri(self, path):
        return "http://127.0.0.1:%d%s" % (self.apache.port, path)

    def test_put_is_stored_and_its_location_names_the_gateway(self):
        p = self.path("a.txt")
        g = self.grant(p)
        r = self.req("PUT", p, b"hello apache\n", token=g["sequencer"])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.apache.read(p), b"hello apache\n")
        # Apache names itself; the client is pointed at the gateway
        self.assertEqual(r.header("Location"),
                         "http://127.0.0.1:%d%s" % (self.gw.port, p))
        r = self.req("GET", p)
        self.assertEqual((r.status, r.body), (200, b"hello apache\n"))

    def test_copy_and_move_reach_apache_with_an_absolute_destination(self):
        src, dst, moved = self.path("src.txt"), self.path("dst.txt"), self.path("moved.txt")
        self.apache.put_file(src, b"source\n")
        s, d, m = self.grant(src), self.grant(dst), self.grant(moved)
        # the client's Destination as a path ...
        r = self.req("COPY", src, token=s["sequencer"],
                     headers=[("Destination", dst),
                              ("Destination-Fencing-Token", d["sequencer"])])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.apache.read(dst), b"source\n")
        # the Destination, named without its '/', was asked about first:
        # its 404 says it did not exist yet. (Apache's threads log in the
        # order they finish, not the order they were sent: the entries are
        # compared as a set, and the statuses tell the order.)
        hits = self.logged(r.test_id, "COPY", 2)
        self.assertEqual(sorted((e.method, e.status, str(e.destination))
                                for e in hits),
                         sorted([("PROPFIND", 404, "None"),
                                 ("COPY", 201, self.upstream_uri(dst))]))
        # ... and as an absolute URL of the gateway
        r = self.req("MOVE", dst, token=d["sequencer"],
                     headers=[("Destination", "http://127.0.0.1:%d%s"
                               % (self.gw.port, moved)),
                              ("Destination-Fencing-Token", m["sequencer"])])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.apache.read(moved), b"source\n")
        self.assertFalse(self.apache.exists(dst))
        hits = self.logged(r.test_id, "MOVE", 3)
        self.assertEqual(sorted((e.method, e.status, str(e.destination))
                                for e in hits),
                         sorted([("PROPFIND", 207, "None"),
                                 ("PROPFIND", 404, "None"),
                                 ("MOVE", 201, self.upstream_uri(moved))]))

    def logged(self, test_id, method, count):
        """Apache's entries for a request once `method` is among them and
        all `count` have come (each of Apache's threads logs when it is
        done: the probe's line may come after the write's)."""
        out = []

        def seen():
            out[:] = self.apache.log_for(test_id=test_id)
            return any(e.method == method for e in out) and len(out) >= count
        wait_until(seen, slack(2.0), 0.02)
        return out

    def test_collection_under_a_route_lock_is_made_copied_and_deleted(self):
        g = self.grant(TREE)
        base = "/%s/%s/" % (TREE, self.tag)
        # Apache makes no parent collection by itself: the route's root
        # first (the route rule covers it too)
        r = self.req("MKCOL", "/%s/" % TREE, token=g["sequencer"])
        self.assertIn(r.status, (201, 405), r)
        r = self.req("MKCOL", base, token=g["sequencer"])
        self.assertEqual(r.status, 201, r)
        r = self.req("PUT", base + "f.txt", b"in a tree\n", token=g["sequencer"])
        self.assertEqual(r.status, 201, r)
        r = self.req("COPY", base, token=g["sequencer"],
                     headers=[("Destination", "/%s/%s-copy/" % (TREE, self.tag))])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.apache.read("/%s/%s-copy/f.txt" % (TREE, self.tag)),
                         b"in a tree\n")
        r = self.req("PROPFIND", base, headers=[("Depth", "1")])
        self.assertEqual(r.status, 207, r)
        self.assertIn(b"f.txt", r.body)
        r = self.req("DELETE", base, token=g["sequencer"])
        self.assertEqual(r.status, 204, r)
        self.assertFalse(self.apache.exists(base))

    def test_stale_write_is_refused_and_never_reaches_apache(self):
        p = self.path("stale.txt")
        old = self.grant(p)
        r = self.gw.request("DELETE", LOCKS + p.strip("/"),
                            headers={"Fence-Lease": old["lease"]})
        self.assertEqual(r.status, 204, r)
        new = self.grant(p)
        self.assertGreater(new["token"], old["token"])
        r = self.req("PUT", p, b"newer\n", token=new["sequencer"])
        self.assertEqual(r.status, 201, r)
        r = self.req("PUT", p, b"older\n", token=old["sequencer"])
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.json.get("error"), "stale_token", r)
        self.assertEqual(self.apache.read(p), b"newer\n")
        self.assertEqual(self.apache.log_for(r.test_id), [])
        # a COPY onto the object with the old token: refused the same way
        src = self.path("other.txt")
        self.apache.put_file(src, b"other\n")
        r = self.req("COPY", src, headers=[("Destination", p),
                                           ("Destination-Fencing-Token",
                                            old["sequencer"])])
        self.assertEqual(r.status, 409, r)
        self.assertEqual(self.apache.read(p), b"newer\n")
        self.assertEqual(self.apache.log_for(r.test_id), [])
