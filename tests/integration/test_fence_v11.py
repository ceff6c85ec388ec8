"""test_fence_v11.py - contract v1.1 of the fencing proxy, row by row,
against a real fencegate, redis-server and nginx WebDAV store, sent the way
an attacker would send it.

Every attack here was reproduced against the v1 gateway. A refused write is
proven not to have reached nginx twice over: nginx's access log has nothing
for it (not under its X-Test-Id, and nothing at all between a mark taken
before the attack and a sentinel GET after it, since a request nginx cannot
parse is logged without its headers), and the object on disk is unchanged.
Framing attacks are written by hand on raw sockets.

The order of the checks: framing (400 bad_request), a body on GET, HEAD
or OPTIONS (400 bad_request), bad_path, bad_destination, subtree_unguarded,
bad_lock_name; then each lock of the write set in turn (the request path's
first) is judged by the whole token table (token_required,
malformed_token, forged_token, wrong_lock, wrong_mode, stale_token) before
the next one is looked at.
"""

import gzip
import http.client
import json
import os
import re
import socket
import threading
import time
import uuid

import harness
from harness import LOCKS, parse_raw, slack, tamper, wait_until
from storage import (on_both_origins, RawRequest, StoreTestCase, make_sequencer, new_key_file,
                     write_config)

TAG = uuid.uuid4().hex[:6]
MIB = 1 << 20
# a token beyond anything issued (tokens are Redis' clock in us)
FAR_AHEAD = 10 ** 12

# ---------------------------------------------------------------------------
# raw HTTP


class RawReply(harness.Response):
    """A response read off a raw socket; `raw` holds every byte read."""

    def __init__(self, raw):
        status, hdrs, body = parse_raw(raw) if raw else (None, {}, b"")
        super().__init__(status, "", list(hdrs.items()), body, 0.0)
        self.raw = raw

    def __repr__(self):
        return "<raw %s %r>" % (self.status, self.raw[:400])


def _response_complete(buf, head_only):
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    if head_only:
        return True
    m = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    if m:
        return len(rest) >= int(m.group(1))
    if re.search(rb"(?im)^transfer-encoding:.*chunked", head):
        return rest.endswith(b"0\r\n\r\n")
    status = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    return bool(status) and status.group(1) in (b"204", b"304")


