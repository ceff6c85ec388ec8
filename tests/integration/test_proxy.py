"""test_proxy.py - the fencing proxy's table, row by row, against a real
nginx WebDAV store: every refused write gets the contract's status and
error code, never shows up in nginx's access log, and leaves the stored
object as it was; accepted writes reach nginx once, with their token.
Also fenced reads, route rules, and the order in which the checks apply.
"""

import os
import time

from harness import slack, tamper, wait_lock_free
from storage import (on_both_origins, RawRequest, StoreTestCase, make_sequencer, new_key_file)

# a token beyond anything issued (tokens are near Redis' clock in us; this
# is some 11 days ahead of it, and below 2^53)
FAR_AHEAD = 10 ** 12


class ProxyCase(StoreTestCase):
    """Helpers shared by the classes of this file."""

    def fixture(self, path, data=None):
        """An object already stored in nginx; returns its bytes."""
        data = data if data is not None else \
            ("original %s\n" % path).encode()
        self.store.put_file(path, data)
        return data

    def write_attempts(self, path):
        """One request per default write method against `path`, each with
        what must not exist afterwards if it is refused:
        (method, body, extra headers, paths that must stay absent)."""
        return [
            ("PUT", b"evil put\n", [], []),
            ("POST", b"evil post\n", [], []),
            ("PATCH", b"evil patch\n", [], []),
            ("DELETE", None, [], []),
            ("MKCOL", None, [], []),
            ("COPY", None, [("Destination", path + ".copy")],
             [path + ".copy"]),
            ("MOVE", None, [("Destination", path + ".moved")],
             [path + ".moved"]),
            ("PROPPATCH", b'<?xml version="1.0"?><D:propertyupdate '
             b'xmlns:D="DAV:"/>', [("Content-Type", "text/xml")], []),
        ]

    def sentinel(self):
        """A GET through the gateway that nginx logs after whatever the
        gateway forwarded before it; waits for it to show up."""
        r = self.send("GET", "/sentinel-%d" % time.monotonic_ns())
        self.assertTrue(self.store.wait_log(slack(5.0), test_id=r.test_id),
                        "the sentinel GET never reached nginx")

    def assert_none_reached_nginx(self, replies, what=""):
        # a window for a request the gateway should not have sent to show
        # (one sent after its refusal was answered): no event marks its
        # absence; the sentinel then orders nginx's log
        time.sleep(slack(0.1))
        self.sentinel()
        ids = {r.test_id: r for r in replies}
        hits = [e for e in self.store.log() if e.test_id in ids]
        self.assertEqual(hits, [], "%s: refused requests reached nginx: %r"
                         % (what, hits))

    def refused_everywhere(self, path, status, code, headers, what,
                           instead=None):
        """Sends every write method to an existing object with `headers`;
        each must be refused with status/code (or, for a method named in
        `instead`, that method's (status, code)), reach nginx never, and
        leave the object (and any COPY/MOVE destination) as it was."""
        data = self.fixture(path)
        replies = []
        for method, body, extra, absent in self.write_attempts(path):
            with self.subTest(method=method, case=what):
                r = self.send(method, path, body, headers=extra + headers)
                replies.append(r)
                st, cd = (instead or {}).get(method, (status, code))
                self.assert_error(r, st, cd, "%s %s" % (what, method))
                self.assert_stored(path, data, "after a refused %s" % method)
                for p in absent:
                    self.assert_absent(p, "after a refused %s" % method)
        self.assert_none_reached_nginx(replies, what)
        return replies


