"""test_proxy_framing.py - requests whose framing or bytes are hostile (a body's length
given twice or wrongly, a header split or repeated, bytes after the end): each
refused with 400 before anything is admitted or forwarded.

The shared base (FenceCase: a gateway in front of a real store, the raw
requests and slow uploads these tests send) is fencecase.py."""

import http.client
import os
import socket
import time
import uuid

import harness
from harness import LOCKS, slack
from storage import on_both_origins, RawRequest
from fencecase import FenceCase, MIB, SlowUpload, TAG, chunked, head_bytes


@on_both_origins
class FramingTests(FenceCase):
    """Requests whose framing or bytes are hostile: refused with 400 before
    anything is admitted or forwarded."""

    def setUp(self):
        super().setUp()
        self.use_shared()

    def host(self):
        return ("Host", "127.0.0.1:%d" % self.gw.port)

    def refused_framing(self, method, path, headers, body, token, data, what,
                        timeout=3.0):
        """One raw request to `path` (holding `data`) whose framing is
        ambiguous: 400 bad_request, and the object is as it was."""
        h = [self.host(), ("X-Test-Id", uuid.uuid4().hex)] + headers
        if token:
            h.append(("Fencing-Token", token))
        with self.subTest(case=what):
            r = self.raw(head_bytes(method, path, h) + body, timeout=timeout)
            self.assert_400(r, "bad_request", what)
            self.assert_stored(path, data, what)

    # -- 1. a body never turns a read into a write ------------------------

    def test_body_never_turns_read_into_write(self):
        path = self.obj("v")
        data = self.fixture(path)
        new = self.obj("never-created")
        evil = b"overwritten!!\n"   # 14 bytes
        mark = self.mark()
        for method in ("HEAD", "GET", "OPTIONS"):
            for target in (path, new):
                for framing in ("content-length", "chunked",
                                "empty chunked"):
                    what = "%s %s with a %s body" % (method, target, framing)
                    tid = uuid.uuid4().hex
                    hdrs = [self.host(), ("X-Test-Id", tid)]
                    if framing == "content-length":
                        hdrs.append(("Content-Length", str(len(evil))))
                        body = evil
                    else:
                        hdrs.append(("Transfer-Encoding", "chunked"))
                        body = chunked(evil if framing == "chunked" else b"")
                    with self.subTest(case=what):
                        r = self.raw(head_bytes(method, target, hdrs) + body,
                                     head_only=(method == "HEAD"))
                        if method == "HEAD" and r.status != 400:
                            # forwarded as HEAD, unchanged
                            self.assertIn(r.status, (200, 404), what)
                            hits = self.store.wait_log(slack(2.0),
                                                       test_id=tid)
                            self.assertEqual([e.method for e in hits],
                                             ["HEAD"], what)
                        elif method == "HEAD":   # a HEAD answer has no body
                            self.assertEqual(r.status, 400, what)
                            self.assertEqual(self.store.log_for(test_id=tid),
                                             [], "%s reached nginx" % what)
                        else:
                            self.assert_400(r, "bad_request", what)
                            self.assertEqual(self.store.log_for(test_id=tid),
                                             [], "%s reached nginx" % what)
                        self.assert_stored(path, data, what)
                        self.assert_absent(new, what)
        got = self.upstream_since(mark)
        self.assertEqual([e for e in got if e.method != "HEAD"], [],
                         "a read with a body reached nginx as something "
                         "else: %r" % got)

    def test_read_with_content_length_zero_is_forwarded(self):
        path = self.obj("v")
        data = self.fixture(path)
        for method in ("GET", "HEAD", "OPTIONS"):
            with self.subTest(method=method):
                r = self.send(method, path, headers=[("Content-Length", "0")])
                self.assertEqual(r.status, 200, "%s: %r" % (method, r))
                if method == "GET":
                    self.assertEqual(r.body, data)
                hits = self.store.wait_log(slack(2.0), test_id=r.test_id)
                self.assertEqual([e.method for e in hits], [method])
        self.assert_stored(path, data)

    def test_propfind_body_stays_a_propfind(self):
        path = self.obj("v")
        data = self.fixture(path)
        xml = (b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:">'
               b'<D:prop><D:getcontentlength/></D:prop></D:propfind>')
        r = self.send("PROPFIND", path, xml, headers=[
            ("Depth", "0"), ("Content-Type", "text/xml")])
        self.assertEqual(r.status, 207, r)
        hits = self.store.wait_log(slack(2.0), test_id=r.test_id)
        self.assertEqual([e.method for e in hits], ["PROPFIND"])
        self.assert_stored(path, data)

    # -- 2. smuggling and framing -----------------------------------------

    def smuggled_put(self, path, tid):
        body = b"smuggled\n"
        return head_bytes("PUT", path, [
            ("Host", "x"), ("Content-Length", str(len(body))),
            ("X-Test-Id", tid)]) + body

    def test_content_length_with_transfer_encoding_refused(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        inner = "smuggled-" + uuid.uuid4().hex
        for method, token in (("GET", None), ("PROPFIND", None),
                              ("PUT", g["sequencer"])):
            for cl in ("1", "0", "200"):
                what = "%s with Content-Length: %s and chunked" % (method, cl)
                hdrs = [self.host(), ("Content-Length", cl),
                        ("Transfer-Encoding", "chunked"),
                        ("X-Test-Id", uuid.uuid4().hex)]
                if token:
                    hdrs.append(("Fencing-Token", token))
                req = head_bytes(method, path, hdrs) + \
                    chunked(self.smuggled_put(path, inner))
                with self.subTest(case=what):
                    r = self.raw(req)
                    self.assert_400(r, "bad_request", what)
                    self.assert_stored(path, data, what)
        self.assert_nothing_upstream(mark, "CL + TE smuggling")
        self.assertEqual(self.store.log_for(test_id=inner), [])
        self.assert_no_admission(self.lock_of(path), "CL + TE")

    def test_chunked_body_of_an_http10_request_refused(self):
        # RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding is
        # badly framed; a 1.0 hop before the gateway would read no body
        # and take the chunks for the next request
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method, token in (("PUT", g["sequencer"]), ("GET", None)):
            h = [self.host(), ("X-Test-Id", uuid.uuid4().hex),
                 ("Transfer-Encoding", "chunked")]
            if token:
                h.append(("Fencing-Token", token))
            head = head_bytes(method, path, h).replace(b" HTTP/1.1\r\n",
                                                       b" HTTP/1.0\r\n", 1)
            with self.subTest(method=method):
                r = self.raw(head + chunked(b"hello"), timeout=1.5)
                self.assert_400(r, "bad_request", "%s HTTP/1.0 chunked" % method)
                self.assert_stored(path, data, method)
        self.assert_nothing_upstream(mark, "HTTP/1.0 with Transfer-Encoding")
        self.assert_no_admission(self.lock_of(path), "HTTP/1.0 chunked")
        # the same PUT in HTTP/1.1 goes through
        h = [self.host(), ("Transfer-Encoding", "chunked"),
             ("Fencing-Token", g["sequencer"])]
        r = self.raw(head_bytes("PUT", path, h) + chunked(b"hello"), timeout=3.0)
        self.assertIn(r.status, (200, 201, 204), r)
        self.assert_stored(path, b"hello")

    def test_transfer_encoding_other_than_chunked_refused(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        seq = g["sequencer"]
        mark = self.mark()
        cases = [
            ("gzip without Content-Length", [("Transfer-Encoding", "gzip")],
             b"abc"),
            ("gzip with Content-Length", [("Transfer-Encoding", "gzip"),
                                          ("Content-Length", "3")], b"abc"),
            ("chunked, chunked", [("Transfer-Encoding", "chunked, chunked")],
             chunked(b"abc")),
            ("chunked twice", [("Transfer-Encoding", "chunked"),
                               ("Transfer-Encoding", "chunked")],
             chunked(b"abc")),
            ("chunked, gzip", [("Transfer-Encoding", "chunked, gzip")],
             chunked(b"abc")),
            ("identity", [("Transfer-Encoding", "identity"),
                          ("Content-Length", "3")], b"abc"),
            ("CHUNKED with Content-Length", [
                ("Content-Length", "3"), ("transfer-encoding", "CHUNKED")],
             chunked(b"abc")),
            ("chunked folded onto a continuation line, with Content-Length",
             [("Content-Length", "3"), ("Transfer-Encoding", "\r\n chunked")],
             chunked(b"abc")),
        ]
        for method, token in (("PUT", seq), ("GET", None)):
            for what, hdrs, body in cases:
                # answered on the head alone: no need to wait long
                self.refused_framing(method, path, hdrs, body, token, data,
                                     "%s with Transfer-Encoding %s"
                                     % (method, what), timeout=1.5)
        self.assert_nothing_upstream(mark, "Transfer-Encoding")
        self.assert_no_admission(self.lock_of(path), "Transfer-Encoding")

    def test_repeated_content_length_refused(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method, token in (("PUT", g["sequencer"]), ("PROPFIND", None),
                              ("GET", None)):
            for values, body in ((("5", "5"), b"hello"),
                                 (("5", "6"), b"hello!"),
                                 (("0", "5"), b"hello")):
                self.refused_framing(
                    method, path, [("Content-Length", v) for v in values],
                    body, token, data, "%s with Content-Length %s"
                    % (method, " and ".join(values)))
        self.assert_nothing_upstream(mark, "repeated Content-Length")
        self.assert_no_admission(self.lock_of(path), "repeated CL")

    def test_folded_header_line_refused_and_named(self):
        """A line that starts with a space or tab continues the header
        before it (obs-fold, RFC 9112 5.2): the two readings of it differ
        between servers, so it is refused, and the message says why."""
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method, token in (("PUT", g["sequencer"]), ("GET", None)):
            for fold in ("\r\n x", "\r\n\tx"):
                what = "%s with X-Note folded by %r" % (method, fold)
                h = [self.host(), ("X-Test-Id", uuid.uuid4().hex),
                     ("X-Note", "a" + fold), ("Content-Length", "3")]
                if token:
                    h.append(("Fencing-Token", token))
                with self.subTest(case=what):
                    r = self.raw(head_bytes(method, path, h) + b"abc",
                                 timeout=1.5)
                    self.assert_error(r, 400, "bad_request", what)
                    self.assertIn("obs-fold", r.json["message"], what)
                    self.assert_stored(path, data, what)
        self.assert_nothing_upstream(mark, "obs-fold")
        self.assert_no_admission(self.lock_of(path), "obs-fold")

    def test_repeated_host_refused(self):
        """Two Host headers would let a Destination be checked against one
        authority and read against the other: 400, nothing upstream."""
        path = self.obj("v")
        data = self.fixture(path)
        s = self.grant(path)
        dst = self.obj("dst")
        d = self.grant(dst)
        mark = self.mark()
        h = [("Host", "a.example"), ("Host", "b.example"),
             ("X-Test-Id", uuid.uuid4().hex),
             ("Destination", "http://b.example" + dst),
             ("Fencing-Token", s["sequencer"]),
             ("Destination-Fencing-Token", d["sequencer"])]
        for method in ("GET", "COPY"):
            with self.subTest(method=method):
                r = self.raw(head_bytes(method, path, h), timeout=3.0)
                self.assert_400(r, "bad_request", "two Host headers")
        self.assert_stored(path, data, "two Host headers")
        self.assertFalse(self.store.exists(dst))
        self.assert_nothing_upstream(mark, "repeated Host")

    def test_malformed_content_length_refused(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method, token in (("PUT", g["sequencer"]), ("PROPFIND", None)):
            for value in ("+5", "5 5", "0x5", "", "-5", "5,5", " 5x",
                          "0000000000000005"):
                self.refused_framing(method, path, [("Content-Length", value)],
                                     b"hello", token, data,
                                     "%s with Content-Length %r"
                                     % (method, value))
        self.assert_nothing_upstream(mark, "malformed Content-Length")
        self.assert_no_admission(self.lock_of(path), "malformed CL")

    def test_fencing_token_in_a_trailer_does_not_count(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        tid = uuid.uuid4().hex
        req = head_bytes("PUT", path, [
            self.host(), ("Transfer-Encoding", "chunked"),
            ("Trailer", "Fencing-Token"), ("X-Test-Id", tid)]) + \
            b"4\r\nevil\r\n0\r\nFencing-Token: " + \
            g["sequencer"].encode() + b"\r\n\r\n"
        r = self.raw(req)
        self.assert_error(r, 428, "token_required")
        self.assertEqual(self.store.log_for(test_id=tid), [])
        self.sentinel()
        self.assertEqual(self.store.log_for(test_id=tid), [])
        self.assert_stored(path, data)

    def test_chunk_size_overflow_never_completes_a_write(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        for size in (b"10000000000000000", b"ffffffffffffffff1", b"-1",
                     b"0x3", b"3 3"):
            tid = uuid.uuid4().hex
            req = head_bytes("PUT", path, [
                self.host(), ("Transfer-Encoding", "chunked"),
                ("Fencing-Token", g["sequencer"]), ("X-Test-Id", tid)]) + \
                size + b"\r\nabc\r\n0\r\n\r\n"
            with self.subTest(size=size):
                r = self.raw(req, timeout=2.0)
                self.assertNotIn(r.status, (200, 201, 204), r)
                self.assert_stored(path, data, size)
        self.sentinel()
        applied = [e for e in self.store.log_for(path=path) if e.applied]
        self.assertEqual(applied, [])
        self.assert_stored(path, data)

    # -- pooled upstream connections ---------------------------------------

    def assert_pooled_requests_get_their_own_answers(self, n=20):
        """n GETs of n distinct objects, one after another on one
        keep-alive client connection: each gets its own object, nginx saw
        each once, and the gateway reused its upstream connections (else
        this proves nothing about them)."""
        objs = []
        for i in range(n):
            p = self.obj("pooled-%02d" % i)
            objs.append((p, self.fixture(p, ("object %02d %s\n" % (
                i, uuid.uuid4().hex)).encode() * (i + 1))))
        ids = []
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port,
                                          timeout=slack(10.0))
        try:
            for i, (p, data) in enumerate(objs):
                tid = "pooled-%d-%s" % (i, uuid.uuid4().hex)
                conn.request("GET", p, headers={"X-Test-Id": tid})
                r = conn.getresponse()
                body = r.read()
                self.assertEqual((r.status, body), (200, data),
                                 "request %d of %d got another answer than "
                                 "its own" % (i + 1, n))
                ids.append(tid)
        finally:
            conn.close()
        self.sentinel()
        entries = [e for e in self.store.log() if e.test_id in ids]
        self.assertEqual(sorted(e.test_id for e in entries), sorted(ids))
        by_id = {e.test_id: e for e in entries}
        for tid, (p, data) in zip(ids, objs):
            e = by_id[tid]
            self.assertEqual((e.method, e.path, e.status,
                              int(e.body_bytes_sent)),
                             ("GET", p, 200, len(data)), e)
        self.assertLess(len({e.connection for e in entries}), n,
                        "the gateway opened a new upstream connection per "
                        "request: pooling was not exercised")

    def test_twenty_pooled_requests_after_framing_attacks_get_their_own_answers(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        seq = g["sequencer"]
        h = self.host()
        inner = "smuggled-" + uuid.uuid4().hex
        attacks = [
            head_bytes("GET", path, [h, ("Content-Length", "1"),
                                     ("Transfer-Encoding", "chunked")])
            + chunked(self.smuggled_put(path, inner)),
            head_bytes("HEAD", path, [h, ("Content-Length", "14")])
            + b"overwritten!!\n",
            head_bytes("GET", path, [h, ("Content-Length", "5"),
                                     ("Content-Length", "6")]) + b"hello!",
            head_bytes("PUT", path, [h, ("Transfer-Encoding", "gzip"),
                                     ("Fencing-Token", seq)]) + b"abc",
            head_bytes("PROPFIND", path, [h, ("Content-Length", "0x5")])
            + b"hello",
            head_bytes("PUT", path, [h, ("Content-Length", "4"),
                                     ("Content-Length", "400"),
                                     ("Fencing-Token", seq)]) + b"evil",
            # a pipelined second request after a GET that claims a body
            head_bytes("GET", path, [h, ("Content-Length", "0")])
            + self.smuggled_put(path, inner),
        ]
        for i, a in enumerate(attacks):
            self.raw(a, timeout=2.0, head_only=a.startswith(b"HEAD"))
        self.assertEqual(self.store.log_for(test_id=inner), [],
                         "the smuggled PUT reached nginx")
        self.assert_stored(path, data)
        self.assert_pooled_requests_get_their_own_answers(20)

    def test_body_shorter_than_content_length_then_close_leaves_the_pool_clean(self):
        path = self.obj("short", ext=".bin")
        g = self.grant(path)
        temps = set(self.store.body_temp_files())
        for framing in ("content-length", "chunked"):
            tid = "short-%s-%s" % (framing, uuid.uuid4().hex)
            up = SlowUpload(self.gw.port, path, [
                ("Fencing-Token", g["sequencer"]), ("X-Test-Id", tid)],
                total=MIB if framing == "content-length" else None)
            up.send(os.urandom(128 * 1024))
            # the upload is under way upstream before the client leaves
            self.wait_for(lambda: set(self.store.body_temp_files()) - temps,
                          slack(5.0), "nginx to start receiving the body")
            up.close()
            hits = self.store.wait_log(slack(5.0), test_id=tid)
            self.assertEqual(len(hits), 1, "%s: nginx never saw the upload "
                             "end: %r" % (framing, hits))
            self.assertFalse(hits[0].applied, hits[0])
            self.wait_for(lambda: not (set(self.store.body_temp_files())
                                       - temps),
                          slack(3.0), "nginx to drop the truncated body")
        self.assert_absent(path)
        # an unfenced request with a body the client never finishes
        folder = os.path.dirname(path) + "/"
        rq = RawRequest(self.gw.port, "PROPFIND", folder, [
            ("Depth", "1"), ("Content-Type", "text/xml"),
            ("Content-Length", "5000"), ("X-Test-Id", uuid.uuid4().hex)])
        rq.send(b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:">')
        # the gateway has taken in what was sent before the client leaves
        harness.wait_read_by_server(self.gw.port, [rq.sock], slack(5.0))
        rq.close()
        self.assert_pooled_requests_get_their_own_answers(20)

    def test_client_that_hangs_up_with_its_last_bytes_ends_the_upload_at_once(self):
        # The hang-up arrives with the body's last bytes, while the
        # gateway is busy elsewhere (the first piece waits for the
        # upstream): the gateway must still see it and end the upload
        # upstream, not at its connection timeout.
        path = self.obj("hup", ext=".bin")
        g = self.grant(path)
        for framing in ("content-length", "chunked"):
            tid = "hup-%s-%s" % (framing, uuid.uuid4().hex)
            up = SlowUpload(self.gw.port, path, [
                ("Fencing-Token", g["sequencer"]), ("X-Test-Id", tid)],
                total=MIB if framing == "content-length" else None)
            piece = os.urandom(32 * 1024)
            if framing == "content-length":
                last = piece
            else:
                last = b"%x\r\n%s\r\n" % (len(piece), piece)
            up.send(piece)
            up.rq.sock.sendall(last * 4)
            up.rq.sock.shutdown(socket.SHUT_WR)
            t0 = time.monotonic()
            hits = self.store.wait_log(slack(5.0), test_id=tid)
            self.assertEqual(len(hits), 1, "%s: nginx never saw the upload "
                             "end: %r" % (framing, hits))
            self.assertFalse(hits[0].applied, hits[0])
            self.assertLess(time.monotonic() - t0, slack(5.0))
            up.close()
        self.assert_absent(path)
        self.assert_pooled_requests_get_their_own_answers(5)

    # -- 9. bytes that have no place in a request --------------------------

    def test_nul_in_request_target_refused(self):
        lock = "it-%s/nul/%s" % (TAG, uuid.uuid4().hex[:8])
        body = b"{}"
        r = self.raw(head_bytes("POST", (LOCKS + lock).encode() + b"\0b",
                                [self.host(),
                                 ("Content-Type", "application/json"),
                                 ("Content-Length", "2")]) + body)
        self.assert_400(r, "bad_request", "NUL in a lock URL")
        st = self.state(lock)
        self.assertFalse(st["held"], "lock %s was granted: %r" % (lock, st))
        self.assertEqual(self.redis.lock_keys(lock), [])
        # and in a proxied target
        path = self.obj("nul")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method, tail, body, code in (
                ("PUT", b"\0.evil", b"evil", "bad_request"),
                ("PUT", b"%00", b"evil", "bad_path"),
                ("GET", b"\0", b"", "bad_request"),
                ("GET", b"%00", b"", "bad_path")):
            what = "%s %r" % (method, path.encode() + tail)
            h = [self.host(), ("Fencing-Token", g["sequencer"])]
            if body:
                h.append(("Content-Length", str(len(body))))
            with self.subTest(case=what):
                r = self.raw(head_bytes(method, path.encode() + tail, h)
                             + body)
                self.assert_error(r, 400, code, what)
        self.assert_nothing_upstream(mark, "NUL in the target")
        self.assert_no_admission(self.lock_of(path), "NUL in the target")
        self.assert_stored(path, data)

    def test_bare_cr_in_header_value_refused(self):
        path = self.obj("cr")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method, extra, body in (
                ("GET", [], b""),
                ("PUT", [("Fencing-Token", g["sequencer"]),
                         ("Content-Length", "4")], b"evil")):
            for name, value in (("X-Evil", "a\rb"),
                                ("X-Evil", "a\rTransfer-Encoding: chunked"),
                                ("User-Agent", "\r")):
                what = "%s with %s: %r" % (method, name, value)
                h = [self.host(), (name, value),
                     ("X-Test-Id", uuid.uuid4().hex)] + extra
                with self.subTest(case=what):
                    r = self.raw(head_bytes(method, path, h) + body,
                                 timeout=3.0)
                    self.assert_400(r, "bad_request", what)
        self.assert_nothing_upstream(mark, "bare CR")
        self.assert_no_admission(self.lock_of(path), "bare CR")
        self.assert_stored(path, data)

    def test_nul_in_header_refused(self):
        base = self.folder("dir")
        src, mine, victim = (base + "/src.txt", base + "/mine.txt",
                             base + "/victim.txt")
        self.fixture(src)
        vdata = self.fixture(victim)
        s = self.grant(src)
        m = self.grant(mine)
        mark = self.mark()
        cases = [
            ("GET", src, [("X-Evil", b"a\0b")]),
            ("GET", src, [(b"X-E\0vil", "a")]),
            ("PUT", src, [("Fencing-Token", s["sequencer"]),
                          ("X-Evil", b"a\0b"), ("Content-Length", "4")]),
            ("PUT", src, [("Fencing-Token", s["sequencer"].encode() + b"\0x"),
                          ("Content-Length", "4")]),
            ("COPY", src, [("Fencing-Token", s["sequencer"]),
                           ("Destination", mine.encode() + b"\0/../victim.txt"),
                           ("Destination-Fencing-Token", m["sequencer"])]),
            (b"PU\0T", src, [("Fencing-Token", s["sequencer"]),
                            ("Content-Length", "4")]),
            (b"GET\0PUT", src, []),
        ]
        for method, target, hdrs in cases:
            what = "%s with %r" % (method, hdrs)
            body = b"evil" if b"PU" in (method if isinstance(method, bytes)
                                         else method.encode()) else b""
            with self.subTest(case=what):
                r = self.raw(head_bytes(method, target, [self.host()] + hdrs)
                             + body, timeout=3.0)
                self.assert_400(r, "bad_request", what)
        self.assert_nothing_upstream(mark, "NUL in a header")
        self.assert_no_admission(self.lock_of(src), "NUL in a header")
        self.assert_stored(victim, vdata)
        self.assert_absent(mine)

    def test_unresolvable_paths_refused_bad_path(self):
        base = self.folder("dir")
        g = self.grant(base + "/x")
        mark = self.mark()
        long_path = base + "/" + "a" * (4096 - len(base))
        for p in (base + "/x%zz", base + "/x%2", base + "/x%0a",
                  base + "/x%0D", base + "/x%7f", base + "/x%00y",
                  "/%2e%2e" + base, long_path,
                  base + "/" + "a" * 3000 + "%61" * (1096 - len(base))):
            for method, body in (("GET", None), ("HEAD", None),
                                 ("PUT", b"evil")):
                with self.subTest(method=method, path=p[:80]):
                    r = self.send(method, p, body, token=g["sequencer"])
                    self.assertEqual(r.status, 400, r)
                    if method != "HEAD":
                        self.assert_error(r, 400, "bad_path", p[:80])
        self.assert_nothing_upstream(mark, "unresolvable paths")

    def test_malformed_request_heads_refused(self):
        path = self.obj("v")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        heads = [
            ("header name with a non-token byte",
             head_bytes("GET", path, [self.host(), ("X(Evil)", "1")])),
            ("header name with a space",
             head_bytes("GET", path, [self.host(), ("X Evil", "1")])),
            ("257 header fields",
             head_bytes("GET", path, [self.host()] + [
                 ("X-H%d" % i, "1") for i in range(256)])),
            ("two spaces in the request line",
             b"GET  " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("junk after the version",
             b"GET " + path.encode() + b" HTTP/1.1 x\r\nHost: x\r\n\r\n"),
            ("PUT with a non-token header name",
             head_bytes("PUT", path, [
                 self.host(), ("Fencing-Token", g["sequencer"]),
                 ("Content-Length", "4"), ("X@Evil", "1")]) + b"evil"),
        ]
        for what, req in heads:
            with self.subTest(case=what):
                r = self.raw(req, timeout=3.0)
                self.assert_400(r, "bad_request", what)
        # 256 fields are still fine
        ok = uuid.uuid4().hex
        r = self.raw(head_bytes("GET", path, [self.host(), ("X-Test-Id", ok)]
                                + [("X-H%d" % i, "1") for i in range(254)]))
        self.assertEqual((r.status, r.body), (200, data), r)
        got = [e for e in self.upstream_since(mark) if e.test_id != ok]
        self.assertEqual(got, [], "malformed heads reached nginx")
        self.assert_stored(path, data)
        self.assert_no_admission(self.lock_of(path), "malformed heads")

    def test_raw_space_or_control_in_target_refused_before_admission(self):
        base = self.folder("dir")
        target = base + "/obj"
        lock = self.lock_of(target)
        g = self.grant(target)
        mark = self.mark()
        for c in (b" ", b"\x01", b"\x7f", b"\t", b"\x1b", b"\x0b"):
            raw_target = base.encode() + b"/x" + c + b"y/../obj"
            for method, body in (("PUT", b"evil"), ("GET", b"")):
                what = "%s %r" % (method, raw_target)
                h = [self.host(), ("X-Test-Id", uuid.uuid4().hex)]
                if body:
                    h += [("Fencing-Token", g["sequencer"]),
                          ("Content-Length", str(len(body)))]
                with self.subTest(case=what):
                    r = self.raw(head_bytes(method, raw_target, h) + body,
                                 timeout=3.0)
                    self.assert_error(r, 400, "bad_request", what)
                    self.assert_no_admission(lock, what)
        self.assert_nothing_upstream(mark, "raw space or control byte")
        self.assert_absent(target)
        # the same grant still writes: nothing was left behind
        w = self.put(target, b"fine\n", g["sequencer"], timeout=slack(5.0))
        self.assertEqual(w.status, 201, w)
        self.assertLess(w.elapsed, slack(1.0))

    # -- 11. byte for byte ---------------------------------------------------

    def test_long_method_forwarded_whole_or_refused(self):
        path = self.obj("method")
        data = self.fixture(path)
        g = self.grant(path)
        mark = self.mark()
        for method in ("PROPFINDXXXXXXXXXXXXX", "X" * 16, "PUTPUTPUTPUTPUTPUT",
                       "GET" + "X" * 40):
            tid = uuid.uuid4().hex
            r = self.raw(head_bytes(method, path, [
                self.host(), ("Fencing-Token", g["sequencer"]),
                ("X-Test-Id", tid)]), timeout=3.0)
            self.assertIsNotNone(r.status, "%s: no answer" % method)
            hits = self.store.wait_log(slack(0.5), test_id=tid)
            self.assertIn([e.method for e in hits], ([], [method]),
                          "%s reached nginx as %r" % (method, hits))
        got = self.upstream_since(mark)
        for e in got:
            self.assertGreater(len(e.method or ""), 15,
                               "a method was cut short: %r" % e)
        self.assert_stored(path, data)


# ---------------------------------------------------------------------------
# 3, 4: COPY, MOVE and collections
