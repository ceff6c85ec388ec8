"""test_events.py - contract v1.5 "what happened": GET /_fence/v1/events
served by a real gateway over a real redis-server.

The events are written here straight into the one stream of a single
Redis (XADD fg:{!ev}:s, the format every writer shares), one of each
kind, so that what is tested is the serving: whatever wrote them, the
gateway shows every kind with every field, in the stream's order.

- A JSON answer lists the events under the prefix, oldest first, each
  {"id","at","kind","lock","token","principal","owner","client",
  "gateway","detail"} (null for what is absent, detail an object), at
  most `limit`, and `next`: the last entry read, shown or not; following
  `next` page by page reads everything once.
- Without `after` it starts from the oldest retained; an `after` older
  than what is retained answers from the oldest with "gap": true.
- A long poll (wait_ms) answers soon after an event it may show is
  appended, and at wait_ms with none, whatever else is appended.
- A stream (Accept: text/event-stream) sends id/event/data frames; one
  opened again with Last-Event-ID goes on with the next event: nothing is
  lost, nothing comes twice.
- The query is read strictly: a malformed after, limit 0 or 1001, wait_ms
  over 60000, an unknown parameter or one given twice is 400 bad_request.
- Under an auth-file a principal with observe:a/ reads a/'s events only;
  a prefix outside its rights is 403.
- A stream whose client does not read is cut off once its unsent bytes
  pass 256 KiB (counted in fencegate_event_readers_cut_total) while
  another stream of the same events receives every one of them.
"""

import json
import os
import re
import secrets
import signal
import socket
import tempfile
import time
import urllib.parse
import hashlib

import harness
import topology
from harness import RespClient, TestCase, metric_value, slack, wait_until

EVENTS = "/_fence/v1/events"
STREAM = "fg:{!ev}:s"
FIELDS = ["id", "at", "kind", "lock", "token", "principal", "owner",
          "client", "gateway", "detail"]
AT_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def xadd(redis, **fields):
    """Appends one event; returns its id."""
    args = ["XADD", STREAM, "*"]
    for k, v in fields.items():
        args += [k, v if isinstance(v, str) else json.dumps(v)
                 if isinstance(v, dict) else str(v)]
    return redis.command(*args).decode()


_TAGS = {}


def stream_of(name):
    """The stream lock `name`'s events go to, and its slot (None on one
    Redis): on a Cluster fg:{!evT}:s, T the first number whose tag "!evT"
    is in the lock's own slot (lockcore/evkeys.c)."""
    if not harness.cluster_mode():
        return STREAM, None
    slot = topology.keyslot("fg:{%s}:s" % name)
    if slot not in _TAGS:
        t = 0
        while topology.keyslot("!ev%d" % t) != slot:
            t += 1
        _TAGS[slot] = t
    return "fg:{!ev%d}:s" % _TAGS[slot], slot


def xadd_lock(redis, name, **fields):
    """Appends one event of lock `name` where its functions would, on one
    Redis or a Cluster; returns its id as the API gives it."""
    key, slot = stream_of(name)
    args = ["XADD", key, "*", "l", name]
    for k, v in fields.items():
        args += [k, str(v)]
    i = redis.command(*args).decode()
    return i if slot is None else "%s.%d" % (i, slot)


def query(**params):
    return EVENTS + ("?" + urllib.parse.urlencode(params) if params else "")