@on_both_origins
class ProxyTableTests(ProxyCase):
    """The shared env: one fencegate (--forward-token yes, a key file) in
    front of nginx."""

    def setUp(self):
        super().setUp()
        self.use_shared()

    # -- 428 ----------------------------------------------------------------

    def test_every_write_method_without_fencing_token_gets_428_token_required_and_never_reaches_nginx(self):
        path = self.obj()
        self.refused_everywhere(path, 428, "token_required", [],
                                "no Fencing-Token")

    def test_refused_write_to_a_new_path_leaves_nothing_in_the_data_dir(self):
        path = self.obj("new")
        r = self.send("PUT", path, b"never\n")
        self.assert_error(r, 428, "token_required")
        d = self.obj("newdir", ext="/")
        r2 = self.send("MKCOL", d)
        self.assert_error(r2, 428, "token_required")
        self.assert_none_reached_nginx([r, r2])
        self.assert_absent(path)
        self.assert_absent(d)
        self.assertEqual(self.store.body_temp_files(), [],
                         "nginx holds a request body")

    # -- 400 malformed --------------------------------------------------------

    def test_unparseable_sequencer_gets_400_malformed_token_and_never_reaches_nginx(self):
        path = self.obj()
        g = self.grant(path)
        for value in ("garbage", str(g["token"]), "fg1.", "",
                      "fg1.%s.x.notanumber.AAAA" % "bm9wZQ",
                      "Bearer " + g["sequencer"]):
            with self.subTest(value=value):
                self.refused_everywhere(path, 400, "malformed_token",
                                        [("Fencing-Token", value)],
                                        "Fencing-Token %r" % value)

    def test_two_fencing_token_headers_get_400_malformed_token_even_when_both_are_current(self):
        path = self.obj()
        g = self.grant(path)
        seq = g["sequencer"]
        self.refused_everywhere(path, 400, "malformed_token",
                                [("Fencing-Token", seq),
                                 ("Fencing-Token", seq)],
                                "two Fencing-Token headers")
        # the same sequencer once is fine
        self.put_ok(path, b"one header\n", seq)
        self.assert_stored(path, b"one header\n")

    # -- 403 forged -----------------------------------------------------------

    def test_sequencer_whose_hmac_does_not_verify_gets_403_forged_token_and_never_reaches_nginx(self):
        path = self.obj()
        lock = self.lock_of(path)
        g = self.grant(path)
        seq, tok = g["sequencer"], g["token"]
        fields = seq.split(".")
        cases = {
            "tampered mac": tamper(seq),
            "other key": make_sequencer(os.urandom(32), lock, "exclusive",
                                        tok),
            "token changed, mac kept": ".".join(
                fields[:3] + [str(tok - 1)] + fields[4:]),
            "mode changed, mac kept": ".".join(
                fields[:2] + ["s"] + fields[3:]),
        }
        for what, value in cases.items():
            with self.subTest(case=what):
                self.refused_everywhere(path, 403, "forged_token",
                                        [("Fencing-Token", value)], what)

    def test_token_greater_than_any_issued_gets_403_forged_token_even_with_a_valid_hmac(self):
        path = self.obj()
        lock = self.lock_of(path)
        g = self.grant(path)
        ahead = make_sequencer(self.key, lock, "exclusive",
                               g["token"] + FAR_AHEAD)
        self.refused_everywhere(path, 403, "forged_token",
                                [("Fencing-Token", ahead)],
                                "token beyond the live grant's")
        fresh = self.obj("never-locked")
        r = self.put(fresh, b"x", make_sequencer(
            self.key, self.lock_of(fresh), "exclusive",
            g["token"] + FAR_AHEAD))
        self.assert_error(r, 403, "forged_token", "lock never granted")
        self.assert_none_reached_nginx([r])
        self.assert_absent(fresh)
        # the live grant still writes
        self.put_ok(path, b"live\n", g["sequencer"])
        self.assert_stored(path, b"live\n")

    # -- 403 wrong_lock / wrong_mode ----------------------------------------

    def test_sequencer_of_another_lock_gets_403_wrong_lock_and_never_reaches_nginx(self):
        path = self.obj()
        other = self.grant(self.obj("other"))
        self.refused_everywhere(path, 403, "wrong_lock",
                                [("Fencing-Token", other["sequencer"])],
                                "another object's lock")
        parent = self.grant(os.path.dirname(path))
        self.refused_everywhere(path, 403, "wrong_lock",
                                [("Fencing-Token", parent["sequencer"])],
                                "the parent folder's lock")

    def test_shared_sequencer_on_a_write_gets_403_wrong_mode_and_never_reaches_nginx(self):
        path = self.obj()
        g = self.grant(path, mode="shared")
        self.assertEqual(g["mode"], "shared")
        # A COPY only reads its source (a shared grant may read); what it
        # writes is its Destination, for which no sequencer came.
        self.refused_everywhere(path, 403, "wrong_mode",
                                [("Fencing-Token", g["sequencer"])],
                                "shared sequencer",
                                instead={"COPY": (428, "token_required")})

    # -- 409 stale ------------------------------------------------------------

    def test_older_token_after_a_newer_grant_gets_409_stale_token_with_token_and_current(self):
        path = self.obj()
        a = self.grant(path)
        self.release_ok(self.lock_of(path), a["lease"])
        b = self.grant(path)
        self.assertGreater(b["token"], a["token"])
        replies = self.refused_everywhere(
            path, 409, "stale_token", [("Fencing-Token", a["sequencer"])],
            "older token")
        for r in replies:
            self.assertEqual(r.json.get("token"), a["token"], r)
            self.assertEqual(r.json.get("current"), b["token"], r)
        w = self.put_ok(path, b"newer\n", b["sequencer"])
        self.assert_stored(path, b"newer\n")
        hits = self.store.wait_log(slack(2.0), test_id=w.test_id)
        self.assertEqual([(e.method, e.token) for e in hits],
                         [("PUT", b["token"])])

    def test_sequencer_of_a_released_grant_gets_409_stale_token(self):
        path = self.obj()
        a = self.grant(path)
        self.put_ok(path, b"while held\n", a["sequencer"])
        self.release_ok(self.lock_of(path), a["lease"])
        replies = self.refused_everywhere(
            path, 409, "stale_token", [("Fencing-Token", a["sequencer"])],
            "released grant")
        for r in replies:
            self.assertEqual(r.json.get("token"), a["token"], r)
            self.assertIn("current", r.json, r)

    def test_sequencer_of_an_expired_grant_gets_409_stale_token(self):
        path = self.obj()
        a = self.grant(path, ttl_ms=300)
        wait_lock_free(self, self.lock_of(path))
        replies = self.refused_everywhere(
            path, 409, "stale_token", [("Fencing-Token", a["sequencer"])],
            "expired grant")
        for r in replies:
            self.assertEqual(r.json.get("token"), a["token"], r)
            self.assertIn("current", r.json, r)

    def test_grant_ending_within_the_fence_margin_gets_409_stale_token(self):
        # ttl 200 ms < the default 250 ms margin: a write could not end in
        # time, so it is refused although the grant is still held
        path = self.obj()
        data = self.fixture(path)
        a = self.grant(path, ttl_ms=200)
        r = self.put(path, b"too late\n", a["sequencer"])
        self.assert_error(r, 409, "stale_token")
        self.assertEqual(r.json.get("token"), a["token"], r)
        self.assertIn("current", r.json, r)
        self.assert_none_reached_nginx([r])
        self.assert_stored(path, data)

    # -- 400 bad_lock_name ----------------------------------------------------

    def test_fenced_write_to_a_path_that_names_no_valid_lock_gets_400_bad_lock_name(self):
        base = self.folder("dir")
        g = self.grant(base)
        replies = []
        for path in ("/", base + "/a%20b", base + "/a~b%21"):
            with self.subTest(path=path):
                r = self.put(path, b"x", g["sequencer"])
                replies.append(r)
                self.assert_error(r, 400, "bad_lock_name", path)
        # not a path inside the upstream at all (v1.1): bad_path
        for path in ("/..", "/%2e%2e/x", base + "/a%00b", base + "/a%2"):
            with self.subTest(path=path):
                r = self.put(path, b"x", g["sequencer"])
                replies.append(r)
                self.assert_error(r, 400, "bad_path", path)
        self.assert_none_reached_nginx(replies)

    def test_dot_segments_resolve_like_the_storage_and_need_the_resolved_locks_sequencer(self):
        # "/base/./x" and "/base/y/../x" are the object "/base/x" to nginx,
        # so they are guarded by lock "base/x": the sequencer of any other
        # lock is wrong_lock there, and nothing reaches nginx.
        base = self.folder("dir")
        other = self.grant(base)
        replies = []
        for path in (base + "/./x", base + "/y/../x", base + "/%2e/x",
                     base + "/y/%2e%2e/x"):
            with self.subTest(path=path):
                r = self.put(path, b"x", other["sequencer"])
                replies.append(r)
                self.assert_error(r, 403, "wrong_lock", path)
        self.assert_none_reached_nginx(replies)
        g = self.grant(base + "/x")
        self.put_ok(base + "/y/../x", b"resolved\n", g["sequencer"])
        self.assert_stored(base + "/x", b"resolved\n")

    # -- accepted -------------------------------------------------------------

    def test_write_with_the_current_sequencer_reaches_nginx_once_with_its_token(self):
        path = self.obj()
        g = self.grant(path)
        w1 = self.put_ok(path, b"first\n", g["sequencer"])
        w2 = self.put_ok(path, b"second\n", g["sequencer"])
        self.assert_stored(path, b"second\n")
        for w, status in ((w1, 201), (w2, 204)):
            hits = self.store.wait_log(slack(2.0), test_id=w.test_id)
            self.assertEqual([(e.method, e.path, e.status, e.token)
                              for e in hits],
                             [("PUT", path, status, g["token"])])
            self.assertEqual(w.status, status)

    def test_every_write_method_with_the_current_sequencer_is_forwarded(self):
        path = self.obj()
        folder = os.path.dirname(path)
        self.fixture(path)
        seq = self.grant(path)["sequencer"]
        # a COPY or MOVE changes its Destination too: it carries the
        # Destination's sequencer as well
        copy = path + ".copy"
        copy_seq = self.grant(copy)["sequencer"]
        sent = []
        for method, body, extra, _ in self.write_attempts(path):
            if method in ("DELETE", "MOVE", "MKCOL"):
                continue   # below, in an order that keeps the object
            if method == "COPY":
                extra = extra + [("Destination-Fencing-Token", copy_seq)]
            r = self.send(method, path, body, headers=extra, token=seq)
            sent.append((method, r))
        data = b"evil put\n"     # the PUT above replaced the fixture
        self.assert_stored(path, data, "PUT")
        self.assert_stored(copy, data, "COPY")
        mv = self.obj("moved")
        mv_seq = self.grant(mv)["sequencer"]
        m = self.send("MOVE", copy, headers=[
            ("Destination", mv), ("Destination-Fencing-Token", mv_seq)],
            token=copy_seq)
        sent.append(("MOVE", m))
        self.assertIn(m.status, (201, 204), m)
        self.assert_stored(mv, data, "MOVE")
        self.assert_absent(copy, "MOVE")
        col = folder + "/col/"
        k = self.send("MKCOL", col, token=self.grant(col)["sequencer"])
        sent.append(("MKCOL", k))
        self.assertEqual(k.status, 201, k)
        self.assertTrue(os.path.isdir(self.store.file_of(col)))
        d = self.send("DELETE", mv, token=mv_seq)
        sent.append(("DELETE", d))
        self.assertEqual(d.status, 204, d)
        self.assert_absent(mv, "DELETE")
        self.sentinel()
        for method, r in sent:
            # a COPY or MOVE of, or onto, a path without its '/' asks the
            # store first whether it is a collection (PROPFIND, Depth 0)
            hits = [e for e in self.store.log() if e.test_id == r.test_id
                    and not (e.method == "PROPFIND" and method in ("COPY", "MOVE"))]
            self.assertEqual(len(hits), 1, "%s: %r" % (method, hits))
            self.assertEqual(hits[0].method, method)
            self.assertEqual(hits[0].status, r.status,
                             "%s: the client got another status than nginx "
                             "answered" % method)
            self.assertIsNotNone(hits[0].token, method)

    # -- answered before the body -------------------------------------------

    def test_refused_write_with_expect_100_continue_gets_its_answer_and_no_100(self):
        path = self.obj()
        data = self.fixture(path)
        a = self.grant(path)
        self.release_ok(self.lock_of(path), a["lease"])
        for what, extra, status in (
                ("no token", [], 428),
                ("stale", [("Fencing-Token", a["sequencer"])], 409),
                ("forged", [("Fencing-Token", tamper(a["sequencer"]))], 403)):
            with self.subTest(case=what):
                tid = "expect-%s-%d" % (what.replace(" ", "-"),
                                        time.monotonic_ns())
                rq = RawRequest(self.gw.port, "PUT", path, [
                    ("Content-Length", "100000"),
                    ("Expect", "100-continue"), ("X-Test-Id", tid)] + extra)
                try:
                    head = rq.read_head(slack(5.0))
                finally:
                    rq.close()
                self.assertIsNotNone(head, "%s: no answer" % what)
                self.assertEqual(head[0], status, "%s: first response "
                                 "status (100 means the body was asked for)"
                                 % what)
                self.assertEqual(self.store.log_for(test_id=tid), [])
        self.sentinel()
        self.assert_stored(path, data)

    def test_refused_write_is_answered_before_its_body_arrives(self):
        path = self.obj()
        tid = "nobody-%d" % time.monotonic_ns()
        rq = RawRequest(self.gw.port, "PUT", path, [
            ("Content-Length", str(10 << 20)), ("X-Test-Id", tid)])
        try:
            rq.send(b"x" * 1000)
            r = rq.read_response(slack(5.0))
        finally:
            rq.close()
        self.assertIsNotNone(r, "no answer before the body was sent")
        self.assert_error(r, 428, "token_required")
        self.sentinel()
        self.assertEqual(self.store.log_for(test_id=tid), [])
        self.assert_absent(path)


