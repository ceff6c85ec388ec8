"""test_proxy_forwarded.py - what is forwarded: a target in absolute form is checked and
forwarded as its path would be, Forwarded/X-Forwarded-* headers a client
sends are never trusted, and every header line the upstream got is the
one that was checked.

The shared base (FenceCase: a gateway in front of a real store, the raw
requests and slow uploads these tests send) is fencecase.py."""

import uuid

import harness
from harness import LOCKS, slack, wait_until
from storage import on_both_origins, RawRequest
from fencecase import FenceCase, TAG, head_bytes, probe_answer, raw_http


@on_both_origins
class AbsoluteFormTests(FenceCase):
    """A target sent as to a proxy, "http://authority/path": checked and
    forwarded exactly as its path would be, with its authority in place of
    Host; nothing else about it is looser."""

    def setUp(self):
        super().setUp()
        self.use_shared()

    def req(self, method, target, headers=(), body=b""):
        tid = uuid.uuid4().hex
        h = [("Host", "127.0.0.1:%d" % self.gw.port), ("X-Test-Id", tid),
             ("Content-Length", str(len(body)))] + list(headers)
        r = self.raw(head_bytes(method, target, h) + body)
        r.test_id = tid
        return r

    def test_absolute_form_read_and_write_are_checked_as_their_path(self):
        path = self.obj("abs")
        data = self.fixture(path)
        r = self.req("GET", "http://files.example" + path)
        self.assertEqual((r.status, r.body), (200, data), r)
        # a write needs the path's lock, whatever the authority says
        r = self.req("PUT", "http://files.example" + path, body=b"x\n")
        self.assert_error(r, 428, "token_required", "absolute-form PUT")
        self.assert_stored(path, data, "a PUT refused")
        g = self.grant(path)
        r = self.req("PUT", "HTTP://files.example" + path,
                     [("Fencing-Token", g["sequencer"])], b"new\n")
        self.assertIn(r.status, (200, 201, 204), r)
        self.assert_stored(path, b"new\n", "the absolute-form PUT")
        # the lock API too, by its path, and recorded as the lock API
        r = self.req("GET", "http://files.example/_fence/v1/health")
        self.assertEqual(r.status, 200, r)
        lock = self.lock_name("abs-api")
        r = self.req("POST", "http://files.example" + LOCKS + lock)
        self.assertEqual(r.status, 200, r)
        ls = self.gw.request("GET", "/_fence/v1/locks?prefix=" + lock)
        self.assertEqual(ls.status, 200, ls)
        (entry,) = ls.json["locks"]
        self.assertEqual(entry["holders"][0]["client"], "127.0.0.1", entry)

    def test_absolute_form_authority_stands_for_host(self):
        src, dst = self.siblings("asrc.txt", "adst.txt")
        data = self.fixture(src)
        s = self.grant(src)
        d = self.grant(dst)
        # the Destination is this request's authority: the target's, not Host
        r = self.req("COPY", "http://files.example" + src, [
            ("Fencing-Token", s["sequencer"]),
            ("Destination", "http://files.example" + dst),
            ("Destination-Fencing-Token", d["sequencer"])])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored(dst, data, "the COPY")
        r = self.req("COPY", "http://files.example" + src, [
            ("Fencing-Token", s["sequencer"]),
            ("Destination", "http://127.0.0.1:%d%s" % (self.gw.port, dst)),
            ("Destination-Fencing-Token", d["sequencer"])])
        self.assert_error(r, 400, "bad_destination", "Host's authority")
        # what the storage is told of the client's authority
        r = self.req("GET", "http://files.example" + src)
        self.assertEqual(r.status, 200, r)
        hits = self.store.wait_log(slack(5.0), test_id=r.test_id)
        self.assertEqual(len(hits), 1, hits)
        self.assertEqual(hits[0].x_forwarded_host, "files.example", hits[0])

    def test_absolute_form_without_a_host_or_with_userinfo_is_refused(self):
        path = self.obj("abs-bad")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for target in ("http://u@files.example" + path, "http://" + path,
                       "http:///" + path.lstrip("/"),
                       "http://files.example/a/../.." + path,
                       "ftp://files.example" + path):
            with self.subTest(target=target):
                r = self.req("PUT", target, [("Fencing-Token", g["sequencer"])],
                             b"evil\n")
                self.assertEqual(r.status, 400, r)
                self.assert_stored(path, data, target)
        self.assert_nothing_upstream(mark, "refused absolute-form targets")


# ---------------------------------------------------------------------------
# 12: credentials never go upstream


HOSTILE = [("X-Forwarded-Proto", "https"),
           ("X-Forwarded-Host", "evil.example"),
           ("Forwarded", "for=6.6.6.6;host=evil.example;proto=https"),
           ("X-Forwarded-For", "203.0.113.7")]