class Stream:
    """A Server-Sent Events stream read off a raw socket: its head, then
    its frames as they come (the chunked body decoded)."""

    def __init__(self, port, target, headers=(), rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10.0)
        self.sock.connect(("127.0.0.1", port))
        head = ["GET %s HTTP/1.1" % target, "Host: 127.0.0.1",
                "Accept: text/event-stream"]
        head += ["%s: %s" % h for h in headers]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        self.raw = b""        # bytes read, not yet decoded
        self.body = b""       # the decoded body, not yet split in frames
        self.status = None
        self.headers = {}
        self.frames = []      # {"id", "event", "data"}
        self.comments = 0
        self.ended = False    # the last chunk came, or the socket closed

    def close(self):
        self.sock.close()

    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except OSError:
            data = b""
        if not data:
            self.ended = True
            return False
        self.raw += data
        return True

    def read_head(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.raw:
            if not self._recv(deadline):
                raise AssertionError("no answer head: %r" % self.raw[:300])
        head, _, self.raw = self.raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        return self

    def _dechunk(self):
        while True:
            size_line, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                return
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                self.ended = True
                self.raw = b""
                return
            if len(rest) < size + 2:
                return
            self.body += rest[:size]
            self.raw = rest[size + 2:]

    def _split(self):
        while b"\n\n" in self.body:
            block, _, self.body = self.body.partition(b"\n\n")
            f = {}
            for ln in block.decode("utf-8").split("\n"):
                if ln.startswith(":"):
                    self.comments += 1
                    continue
                k, _, v = ln.partition(": ")
                f[k] = v
            if f:
                if "data" in f:
                    f["json"] = json.loads(f["data"])
                self.frames.append(f)

    def wait(self, pred, timeout):
        """Reads until pred(self) or timeout; returns pred(self)."""
        deadline = time.monotonic() + timeout
        while not pred(self):
            self._dechunk()
            self._split()
            if pred(self) or self.ended:
                break
            if not self._recv(deadline):
                self._dechunk()
                self._split()
                break
        return pred(self)

    def ids(self):
        return [f["id"] for f in self.frames if "id" in f]


class EventsCase(TestCase):
    """Shared helpers: the gateway's events, read over HTTP."""

    def events(self, gw=None, headers=None, timeout=10.0, **params):
        return self.req("GET", query(**params), gw=gw, headers=headers,
                        timeout=timeout)

    def events_ok(self, gw=None, headers=None, **params):
        r = self.events(gw=gw, headers=headers, **params)
        self.assertEqual(r.status, 200, r)
        return r.json

    def prefix(self):
        n = self.lock_name()
        return n[:n.rindex("/") + 1]

    def mark(self):
        """An id after everything appended so far (an entry under no
        test's prefix)."""
        return xadd(self.redis, k="released", l="mark/" + secrets.token_hex(4))

    def stream(self, target, headers=(), rcvbuf=None, gw=None):
        s = Stream(self._g(gw).port, target, headers, rcvbuf)
        self.addCleanup(s.close)
        return s


@harness.single_redis("appends to the one event stream of a single Redis")
class Serving(EventsCase):

    def test_every_kind_in_the_streams_order_with_every_field(self):
        p = self.prefix()
        after = self.mark()
        gwid = "0123456789abcdef"
        ids = [
            xadd(self.redis, k="granted", l=p + "a", t="17", p="alice",
                 o="job-1", c="10.0.0.7", g=gwid,
                 d={"mode": "exclusive", "ttl_ms": 30000}),
            xadd(self.redis, k="released", l=p + "a", t="17", p="alice",
                 o="job-1", c="10.0.0.7", g=gwid),
            xadd(self.redis, k="expired", l=p + "b", t="18", g=gwid),
            xadd(self.redis, k="broken", l=p + "c", t="19", p="bob",
                 d={"by": "ops"}),
            xadd(self.redis, k="given_back", l=p + "c", t="20",
                 d={"reason": "client_gone"}),
            xadd(self.redis, k="lease_lost", l=p + "d", t="21", g=gwid),
            xadd(self.redis, k="refused", l=p + "e", t="22",
                 d={"code": "stale_token", "method": "PUT", "path": "/e/x",
                    "count": 3}),
        ]
        # a read answered at once reads Redis: all of them are there,
        # whether it starts after a recent id or an old one
        for start in (after, "1000-0"):
            page = self.events_ok(prefix=p, after=start)
            got = page["events"]
            self.assertEqual([e["id"] for e in got], ids, start)
            self.assertEqual(page["next"], ids[-1])
            for e in got:
                self.assertEqual(list(e), FIELDS)
                self.assertRegex(e["at"], AT_RE)
                self.assertTrue(e["lock"].startswith(p))
                self.assertIsInstance(e["detail"], dict)
            self.assertEqual([e["kind"] for e in got],
                             ["granted", "released", "expired", "broken",
                              "given_back", "lease_lost", "refused"])
            g = got[0]
            self.assertEqual((g["token"], g["principal"], g["owner"],
                              g["client"], g["gateway"]),
                             (17, "alice", "job-1", "10.0.0.7", gwid))
            self.assertEqual(g["detail"], {"mode": "exclusive",
                                           "ttl_ms": 30000})
            ex = got[2]
            self.assertEqual((ex["principal"], ex["owner"], ex["client"]),
                             (None, None, None))
            self.assertEqual(ex["detail"], {})
            self.assertEqual(got[3]["detail"], {"by": "ops"})
            self.assertEqual(got[6]["detail"]["count"], 3)
            # at is the id's ms, as RFC 3339
            ms = int(ids[0].split("-")[0])
            self.assertEqual(g["at"], time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) +
                ".%03dZ" % (ms % 1000))

    def test_long_polls_from_the_ring_read_every_event_once_in_order(self):
        p = self.prefix()
        after = self.mark()
        ids = [xadd(self.redis, k="granted", l=p + str(i), t=str(i + 1))
               for i in range(7)]
        seen, cursor, polls = [], after, 0
        while len(seen) < len(ids):
            polls += 1
            self.assertLess(polls, 20, seen)
            r = self.events(prefix=p, after=cursor, wait_ms=10000, limit=3,
                            timeout=slack(20.0))
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.json["events"], "a long poll answered nothing "
                            "with events there: %r" % r.json)
            seen += [e["id"] for e in r.json["events"]]
            cursor = r.json["next"]
        self.assertEqual(seen, ids)

    def test_an_entry_without_token_or_detail_shows_nulls(self):
        p = self.prefix()
        after = self.mark()
        i = xadd(self.redis, k="expired", l=p + "x")
        e = self.events_ok(prefix=p, after=after)["events"]
        self.assertEqual(len(e), 1)
        self.assertEqual(e[0]["id"], i)
        self.assertIsNone(e[0]["token"])
        self.assertIsNone(e[0]["gateway"])
        self.assertEqual(e[0]["detail"], {})

    def test_pages_follow_next_and_next_is_the_last_entry_read(self):
        p = self.prefix()
        after = self.mark()
        mine = []
        for i in range(7):
            mine.append(xadd(self.redis, k="granted", l=p + str(i), t=str(i + 1)))
            xadd(self.redis, k="granted", l="elsewhere/" + p + str(i))
        last = xadd(self.redis, k="released", l="elsewhere/" + p + "z")
        for start in (after, "1000-0"):
            seen, cursor, pages = [], start, 0
            while True:
                page = self.events_ok(prefix=p, after=cursor, limit=3)
                self.assertLessEqual(len(page["events"]), 3)
                pages += 1
                seen += [e["id"] for e in page["events"]]
                if not page["events"]:
                    break
                cursor = page["next"]
                self.assertLess(pages, 50)
            self.assertEqual(seen, mine, start)
            # the entry read last, though not shown (another prefix)
            self.assertEqual(page["next"], last)
            # nothing after it: next is the after given
            again = self.events_ok(prefix=p, after=last)
            self.assertEqual(again, {"events": [], "next": last})

    def test_a_prefix_behind_pages_of_other_locks_events_is_answered_with_its_own(self):
        # 2500 entries of other locks (two and a half pages of a history
        # read) come before the prefix's one: the answer holds it, not an
        # empty page with a next to follow
        p = self.prefix()
        after = self.mark()
        self.redis.command(
            "EVAL", "for i = 1, tonumber(ARGV[1]) do redis.call('XADD', "
            "KEYS[1], '*', 'k', 'granted', 'l', ARGV[2] .. i) end return 1",
            "1", STREAM, "2500", "elsewhere/" + p)
        mine = xadd(self.redis, k="granted", l=p + "a", t="1")
        for params in ({"after": after}, {"after": after, "wait_ms": 5000},
                       {}):
            t0 = time.monotonic()
            page = self.events_ok(prefix=p, **params)
            self.assertEqual([e["id"] for e in page["events"]], [mine],
                             params)
            self.assertEqual(page["next"], mine, params)
            self.assertLess(time.monotonic() - t0, slack(3.0), params)

    def test_from_the_oldest_retained_without_after(self):
        p = self.prefix()
        mine = [xadd(self.redis, k="granted", l=p + "a", t="1"),
                xadd(self.redis, k="released", l=p + "a", t="1")]
        page = self.events_ok(prefix=p, limit=1000)
        self.assertEqual([e["id"] for e in page["events"]], mine)
        self.assertNotIn("gap", page)

    def test_an_after_older_than_retained_answers_from_the_oldest_with_gap(self):
        p = self.prefix()
        for i in range(5):
            xadd(self.redis, k="granted", l=p + "a", t=str(i + 1))
        self.redis.command("XTRIM", STREAM, "MAXLEN", "2")
        kept = [e[0].decode() for e in
                self.redis.command("XRANGE", STREAM, "-", "+")]
        self.assertEqual(len(kept), 2)
        page = self.events_ok(prefix=p, after="1000-0")
        self.assertIs(page.get("gap"), True, page)
        self.assertEqual([e["id"] for e in page["events"]], kept)
        # a stream says so too, before the events that are left
        s = self.stream(query(prefix=p), [("Last-Event-ID", "1000-0")])
        s.read_head()
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 2, slack(5.0)),
                        s.frames)
        self.assertEqual(s.frames[0].get("event"), "gap")
        self.assertEqual(s.ids(), kept)

    def test_a_long_poll_answers_when_an_event_it_may_show_comes(self):
        p = self.prefix()
        after = self.mark()
        c = self.call("GET", query(prefix=p, after=after, wait_ms=30000),
                      timeout=slack(40.0))
        time.sleep(slack(0.3))
        self.assertFalse(c.done, "answered with nothing to show")
        # another prefix's event wakes nobody here
        xadd(self.redis, k="granted", l="elsewhere/" + p + "a")
        time.sleep(slack(0.3))
        self.assertFalse(c.done, "answered for another prefix's event")
        t0 = time.monotonic()
        i = xadd(self.redis, k="granted", l=p + "a", t="5")
        r = c.result(slack(10.0))
        took = c.t_end - t0
        self.assertEqual(r.status, 200, r)
        self.assertEqual([e["id"] for e in r.json["events"]], [i])
        self.assertEqual(r.json["next"], i)
        self.assertLess(took, slack(3.0), "answered %.2f s after the event"
                        % took)

    def test_a_long_poll_answers_at_wait_ms_with_nothing(self):
        p = self.prefix()
        after = self.mark()
        t0 = time.monotonic()
        c = self.call("GET", query(prefix=p, after=after, wait_ms=800),
                      timeout=slack(20.0))
        xadd(self.redis, k="granted", l="elsewhere/" + p + "a")
        r = c.result(slack(15.0))
        took = c.t_end - t0
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["events"], [])
        self.assertGreaterEqual(took, 0.8)
        self.assertLess(took, 0.8 + slack(4.0))
        # what it read but did not show moved its next on
        self.assertRegex(r.json["next"], r"^\d+-\d+$")

    def test_a_long_poll_from_history_goes_live(self):
        """An after older than the ring's start: Redis first (nothing
        under the prefix there), then the ring, in one long poll."""
        p = self.prefix()
        c = self.call("GET", query(prefix=p, after="1000-0", wait_ms=30000),
                      timeout=slack(40.0))
        time.sleep(slack(0.5))
        self.assertFalse(c.done, "answered with nothing to show")
        i = xadd(self.redis, k="released", l=p + "a", t="1")
        r = c.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.assertEqual([e["id"] for e in r.json["events"]], [i])
        self.assertNotIn("gap", r.json)

    def test_a_stream_with_nothing_to_send_opens_with_a_comment_at_once(self):
        # the client holds bytes of the stream before any event, long
        # before the first keep-alive (15 s)
        s = self.stream(query(prefix=self.prefix()))
        s.read_head()
        self.assertEqual(s.status, 200)
        self.assertTrue(s.wait(lambda s: s.comments >= 1, slack(2.0)),
                        "no opening comment: %r" % s.body[:200])
        self.assertEqual(s.frames, [])
        s.close()

    def test_a_stream_resumes_with_last_event_id_without_loss_or_repeat(self):
        p = self.prefix()
        first = [xadd(self.redis, k="granted", l=p + "a", t=str(i + 1))
                 for i in range(3)]
        s = self.stream(query(prefix=p), [("Last-Event-ID", first[0])])
        s.read_head()
        self.assertEqual(s.status, 200)
        self.assertTrue(s.headers["content-type"].startswith("text/event-stream"))
        self.assertEqual(s.headers.get("cache-control"), "no-store")
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 2, slack(5.0)),
                        s.frames)
        live = xadd(self.redis, k="released", l=p + "a", t="3")
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 3, slack(5.0)),
                        s.frames)
        self.assertEqual(s.ids(), first[1:] + [live])
        f = s.frames[-1]
        # a plain message (an EventSource's onmessage gets it): its kind
        # is the JSON's, and no event: line names another type
        self.assertNotIn("event", f)
        self.assertEqual(f["json"]["kind"], "released")
        self.assertEqual(f["json"]["id"], live)
        self.assertEqual(list(f["json"]), FIELDS)
        s.close()
        # what happens while nobody reads comes on the next stream
        missed = [xadd(self.redis, k="granted", l=p + "b", t=str(10 + i))
                  for i in range(3)]
        s2 = self.stream(query(prefix=p), [("Last-Event-ID", live)])
        s2.read_head()
        self.assertTrue(s2.wait(lambda s: len(s.ids()) >= 3, slack(5.0)),
                        s2.frames)
        after = xadd(self.redis, k="released", l=p + "b", t="12")
        self.assertTrue(s2.wait(lambda s: len(s.ids()) >= 4, slack(5.0)),
                        s2.frames)
        self.assertEqual(s2.ids(), missed + [after])
        # nothing more: no event came twice
        self.assertFalse(s2.wait(lambda s: len(s.ids()) > 4, slack(0.5)))

    def test_streams_opened_at_once_all_get_in_and_each_gets_the_next_event(self):
        # More streams at once than the history reads that may wait (64 for
        # the gateway): each one's first read is a history read, so some
        # find the queue full; they wait their turn, none is ended.
        p = self.prefix()
        start = xadd(self.redis, k="granted", l=p + "a", t="1")
        base = metric_value(self.gw, "fencegate_event_readers")
        n = 300
        streams = [Stream(self.gw.port, query(prefix=p),
                          [("Last-Event-ID", start)]) for _ in range(n)]
        for st in streams:
            self.addCleanup(st.close)
        for st in streams:
            st.read_head(timeout=slack(10.0))
            self.assertEqual(st.status, 200)
        # every stream is listed (none was ended for want of room)
        harness.wait_until(lambda: harness.metric_value(
            self.gw, "fencegate_event_readers") >= n, slack(10.0))
        self.assertGreaterEqual(
            harness.metric_value(self.gw, "fencegate_event_readers"), n)
        live = xadd(self.redis, k="released", l=p + "a", t="1")
        for st in streams:
            self.assertTrue(st.wait(lambda s: live in s.ids(), slack(10.0)),
                            (st.frames, st.ended))
            self.assertFalse(st.ended)
            self.assertEqual(st.ids(), [live])
        # the gateway has let them all go before the next test counts its
        # own readers
        for st in streams:
            st.close()
        self.assertTrue(wait_until(lambda: metric_value(
            self.gw, "fencegate_event_readers") == base, slack(10.0)))

    def test_a_stream_from_an_old_id_reads_history_then_live(self):
        p = self.prefix()
        mine = [xadd(self.redis, k="granted", l=p + "a", t="1")]
        s = self.stream(query(prefix=p), [("Last-Event-ID", "1000-0")])
        s.read_head()
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 1, slack(5.0)))
        mine.append(xadd(self.redis, k="released", l=p + "a", t="1"))
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 2, slack(5.0)))
        ids = [i for i in s.ids()]
        self.assertEqual(ids, mine)

    def test_an_idle_stream_sends_a_keep_alive_every_15_s(self):
        s = self.stream(query(prefix="nothing-here/", after=self.mark()))
        s.read_head()
        # (the first comment is the stream's opening, sent at once)
        self.assertTrue(s.wait(lambda s: s.comments >= 1, slack(2.0)),
                        "no opening comment")
        t0 = time.monotonic()
        self.assertTrue(s.wait(lambda s: s.comments >= 2, 15.0 + slack(10.0)),
                        "no keep-alive comment")
        took = time.monotonic() - t0
        self.assertGreater(took, 14.0)
        self.assertEqual(s.frames, [])
        self.assertFalse(s.ended)

    def test_head_answers_like_get_without_a_body(self):
        r = self.req("HEAD", query(prefix="a/", wait_ms=30000), timeout=slack(5.0))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"")
        self.assertLess(r.elapsed, slack(3.0))

    def test_the_readers_gauge(self):
        base = metric_value(self.gw, "fencegate_event_readers")
        s = self.stream(query(prefix="nothing-here/", after=self.mark()))
        s.read_head()
        self.assertTrue(wait_until(
            lambda: metric_value(self.gw, "fencegate_event_readers") == base + 1,
            slack(3.0)))
        s.close()
        self.assertTrue(wait_until(
            lambda: metric_value(self.gw, "fencegate_event_readers") == base,
            slack(5.0)))