@on_both_origins
class FencedReadTests(ProxyCase):

    def setUp(self):
        super().setUp()
        self.use_shared()

    def test_reads_without_a_token_pass_to_nginx(self):
        path = self.obj()
        data = self.fixture(path)
        folder = os.path.dirname(path) + "/"
        replies = []
        for method, p, extra, status in (
                ("GET", path, [], 200), ("HEAD", path, [], 200),
                ("OPTIONS", path, [], 200),
                ("PROPFIND", folder, [("Depth", "1")], 207)):
            r = self.send(method, p, headers=extra)
            replies.append(r)
            self.assertEqual(r.status, status, "%s: %r" % (method, r))
            if method == "GET":
                self.assertEqual(r.body, data)
        self.sentinel()
        for r in replies:
            self.assertEqual(len(self.store.log_for(test_id=r.test_id)), 1)

    def test_fenced_read_with_a_current_sequencer_of_either_mode_passes(self):
        path = self.obj()
        data = self.fixture(path)
        shared = self.grant(path, mode="shared")
        for method in ("GET", "HEAD", "PROPFIND"):
            r = self.send(method, path, token=shared["sequencer"],
                          headers=[("Depth", "0")])
            self.assertIn(r.status, (200, 207), "%s shared: %r"
                          % (method, r))
            if method == "GET":
                self.assertEqual(r.body, data)
        self.release_ok(self.lock_of(path), shared["lease"])
        ex = self.grant(path)
        r = self.send("GET", path, token=ex["sequencer"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, data)
        # the sequencer itself never goes upstream (the contract leaves it
        # open whether a read passes the token number on)
        hits = self.store.wait_log(slack(2.0), test_id=r.test_id)
        self.assertEqual(len(hits), 1, hits)
        self.assertIn(hits[0].fencing_token, (None, str(ex["token"])))

    def test_fenced_read_is_checked_like_a_write_and_refusals_never_reach_nginx(self):
        path = self.obj()
        self.fixture(path)
        old = self.grant(path)
        self.release_ok(self.lock_of(path), old["lease"])
        cur = self.grant(path)
        other = self.grant(self.obj("other"))
        cases = (
            ("stale", old["sequencer"], 409, "stale_token"),
            ("forged", tamper(cur["sequencer"]), 403, "forged_token"),
            ("ahead", make_sequencer(self.key, self.lock_of(path),
                                     "exclusive", cur["token"] + FAR_AHEAD),
             403, "forged_token"),
            ("wrong lock", other["sequencer"], 403, "wrong_lock"),
            ("malformed", "garbage", 400, "malformed_token"),
        )
        replies = []
        for what, seq, status, code in cases:
            for method in ("GET", "HEAD", "PROPFIND"):
                with self.subTest(case=what, method=method):
                    r = self.send(method, path, token=seq,
                                  headers=[("Depth", "0")])
                    replies.append(r)
                    self.assertEqual(r.status, status, "%s %s: %r"
                                     % (what, method, r))
                    if method != "HEAD":
                        self.assert_error(r, status, code, what)
        self.assert_none_reached_nginx(replies, "fenced reads")


class CheckOrderTests(ProxyCase):
    """When a request fails several rows, the first row in the contract's
    table decides."""

    def setUp(self):
        super().setUp()
        self.use_shared()

    def expect(self, path, headers, status, code, what):
        r = self.send("PUT", path, b"x", headers=headers)
        self.assert_error(r, status, code, what)
        return r

    def test_checks_apply_in_the_contracts_order(self):
        path = self.obj()
        data = self.fixture(path)
        lock = self.lock_of(path)
        old_shared = self.grant(path, mode="shared")
        self.release_ok(lock, old_shared["lease"])
        cur = self.grant(path)
        other_path = self.obj("other")
        other = self.grant(other_path, mode="shared")
        replies = [
            # duplicate header beats everything about its values
            self.expect(path, [("Fencing-Token", tamper(cur["sequencer"])),
                               ("Fencing-Token", other["sequencer"])],
                        400, "malformed_token", "two headers, one forged"),
            # a bad HMAC beats naming another lock in another mode
            self.expect(path, [("Fencing-Token", tamper(other["sequencer"]))],
                        403, "forged_token", "forged + wrong lock + shared"),
            # a token beyond any issued beats naming another lock
            self.expect(path, [("Fencing-Token", make_sequencer(
                self.key, self.lock_of(other_path), "exclusive",
                other["token"] + FAR_AHEAD))],
                403, "forged_token", "ahead + wrong lock"),
            # another lock beats a shared mode
            self.expect(path, [("Fencing-Token", other["sequencer"])],
                        403, "wrong_lock", "wrong lock + shared"),
            # a shared mode beats a stale token
            self.expect(path, [("Fencing-Token", old_shared["sequencer"])],
                        403, "wrong_mode", "shared + stale"),
        ]
        self.assert_none_reached_nginx(replies, "combined failures")
        self.assert_stored(path, data)


@on_both_origins
class RouteTests(ProxyCase):
    """A config file with route rules: a prefix maps to one coarser lock,
    the longest prefix wins."""

    store_config = ("# routes of the order store\n"
                    "route /orders/ orders\n"
                    "route /orders/42/ orders/42\n"
                    "\n"
                    "route /invoices/7/ billing-7   # a name unlike the path\n"
                    "route /shop/ shop\n"
                    "route /shop/cart/ shop/cart\n")

    def setUp(self):
        super().setUp()
        self.use_shared()
        # the collections the tests write into (Apache makes none)
        for d in ("/orders/42/items/", "/orders/43/", "/invoices/",
                  "/elsewhere/", "/shop/"):
            self.store.mkdir(d)

    def grant(self, name, **fields):
        """Route locks are fixed names: a grant is released at cleanup
        whatever happens, so one failing test cannot hold the next one
        up."""
        g = super().grant(name, **fields)
        self.addCleanup(self.release, self.lock_of(name), g["lease"])
        return g

    def test_route_makes_the_prefix_lock_guard_paths_under_it(self):
        g = self.grant("orders/42")
        w = self.put_ok("/orders/42/items/7", b"item 7\n", g["sequencer"])
        self.assert_stored("/orders/42/items/7", b"item 7\n")
        hits = self.store.wait_log(slack(2.0), test_id=w.test_id)
        self.assertEqual([(e.path, e.token) for e in hits],
                         [("/orders/42/items/7", g["token"])])
        # percent-encoded paths are matched decoded
        self.put_ok("/orders/%342/items/8", b"item 8\n", g["sequencer"])
        self.assert_stored("/orders/42/items/8", b"item 8\n")

    def test_route_prefix_covers_the_path_without_its_trailing_slash(self):
        g = self.grant("billing-7")
        self.put_ok("/invoices/7", b"invoice 7\n", g["sequencer"])
        self.assert_stored("/invoices/7", b"invoice 7\n")
        per_path = self.grant("invoices/7")
        r = self.put("/invoices/7", b"evil\n", per_path["sequencer"])
        self.assert_error(r, 403, "wrong_lock")
        self.assert_none_reached_nginx([r])
        self.assert_stored("/invoices/7", b"invoice 7\n")
        # a sibling that merely starts with the same characters is not
        # under the prefix
        own = self.grant("invoices/77")
        self.put_ok("/invoices/77", b"invoice 77\n", own["sequencer"])
        r2 = self.put("/invoices/77", b"evil\n", g["sequencer"])
        self.assert_error(r2, 403, "wrong_lock")

    def test_repeated_slashes_meet_the_same_route_as_single_ones(self):
        g = self.grant("orders/42")
        orders = self.grant("orders")
        for p in ("//orders/42/items/1", "/orders//42/items/1",
                  "/orders/42//items/1"):
            with self.subTest(path=p):
                r = self.put(p, b"evil\n", orders["sequencer"])
                self.assert_error(r, 403, "wrong_lock", p)
                self.assert_none_reached_nginx([r])
        self.put_ok("//orders/42/items/1", b"one\n", g["sequencer"])
        self.assert_stored("/orders/42/items/1", b"one\n")

    def test_dot_segments_cannot_carry_a_write_past_a_longer_route(self):
        # nginx resolves "." and ".." segments: /orders/./42/x is stored as
        # /orders/42/x, which only the sequencer of orders/42 may write
        orders = self.grant("orders")
        for i, p in enumerate(("/orders/./42/dot%d", "/orders/%%2e/42/dot%d",
                               "/orders/x/../42/dot%d",
                               "/orders/x/%%2e%%2e/42/dot%d",
                               "/orders/42/../43/../42/dot%d")):
            p = p % i
            target = "/orders/42/dot%d" % i
            with self.subTest(path=p):
                r = self.put(p, b"bypass\n", orders["sequencer"])
                self.assertNotIn(r.status, (200, 201, 204),
                                 "%s: a write stored as %s went through with "
                                 "the sequencer of lock orders, not "
                                 "orders/42: %r" % (p, target, r))
                self.assertIn(r.status, (400, 403), r)
                self.assert_absent(target, p)
                self.assert_none_reached_nginx([r], p)
        # and the other way: a route's own lock cannot write beside it
        self.store.put_file("/orders/43/dot", b"43\n")
        o42 = self.grant("orders/42")
        r = self.put("/orders/42/../43/dot", b"bypass\n", o42["sequencer"])
        self.assertNotIn(r.status, (200, 201, 204), "/orders/42/../43/dot "
                         "(stored as /orders/43/dot) went through with the "
                         "sequencer of orders/42: %r" % r)
        self.assert_stored("/orders/43/dot", b"43\n")

    def test_fragment_in_the_request_target_cannot_carry_a_write_past_a_longer_route(self):
        # a '#' has no place in a request target; what follows it must not
        # decide the lock when the upstream request goes without it
        # (/shop/cart is guarded by lock shop/cart, not by shop)
        self.store.put_file("/shop/cart", b"cart\n")
        shop = self.grant("shop")
        for p in ("/shop/cart#/x", "/shop/cart#"):
            with self.subTest(path=p):
                r = self.put(p, b"bypass\n", shop["sequencer"])
                self.assertNotIn(r.status, (200, 201, 204),
                                 "%s went through with the sequencer of "
                                 "lock shop: %r" % (p, r))
                self.assert_none_reached_nginx([r], p)
                self.assert_stored("/shop/cart", b"cart\n", p)

    def test_per_path_sequencer_is_wrong_lock_under_a_route(self):
        self.store.put_file("/orders/42/items/9", b"nine\n")
        per_path = self.grant("orders/42/items/9")
        r = self.put("/orders/42/items/9", b"evil\n", per_path["sequencer"])
        self.assert_error(r, 403, "wrong_lock")
        self.assert_none_reached_nginx([r])
        self.assert_stored("/orders/42/items/9", b"nine\n")

    def test_longest_matching_prefix_decides_and_other_paths_keep_their_own_lock(self):
        orders = self.grant("orders")
        o42 = self.grant("orders/42")
        self.put_ok("/orders/43/x", b"43\n", orders["sequencer"])
        r = self.put("/orders/42/x", b"evil\n", orders["sequencer"])
        self.assert_error(r, 403, "wrong_lock", "the shorter prefix's lock")
        self.put_ok("/orders/42/x", b"42\n", o42["sequencer"])
        r2 = self.put("/orders/43/x", b"evil\n", o42["sequencer"])
        self.assert_error(r2, 403, "wrong_lock", "a sibling prefix's lock")
        own = self.grant("elsewhere/y")
        self.put_ok("/elsewhere/y", b"y\n", own["sequencer"])
        r3 = self.put("/elsewhere/z", b"evil\n", orders["sequencer"])
        self.assert_error(r3, 403, "wrong_lock", "outside every route")
        self.assert_none_reached_nginx([r, r2, r3])
        self.assert_stored("/orders/43/x", b"43\n")
        self.assert_stored("/orders/42/x", b"42\n")
        self.assert_absent("/elsewhere/z")

    def test_one_route_lock_orders_writes_to_every_path_under_it(self):
        a = self.grant("orders/42")
        self.put_ok("/orders/42/a", b"a by first\n", a["sequencer"])
        self.release_ok("orders/42", a["lease"])
        b = self.grant("orders/42")
        self.put_ok("/orders/42/b", b"b by second\n", b["sequencer"])
        # the first holder's token is stale for every path of the route
        r = self.put("/orders/42/c", b"c by first\n", a["sequencer"])
        self.assert_error(r, 409, "stale_token")
        self.assertEqual((r.json.get("token"), r.json.get("current")),
                         (a["token"], b["token"]))
        self.assert_none_reached_nginx([r])
        self.assert_absent("/orders/42/c")


class KeyFileSanityTests(StoreTestCase):
    """The tests above sign sequencers with the gateway's key file; this
    checks that they sign exactly as fencegate does."""

    def test_sequencer_built_by_the_tests_equals_the_gateways(self):
        self.use_shared()
        path = self.obj()
        g = self.grant(path)
        self.assertEqual(make_sequencer(self.key, self.lock_of(path),
                                        "exclusive", g["token"]),
                         g["sequencer"])
        self.assertNotEqual(make_sequencer(new_key_file()[0],
                                           self.lock_of(path), "exclusive",
                                           g["token"]), g["sequencer"])


class ProxyEnvironmentTests(ProxyCase):
    """The storage is reached directly, whatever proxy the gateway's
    environment names (as nginx's proxy_pass): http_proxy and its kin
    would otherwise carry checked writes through a third party."""

    def test_proxy_variables_in_the_environment_are_not_used(self):
        import socket
        import threading
        trap = socket.socket()
        trap.bind(("127.0.0.1", 0))
        trap.listen(16)
        trap.settimeout(0.2)
        self.addCleanup(trap.close)
        url = "http://127.0.0.1:%d" % trap.getsockname()[1]
        caught = []
        done = threading.Event()

        def watch():
            while not done.is_set():
                try:
                    c, _ = trap.accept()
                except OSError:
                    continue
                with c:
                    c.settimeout(1.0)
                    try:
                        caught.append(c.recv(4096))
                    except OSError as e:
                        caught.append(repr(e))
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        self.addCleanup(t.join, 2.0)
        self.addCleanup(done.set)
        # (no_proxy emptied: the runner's own must not exempt loopback)
        self.start_store(gateway_env={
            "http_proxy": url, "HTTP_PROXY": url, "https_proxy": url,
            "all_proxy": url, "ALL_PROXY": url, "no_proxy": "",
            "NO_PROXY": ""})
        path = self.obj()
        data = self.fixture(path)
        r = self.send("GET", path)
        self.assertEqual(r.status, 200, "GET through the gateway: %r" % (r,))
        self.assertEqual(r.body, data)
        r = self.send("PUT", path, b"fenced\n",
                      token=self.grant(path)["sequencer"])
        self.assertIn(r.status, (200, 201, 204), "fenced PUT: %r" % (r,))
        self.assert_stored(path, b"fenced\n", "after the fenced PUT")
        self.assertEqual(caught, [], "the gateway went through the proxy "
                         "its environment names")
