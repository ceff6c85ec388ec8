"""test_proxy_write_set.py - the write set: COPY and MOVE change their Destination too, and
DELETE, COPY and MOVE of a collection change its whole subtree, so each is
fenced by every lock that guards what it changes.

The shared base (FenceCase: a gateway in front of a real store, the raw
requests and slow uploads these tests send) is fencecase.py."""

import os
import uuid

from harness import slack, tamper
from storage import on_both_origins, make_sequencer
from fencecase import FAR_AHEAD, FenceCase, TAG, chunked, head_bytes


COLL = "v11coll-" + TAG
NEST = "v11nest-" + TAG
PAIR = "v11pair-" + TAG


@on_both_origins
class DestinationTests(FenceCase):
    """COPY and MOVE change their Destination; DELETE, COPY and MOVE of a
    collection change its whole subtree."""

    store_config = ("route /%s/ %s\n" % (COLL, COLL) +
                    "route /%s/ %s\n" % (NEST, NEST) +
                    "route /%s/inner/ %s-inner\n" % (NEST, NEST) +
                    "route /%s/ %s\n" % (PAIR, PAIR))

    def setUp(self):
        super().setUp()
        self.use_shared()

    def absolute(self, path, host=None):
        return "http://%s%s" % (host or "127.0.0.1:%d" % self.gw.port, path)

    def copy_or_move(self, method, src, dest, token=None, dtoken=None,
                     extra=()):
        h = [("Destination", dest)] + list(extra)
        if dtoken is not None:
            h.append(("Destination-Fencing-Token", dtoken))
        return self.send(method, src, headers=h, token=token)

    # -- 3. the Destination is in the write set ---------------------------

    def destination_held_by_another(self, method):
        src = self.obj("src")
        dst = self.obj("dst")
        sdata = self.fixture(src)
        ddata = self.fixture(dst)
        mine = self.grant(src)
        old = super().grant(dst)                 # an earlier grant of dst
        self.release_ok(self.lock_of(dst), old["lease"])
        other = self.grant(dst)                  # another client holds dst
        mark = self.mark()
        cases = (
            ("no Destination-Fencing-Token", None, 428, "token_required"),
            ("Destination-Fencing-Token of the source's lock",
             mine["sequencer"], 403, "wrong_lock"),
            ("stale Destination-Fencing-Token", old["sequencer"], 409,
             "stale_token"),
        )
        for what, dtoken, status, code in cases:
            with self.subTest(method=method, case=what):
                r = self.copy_or_move(method, src, dst, mine["sequencer"],
                                      dtoken)
                self.assert_error(r, status, code, "%s: %s" % (method, what))
                if code == "stale_token":
                    self.assertEqual((r.json.get("token"),
                                      r.json.get("current")),
                                     (old["token"], other["token"]), r)
                self.assert_stored(dst, ddata, what)
                self.assert_stored(src, sdata, what)
        self.assert_nothing_upstream(mark, method)
        # the holder of dst can still write it
        self.put_ok(dst, b"other's\n", other["sequencer"])

    def test_copy_onto_an_object_locked_by_another_refused(self):
        self.destination_held_by_another("COPY")

    def test_move_onto_an_object_locked_by_another_refused(self):
        self.destination_held_by_another("MOVE")

    def test_destination_fencing_token_is_checked_like_fencing_token(self):
        src = self.obj("src")
        dst = self.obj("dst")
        self.fixture(src)
        ddata = self.fixture(dst)
        mine = self.grant(src)
        shared = self.grant(dst, mode="shared")
        mark = self.mark()
        cases = (
            ("tampered", tamper(shared["sequencer"]), 403, "forged_token"),
            ("beyond any issued", make_sequencer(
                self.key, self.lock_of(dst), "exclusive",
                shared["token"] + FAR_AHEAD), 403, "forged_token"),
            ("garbage", "garbage", 400, "malformed_token"),
            ("shared grant", shared["sequencer"], 403, "wrong_mode"),
        )
        for method in ("COPY", "MOVE"):
            for what, dtoken, status, code in cases:
                with self.subTest(method=method, case=what):
                    r = self.copy_or_move(method, src, dst,
                                          mine["sequencer"], dtoken)
                    self.assert_error(r, status, code, what)
            with self.subTest(method=method, case="two headers"):
                r = self.copy_or_move(method, src, dst, mine["sequencer"],
                                      shared["sequencer"], extra=[(
                                          "Destination-Fencing-Token",
                                          shared["sequencer"])])
                self.assert_error(r, 400, "malformed_token")
        self.assert_nothing_upstream(mark, "Destination-Fencing-Token")
        self.assert_stored(dst, ddata)

    def test_copy_and_move_with_both_tokens_current_succeed(self):
        src, dst, moved = self.siblings("src.txt", "dst.txt", "moved.txt")
        data = self.fixture(src)
        self.fixture(dst)
        s = self.grant(src)
        d = self.grant(dst)
        c = self.copy_or_move("COPY", src, dst, s["sequencer"],
                              d["sequencer"])
        self.assertIn(c.status, (201, 204), c)
        self.assert_stored(dst, data, "COPY")
        self.assert_stored(src, data, "COPY")
        m = self.grant(moved)
        r = self.copy_or_move("MOVE", dst, moved, d["sequencer"],
                              m["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(moved, data, "MOVE")
        self.assert_absent(dst, "MOVE")
        # the token forwarded is that of the first lock the request writes:
        # a COPY's Destination (its source is only read), a MOVE's path
        for reply, method, dest, tok in ((c, "COPY", dst, d["token"]),
                                         (r, "MOVE", moved, d["token"])):
            hits = self.writes_logged(reply.test_id)
            self.assertEqual([(e.method, e.status, e.destination, e.token)
                              for e in hits],
                             [(method, reply.status, self.upstream_uri(dest),
                               tok)])

    def test_one_route_lock_guarding_both_paths_needs_only_fencing_token(self):
        g = self.grant(PAIR)
        d = "/%s/%s/" % (PAIR, uuid.uuid4().hex[:8])
        a, b, c = d + "a.txt", d + "b.txt", d + "c.txt"
        data = self.fixture(a)
        r = self.copy_or_move("COPY", a, b, g["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(b, data)
        r = self.copy_or_move("MOVE", b, c, g["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(c, data)
        self.assert_absent(b)
        # a Destination outside the route needs its own token
        out = self.obj("outside")
        self.grant(out)   # held, but its token is not sent
        mark = self.mark()
        r = self.copy_or_move("COPY", a, out, g["sequencer"])
        self.assert_error(r, 428, "token_required")
        self.assert_nothing_upstream(mark, "COPY out of the route")
        self.assert_absent(out)

    def upstream_uri(self, path):
        """A Destination as the upstream receives it (v1.1.1): the
        upstream's absolute URI."""
        return "http://127.0.0.1:%d%s" % (self.store.port, path)

    def test_destination_as_absolute_url_of_the_requests_host_is_forwarded_as_the_upstreams(self):
        src, dst, dst2 = self.siblings("src.txt", "dst.txt", "dst2.txt")
        data = self.fixture(src)
        s = self.grant(src)
        d = self.grant(dst)
        r = self.copy_or_move("COPY", src, self.absolute(dst),
                              s["sequencer"], d["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(dst, data)
        hits = self.writes_logged(r.test_id)
        self.assertEqual([e.destination for e in hits],
                         [self.upstream_uri(dst)],
                         "the Destination must reach nginx as its own "
                         "absolute URI (v1.1.1)")
        # the authority is compared case-insensitively with Host
        d2 = self.grant(dst2)
        r = self.copy_or_move("COPY", src, "HTTP://127.0.0.1:%d%s"
                              % (self.gw.port, dst2), s["sequencer"],
                              d2["sequencer"])
        self.assertIn(r.status, (201, 204, 400), r)
        if r.status == 400:
            self.assert_error(r, 400, "bad_destination")
            self.assert_absent(dst2)
        else:
            self.assert_stored(dst2, data)

    def test_destination_of_another_authority_or_garbage_refused_bad_destination(self):
        src = self.obj("src")
        sdata = self.fixture(src)
        dst = self.obj("dst")
        ddata = self.fixture(dst)
        s = self.grant(src)
        d = self.grant(dst)
        me = "127.0.0.1:%d" % self.gw.port
        bad = [
            "http://evil.example" + dst,
            "http://127.0.0.1:1" + dst,
            "http://127.0.0.1" + dst,
            "http://localhost:%d%s" % (self.gw.port, dst),
            "http://%s@evil.example%s" % (me, dst),
            "http://user@%s%s" % (me, dst),
            "ftp://%s%s" % (me, dst),
            "//%s%s" % (me, dst),
            "garbage",
            dst + " x",
            "/a b" + dst,
            dst + "\x7f",
            dst.lstrip("/"),
            "",
            dst + "?x=1",
            dst + "#frag",
            "http:" + dst,
            "/\x01" + dst,
        ]
        mark = self.mark()
        for method in ("COPY", "MOVE"):
            with self.subTest(method=method, destination=None):
                r = self.send(method, src, token=s["sequencer"], headers=[
                    ("Destination-Fencing-Token", d["sequencer"])])
                self.assert_error(r, 400, "bad_destination", "none")
            for dest in bad:
                with self.subTest(method=method, destination=dest):
                    r = self.copy_or_move(method, src, dest, s["sequencer"],
                                          d["sequencer"])
                    self.assert_error(r, 400, "bad_destination", repr(dest))
        self.assert_nothing_upstream(mark, "bad Destination")
        self.assert_stored(src, sdata)
        self.assert_stored(dst, ddata)

    def test_destination_under_the_fence_prefix_refused_bad_destination(self):
        src = self.obj("src")
        sdata = self.fixture(src)
        s = self.grant(src)
        mark = self.mark()
        for dest in ("/_fence/v1/locks/x", "/_fence/", "/%5Ffence/v1/health",
                     "/%5ffence/v1/health", "/x/../_fence/v1/health",
                     "//_fence/v1/health", "/./_fence/v1/health",
                     self.absolute("/_fence/v1/check")):
            for method in ("COPY", "MOVE"):
                with self.subTest(method=method, destination=dest):
                    r = self.copy_or_move(method, src, dest, s["sequencer"])
                    self.assert_error(r, 400, "bad_destination", dest)
        self.assert_nothing_upstream(mark, "Destination under /_fence/")
        self.assert_stored(src, sdata)
        self.assertFalse(os.path.exists(os.path.join(self.store.data,
                                                     "_fence")))

    def test_destination_climbing_above_root_or_unresolvable_refused(self):
        src = self.obj("src")
        sdata = self.fixture(src)
        s = self.grant(src)
        mark = self.mark()
        for dest in ("/../x", "/a/../../x", "/%2e%2e/x", "/..%2fx",
                     "//../x", self.absolute("/../x"), "/..",
                     self.absolute("/a/%2E%2E/../x"), "/x%00y", "/x%2",
                     "/x%zzy"):
            for method in ("COPY", "MOVE"):
                with self.subTest(method=method, destination=dest):
                    r = self.copy_or_move(method, src, dest, s["sequencer"])
                    self.assertEqual(r.status, 400, r)
                    self.assertIn(r.json.get("error"),
                                  ("bad_destination", "bad_path"), r)
                    self.assert_error(r, 400, r.json.get("error"))
        self.assert_nothing_upstream(mark, "Destination above the root")
        self.assert_stored(src, sdata)
        self.assertFalse(os.path.exists(os.path.join(
            os.path.dirname(self.store.data), "x")))

    def test_destination_is_resolved_before_its_lock_is_chosen(self):
        src = self.obj("src")
        self.fixture(src)
        base = os.path.dirname(src)
        dst = base + "/dst.txt"
        ddata = self.fixture(dst)
        s = self.grant(src)
        other = self.grant(dst)                  # another client holds dst
        decoy = self.grant(base + "/decoy")      # the attacker holds this
        mark = self.mark()
        for dest in (base + "/decoy/../dst.txt", base + "/./dst.txt",
                     base + "//dst.txt", base + "/%64st.txt",
                     base + "/decoy/%2e%2e/dst.txt",
                     self.absolute(base + "/decoy/../dst.txt")):
            with self.subTest(destination=dest):
                r = self.copy_or_move("COPY", src, dest, s["sequencer"],
                                      decoy["sequencer"])
                self.assert_error(r, 403, "wrong_lock", dest)
        self.assert_nothing_upstream(mark, "unresolved Destination")
        self.assert_stored(dst, ddata)
        # the resolved lock's token is the one that works (nginx itself
        # refuses a Destination with dot segments, so an escape it is)
        r = self.copy_or_move("COPY", src, base + "/%64st.txt",
                              s["sequencer"], other["sequencer"])
        self.assertIn(r.status, (201, 204), r)

    def test_two_destination_headers_cannot_split_check_and_use(self):
        src, d1, d2 = self.siblings("src.txt", "mine.txt", "victim.txt")
        data = self.fixture(src)
        vdata = self.fixture(d2)
        s = self.grant(src)
        g1 = self.grant(d1)
        self.grant(d2)                            # another client holds d2
        for first, second in ((d1, d2), (d2, d1)):
            with self.subTest(first=first):
                r = self.send("COPY", src, token=s["sequencer"], headers=[
                    ("Destination", first), ("Destination", second),
                    ("Destination-Fencing-Token", g1["sequencer"])])
                self.assertNotIn(r.status, (500, 502), r)
                if r.status in (201, 204):
                    self.assertEqual(first, d1, "the copy went through with "
                                     "the victim's path checked first")
                    self.assert_stored(d1, data)
                self.assert_stored(d2, vdata, "two Destination headers")

    # -- 4. collections -------------------------------------------------------

    def collection(self, tag="dir"):
        d = self.obj(tag, ext="/")
        f = d + "file.txt"
        data = self.fixture(f)
        return d, f, data

    def test_delete_collection_with_its_own_lock_refused_subtree_unguarded(self):
        d, f, data = self.collection()
        g = self.grant(d)                    # lock "…/dir"
        self.grant(f)                        # another client holds the file
        mark = self.mark()
        for target in (d, d[:-1] + "//", d + ".", d + "x/..", d[:-1] + "%2F",
                       d + "x/%2e%2e/"):
            with self.subTest(target=target):
                r = self.send("DELETE", target, token=g["sequencer"])
                self.assert_error(r, 403, "subtree_unguarded", target)
                self.assert_stored(f, data, target)
        # decided before the token is looked at
        r = self.send("DELETE", d)
        self.assert_error(r, 403, "subtree_unguarded", "no token")
        self.assert_nothing_upstream(mark, "DELETE of a collection")
        self.assertTrue(os.path.isdir(self.store.file_of(d)))

    def test_move_and_copy_of_a_collection_refused_subtree_unguarded(self):
        d, f, data = self.collection()
        d2 = self.obj("dir2", ext="/")
        g = self.grant(d)
        g2 = self.grant(d2)
        held = self.grant(f)                 # another client holds the file
        coll = self.grant(COLL)
        single = self.obj("single")
        self.fixture(single)
        gs = self.grant(single)
        mark = self.mark()
        cases = (
            ("collection to collection", d, d2, g, g2),
            ("collection to a route", d, "/%s/x-%s/" % (COLL, TAG), g, coll),
            ("route collection out of the route", "/%s/" % COLL, d2, coll,
             g2),
            ("object onto a collection", single, d2, gs, g2),
            ("file's own lock, collection source", d, d2, held, g2),
            ("escaped trailing slash", d[:-1] + "%2F", d2, g, g2),
            ("collection named by a dot segment", d + "x/..", d2, g, g2),
            ("object onto an escaped collection", single, d2[:-1] + "%2f",
             gs, g2),
            ("object onto a collection named by a dot", single, d2 + ".",
             gs, g2),
        )
        for method in ("MOVE", "COPY"):
            for what, src, dst, sg, dg in cases:
                with self.subTest(method=method, case=what):
                    r = self.copy_or_move(method, src, dst, sg["sequencer"],
                                          dg["sequencer"])
                    self.assert_error(r, 403, "subtree_unguarded", what)
        self.assert_nothing_upstream(mark, "MOVE/COPY of a collection")
        self.assert_stored(f, data)
        self.assert_absent(d2)

    def test_lock_of_a_collection_refused_subtree_unguarded(self):
        # a WebDAV LOCK of a collection locks its members too (RFC 4918
        # 9.10.3): their holders would be answered 423 by the storage
        d, f, data = self.collection()
        g = self.grant(d)
        held = self.grant(f)                 # another client holds the file
        lockinfo = (b'<?xml version="1.0" encoding="utf-8"?>'
                    b'<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
                    b'</D:lockscope><D:locktype><D:write/></D:locktype>'
                    b'</D:lockinfo>')
        hdrs = [("Depth", "infinity"), ("Timeout", "Second-600"),
                ("Content-Type", "application/xml")]
        mark = self.mark()
        for target in (d, d + ".", d[:-1] + "%2F"):
            with self.subTest(target=target):
                r = self.send("LOCK", target, lockinfo, token=g["sequencer"],
                              headers=hdrs)
                self.assert_error(r, 403, "subtree_unguarded", target)
        self.assert_nothing_upstream(mark, "LOCK of a collection")
        # named without its '/', it goes with Depth 0: the file's holder
        # can still write it
        r = self.send("LOCK", d[:-1], lockinfo, token=g["sequencer"],
                      headers=hdrs)
        self.assertNotIn(r.status, (500, 502), r)
        self.put_ok(f, b"still the holder's\n", held["sequencer"])

    def test_delete_collection_under_a_route_covering_the_subtree_succeeds(self):
        g = self.grant(COLL)
        sub = "/%s/sub-%s/" % (COLL, uuid.uuid4().hex[:8])
        self.fixture(sub + "a/b.txt")
        self.fixture(sub + "c.txt")
        r = self.send("DELETE", sub, token=g["sequencer"])
        self.assertEqual(r.status, 204, r)
        self.assert_absent(sub)
        self.fixture("/%s/top.txt" % COLL)
        r = self.send("DELETE", "/%s/" % COLL, token=g["sequencer"])
        self.assertEqual(r.status, 204, r)
        self.assert_absent("/%s/" % COLL)
        # a per-object lock of a path in the route is not the route's lock
        self.fixture("/%s/k/x.txt" % COLL)
        per = self.grant("%s/k" % COLL)
        r = self.send("DELETE", "/%s/k/" % COLL, token=per["sequencer"])
        self.assert_error(r, 403, "wrong_lock")
        self.assertTrue(self.store.exists("/%s/k/x.txt" % COLL))

    def test_collection_containing_another_route_refused_subtree_unguarded(self):
        g = self.grant(NEST)
        inner = "/%s/inner/x.txt" % NEST
        idata = self.fixture(inner)
        mark = self.mark()
        r = self.send("DELETE", "/%s/" % NEST, token=g["sequencer"])
        self.assert_error(r, 403, "subtree_unguarded")
        self.assert_nothing_upstream(mark, "DELETE over an inner route")
        self.assert_stored(inner, idata)
        # nor can a collection be copied or moved onto it
        pair = self.grant(PAIR)
        src = "/%s/%s/" % (PAIR, uuid.uuid4().hex[:8])
        self.fixture(src + "f.txt")
        for method in ("COPY", "MOVE"):
            with self.subTest(method=method):
                r = self.copy_or_move(method, src, "/%s/" % NEST,
                                      pair["sequencer"], g["sequencer"])
                self.assert_error(r, 403, "subtree_unguarded", method)
        self.assert_nothing_upstream(mark, "onto a collection with an "
                                     "inner route")
        self.assert_stored(inner, idata)
        # a collection beside the inner route is the outer lock's alone
        other = "/%s/other-%s/" % (NEST, uuid.uuid4().hex[:8])
        self.fixture(other + "y.txt")
        r = self.send("DELETE", other, token=g["sequencer"])
        self.assertEqual(r.status, 204, r)
        self.assert_absent(other)
        self.assert_stored(inner, idata)

    def test_copy_and_move_of_a_collection_inside_one_route_succeed(self):
        g = self.grant(PAIR)
        base = "/%s/%s" % (PAIR, uuid.uuid4().hex[:8])
        data = self.fixture(base + "/a/f.txt")
        r = self.copy_or_move("COPY", base + "/a/", base + "/b/",
                              g["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(base + "/b/f.txt", data)
        r = self.copy_or_move("MOVE", base + "/b/", base + "/c/",
                              g["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(base + "/c/f.txt", data)
        self.assert_absent(base + "/b/")

    def test_collection_named_without_its_slash_changes_nothing_under_it(self):
        # Without its trailing slash the gateway takes a path for an object
        # under its own lock. The storage may take it for the collection
        # (Apache does; nginx refuses): a DELETE goes "Depth: 0" (refused
        # for a collection), a COPY's source too (the collection alone is
        # copied, never what is in it), and a MOVE's source or a
        # Destination is asked about first (a collection: 403).
        d, f, data = self.collection()
        g = self.grant(d)
        self.grant(f)                        # another client holds the file
        r = self.send("DELETE", d[:-1], token=g["sequencer"])
        self.assertIn(r.status, (400, 409), r)
        hits = self.store.wait_log(slack(2.0), test_id=r.test_id)
        self.assertEqual([(e.method, e.applied) for e in hits],
                         [("DELETE", False)])
        self.assertTrue(os.path.isdir(self.store.file_of(d)))
        self.assert_stored(f, data)
        other = os.path.dirname(d[:-1]) + "/other"
        o = self.grant(other)
        r = self.copy_or_move("MOVE", d[:-1], other, g["sequencer"],
                              o["sequencer"])
        self.assert_error(r, 403, "subtree_unguarded", "MOVE")
        self.assertEqual([e for e in self.store.log_for(test_id=r.test_id)
                          if e.method != "PROPFIND"], [])
        r = self.copy_or_move("COPY", d[:-1], other, g["sequencer"],
                              o["sequencer"])
        # nginx refuses it (400); Apache copies the collection alone
        self.assertIn(r.status, (400, 201), r)
        self.assertFalse(self.store.exists(other + "/file.txt"))
        self.assertTrue(os.path.isdir(self.store.file_of(d)))
        self.assert_stored(f, data)
        # an object onto a collection named without its slash
        src = self.obj("src")
        self.fixture(src)
        s = self.grant(src)
        d2, f2, data2 = self.collection("dir2")
        g2 = self.grant(d2)
        for method in ("COPY", "MOVE"):
            r = self.copy_or_move(method, src, d2[:-1], s["sequencer"],
                                  g2["sequencer"])
            self.assert_error(r, 403, "subtree_unguarded", method)
            self.assertEqual([e for e in self.store.log_for(test_id=r.test_id)
                              if e.method != "PROPFIND"], [])
            self.assert_stored(f2, data2, method)
        # with Overwrite: F the storage leaves an existing Destination
        # alone: nothing to ask
        r = self.copy_or_move("COPY", src, d2[:-1], s["sequencer"],
                              g2["sequencer"], extra=[("Overwrite", "F")])
        self.assertIn(r.status, (409, 412), r)
        self.assert_stored(f2, data2)

    def test_connection_naming_a_header_the_gateway_decides_by_refused(self):
        # A proxy leaves out what Connection names: an `Overwrite: F`
        # checked here (nothing to ask the storage) would reach it as no
        # Overwrite, i.e. T, and replace a collection whose members other
        # locks guard; a `Depth: 0` as none, i.e. infinity.
        src = self.obj("src")
        sdata = self.fixture(src)
        s = self.grant(src)
        d2, f2, data2 = self.collection("dir2")
        g2 = self.grant(d2)
        self.grant(f2)                       # another client holds the file
        host = ("Host", "127.0.0.1:%d" % self.gw.port)
        dest = [("Destination", d2[:-1]),
                ("Destination-Fencing-Token", g2["sequencer"])]
        cases = (
            ("COPY, Connection: Overwrite", "COPY", src,
             dest + [("Overwrite", "F"), ("Connection", "Overwrite")]),
            ("MOVE, Connection: keep-alive, overwrite", "MOVE", src,
             dest + [("Overwrite", "f"),
                     ("Connection", "keep-alive, overwrite")]),
            ("COPY, Overwrite named by a second Connection", "COPY", src,
             dest + [("Overwrite", "F"), ("Connection", "keep-alive"),
                     ("Connection", "TE,Overwrite")]),
            ("COPY, Connection: Destination", "COPY", src,
             dest + [("Overwrite", "F"), ("Connection", "Destination")]),
            ("PROPFIND, Connection: Depth", "PROPFIND", d2,
             [("Depth", "0"), ("Connection", "Depth")]),
        )
        mark = self.mark()
        for what, method, path, hdrs in cases:
            with self.subTest(case=what):
                h = [host, ("X-Test-Id", uuid.uuid4().hex)] + hdrs
                if method != "PROPFIND":
                    h.append(("Fencing-Token", s["sequencer"]))
                r = self.raw(head_bytes(method, path, h), timeout=3.0)
                self.assert_400(r, "bad_request", what)
                self.assert_stored(f2, data2, what)
                self.assert_stored(src, sdata, what)
        self.assert_nothing_upstream(mark, "Connection naming a decided header")
        self.assert_no_admission(self.lock_of(src), "Connection: Overwrite")
        # a Connection header naming other headers changes nothing
        r = self.copy_or_move("COPY", src, d2[:-1], s["sequencer"],
                              g2["sequencer"],
                              extra=[("Overwrite", "F"),
                                     ("Connection", "keep-alive, X-Other")])
        self.assertIn(r.status, (409, 412), r)
        self.assert_stored(f2, data2)

    # -- the order of the checks ---------------------------------------------

    def test_token_checks_judge_each_lock_whole_request_path_first(self):
        # each lock of the write set is judged by the whole token table
        # (header, form, HMAC, beyond any issued, lock, mode, stale) before
        # the next is looked at; the request path's lock comes first
        src, dst = self.siblings("src.txt", "dst.txt")
        sdata = self.fixture(src)
        ddata = self.fixture(dst)
        old = super().grant(src)
        self.release_ok(self.lock_of(src), old["lease"])
        cur = self.grant(src)
        dold = super().grant(dst)
        self.release_ok(self.lock_of(dst), dold["lease"])
        dcur = self.grant(dst)
        other = self.grant(self.obj("other"))
        ahead = make_sequencer(self.key, self.lock_of(src), "exclusive",
                               cur["token"] + FAR_AHEAD)
        mark = self.mark()
        cases = (
            # the request path's local rows beat the Destination's header
            ("malformed", "garbage", None, 400, "malformed_token", None),
            ("tampered", tamper(cur["sequencer"]), None, 403,
             "forged_token", None),
            ("another lock", other["sequencer"], None, 403, "wrong_lock",
             None),
            # so do the request path's Redis rows
            ("stale, no Destination token", old["sequencer"], None, 409,
             "stale_token", old["token"]),
            ("beyond any issued, no Destination token", ahead, None, 403,
             "forged_token", None),
            ("stale + current Destination token", old["sequencer"],
             dcur["sequencer"], 409, "stale_token", old["token"]),
            ("stale + stale Destination token", old["sequencer"],
             dold["sequencer"], 409, "stale_token", old["token"]),
            ("beyond any issued + stale Destination token", ahead,
             dold["sequencer"], 403, "forged_token", None),
            ("current + stale Destination token", cur["sequencer"],
             dold["sequencer"], 409, "stale_token", dold["token"]),
        )
        for method in ("COPY", "MOVE"):
            for what, seq, dseq, status, code, token in cases:
                with self.subTest(method=method, case=what):
                    r = self.copy_or_move(method, src, dst, seq, dseq)
                    self.assert_error(r, status, code, what)
                    if token is not None:
                        self.assertEqual(r.json.get("token"), token, r)
        # a MOVE changes its source: a shared grant cannot fence it
        self.release_ok(self.lock_of(src), cur["lease"])
        shared = self.grant(src, mode="shared")
        r = self.copy_or_move("MOVE", src, dst, shared["sequencer"])
        self.assert_error(r, 403, "wrong_mode", "MOVE with a shared grant")
        self.assert_nothing_upstream(mark, "refused token checks")
        self.assert_stored(src, sdata)
        self.assert_stored(dst, ddata)

    def test_copy_only_reads_its_source(self):
        src, dst, dst2, dst3 = self.siblings("src.txt", "dst.txt", "dst2.txt",
                                             "dst3.txt")
        data = self.fixture(src)
        old = super().grant(src)
        self.release_ok(self.lock_of(src), old["lease"])
        d = self.grant(dst)
        # no Fencing-Token: the source is read unchecked; the token
        # forwarded is the Destination's
        r = self.copy_or_move("COPY", src, dst, None, d["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(dst, data)
        hits = self.writes_logged(r.test_id)
        self.assertEqual([e.token for e in hits], [d["token"]])
        # a shared grant of the source may fence the read
        shared = self.grant(src, mode="shared")
        d2 = self.grant(dst2)
        r = self.copy_or_move("COPY", src, dst2, shared["sequencer"],
                              d2["sequencer"])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(dst2, data)
        # but a Fencing-Token that came is checked like a fenced read
        d3 = self.grant(dst3)
        mark = self.mark()
        r = self.copy_or_move("COPY", src, dst3, old["sequencer"],
                              d3["sequencer"])
        self.assert_error(r, 409, "stale_token", "stale source token")
        self.assertEqual(r.json.get("token"), old["token"])
        self.assert_nothing_upstream(mark, "COPY with a stale source token")
        self.assert_absent(dst3)

    def test_checks_apply_in_the_v11_order(self):
        base = self.obj("order", ext="")
        src = base + "/src.txt"
        dst = base + "/dst.txt"
        self.fixture(src)
        ddata = self.fixture(dst)
        s = self.grant(src)
        mark = self.mark()
        # framing beats a path above the root
        r = self.raw(head_bytes("PUT", "/../x", [
            ("Host", "127.0.0.1:%d" % self.gw.port), ("Content-Length", "1"),
            ("Transfer-Encoding", "chunked")]) + chunked(b"x"))
        self.assert_400(r, "bad_request", "framing + bad path")
        # a path above the root beats a bad Destination
        r = self.copy_or_move("COPY", "/../x", "http://evil.example/x")
        self.assert_error(r, 400, "bad_path", "bad path + bad destination")
        # a bad Destination beats an unguarded subtree
        r = self.copy_or_move("COPY", base + "/", "http://evil.example/x/")
        self.assert_error(r, 400, "bad_destination",
                          "bad destination + subtree")
        # an unguarded subtree beats a path with no valid lock name
        r = self.send("DELETE", base + "/a%20b/")
        self.assert_error(r, 403, "subtree_unguarded",
                          "subtree + bad lock name")
        # a path with no valid lock name beats a missing token
        r = self.send("PUT", base + "/a%20b", b"x")
        self.assert_error(r, 400, "bad_lock_name",
                          "bad lock name + no token")
        # the request path's member is checked before the Destination's
        r = self.copy_or_move("COPY", src, dst, tamper(s["sequencer"]))
        self.assert_error(r, 403, "forged_token",
                          "forged Fencing-Token + no Destination token")
        r = self.copy_or_move("COPY", src, dst, s["sequencer"])
        self.assert_error(r, 428, "token_required",
                          "no Destination-Fencing-Token")
        self.assert_nothing_upstream(mark, "combined failures")
        self.assert_stored(dst, ddata)


# ---------------------------------------------------------------------------
# 5, 6: release ends writes; waiting writes cost Redis nothing