class OneLock(EventsCase):
    """A lock's events, on one Redis or a Cluster (its own slot's stream):
    always in its order, with the ids the topology gives."""

    def read_all(self, name, want):
        """Follows next from the oldest retained until `want` events of
        `name` were seen (a page may hold fewer than its limit)."""
        seen, cursor = [], None
        for _ in range(50):
            params = dict(prefix=name, limit=1000)
            if cursor:
                params["after"] = cursor
            page = self.events_ok(**params)
            seen += [e["id"] for e in page["events"]]
            if len(seen) >= want:
                return seen
            cursor = page["next"] or cursor
        return seen

    def test_a_locks_events_in_order_then_a_long_poll_then_a_stream(self):
        name = self.lock_name()
        ids = [xadd_lock(self.redis, name, k="granted", t=1),
               xadd_lock(self.redis, name, k="released", t=1),
               xadd_lock(self.redis, name, k="granted", t=2)]
        if harness.cluster_mode():
            for i in ids:
                self.assertRegex(i, r"^\d+-\d+\.\d+$")
        self.assertEqual(self.read_all(name, 3), ids)
        c = self.call("GET", query(prefix=name, after=ids[-1], wait_ms=30000),
                      timeout=slack(40.0))
        time.sleep(slack(0.3))
        self.assertFalse(c.done)
        ids.append(xadd_lock(self.redis, name, k="released", t=2))
        r = c.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.assertEqual([e["id"] for e in r.json["events"]], ids[3:])
        s = self.stream(query(prefix=name), [("Last-Event-ID", ids[0])])
        s.read_head()
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 3, slack(5.0)),
                        s.frames)
        ids.append(xadd_lock(self.redis, name, k="granted", t=3))
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 4, slack(5.0)),
                        s.frames)
        self.assertEqual(s.ids(), ids[1:])