def raw_http(port, data, timeout=5.0, head_only=False):
    """Sends `data` on a fresh connection and reads one response (only its
    head when head_only, as for HEAD), or until the server closes or
    `timeout` passes. Send errors are swallowed: the server may answer
    and close before it has read everything."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    buf = b""
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except (socket.timeout, OSError):
                break
            if not chunk:
                break
            buf += chunk
            if _response_complete(buf, head_only):
                break
    finally:
        s.close()
    return RawReply(buf)


def head_bytes(method, target, headers):
    """A request head; `method` and `target` may be str or bytes, so that
    any byte can be put in them."""
    def b(x):
        return x if isinstance(x, bytes) else x.encode("latin-1")
    lines = [b(method) + b" " + b(target) + b" HTTP/1.1"]
    lines += [b(k) + b": " + b(v) for k, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def chunked(*pieces):
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + \
        b"0\r\n\r\n"


def script_calls(redis):
    """How many scripts Redis has run so far (EVALSHA, EVAL, FCALL)."""
    info = redis.command("INFO", "commandstats")
    if isinstance(info, bytes):
        info = info.decode()
    n = 0
    for line in info.splitlines():
        m = re.match(r"cmdstat_(evalsha|eval|fcall|evalsha_ro|eval_ro|"
                     r"fcall_ro):calls=(\d+)", line)
        if m:
            n += int(m.group(2))
    return n

def refused_total(gw, reason):
    """fencegate_fence_refused_total{reason} of a gateway, 0 before any."""
    r = gw.request("GET", "/_fence/v1/metrics")
    m = re.search(r'^fencegate_fence_refused_total\{reason="%s"\} (\S+)$'
                  % re.escape(reason), r.body.decode(), re.M)
    return float(m.group(1)) if m else 0.0


def given_back_total(gw):
    """fencegate_lock_given_back_total of a gateway, over its reasons."""
    r = gw.request("GET", "/_fence/v1/metrics")
    return sum(float(v) for v in re.findall(
        r'^fencegate_lock_given_back_total\{[^}]*\} (\S+)$',
        r.body.decode(), re.M))


class SlowUpload:
    """A PUT whose body the test paces: chunked, or with a Content-Length
    of `total` bytes. trickle() sends a small piece every `every` s from a
    thread (never the last byte of a Content-Length body) until stop()."""

    def __init__(self, port, path, headers, total=None):
        hdrs = list(headers)
        hdrs.append(("Content-Length", str(total)) if total
                    else ("Transfer-Encoding", "chunked"))
        self.rq = RawRequest(port, "PUT", path, hdrs)
        self.total = total
        self.sent = 0
        self.failed = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = None

    def send(self, data):
        with self._lock:
            if self.total:
                data = data[:self.total - self.sent]
                self.rq.send(data)
            else:
                self.rq.send_chunk(data)
            self.sent += len(data)

    def _run(self, every):
        while not self._stop.wait(every):
            if self.total and self.total - self.sent <= 64:
                continue
            try:
                self.send(b"slow-%08d\n" % self.sent)
            except OSError:
                self.failed = True
                return

    def trickle(self, every=0.05):
        self._thread = threading.Thread(target=self._run, args=(every,),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def finish(self):
        """Ends the body (the rest of a Content-Length body, or the last
        chunk). Send errors mean the gateway gave up on it: swallowed."""
        self.stop()
        try:
            with self._lock:
                if self.total:
                    while self.sent < self.total:
                        n = min(65536, self.total - self.sent)
                        self.rq.send(b"z" * n)
                        self.sent += n
                else:
                    self.rq.end_chunks()
        except OSError:
            self.failed = True

    def close(self):
        self.stop()
        self.rq.close()


# ---------------------------------------------------------------------------
# a recording upstream, for the header details nginx's log cannot show


# what the recording upstream answers a PROPFIND of a path ending so
PROBE_ANSWERS = {"redirect": 301, "private": 401, "coll": 207, "slow": 207}
MULTISTATUS = (b'<?xml version="1.0" encoding="utf-8"?>\n'
               b'<D:multistatus xmlns:D="DAV:"><D:response><D:href>%s</D:href>'
               b'<D:propstat><D:prop><D:resourcetype>%s</D:resourcetype>'
               b'</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>'
               b'</D:response></D:multistatus>\n')


def probe_answer(req):
    """The recording upstream's answer to a PROPFIND (a probe): an object
    (207), a collection ("...coll"), or an answer that says neither, by
    the last "-" part of its path."""
    tail = req["path"].rsplit("-", 1)[-1]
    status = PROBE_ANSWERS.get(tail, 207)
    coll = tail in ("coll", "gzip", "utf16", "json")
    out = MULTISTATUS % (req["path"].encode(),
                         b"<D:collection/>" if coll else b"")
    ctype = "application/xml"
    headers = []
    # a collection the gateway cannot read as sent: coded, in a charset
    # where its name is not ASCII, or not XML at all
    if tail == "gzip":
        out = gzip.compress(out)
        headers.append(("Content-Encoding", "gzip"))
    elif tail == "utf16":
        out = out.decode().encode("utf-16")
        ctype = "text/xml; charset=UTF-16"
    elif tail == "json":
        out = b'{"resourcetype": "collection"}'
        ctype = "application/json"
    if status == 301:
        headers.append(("Location", req["path"] + "/"))
    answer = {"status": status, "body": out, "ctype": ctype,
              "headers": headers}
    if tail == "slow":
        answer["hold"] = 1.0
    return answer



class V11Case(StoreTestCase):
    """Helpers of the v1.1 tests."""

    def fixture(self, path, data=None):
        data = data if data is not None else \
            ("original %s %s\n" % (path, uuid.uuid4().hex)).encode()
        self.store.put_file(path, data)
        return data

    def writes_logged(self, test_id, timeout=2.0):
        """The store's log entries of a request, without the PROPFINDs
        the gateway asked first (a COPY or MOVE of a path without its '/'),
        once there is one."""
        def writes():
            return [e for e in self.store.log_for(test_id=test_id)
                    if e.method != "PROPFIND"]
        return wait_until(writes, slack(timeout)) or []

    def grant(self, path_or_lock, gw=None, **fields):
        """A grant released at cleanup whatever happens (route locks are
        fixed names shared by the tests of a class)."""
        g = super().grant(path_or_lock, gw=gw, **fields)
        self.addCleanup(self._release_quietly, self.lock_of(path_or_lock),
                        g["lease"], gw)
        return g

    def _release_quietly(self, name, lease, gw):
        try:
            self.release(name, lease, gw)
        except OSError:
            pass   # the gateway is gone (stopped by the test)

    # -- what reached nginx -------------------------------------------------

    def siblings(self, *names):
        """Paths in one directory no other test uses (nginx copies and
        moves only into a directory that exists)."""
        base = self.folder("dir")
        return [base + "/" + n for n in names]

    def mark(self, gw=None):
        """A position in nginx's access log after everything forwarded so
        far (nginx logs a request just after answering it: a client can
        hear the answer before the line is written, so a sentinel goes
        first)."""
        self.sentinel(gw)
        return len(self.store.log())

    def sentinel(self, gw=None):
        """A GET through the gateway that nginx logs after whatever the
        gateway forwarded before it."""
        tid = "sentinel-" + uuid.uuid4().hex
        self.send("GET", "/sentinel-" + tid, test_id=tid, gw=gw)
        self.assertTrue(self.store.wait_log(slack(5.0), test_id=tid),
                        "the sentinel GET never reached nginx")

    def upstream_since(self, mark, gw=None):
        """What nginx logged since `mark`, sentinels left out."""
        # a window for a request the gateway should not have sent to show
        # (one sent after its refusal was answered): no event marks its
        # absence; the sentinel then orders nginx's log
        time.sleep(slack(0.1))
        self.sentinel(gw)
        return [e for e in self.store.log()[mark:]
                if not (e.test_id or "").startswith("sentinel-")]

    def assert_nothing_upstream(self, mark, what, gw=None):
        got = self.upstream_since(mark, gw)
        self.assertEqual(got, [], "%s: nginx saw requests: %r"
                         % (what, [(e.method, e.uri, e.status, e.test_id)
                                   for e in got]))

    def assert_no_admission(self, lock, what):
        """No write was admitted (recorded in Redis) for `lock`."""
        key = "fg:{%s}:f" % lock
        self.assertEqual(self.redis.command("ZCARD", key), 0,
                         "%s: a write was admitted for lock %s (%r)"
                         % (what, lock, self.redis.command(
                             "ZRANGE", key, 0, -1, "WITHSCORES")))

    # -- assertions on answers ----------------------------------------------

    def assert_400(self, r, code, what):
        """A 400 with error `code`. A framing error the HTTP layer catches
        before fencegate sees the request may come without a JSON body
        (docs/api.md, error codes); when the body is JSON it must carry
        `code`."""
        self.assertEqual(r.status, 400, "%s: %r" % (what, r))
        ctype = (r.header("Content-Type") or "").lower()
        if ctype.startswith("application/json"):
            self.assert_error(r, 400, code, what)

    def raw(self, data, gw=None, **kw):
        return raw_http((gw or self.gw).port, data, **kw)


# ---------------------------------------------------------------------------
# 1, 2, 9, 11: framing, bytes, targets


@on_both_origins
class V11FramingTests(V11Case):
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

    def test_v11_body_never_turns_read_into_write(self):
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

    def test_v11_read_with_content_length_zero_is_forwarded(self):
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

    def test_v11_propfind_body_stays_a_propfind(self):
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

    def test_v11_content_length_with_transfer_encoding_refused(self):
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

    def test_v11_chunked_body_of_an_http10_request_refused(self):
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

    def test_v11_transfer_encoding_other_than_chunked_refused(self):
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

    def test_v11_repeated_content_length_refused(self):
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

    def test_v11_folded_header_line_refused_and_named(self):
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

    def test_v11_repeated_host_refused(self):
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

    def test_v11_malformed_content_length_refused(self):
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

    def test_v11_fencing_token_in_a_trailer_does_not_count(self):
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

    def test_v11_chunk_size_overflow_never_completes_a_write(self):
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

    def test_v11_twenty_pooled_requests_after_framing_attacks_get_their_own_answers(self):
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

    def test_v11_body_shorter_than_content_length_then_close_leaves_the_pool_clean(self):
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

    def test_v11_client_that_hangs_up_with_its_last_bytes_ends_the_upload_at_once(self):
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

    def test_v11_nul_in_request_target_refused(self):
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

    def test_v11_bare_cr_in_header_value_refused(self):
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

    def test_v11_nul_in_header_refused(self):
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

    def test_v11_unresolvable_paths_refused_bad_path(self):
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

    def test_v11_malformed_request_heads_refused(self):
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

    def test_v11_raw_space_or_control_in_target_refused_before_admission(self):
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

    def test_v11_long_method_forwarded_whole_or_refused(self):
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


COLL = "v11coll-" + TAG
NEST = "v11nest-" + TAG
PAIR = "v11pair-" + TAG


@on_both_origins
class V11DestinationTests(V11Case):
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

    def test_v11_copy_onto_an_object_locked_by_another_refused(self):
        self.destination_held_by_another("COPY")

    def test_v11_move_onto_an_object_locked_by_another_refused(self):
        self.destination_held_by_another("MOVE")

    def test_v11_destination_fencing_token_is_checked_like_fencing_token(self):
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

    def test_v11_copy_and_move_with_both_tokens_current_succeed(self):
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

    def test_v11_one_route_lock_guarding_both_paths_needs_only_fencing_token(self):
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

    def test_v11_destination_as_absolute_url_of_the_requests_host_is_forwarded_as_the_upstreams(self):
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

    def test_v11_destination_of_another_authority_or_garbage_refused_bad_destination(self):
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

    def test_v11_destination_under_the_fence_prefix_refused_bad_destination(self):
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

    def test_v11_destination_climbing_above_root_or_unresolvable_refused(self):
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

    def test_v11_destination_is_resolved_before_its_lock_is_chosen(self):
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

    def test_v11_two_destination_headers_cannot_split_check_and_use(self):
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

    def test_v11_delete_collection_with_its_own_lock_refused_subtree_unguarded(self):
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

    def test_v11_move_and_copy_of_a_collection_refused_subtree_unguarded(self):
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

    def test_v11_lock_of_a_collection_refused_subtree_unguarded(self):
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

    def test_v11_delete_collection_under_a_route_covering_the_subtree_succeeds(self):
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

    def test_v11_collection_containing_another_route_refused_subtree_unguarded(self):
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

    def test_v11_copy_and_move_of_a_collection_inside_one_route_succeed(self):
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

    def test_v11_collection_named_without_its_slash_changes_nothing_under_it(self):
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

    def test_v11_connection_naming_a_header_the_gateway_decides_by_refused(self):
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

    def test_v11_token_checks_judge_each_lock_whole_request_path_first(self):
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

    def test_v11_copy_only_reads_its_source(self):
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

    def test_v11_checks_apply_in_the_v11_order(self):
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


@on_both_origins
class V11ReleaseTests(V11Case):

    def setUp(self):
        super().setUp()
        self.use_shared()

    def start_old_write(self, path, a, total=None, gw=None):
        tid = "old-" + uuid.uuid4().hex
        temps = set(self.store.body_temp_files())
        up = SlowUpload((gw or self.gw).port, path, [
            ("Fencing-Token", a["sequencer"]), ("X-Test-Id", tid)],
            total=total)
        self.addCleanup(up.close)
        up.send(b"old holder's first part\n" * 4000)
        up.trickle()
        self.wait_for(lambda: set(self.store.body_temp_files()) - temps,
                      slack(5.0), "the old holder's upload to reach nginx")
        return up, tid

    def judge_old_write(self, path, up, tid, new_tid, new_data):
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=new_tid))
        up.finish()
        r_old = up.rq.read_response(slack(5.0))
        if r_old is not None:
            self.assert_error(r_old, 409, "stale_token", "the released write")
        hits = self.store.wait_log(slack(5.0), test_id=tid)
        self.assertTrue(all(not e.applied for e in hits),
                        "the old holder's upload completed upstream: %r"
                        % hits)
        applied = [e.test_id for e in self.store.log_for(path=path,
                                                         method="PUT")
                   if e.applied]
        self.assertEqual(applied, [new_tid])
        self.assert_stored(path, new_data, "after the old upload ended")

    def test_v11_release_ends_writes_and_the_blocked_next_holder_writes_promptly(self):
        path = self.obj("release", ext=".bin")
        lock = self.lock_of(path)
        a = super().grant(path, ttl_ms=30000)
        up, tid = self.start_old_write(path, a)
        waiter = self.call("POST", lock, body={"ttl_ms": 10000,
                                               "wait_ms": 10000},
                           timeout=slack(15.0))
        self.wait_waiters(lock, 1)
        t_release = time.monotonic()
        self.release_ok(lock, a["lease"])
        g = waiter.result(slack(5.0))
        self.assertEqual(g.status, 200, g)
        b = g.json
        self.addCleanup(self.release, lock, b["lease"])
        new = b"the next holder's data\n"
        try:
            w = self.put(path, new, b["sequencer"], timeout=slack(5.0))
        except OSError as e:
            self.fail("the next holder's write was not answered within 5 s "
                      "of the release (%r): it waited for the released "
                      "holder's upload" % e)
        t_done = time.monotonic()
        self.assertIn(w.status, (201, 204), w)
        self.assertLess(t_done - t_release, slack(2.0),
                        "the next holder's write ended %.2f s after the "
                        "release" % (t_done - t_release))
        self.assert_stored(path, new)
        self.judge_old_write(path, up, tid, w.test_id, new)

    def next_holder_writes_promptly(self, path, b, up, tid, t_release, new,
                                    gw=None):
        """The next holder (grant b) writes `new` within 2 s of the release,
        and the released write `tid` never completed."""
        try:
            w = self.put(path, new, b["sequencer"], gw=gw, timeout=slack(5.0))
        except OSError as e:
            self.fail("the next holder's write was not answered within 5 s "
                      "of the release (%r)" % e)
        self.assertIn(w.status, (201, 204), w)
        self.assertLess(time.monotonic() - t_release, slack(2.0))
        self.assert_stored(path, new)
        self.judge_old_write(path, up, tid, w.test_id, new)

    def test_v11_release_ends_writes_and_an_acquire_right_after_writes_promptly(self):
        path = self.obj("release-cl", ext=".bin")
        lock = self.lock_of(path)
        a = super().grant(path, ttl_ms=30000)
        up, tid = self.start_old_write(path, a, total=4 * MIB)
        t_release = time.monotonic()
        self.release_ok(lock, a["lease"])
        b = self.grant(path, ttl_ms=10000)
        self.next_holder_writes_promptly(path, b, up, tid, t_release,
                                         b"acquired right after the release\n")

    def test_v11_release_through_another_gateway_ends_writes(self):
        env = self.start_store(gateways=2,
                               flags=("--forward-token", "yes"))
        gw1, gw2 = env.gateways
        path = self.obj("release-gw", ext=".bin")
        lock = self.lock_of(path)
        a = super().grant(path, gw=gw1, ttl_ms=30000)
        up, tid = self.start_old_write(path, a, gw=gw1)
        t_release = time.monotonic()
        self.release_ok(lock, a["lease"], gw=gw2)
        b = self.grant(path, gw=gw2, ttl_ms=10000)
        self.next_holder_writes_promptly(path, b, up, tid, t_release,
                                         b"written through the other gateway\n",
                                         gw=gw2)

    def test_v11_release_of_one_of_two_holds_does_not_end_writes(self):
        # the grant goes on while its lease holds it: its writes go on too
        path = self.obj("holds", ext=".bin")
        lock = self.lock_of(path)
        a = self.grant(path, ttl_ms=30000)
        again = self.acquire(lock, body={"lease": a["lease"],
                                         "ttl_ms": 30000})
        self.assertEqual((again.status, again.json.get("holds")), (200, 2),
                         again)
        up, tid = self.start_old_write(path, a)
        r = self.release(lock, a["lease"])
        self.assertEqual(r.status, 204, r)
        self.assertTrue(self.state(lock)["held"])
        up.finish()
        done = up.rq.read_response(slack(5.0))
        self.assertIsNotNone(done, "the write of a grant still held was "
                             "cut off")
        self.assertEqual(done.status, 201, done)
        hits = self.store.wait_log(slack(2.0), test_id=tid)
        self.assertEqual([e.applied for e in hits], [True], hits)
        self.assertEqual(len(self.store.read(path)), up.sent)


class V11WaitingWriteCostTests(V11Case):
    """Two gateways on one Redis. A write admitted on gateway 1 is in
    flight when gateway 1 is paused (SIGSTOP), and its grant is released
    through gateway 2: gateway 1 cannot end it, so writes under the next
    holder's token must wait, at most the margin after the release. A
    large fence-margin-ms keeps them waiting through every measurement."""

    WAITERS = 50
    MARGIN_S = 10.0

    def test_v11_waiting_writes_cost_redis_nothing_while_nothing_changes(self):
        env = self.start_store(gateway_flags=[
            ["--forward-token", "yes", "--fence-margin-ms",
             "%d" % (self.MARGIN_S * 1000)]] * 2)
        gw1, gw2 = env.gateways
        path = self.obj("waiting", ext=".bin")
        lock = self.lock_of(path)
        a = super().grant(path, gw=gw1, ttl_ms=30000)
        temps = set(self.store.body_temp_files())
        old_tid = "old-" + uuid.uuid4().hex
        old = SlowUpload(gw1.port, path, [("Fencing-Token", a["sequencer"]),
                                          ("X-Test-Id", old_tid)])
        self.addCleanup(old.close)
        old.send(b"old\n" * 20000)
        self.wait_for(lambda: set(self.store.body_temp_files()) - temps,
                      slack(5.0), "the old upload to reach nginx")
        gw1.pause()
        self.addCleanup(gw1.resume)
        t_release = time.monotonic()
        self.release_ok(lock, a["lease"], gw=gw2)
        b = self.grant(path, gw=gw2, ttl_ms=30000)

        base = script_calls(self.redis)
        writers, ids = [], []
        for i in range(self.WAITERS):
            tid = "waiting-%d-%s" % (i, uuid.uuid4().hex)
            rq = RawRequest(gw2.port, "PUT", path, [
                ("Fencing-Token", b["sequencer"]), ("Content-Length", "4096"),
                ("X-Test-Id", tid)])
            rq.send(b"w" * 512)
            self.addCleanup(rq.close)
            writers.append(rq)
            ids.append(tid)
        self.wait_for(lambda: script_calls(self.redis) - base
                      >= self.WAITERS, slack(5.0),
                      "each waiting write to be checked in Redis once")
        c0, t0 = script_calls(self.redis), time.monotonic()
        time.sleep(2.0)                       # the measurement window (a rate)
        c1, t1 = script_calls(self.redis), time.monotonic()
        answered = [i for i, w in enumerate(writers) if w.readable(0)]
        self.assertEqual(answered, [], "writes under the newer token were "
                         "answered while the released write was in flight "
                         "on a paused gateway")
        rate = (c1 - c0) / (t1 - t0)
        self.assertLess(rate, 50.0, "%d writes waiting cost Redis %.0f "
                        "script calls/s" % (self.WAITERS, rate))

        # the clients leave with body bytes unread: half close, half reset
        parked = harness.metric_value(gw2, "fencegate_waiters", kind="admit")
        for i, w in enumerate(writers):
            if i % 2:
                w.abort()
            else:
                w.close()
        # the gateway noticed: none of them waits any more
        self.assertTrue(wait_until(
            lambda: harness.metric_value(gw2, "fencegate_waiters",
                                         kind="admit")
            <= parked - self.WAITERS, slack(3.0)),
            "the departed writes still wait on gateway 2")
        c2, t2 = script_calls(self.redis), time.monotonic()
        time.sleep(1.0)                       # the measurement window (a rate)
        c3, t3 = script_calls(self.redis), time.monotonic()
        self.assertLess((c3 - c2) / (t3 - t2), 10.0,
                        "Redis work goes on for writes whose clients left")

        # something changes (the released write ends): nobody is left to
        # wake for the departed writes
        c4 = script_calls(self.redis)
        gw1.resume()
        hits = self.store.wait_log(slack(5.0), test_id=old_tid)
        self.assertTrue(hits, "the released write did not end when its "
                        "gateway resumed")
        self.assertTrue(all(not e.applied for e in hits), hits)
        time.sleep(1.0)                       # the measurement window (a count)
        c5 = script_calls(self.redis)
        self.assertLess(c5 - c4, 25, "the end of the old write cost %d "
                        "script calls: the departed writes were woken"
                        % (c5 - c4))
        applied = [e for e in self.store.log() if e.test_id in ids
                   and e.applied]
        self.assertEqual(applied, [], "a write whose client left was "
                         "applied")
        # the next holder writes no later than the margin after the release
        self.assertLess(time.monotonic() - t_release, self.MARGIN_S - 1.0,
                        "the measurements ran past the margin: they did not "
                        "measure waiting writes")
        new = b"the next holder's data\n"
        w = self.put(path, new, b["sequencer"], gw=gw2,
                     timeout=self.MARGIN_S + slack(5.0))
        self.assertIn(w.status, (201, 204), w)
        self.assertLess(time.monotonic() - t_release,
                        self.MARGIN_S + slack(2.0))
        self.assert_stored(path, new)
        # from the clients' leaving to the end of the old write's record
        # (which let this write go), nobody woke the departed writes
        c6 = script_calls(self.redis)
        self.assertLess(c6 - c2, 25, "%d script calls after the waiting "
                        "writes' clients left" % (c6 - c2))
        gone = [e for e in self.store.log() if e.test_id in ids]
        self.assertEqual(gone, [], "writes whose clients left before they "
                         "were admitted went upstream")
        old.close()


    def test_v11_a_write_refused_after_waiting_is_counted_as_a_fence_refusal(self):
        # The write under the next holder's token waits until the released
        # write's record ends, the margin after the release; releasing the
        # next holder meanwhile does not wake it (its lock has no write of
        # its own), so it asks again then, and is refused.
        margin_s = 6.0
        env = self.start_store(gateway_flags=[
            ["--forward-token", "yes", "--fence-margin-ms",
             "%d" % (margin_s * 1000)]] * 2)
        gw1, gw2 = env.gateways
        path = self.obj("refused-after-wait", ext=".bin")
        lock = self.lock_of(path)
        a = super().grant(path, gw=gw1, ttl_ms=30000)
        temps = set(self.store.body_temp_files())
        old = SlowUpload(gw1.port, path, [("Fencing-Token", a["sequencer"]),
                                          ("X-Test-Id", "old-" + uuid.uuid4().hex)])
        self.addCleanup(old.close)
        old.send(b"old\n" * 20000)
        self.wait_for(lambda: set(self.store.body_temp_files()) - temps,
                      slack(5.0), "the old upload to reach nginx")
        gw1.pause()
        self.addCleanup(gw1.resume)
        t_release = time.monotonic()
        self.release_ok(lock, a["lease"], gw=gw2)
        b = self.grant(path, gw=gw2, ttl_ms=30000)
        before = refused_total(gw2, "stale_token")

        tid = "refused-" + uuid.uuid4().hex
        rq = RawRequest(gw2.port, "PUT", path, [
            ("Fencing-Token", b["sequencer"]), ("Content-Length", "4"),
            ("X-Test-Id", tid)])
        self.addCleanup(rq.close)
        rq.send(b"new\n")
        # admit.lua answered "wait": the gateway is named among the lock's
        # waiting writers
        key = "fg:{%s}:s" % lock
        self.wait_for(lambda: self.redis.command("HGET", key, "aw"),
                      slack(5.0), "the write to wait for the released one")
        self.assertFalse(rq.readable(0), "the write was answered before "
                         "its grant was released")
        self.release_ok(lock, b["lease"], gw=gw2)
        self.assertLess(time.monotonic() - t_release, margin_s - 1.0,
                        "the next holder was released after the margin: "
                        "its write may have been admitted meanwhile")
        r = rq.read_response(margin_s + slack(5.0))
        self.assertIsNotNone(r, "the waiting write was not answered")
        self.assertEqual(r.status, 409, r)
        self.assertEqual(json.loads(r.body)["error"], "stale_token", r)
        # counted when the request completes, just after its answer left
        wait_until(lambda: refused_total(gw2, "stale_token") > before,
                   slack(3.0), 0.02)
        self.assertEqual(refused_total(gw2, "stale_token"), before + 1,
                         "the refusal after waiting was not counted once")
        self.assertEqual([e for e in self.store.log() if e.test_id == tid],
                         [], "the refused write reached the storage")


# ---------------------------------------------------------------------------
# 7: paths stay inside the upstream


@on_both_origins
class V11UpstreamPathTests(V11Case):
    """A gateway whose upstream URL has a path (/sub): nothing outside it
    can be read or written."""

    def setUp(self):
        super().setUp()
        self.use_shared()
        key, keypath = new_key_file()
        self.key = key
        self.sub = self.start_gateway(self.redis.port, self.store.port, [
            "--key-file", keypath, "--forward-token", "yes",
            "--upstream", "http://127.0.0.1:%d/sub" % self.store.port])
        self.gw = self.sub
        self.secret_path = "/secret-%s.txt" % uuid.uuid4().hex[:8]
        self.secret = ("the secret %s\n" % uuid.uuid4().hex).encode()
        self.store.put_file(self.secret_path, self.secret)
        self.inside = "/inside-%s.txt" % uuid.uuid4().hex[:8]
        self.inside_data = self.fixture("/sub" + self.inside)

    def climbing(self):
        s = self.secret_path
        return ["/.." + s, "/%2e%2e" + s, "/a/../.." + s, "//.." + s,
                "/..%2f" + s[1:], "/.%2e" + s, "/%2E%2E" + s,
                "/a//../.." + s, "/a/%2e%2e/%2e%2e" + s, "/..%2F" + s[1:],
                "/a/b/../../.." + s, "/%2e%2e%2f" + s[1:],
                "/%2E%2E%2F" + s[1:], "/a%2f..%2f..%2f" + s[1:]]

    def test_v11_reads_cannot_leave_the_upstream_path(self):
        r = self.send("GET", self.inside)
        self.assertEqual((r.status, r.body), (200, self.inside_data),
                         "the upstream path prefix does not work")
        # Apache logs each request from its own thread once it is done:
        # this GET's line may come after the sentinel's, so it is waited
        # for before the mark
        self.assertTrue(self.store.wait_log(slack(5.0), test_id=r.test_id),
                        "the GET inside the upstream path was never logged")
        mark = self.mark()
        for p in self.climbing():
            for method in ("GET", "HEAD", "PROPFIND", "OPTIONS"):
                with self.subTest(method=method, path=p):
                    r = self.send(method, p, headers=[("Depth", "0")])
                    self.assertNotIn(self.secret.strip(), r.body)
                    self.assertEqual(r.status, 400, r)
                    if method != "HEAD":
                        self.assert_error(r, 400, "bad_path", p)
        self.assert_nothing_upstream(mark, "reads above the upstream path")

    def test_v11_writes_cannot_leave_the_upstream_path(self):
        lock = self.secret_path.strip("/")
        g = self.grant(lock)       # a lock whose name matches the target
        ig = self.grant(self.inside)
        mark = self.mark()
        for p in self.climbing():
            for method, body, extra in (
                    ("PUT", b"overwritten\n", []), ("DELETE", None, []),
                    ("MOVE", None, [("Destination", "/stolen.txt")]),
                    ("COPY", None, [("Destination", "/stolen.txt")])):
                with self.subTest(method=method, path=p):
                    r = self.send(method, p, body, headers=extra,
                                  token=g["sequencer"])
                    self.assert_error(r, 400, "bad_path", p)
            with self.subTest(method="MOVE onto", path=p):
                r = self.send("MOVE", self.inside, token=ig["sequencer"],
                              headers=[("Destination", p),
                                       ("Destination-Fencing-Token",
                                        g["sequencer"])])
                self.assertEqual(r.status, 400, r)
                self.assertIn(r.json.get("error"),
                              ("bad_destination", "bad_path"), r)
        self.assert_nothing_upstream(mark, "writes above the upstream path")
        self.assertEqual(self.store.read(self.secret_path), self.secret)
        self.assert_stored("/sub" + self.inside, self.inside_data)
        self.assert_absent("/stolen.txt")
        self.assert_absent("/sub/stolen.txt")

    def test_v11_destination_is_forwarded_under_the_upstream_path(self):
        copied = "/copied-%s.txt" % uuid.uuid4().hex[:8]
        s = self.grant(self.inside)
        d = self.grant(copied)
        r = self.send("COPY", self.inside, token=s["sequencer"], headers=[
            ("Destination", "http://127.0.0.1:%d%s" % (self.gw.port, copied)),
            ("Destination-Fencing-Token", d["sequencer"])])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored("/sub" + copied, self.inside_data)
        self.assert_absent(copied)
        hits = self.writes_logged(r.test_id)
        self.assertEqual([(e.path, e.destination) for e in hits],
                         [("/sub" + self.inside, "http://127.0.0.1:%d/sub%s"
                           % (self.store.port, copied))])


# ---------------------------------------------------------------------------
# 8: route rules that would never match


class V11RouteRuleTests(V11Case):
    """A route prefix that is not a resolved path can never match a
    resolved request path: the gateway resolves it when it reads it, and
    then the rule's lock guards the paths, or, when it cannot be resolved
    inside the upstream, refuses it at start (exit 2 with a reason)."""

    T = uuid.uuid4().hex[:6]
    RULES = (
        # (config line, resolved prefix, lock, a raw path under the prefix)
        ("route /r%s-orders%%2F42/ r%s-orders/42" % (T, T),
         "/r%s-orders/42/" % T, "r%s-orders/42" % T,
         "/r%s-orders%%2F42/" % T),
        ("route /r%s-a//b/ r%s-x" % (T, T), "/r%s-a/b/" % T, "r%s-x" % T,
         "/r%s-a//b/" % T),
        ("route /r%s-c/./d/ r%s-y" % (T, T), "/r%s-c/d/" % T, "r%s-y" % T,
         "/r%s-c/./d/" % T),
        ("route /../r%s-x/ r%s-z" % (T, T), None, "r%s-z" % T, None),
        ("route /r%s-e%%zz/ r%s-e" % (T, T), None, "r%s-e" % T, None),
        ("route /r%s-f%%00/ r%s-f" % (T, T), None, "r%s-f" % T, None),
    )

    def setUp(self):
        super().setUp()
        self.use_shared()

    def start_with_config(self, text):
        _, keypath = new_key_file()
        g = harness.Gateway(self.redis.port, self.store.port, [
            "--config", write_config(text), "--key-file", keypath])
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start(wait=False)

        def settled():
            if g.proc.poll() is not None:
                return "exited"
            try:
                harness.http_request(g.port, "GET", "/_fence/v1/health",
                                     timeout=1.0)
                return "up"
            except OSError:
                return None
        state = wait_until(settled, slack(10.0), 0.03)
        self.assertIsNotNone(state, "fencegate neither ran nor exited")
        return g, state

    def assert_refused_at_start(self, g, what):
        self.assertEqual(g.proc.returncode, 2, "%s: exit code" % what)
        with open(g.logpath, "rb") as f:
            lines = [ln for ln in f.read().decode("utf-8", "replace")
                     .splitlines() if ln.strip() and not ln.startswith("###")]
        self.assertTrue(lines, "%s: exit 2 without a reason" % what)

    def assert_rule_applies(self, g, prefix, lock, raw_prefix, what):
        n = uuid.uuid4().hex[:8]
        obj = prefix + "obj-" + n
        per = self.grant(obj, gw=g)
        r = self.put(obj, b"evil\n", per["sequencer"], gw=g)
        self.assert_error(r, 403, "wrong_lock", "%s: the per-object lock "
                          "wrote under the route" % what)
        self.assertEqual(self.store.wait_log(slack(0.3), test_id=r.test_id),
                         [])
        self.assert_absent(obj)
        rg = self.grant(lock, gw=g)
        self.put_ok(obj, b"route\n", rg["sequencer"], gw=g)
        self.assert_stored(obj, b"route\n", what)
        self.put_ok(raw_prefix + "raw-" + n, b"raw\n", rg["sequencer"], gw=g)
        self.assert_stored(prefix + "raw-" + n, b"raw\n", what)
        self.release_ok(lock, rg["lease"], gw=g)
        self.release_ok(self.lock_of(obj), per["lease"], gw=g)

    def test_v11_route_rules_that_would_never_match_are_refused_or_resolved(self):
        for line, prefix, lock, raw_prefix in self.RULES:
            with self.subTest(rule=line):
                g, state = self.start_with_config(line + "\n")
                if prefix is None:
                    self.assertEqual(state, "exited", "%s: accepted" % line)
                    self.assert_refused_at_start(g, line)
                else:
                    self.assertEqual(state, "up", "%s: refused:\n%s"
                                     % (line, g.log_tail(5)))
                    self.assert_rule_applies(g, prefix, lock, raw_prefix,
                                             line)
                g.stop()
        # the resolvable rules together apply each; one bad rule among
        # them is still refused
        good = [r for r in self.RULES if r[1] is not None]
        g, state = self.start_with_config("".join(r[0] + "\n" for r in good))
        self.assertEqual(state, "up")
        for line, prefix, lock, raw_prefix in good:
            with self.subTest(rule=line, config="all good rules"):
                self.assert_rule_applies(g, prefix, lock, raw_prefix, line)
        g.stop()
        g, state = self.start_with_config("".join(r[0] + "\n"
                                                  for r in self.RULES))
        self.assertEqual(state, "exited")
        self.assert_refused_at_start(g, "all rules")


# ---------------------------------------------------------------------------
# 10: a departed waiter never gets the lock; a grant nobody received


class V11WaiterTests(V11Case):

    def setUp(self):
        super().setUp()
        self.use_shared()

    def park(self, lock, gw=None):
        """A blocking acquire over a raw socket, parked in the queue."""
        body = json.dumps({"ttl_ms": 3600000, "wait_ms": 60000}).encode()
        s = socket.create_connection(("127.0.0.1", (gw or self.gw).port),
                                     timeout=5.0)
        self.addCleanup(s.close)
        s.sendall(head_bytes("POST", LOCKS + lock, [
            ("Host", "x"), ("Content-Type", "application/json"),
            ("Content-Length", str(len(body)))]) + body)
        self.wait_waiters(lock, 1, gw=gw)
        return s

    @staticmethod
    def leave(s, how):
        if how == "one more byte":
            s.sendall(b"X")
        if how == "reset":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()

    def test_v11_departed_waiter_never_gets_the_lock(self):
        for how in ("one more byte", "close", "reset"):
            with self.subTest(how=how):
                lock = self.lock_name()
                a = self.acquire_ok(lock, ttl_ms=30000)
                s = self.park(lock)
                self.leave(s, how)
                self.wait_waiters(lock, 0, timeout=slack(3.0))
                self.release_ok(lock, a["lease"])
                c = self.acquire(lock, body={"ttl_ms": 5000, "wait_ms": 0})
                self.assertEqual(c.status, 200, "%s: the departed waiter got "
                                 "the lock: %r" % (how, c))
                st = self.state(lock)
                self.assertEqual((st["held"], st["holders"], st["token"]),
                                 (True, 1, c.json["token"]))
                self.release_ok(lock, c.json["lease"])

    def test_v11_grant_nobody_received_is_given_back(self):
        env = self.start_store(gateways=2)
        gw1, gw2 = env.gateways
        for how in ("one more byte", "close", "reset"):
            with self.subTest(how=how):
                lock = self.lock_name()
                a = self.acquire_ok(lock, gw=gw1, ttl_ms=30000)
                s = self.park(lock, gw=gw2)
                # gateway 2 cannot notice anything while it is stopped: the
                # lock is handed to a waiter whose client is gone
                gw2.pause()
                try:
                    self.leave(s, how)
                    self.release_ok(lock, a["lease"], gw=gw1)
                finally:
                    gw2.resume()
                got = {}

                def granted():
                    r = self.acquire(lock, gw=gw1, body={"ttl_ms": 5000})
                    got["r"] = r
                    return r.status == 200
                self.assertTrue(wait_until(granted, slack(3.0), 0.05),
                                "%s: the lock was not given back: %r"
                                % (how, got.get("r")))
                st = self.state(lock, gw=gw1)
                self.assertEqual((st["holders"], st["waiters"], st["token"]),
                                 (1, 0, got["r"].json["token"]))
                self.release_ok(lock, got["r"].json["lease"], gw=gw1)


    def test_v11_reentry_whose_client_closed_is_taken_back_whole(self):
        # its hold and the ttl it set go: one release frees the lock, and
        # the lease ends when it would have without the re-entry
        env = self.start_store(gateways=1)
        gw = env.gw
        lock = self.lock_name()
        a = self.acquire_ok(lock, gw=gw, ttl_ms=60000)
        body = json.dumps({"lease": a["lease"], "ttl_ms": 600000}).encode()
        before = given_back_total(gw)
        gw.pause()
        try:
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=5.0)
            s.sendall(head_bytes("POST", LOCKS + lock, [
                ("Host", "x"), ("Content-Type", "application/json"),
                ("Content-Length", str(len(body)))]) + body)
            self.leave(s, "close")
        finally:
            gw.resume()
        # the held-up re-entry reaches Redis after the gateway resumes:
        # its ttl is judged once its give-back has run
        self.assertTrue(wait_until(lambda: given_back_total(gw) > before,
                                   slack(3.0), 0.05),
                        "the undelivered re-entry was not given back")
        last = {}

        def taken_back():
            st = self.state(lock, gw=gw)
            last["s"] = st
            return st["ttl_ms"] <= 60000
        self.assertTrue(wait_until(taken_back, slack(3.0), 0.05),
                        "the undelivered re-entry's ttl still holds: %r"
                        % last.get("s"))
        self.release_ok(lock, a["lease"], gw=gw)
        self.assertFalse(self.state(lock, gw=gw)["held"])

    def test_v11_grant_to_a_waiter_whose_gateway_died_is_not_held_for_its_ttl(self):
        # the waiter's gateway is killed: nobody can give its grant back,
        # so the grant lasts only as long as that gateway was last known
        # alive (waiter-liveness-ms), not its 60 s ttl
        env = self.start_store(gateways=2, flags=["--waiter-liveness-ms",
                                                  "2000"])
        gw1, gw2 = env.gateways
        lock = self.lock_name()
        a = self.acquire_ok(lock, gw=gw1, ttl_ms=60000)
        body = json.dumps({"ttl_ms": 60000, "wait_ms": 60000}).encode()
        s = socket.create_connection(("127.0.0.1", gw2.port), timeout=5.0)
        self.addCleanup(s.close)
        s.sendall(head_bytes("POST", LOCKS + lock, [
            ("Host", "x"), ("Content-Type", "application/json"),
            ("Content-Length", str(len(body)))]) + body)
        self.wait_waiters(lock, 1, gw=gw1)
        gw2.kill()
        env.gateways.remove(gw2)  # killed on purpose
        t_rel = time.monotonic()
        self.release_ok(lock, a["lease"], gw=gw1)
        got = {}

        def granted():
            r = self.acquire(lock, gw=gw1, body={"ttl_ms": 5000})
            got["r"] = r
            return r.status == 200
        self.assertTrue(wait_until(granted, 2.0 + slack(3.0), 0.1),
                        "the dead gateway's waiter still holds the lock "
                        "%.1f s after the release: %r"
                        % (time.monotonic() - t_rel, got.get("r")))
        self.assertLess(time.monotonic() - t_rel, 30.0)
        self.release_ok(lock, got["r"].json["lease"], gw=gw1)

    def test_v11_try_once_grant_whose_client_closed_is_given_back(self):
        # the client sends its acquire and closes at once; the gateway
        # (held up) reads both together: it must not count an answer its
        # client's kernel takes and resets as delivered
        env = self.start_store(gateways=1)
        gw = env.gw
        body = json.dumps({"ttl_ms": 3600000}).encode()
        for how in ("close", "reset", "one more byte"):
            with self.subTest(how=how):
                locks = [self.lock_name() for _ in range(5)]
                gw.pause()
                try:
                    for lock in locks:
                        s = socket.create_connection(("127.0.0.1", gw.port),
                                                     timeout=5.0)
                        s.sendall(head_bytes("POST", LOCKS + lock, [
                            ("Host", "x"),
                            ("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))]) + body)
                        self.leave(s, how)
                finally:
                    gw.resume()
                for lock in locks:
                    # the held-up acquire reaches Redis after the gateway
                    # resumes: until then the lock is unknown (no token),
                    # and "no holders" would say nothing
                    self.assertTrue(wait_until(
                        lambda: self.state(lock, gw=gw)["token"] is not None,
                        slack(3.0), 0.02),
                        "%s: the acquire of %s never reached Redis: %r"
                        % (how, lock, self.state(lock, gw=gw)))
                    self.assertTrue(wait_until(
                        lambda: self.state(lock, gw=gw)["holders"] == 0,
                        slack(3.0), 0.05),
                        "%s: a grant nobody received still holds %s: %r"
                        % (how, lock, self.state(lock, gw=gw)))
                    c = self.acquire(lock, gw=gw, body={"ttl_ms": 5000})
                    self.assertEqual(c.status, 200, c)
                    self.release_ok(lock, c.json["lease"], gw=gw)


# ---------------------------------------------------------------------------
# absolute-form targets (RFC 9112 3.2.2: a server accepts them)


@on_both_origins
class V11AbsoluteFormTests(V11Case):
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

    def test_v11_absolute_form_read_and_write_are_checked_as_their_path(self):
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

    def test_v11_absolute_form_authority_stands_for_host(self):
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

    def test_v11_absolute_form_without_a_host_or_with_userinfo_is_refused(self):
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
class V11ForwardedHeaderTests(V11Case):
    """What nginx was sent (its access log records the headers)."""

    def setUp(self):
        super().setUp()
        self.use_shared()

    def test_v11_credentials_and_client_forwarding_headers_never_go_upstream(self):
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


class V11RecordedHeaderTests(V11Case):
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

    def test_v11_credentials_and_client_forwarding_headers_are_replaced_for_the_upstream(self):
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

    def test_v11_probe_carries_the_clients_credentials_and_user_agent(self):
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

    def test_v11_method_override_header_naming_another_method_refused(self):
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

    def test_v11_probe_answer_the_gateway_cannot_read_as_sent_refuses_the_write(self):
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

    def test_v11_probe_answer_that_names_no_kind_refuses_the_write(self):
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

    def test_v11_client_that_leaves_during_the_probe_sends_no_write(self):
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

    def test_v11_move_whose_headers_cannot_be_built_is_answered(self):
        s = self.grant("rec-%s/src" % TAG)
        d = self.grant("rec-%s/dst-object" % TAG)
        r = self.send("MOVE", "/rec-%s/src" % TAG, token=s["sequencer"],
                      headers=[("Destination", "/rec-%s/dst-object" % TAG),
                               ("Destination-Fencing-Token", d["sequencer"]),
                               ("X-Forwarded-For", "1" * 3000),
                               ("X-Forwarded-For", "2" * 3000)],
                      timeout=slack(5.0))
        self.assertEqual(r.status, 500, r)

    def test_v11_delete_and_copy_of_a_path_without_its_slash_go_depth_0(self):
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

    def test_v11_x_forwarded_host_is_removed_when_the_request_had_no_host(self):
        r = raw_http(self.gw.port, b"GET /rec-%s/nohost HTTP/1.0\r\n"
                     b"X-Forwarded-Host: evil.example\r\n"
                     b"Forwarded: host=evil.example\r\n\r\n" % TAG.encode())
        self.assertEqual(r.status, 200, r)
        recs = [x for x in self.rec.records if x["path"].endswith("nohost")]
        self.assertEqual(len(recs), 1, recs)
        names = {k.lower() for k, _ in recs[0]["headers"]}
        self.assertNotIn("x-forwarded-host", names)
        self.assertNotIn("forwarded", names)