@on_both_origins
class ForwardedHeaderTests(FenceCase):
    """What nginx was sent (its access log records the headers)."""

    def setUp(self):
        super().setUp()
        self.use_shared()

    def test_credentials_and_client_forwarding_headers_never_go_upstream(self):
        src, dst = self.siblings("src.txt", "dst.txt")
        self.fixture(src)
        s = self.grant(src)
        d = self.grant(dst)
        secrets = (s["sequencer"], d["sequencer"], s["lease"], d["lease"])
        creds = [("Fence-Lease", s["lease"])]
        sent = [
            self.send("PUT", src, b"new\n", token=s["sequencer"],
                      headers=HOSTILE + creds),
            self.send("COPY", src, token=s["sequencer"], headers=HOSTILE +
                      creds + [("Destination", dst),
                               ("Destination-Fencing-Token",
                                d["sequencer"])]),
            self.send("GET", src, token=s["sequencer"], headers=HOSTILE +
                      creds + [("Destination-Fencing-Token",
                                d["sequencer"])]),
            self.send("GET", src, headers=HOSTILE + creds),
        ]
        host = "127.0.0.1:%d" % self.gw.port
        for r in sent:
            self.assertIn(r.status, (200, 201, 204), r)
            hits = self.writes_logged(r.test_id)
            self.assertEqual(len(hits), 1, hits)
            # with the PROPFIND a COPY asks first (Destination without '/')
            asked = [e for e in self.store.log_for(test_id=r.test_id)
                     if e.method == "PROPFIND"]
            self.assertEqual(len(asked), 1 if r is sent[1] else 0, asked)
            for e in hits + asked:
                for field in ("fencing_token", "destination_fencing_token",
                              "fence_lease", "forwarded", "x_forwarded_host",
                              "destination", "x_forwarded_for"):
                    v = getattr(e, field) or ""
                    for sec in secrets:
                        self.assertNotIn(sec, v, "a credential went upstream "
                                         "in %s" % field)
                self.assertIn(e.fencing_token, (None, str(s["token"]),
                                                str(d["token"])))
                self.assertIsNone(e.destination_fencing_token)
                self.assertIsNone(e.fence_lease)
                self.assertEqual(e.x_forwarded_proto, "http")
                self.assertEqual(e.x_forwarded_host, host)
                self.assertIsNone(e.forwarded)
                self.assertEqual(e.x_forwarded_for, "203.0.113.7, 127.0.0.1")