class Validation(EventsCase):
    """The query is read strictly (nothing needs an event in Redis)."""

    def test_bad_queries_are_400(self):
        cases = [
            ("after=abc", "after"),
            ("after=1-2-3", "after"),
            ("after=1-1.16384", "after"),
            ("after=", "after"),
            ("limit=0", "limit"),
            ("limit=1001", "limit"),
            ("limit=-1", "limit"),
            ("wait_ms=60001", "wait_ms"),
            ("wait_ms=1.5", "wait_ms"),
            ("cursor=abc", "unknown parameter"),
            ("prefix=a/&Prefix=b", "unknown parameter"),
            ("limit=5&limit=5", "more than once"),
            ("prefix=a/&prefix=a/", "more than once"),
            ("after=1-1&after=1-1", "more than once"),
            ("wait_ms=1&wait_ms=1", "more than once"),
            ("prefix=a%20b", "prefix"),
        ]
        for q, says in cases:
            r = self.req("GET", EVENTS + "?" + q)
            self.assert_bad_request(r, q)
            self.assertIn(says, r.json["message"], q)

    def test_bounds_are_taken(self):
        for q in ("limit=1", "limit=1000", "wait_ms=0", "after=1-0",
                  "after=1-0.16383", "prefix="):
            r = self.req("GET", EVENTS + "?" + q)
            self.assertEqual(r.status, 200, (q, r))
            self.assertIsInstance(r.json["events"], list)

    def test_a_stream_with_two_last_event_ids_is_400(self):
        r = self.req("GET", EVENTS, headers={"Accept": "text/event-stream",
                                             "Last-Event-ID": "1-1, 2-2"})
        self.assert_bad_request(r)
        s = Stream(self.gw.port, EVENTS, [("Last-Event-ID", "1-1"),
                                          ("Last-Event-ID", "2-2")])
        self.addCleanup(s.close)
        s.read_head()
        self.assertEqual(s.status, 400)

    def test_a_stream_with_a_bad_after_is_400_whatever_its_last_event_id(self):
        # Last-Event-ID stands for after, but does not excuse a bad one
        for q in ("after=abc", "after=", "after=1-1.16384"):
            r = self.req("GET", EVENTS + "?" + q,
                         headers={"Accept": "text/event-stream",
                                  "Last-Event-ID": "1-1"})
            self.assert_bad_request(r, q)
            self.assertIn("after", r.json["message"], q)
        r = self.req("GET", EVENTS + "?after=1-1",
                     headers={"Accept": "text/event-stream",
                              "Last-Event-ID": "garbage"})
        self.assert_bad_request(r)
        self.assertIn("Last-Event-ID", r.json["message"])

    def test_other_methods_are_405(self):
        for m in ("POST", "DELETE", "PUT"):
            r = self.req(m, EVENTS)
            self.assert_error(r, 405, "method_not_allowed", m)
            self.assertIn("GET", r.header("Allow"))

    def test_a_body_is_400(self):
        r = self.req("GET", EVENTS, raw="{}")
        self.assert_bad_request(r)


