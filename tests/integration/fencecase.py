"""fencecase.py - the shared base of the fencing proxy's tests
(test_proxy_framing, test_proxy_write_set, test_proxy_lease_end,
test_proxy_routes, test_proxy_forwarded): FenceCase, a real fencegate,
redis-server and WebDAV store (nginx or Apache, the cell's origin), and the
raw requests and slow uploads those tests send the way an attacker would.

A refused write is proven not to have reached the store twice over: the
store's access log has nothing for it (not under its X-Test-Id, and nothing
at all between a mark taken before the attack and a sentinel GET after it,
since a request the store cannot parse is logged without its headers), and
the object on disk is unchanged. Framing attacks are written by hand on
raw sockets.

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
from storage import (ANSWERED, answer_mark, on_both_origins, RawRequest, StoreTestCase, make_sequencer, new_key_file,
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



class FenceCase(StoreTestCase):
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
        """A position in the store's access log after everything forwarded
        so far, with the requests answered by then (a store logs a request
        just after answering it: a client can hear the answer before the
        line is written, so a sentinel goes first; Apache's workers may
        still write an earlier request's line after the sentinel's)."""
        self.sentinel(gw)
        return (len(self.store.log()), answer_mark())

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
        pos, answered = mark
        return [e for e in self.store.log()[pos:]
                if not (e.test_id or "").startswith("sentinel-")
                and ANSWERED.get(e.test_id, answered) >= answered]

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