class RecordedHeaderTests(FenceCase):
    """Every header line the upstream got, repeats included."""

    def setUp(self):
        super().setUp()
        env = self.start_env(("--forward-token", "yes"), upstream=False)
        self.rec = env.upstream
        self.rec.on("PROPFIND", respond=probe_answer)
        self.rec.start()
        self.addCleanup(self.rec.stop)
        self.gw = env.gw
        self.redis = env.redis

    def test_credentials_and_client_forwarding_headers_are_replaced_for_the_upstream(self):
        s = self.grant("rec-%s/src" % TAG)
        d = self.grant("rec-%s/dst" % TAG)
        src, dst = "/rec-%s/src" % TAG, "/rec-%s/dst" % TAG
        secrets = (s["sequencer"], d["sequencer"], s["lease"], d["lease"])
        host = "127.0.0.1:%d" % self.gw.port
        creds = [("Fence-Lease", s["lease"]), ("fence-lease", d["lease"])]
        sent = [
            ("PUT", src, b"new\n", [], s["sequencer"]),
            ("COPY", src, None, [("Destination", "http://%s%s" % (host, dst)),
                                 ("Destination-Fencing-Token",
                                  d["sequencer"])], s["sequencer"]),
            ("MOVE", src, None, [("Destination", dst),
                                 ("destination-fencing-token",
                                  d["sequencer"])], s["sequencer"]),
            ("GET", src, None, [("Destination-Fencing-Token",
                                 d["sequencer"])], s["sequencer"]),
            ("GET", src, None, [], None),
        ]
        for method, path, body, extra, token in sent:
            r = self.send(method, path, body, token=token,
                          headers=HOSTILE + creds + extra)
            self.assertEqual(r.status, 200, "%s: %r" % (method, r))
        recs = self.rec.records
        # a COPY's and a MOVE's Destination named without its '/' is asked
        # about first (PROPFIND, Depth 0), a MOVE's path too
        self.assertEqual([(x["method"], x["path"]) for x in recs],
                         [("PUT", src), ("PROPFIND", dst), ("COPY", src),
                          ("PROPFIND", src), ("PROPFIND", dst), ("MOVE", src),
                          ("GET", src), ("GET", src)])
        for x in recs:
            if x["method"] == "PROPFIND":
                self.assertEqual([v for k, v in x["headers"]
                                  if k.lower() == "depth"], ["0"])
                self.assertIn(b"resourcetype", x["body"])
                continue
            what = "%s %s" % (x["method"], x["path"])
            names = {}
            for k, v in x["headers"]:
                names.setdefault(k.lower(), []).append(v)
                for sec in secrets:
                    self.assertNotIn(sec, v, "%s: a credential went upstream "
                                     "in %s" % (what, k))
            self.assertNotIn("destination-fencing-token", names, what)
            self.assertNotIn("fence-lease", names, what)
            for v in names.get("fencing-token", []):
                self.assertIn(v, (str(s["token"]), str(d["token"])), what)
            self.assertEqual(names.get("x-forwarded-proto"), ["http"], what)
            self.assertEqual(names.get("x-forwarded-host"), [host], what)
            self.assertNotIn("forwarded", names, what)
            self.assertEqual(", ".join(names.get("x-forwarded-for", [])),
                             "203.0.113.7, 127.0.0.1", what)
            if x["method"] in ("COPY", "MOVE"):
                self.assertEqual(names.get("destination"),
                                 ["http://127.0.0.1:%d%s" % (self.rec.port, dst)],
                                 what)

    def probe_case(self, dst_tail, extra=()):
        """A MOVE of /rec-TAG/src onto /rec-TAG/dst-<dst_tail>: the reply,
        and what the upstream got for it."""
        src = "/rec-%s/src-%s-object" % (TAG, dst_tail)
        s = self.grant(src.lstrip("/"))
        dst = "/rec-%s/dst-%s" % (TAG, dst_tail)
        d = self.grant(dst.lstrip("/"))
        n = len(self.rec.records)
        r = self.send("MOVE", src, token=s["sequencer"],
                      headers=[("Destination", dst),
                               ("Destination-Fencing-Token", d["sequencer"])]
                      + list(extra))
        return r, dst, self.rec.records[n:]

    def test_probe_carries_the_clients_credentials_and_user_agent(self):
        r, dst, recs = self.probe_case("object", [
            ("Authorization", "Basic dXNlcjpwYXNz"),
            ("User-Agent", "gvfs/1.50"), ("Depth", "infinity"),
            ("Overwrite", "T")])
        self.assertEqual(r.status, 200, r)
        src = "/rec-%s/src-object-object" % TAG
        self.assertEqual([(x["method"], x["path"]) for x in recs],
                         [("PROPFIND", src), ("PROPFIND", dst), ("MOVE", src)])
        for x in recs[:2]:
            h = [(k.lower(), v) for k, v in x["headers"]]
            self.assertIn(("authorization", "Basic dXNlcjpwYXNz"), h)
            self.assertIn(("user-agent", "gvfs/1.50"), h)
            self.assertEqual([v for k, v in h if k == "depth"], ["0"])
            self.assertNotIn("overwrite", [k for k, _ in h])
        self.assertIn(("Overwrite", "T"), recs[2]["headers"])

    def test_method_override_header_naming_another_method_refused(self):
        # a storage that honours one would apply a DELETE checked as a GET
        n = len(self.rec.records)
        for hdr in ("X-HTTP-Method-Override", "x-http-method",
                    "X-Method-Override"):
            for method, value in (("GET", "DELETE"), ("GET", "put"),
                                  ("PROPFIND", "MOVE"), ("GET", "")):
                with self.subTest(header=hdr, method=method, value=value):
                    r = self.send(method, "/rec-%s/override" % TAG,
                                  headers=[(hdr, value)])
                    self.assert_error(r, 400, "bad_request")
                    self.assertIn(hdr.lower(), r.json["message"].lower())
        self.assertEqual(self.rec.records[n:], [])
        # naming the request's own method, it goes as it came
        r = self.send("GET", "/rec-%s/override" % TAG,
                      headers=[("X-HTTP-Method-Override", "get")])
        self.assertEqual(r.status, 200, r)
        self.assertIn(("X-HTTP-Method-Override", "get"),
                      self.rec.records[-1]["headers"])

    def test_probe_answer_the_gateway_cannot_read_as_sent_refuses_the_write(self):
        # a client's Accept-Encoding or Accept-Charset would otherwise have
        # a storage answer in bytes where no collection can be seen
        r, dst, recs = self.probe_case("object", [
            ("Accept-Encoding", "gzip, br"), ("Accept-Charset", "utf-16"),
            ("Overwrite", "T")])
        self.assertEqual(r.status, 200, r)
        for x in recs[:2]:
            h = [(k.lower(), v) for k, v in x["headers"]]
            self.assertEqual([v for k, v in h if k == "accept-encoding"],
                             ["identity"], x)
            self.assertNotIn("accept-charset", [k for k, _ in h])
        # the client's own go with the write itself
        self.assertIn(("Accept-Encoding", "gzip, br"), recs[2]["headers"])
        for tail in ("gzip", "utf16", "json"):
            with self.subTest(answer=tail):
                r, dst, recs = self.probe_case(tail, [("Overwrite", "T")])
                self.assertEqual(r.json.get("error") if r.json else None,
                                 "upstream_unavailable", r)
                self.assertEqual([x["method"] for x in recs],
                                 ["PROPFIND", "PROPFIND"])

    def test_probe_answer_that_names_no_kind_refuses_the_write(self):
        # a redirect (Apache's mod_dir sends one for a collection named
        # without its '/') or a refusal says nothing: the write is not
        # risked on it
        for tail, code in (("coll", "subtree_unguarded"),
                           ("redirect", "upstream_unavailable"),
                           ("private", "upstream_unavailable")):
            with self.subTest(answer=tail):
                r, dst, recs = self.probe_case(tail)
                self.assertEqual(r.json.get("error") if r.json else None,
                                 code, r)
                self.assertEqual([x["method"] for x in recs],
                                 ["PROPFIND", "PROPFIND"])

    def test_client_that_leaves_during_the_probe_sends_no_write(self):
        s = self.grant("rec-%s/src" % TAG)
        dst = "/rec-%s/dst-slow" % TAG
        d = self.grant(dst.lstrip("/"))
        n = len(self.rec.records)
        ended = harness.metric_value(self.gw,
                                     "fencegate_upstream_responses_total")
        rq = RawRequest(self.gw.port, "MOVE", "/rec-%s/src" % TAG, [
            ("Fencing-Token", s["sequencer"]), ("Destination", dst),
            ("Destination-Fencing-Token", d["sequencer"])])
        self.assertTrue(wait_until(
            lambda: any(x["path"] == dst for x in self.rec.records[n:]),
            slack(5.0)), "the Destination was never asked about")
        rq.close()
        # the slow answer came (both probes' transfers ended) and nothing
        # followed it upstream (none in flight): it went nowhere
        self.assertTrue(wait_until(
            lambda: harness.metric_value(
                self.gw, "fencegate_upstream_responses_total") >= ended + 2
            and harness.metric_value(
                self.gw, "fencegate_upstream_transfers") == 0,
            slack(5.0)), "the slow probe never ended")
        self.assertEqual([x["method"] for x in self.rec.records[n:]],
                         ["PROPFIND", "PROPFIND"])
        self.assertTrue(self.gw.alive())

    def test_move_whose_headers_cannot_be_built_is_answered(self):
        s = self.grant("rec-%s/src" % TAG)
        d = self.grant("rec-%s/dst-object" % TAG)
        r = self.send("MOVE", "/rec-%s/src" % TAG, token=s["sequencer"],
                      headers=[("Destination", "/rec-%s/dst-object" % TAG),
                               ("Destination-Fencing-Token", d["sequencer"]),
                               ("X-Forwarded-For", "1" * 3000),
                               ("X-Forwarded-For", "2" * 3000)],
                      timeout=slack(5.0))
        self.assertEqual(r.status, 500, r)

    def test_delete_and_copy_of_a_path_without_its_slash_go_depth_0(self):
        # whatever Depth the client sent: a storage that takes the path
        # for a collection must not delete or copy what is in it
        g = self.grant("rec-%s/obj" % TAG)
        d = self.grant("rec-%s/copy" % TAG)
        for method, depth in (("DELETE", None), ("DELETE", "infinity"),
                              ("COPY", "infinity")):
            h = [("Depth", depth)] if depth else []
            if method == "COPY":
                h += [("Destination", "/rec-%s/copy" % TAG),
                      ("Destination-Fencing-Token", d["sequencer"]),
                      ("Overwrite", "F")]
            r = self.send(method, "/rec-%s/obj" % TAG, token=g["sequencer"],
                          headers=h, test_id="depth-%s-%s" % (method, depth))
            self.assertEqual(r.status, 200, r)
        recs = [x for x in self.rec.records if x["path"].endswith("/obj")]
        self.assertEqual([x["method"] for x in recs],
                         ["DELETE", "DELETE", "COPY"])
        for x in recs:
            self.assertEqual([v for k, v in x["headers"]
                              if k.lower() == "depth"], ["0"], x)

    def test_x_forwarded_host_is_removed_when_the_request_had_no_host(self):
        r = raw_http(self.gw.port, b"GET /rec-%s/nohost HTTP/1.0\r\n"
                     b"X-Forwarded-Host: evil.example\r\n"
                     b"Forwarded: host=evil.example\r\n\r\n" % TAG.encode())
        self.assertEqual(r.status, 200, r)
        recs = [x for x in self.rec.records if x["path"].endswith("nohost")]
        self.assertEqual(len(recs), 1, recs)
        names = {k.lower() for k, _ in recs[0]["headers"]}
        self.assertNotIn("x-forwarded-host", names)
        self.assertNotIn("forwarded", names)