def sha(key):
    return hashlib.sha256(key.encode()).hexdigest()


KEYS = {n: secrets.token_urlsafe(32) for n in ("alice", "root", "none")}


@harness.single_redis("appends to the one event stream of a single Redis")
class Rights(EventsCase):
    """Under an auth-file: observe:a/ reads a/'s events only."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        d = tempfile.mkdtemp(dir=harness.tmp_root())
        path = os.path.join(d, "auth")
        with open(path, "w") as f:
            f.write("alice sha256:%s observe:ev-a/\n" % sha(KEYS["alice"]))
            f.write("root sha256:%s observe:*\n" % sha(KEYS["root"]))
            f.write("none sha256:%s metrics\n" % sha(KEYS["none"]))
        cls.gateway_flags = ("--auth-file", path)

    def who(self, name):
        return {"Authorization": "Bearer " + KEYS[name]}

    def test_a_principal_sees_only_what_it_may_observe(self):
        after = xadd(self.redis, k="released", l="mark/x")
        a = xadd(self.redis, k="granted", l="ev-a/1", t="1")
        b = xadd(self.redis, k="granted", l="ev-b/1", t="2")
        a2 = xadd(self.redis, k="released", l="ev-a/1", t="1")
        got = self.events_ok(headers=self.who("alice"), prefix="ev-a/",
                             after=after)
        self.assertEqual([e["id"] for e in got["events"]], [a, a2])
        got = self.events_ok(headers=self.who("root"), prefix="ev-", after=after)
        self.assertEqual([e["id"] for e in got["events"]], [a, b, a2])
        # a stream too
        s = self.stream(query(prefix="ev-a/"), [("Last-Event-ID", after)]
                        + list(self.who("alice").items()))
        s.read_head()
        self.assertEqual(s.status, 200)
        self.assertTrue(s.wait(lambda s: len(s.ids()) >= 2, slack(5.0)))
        self.assertEqual(s.ids(), [a, a2])

    def test_a_prefix_outside_its_rights_is_403(self):
        for p in ("", "ev-", "ev-b/", "ev-a"):
            r = self.events(headers=self.who("alice"), prefix=p)
            self.assert_error(r, 403, "forbidden", p)
        r = self.events(headers=self.who("none"), prefix="zzz/")
        self.assert_error(r, 403, "forbidden")
        r = self.events(prefix="ev-a/")
        self.assert_error(r, 401, "unauthenticated")
        s = self.stream(query(prefix="ev-b/"), list(self.who("alice").items()))
        s.read_head()
        self.assertEqual(s.status, 403)


@harness.single_redis("appends to the one event stream of a single Redis")
class SlowReader(EventsCase):
    """A stream that is not read is cut off; one that is read gets all."""

    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.env = self.start_env()
        self.gw = self.env.gw
        self.redis = self.env.redis

    def test_a_reader_that_does_not_read_is_cut_off_and_another_gets_everything(self):
        p = "slow/"
        after = self.mark()
        target = query(prefix=p)
        slow = self.stream(target, [("Last-Event-ID", after)], rcvbuf=4096)
        slow.read_head()
        self.assertEqual(slow.status, 200)
        # the reader that keeps up is a process of its own (curl), so that
        # nothing of this test's own work slows its reading
        out = os.path.join(tempfile.mkdtemp(dir=harness.tmp_root()), "fast")
        fast = harness.spawn(["curl", "-sN", "-o", out,
                              "-H", "Accept: text/event-stream",
                              "-H", "Last-Event-ID: " + after,
                              "http://127.0.0.1:%d%s" % (self.gw.port, target)])
        self.addCleanup(harness.stop_process, fast)
        self.assertTrue(wait_until(
            lambda: metric_value(self.gw, "fencegate_event_readers") >= 2,
            slack(5.0)))
        # about 7 MB of events, paced so that one turn of the follower
        # brings far less than the bound to a reader that keeps up
        n = 2000
        pad = "x" * 3500
        ids = []
        with RespClient(self.redis.port) as c:
            for i in range(n):
                ids.append(c.command("XADD", STREAM, "*", "k", "refused",
                                     "l", p + "a", "t", str(i + 1), "d",
                                     json.dumps({"code": "stale_token",
                                                 "path": "/" + pad,
                                                 "count": i + 1})).decode())
                if i % 10 == 9:
                    time.sleep(0.02)
        harness.wait_metric(self.gw, "fencegate_event_readers_cut_total", 1,
                            slack(20.0))

        def fast_ids():
            with open(out, "rb") as f:
                return re.findall(rb"^id: (\S+)$", f.read(), re.M)
        self.assertTrue(wait_until(lambda: len(fast_ids()) >= n, slack(30.0)),
                        "the reading stream got %d of %d" % (len(fast_ids()), n))
        self.assertEqual([i.decode() for i in fast_ids()], ids)
        self.assertIsNone(fast.poll(), "the reading stream ended")
        self.assertEqual(metric_value(self.gw, "fencegate_event_readers_cut_total"), 1)
        # the one not read ended: what it was sent, then the end
        self.assertTrue(slow.wait(lambda s: s.ended, slack(20.0)),
                        "the stream not read did not end")
        self.assertLess(len(slow.ids()), n)
        self.assertEqual(slow.ids(), ids[:len(slow.ids())])


@harness.single_redis("appends to the one event stream of a single Redis")
class Drain(EventsCase):
    """A gateway that drains answers its long polls with what they have
    and ends its streams: nothing waits for the drain's bound."""

    uses_shared_env = False

    def test_the_drain_answers_long_polls_and_ends_streams(self):
        env = self.start_env(flags=["--drain-timeout-ms", "20000"])
        self.gw, self.redis = env.gw, env.redis
        after = self.mark()
        s = self.stream(query(prefix="d/"), [("Last-Event-ID", after)])
        s.read_head()
        i = xadd(self.redis, k="granted", l="d/x", t="1")
        self.assertTrue(s.wait(lambda s: s.ids() == [i], slack(5.0)), s.frames)
        c = self.call("GET", query(prefix="d/", after=i, wait_ms=60000),
                      timeout=slack(40.0))
        self.assertTrue(wait_until(
            lambda: metric_value(self.gw, "fencegate_event_readers") >= 2,
            slack(5.0)))
        t0 = time.monotonic()
        self.gw.proc.send_signal(signal.SIGTERM)
        r = c.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json, {"events": [], "next": i})
        self.assertTrue(s.wait(lambda s: s.ended, slack(10.0)),
                        "the stream did not end")
        self.assertTrue(wait_until(lambda: not self.gw.alive(), slack(15.0)))
        self.assertLess(time.monotonic() - t0, slack(15.0))
        self.assertEqual(self.gw.proc.returncode, 0)
