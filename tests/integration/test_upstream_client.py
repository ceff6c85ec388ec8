"""The gateway's own upstream client (gateway/upstream/h1client.c): a
request with no body or a small one of known length, to an upstream given
by its IP address over plain http, is carried by it instead of libcurl.
These tests hold it to what libcurl did: the same request bytes, the
same reading of the answer's framing, a kept-alive connection closed
under a GET replaced once (a write is never sent twice), a body cut off
never completed, and a broken answer never forwarded as a good one."""

import socket
import time

import harness
from harness import slack
from origins import StandIn


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Origin: scripted\r\n\r\nabc"


class UpstreamClientTests(harness.TestCase):
    uses_shared_env = False

    def origin(self, answer, close_after=lambda conn, rank: False):
        o = StandIn(script=answer, close_after=close_after).start()
        self.addCleanup(o.stop)
        return o

    def gateway(self, origin, upstream=None):
        """A gateway with one loop (one pool of upstream connections) in
        front of `origin`, reached by its address (the gateway's own
        client) or by `upstream` (a URL: a name makes it libcurl's)."""
        if not hasattr(self, "_redis_env"):
            self._redis_env = self.start_env(gateways=0, upstream=False)
        flags = ["--threads", "1"]
        if upstream:
            flags += ["--upstream", upstream]
        return self.start_gateway(self._redis_env.redis.port, origin.port,
                                  flags)

    def get(self, gw, path="/o/a.txt", method="GET", headers=None):
        return harness.http_request(gw.port, method, path,
                                    headers=headers or {},
                                    timeout=slack(10.0))

    # -- the request -------------------------------------------------------

    @staticmethod
    def unhosted(a, b, o, own, curl):
        """Heads `a` (sent by the gateway `own`, to `o` by its address) and
        `b` (by `curl`, to `o` by name) without what must differ: the
        host each was told to reach, and the gateway each was asked
        through."""
        a = a.replace(b"Host: 127.0.0.1:%d" % o.port, b"Host: H")
        b = b.replace(b"Host: localhost:%d" % o.port, b"Host: H")
        a = a.replace(b"Host: 127.0.0.1:%d" % own.port, b"Host: G")
        b = b.replace(b"Host: 127.0.0.1:%d" % curl.port, b"Host: G")
        return a, b

    def test_request_bytes_are_those_libcurl_sends(self):
        o = self.origin(lambda conn, rank, head: OK)
        own = self.gateway(o)
        curl = self.gateway(o, "http://localhost:%d" % o.port)
        cases = [
            ("GET", "/o/a.txt", {}),
            ("GET", "/o/b%20c.txt?x=1&y=%2F", {"Accept": "text/plain",
                                              "X-Empty": "",
                                              "X-Forwarded-For": "10.1.2.3",
                                              "Range": "bytes=0-1"}),
            ("HEAD", "/o/a.txt", {"If-None-Match": '"abc"',
                                  "Connection": "X-Drop",
                                  "X-Drop": "1", "Keep-Alive": "5"}),
            ("GET", "/o/(a)!*'~.txt", {"User-Agent": "t/1",
                                       "Accept-Encoding": "gzip"}),
        ]
        for method, path, headers in cases:
            with self.subTest(method=method, path=path):
                r1 = self.get(own, path, method, headers)
                r2 = self.get(curl, path, method, headers)
                self.assertEqual((r1.status, r2.status), (200, 200))
                got = o.requests()
                a, b = self.unhosted(got[-2][2], got[-1][2], o, own, curl)
                self.assertEqual(a, b)
                self.assertTrue(a.startswith(b"%s %s HTTP/1.1\r\nHost: H\r\n"
                                             % (method.encode(),
                                                path.encode())), a)

    # -- the answer's framing ------------------------------------------------

    def test_chunked_answer_arrives_whole_and_its_trailer_is_not_a_header(self):
        body = b"".join(b"%x\r\n%s\r\n" % (len(p), p)
                        for p in (b"hello ", b"chunked ", b"world"))
        o = self.origin(lambda conn, rank, head: (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
            b"0\r\nX-Trailer: t\r\n\r\n"))
        gw = self.gateway(o)
        for _ in range(3):   # and the connection is reused after it
            r = self.get(gw)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b"hello chunked world")
            self.assertIsNone(r.header("X-Trailer"))
        self.assertEqual(o.carried(), [(0, 0), (0, 1), (0, 2)])

    def test_interim_answer_is_passed_over_for_the_final_one(self):
        o = self.origin(lambda conn, rank, head: (
            b"HTTP/1.1 100 Continue\r\n\r\n" + OK))
        r = self.get(self.gateway(o))
        self.assertEqual((r.status, r.body), (200, b"abc"))

    def test_head_and_304_answers_have_no_body(self):
        def answer(conn, rank, head):
            if head.startswith(b"HEAD"):
                return b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"
            return b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"
        o = self.origin(answer)
        gw = self.gateway(o)
        for method, status in (("HEAD", 200), ("GET", 304), ("HEAD", 200)):
            r = self.get(gw, method=method)
            self.assertEqual((r.status, r.body), (status, b""), method)
        # each of them announced a body it does not carry, which could
        # still come: its connection is never used again (v1.3.1)
        self.assertEqual(o.carried(), [(0, 0), (1, 0), (2, 0)],
                         "a connection was used again after one")

    def test_body_read_to_the_close(self):
        o = self.origin(lambda conn, rank, head: (
            b"HTTP/1.1 200 OK\r\n\r\nuntil the close"),
            close_after=lambda conn, rank: True)
        gw = self.gateway(o)
        for _ in range(2):
            r = self.get(gw)
            self.assertEqual((r.status, r.body), (200, b"until the close"))
        self.assertEqual(o.carried(), [(0, 0), (1, 0)])

    def test_malformed_answers_are_502_and_never_forwarded(self):
        bad = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            b"HTTP/2.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
            b"garbage\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ]
        state = {"i": 0}
        o = self.origin(lambda conn, rank, head: bad[state["i"]])
        gw = self.gateway(o)
        for i, b in enumerate(bad):
            state["i"] = i
            with self.subTest(answer=b):
                r = self.get(gw)
                self.assert_error(r, 502, "upstream_unavailable")
                self.assertLess(r.elapsed, slack(2.0))
        self.assert_alive(gw)

    def test_answer_broken_after_its_head_is_502_on_either_client(self):
        # the head, then a chunk size that is none: nothing of the body
        # was in hand, so no head goes to the client (libmicrohttpd would
        # leave it waiting for a body that never comes)
        o = self.origin(lambda conn, rank, head: (
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))
        for gw in (self.gateway(o),
                   self.gateway(o, "http://localhost:%d" % o.port)):
            g = self.acquire_ok("o/a.txt", gw=gw)
            for method, headers in (("GET", {}), ("DELETE", {
                    "Fencing-Token": g["sequencer"]})):
                r = self.get(gw, method=method, headers=headers)
                self.assert_error(r, 502, "upstream_unavailable")
                self.assertEqual(r.json.get("upstream_status"), 201, r)
                self.assertLess(r.elapsed, slack(2.0))
            self.release_ok("o/a.txt", g["lease"], gw=gw)

    def test_answer_cut_short_never_reaches_the_client_whole(self):
        o = self.origin(lambda conn, rank, head: (
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"),
            close_after=lambda conn, rank: True)
        gw = self.gateway(o)
        try:
            r = self.get(gw)
        except (OSError, harness.http.client.HTTPException):
            r = None
        if r is not None:
            self.assertNotEqual((r.status, len(r.body)), (200, 10), r)
        self.assert_alive(gw)

    # -- connections ---------------------------------------------------------

    def test_connection_closed_under_a_request_is_replaced_once(self):
        # each connection answers its first request, then reads the next
        # one and closes without a word (an origin whose keep-alive bound
        # ran out as the request came)
        o = self.origin(lambda conn, rank, head: OK if rank == 0 else None)
        gw = self.gateway(o)
        for i in range(4):
            r = self.get(gw)
            self.assertEqual((r.status, r.body), (200, b"abc"), i)
        # every request after the first was sent on the kept connection,
        # lost there, and sent once more on a new one
        self.assertEqual(o.carried(), [(0, 0), (0, 1), (1, 0), (1, 1),
                                       (2, 0), (2, 1), (3, 0)])
        self.assertEqual(len({h for _, _, h in o.requests()}), 1)

    def test_new_connection_closed_without_an_answer_is_502_not_retried(self):
        o = self.origin(lambda conn, rank, head: None)
        gw = self.gateway(o)
        r = self.get(gw)
        self.assert_error(r, 502, "upstream_unavailable")
        self.assertEqual(len(o.requests()), 1)

    def test_idle_connection_the_origin_closes_is_not_used(self):
        o = self.origin(lambda conn, rank, head: OK,
                        close_after=lambda conn, rank: True)
        gw = self.gateway(o)
        self.assertEqual(self.get(gw).status, 200)
        # the origin's close is in the gateway's socket (loopback)
        self.assertTrue(harness.wait_until(lambda: o.hung_up >= 1, slack(5.0)))
        self.assertEqual(self.get(gw).status, 200)
        self.assertEqual(o.carried(), [(0, 0), (1, 0)])

    def test_refused_connection_is_502(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()   # nothing listens there
        o = self.origin(lambda conn, rank, head: OK)
        gw = self.gateway(o, "http://127.0.0.1:%d" % port)
        r = self.get(gw)
        self.assert_error(r, 502, "upstream_unavailable")

    def test_large_answer_streams_through_a_slow_reader(self):
        size = 8 << 20
        blob = bytes(range(256)) * (size // 256)
        o = self.origin(lambda conn, rank, head: (
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + blob))
        gw = self.gateway(o)
        s = socket.create_connection(("127.0.0.1", gw.port))
        self.addCleanup(s.close)
        s.settimeout(slack(20.0))
        s.sendall(b"GET /o/big HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        head, got = got.split(b"\r\n\r\n", 1)
        self.assertIn(b"200", head.split(b"\r\n")[0])
        # the cause: a reader that stops reading for a while; the
        # gateway's buffer fills and it must wait
        time.sleep(0.5)
        while len(got) < size:
            d = s.recv(1 << 20)
            if not d:
                break
            got += d
        self.assertEqual(len(got), size)
        self.assertTrue(got == blob, "the body changed on its way")

    # -- writes ----------------------------------------------------------------

    def write(self, gw, method, path, body, seq, headers=None):
        h = {"Fencing-Token": seq}
        h.update(headers or {})
        return harness.http_request(gw.port, method, path, raw=body,
                                    headers=h, timeout=slack(10.0))

    def raw_put_head(self, gw, path, length, seq):
        """A socket to `gw` that sent a PUT's head announcing `length`
        body bytes, and none of them yet."""
        s = socket.create_connection(("127.0.0.1", gw.port))
        self.addCleanup(s.close)
        s.settimeout(slack(10.0))
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: x\r\nFencing-Token: %s\r\n"
                  b"Content-Length: %d\r\n\r\n" % (path.encode(), seq.encode(),
                                                   length))
        return s

    def test_write_bytes_are_those_libcurl_sends(self):
        o = self.origin(lambda conn, rank, head: OK)
        own = self.gateway(o)
        curl = self.gateway(o, "http://localhost:%d" % o.port)
        seq = self.acquire_ok("o/w.txt", gw=own)["sequencer"]
        xml = b'<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"/>'
        cases = [
            ("PUT", b"x" * 1000, {}),
            ("PUT", b"", {}),
            ("POST", b"a=1", {"Content-Type": "application/x-www-form-urlencoded"}),
            ("PATCH", b"patch", {"Content-Type": "text/plain", "X-Empty": ""}),
            ("PROPPATCH", xml, {"Content-Type": "text/xml"}),
            ("DELETE", None, {}),
            ("MKCOL", None, {"X-Forwarded-For": "10.1.2.3"}),
            # the largest body the own client carries, announced with
            # Expect (the gateway answers that itself; curl adds none)
            ("PUT", bytes(range(256)) * 256, {"Expect": "100-continue"}),
        ]
        for method, body, headers in cases:
            with self.subTest(method=method, size=len(body or b"")):
                r1 = self.write(own, method, "/o/w.txt", body, seq, headers)
                r2 = self.write(curl, method, "/o/w.txt", body, seq, headers)
                self.assertEqual((r1.status, r2.status), (200, 200), (r1, r2))
                got = o.requests()
                (_, _, a), (_, _, b) = got[-2], got[-1]
                a, b = self.unhosted(a, b, o, own, curl)
                self.assertEqual(a, b)
                self.assertTrue(a.startswith(b"%s /o/w.txt HTTP/1.1\r\nHost: H\r\n"
                                             % method.encode()), a)
                self.assertEqual(o.body(-2), (body or b"", True))
                self.assertEqual(o.body(-1), (body or b"", True))

    def test_write_is_never_sent_twice(self):
        # each connection answers its first request and is then closed
        # under the next one, after its whole body came: a GET would be
        # sent again on a new connection, a write (with a body or not)
        # is not
        o = self.origin(lambda conn, rank, head: OK if rank == 0 else None)
        gw = self.gateway(o)
        seq = self.acquire_ok("o/a.txt", gw=gw)["sequencer"]
        for i, (method, body) in enumerate((("PUT", b"once"),
                                            ("DELETE", None))):
            with self.subTest(method=method):
                self.assertEqual(self.get(gw).status, 200)
                r = self.write(gw, method, "/o/a.txt", body, seq)
                self.assert_error(r, 502, "upstream_unavailable")
                self.assertEqual(o.carried()[2 * i:], [(i, 0), (i, 1)])
                self.assertEqual(o.body(2 * i + 1), (body or b"", True))
        # and the client goes on over a new connection
        self.assertEqual(self.write(gw, "PUT", "/o/a.txt", b"again", seq).status,
                         200)
        self.assertEqual(o.carried()[-1], (2, 0))

    def test_write_takes_no_connection_the_origin_closed(self):
        # every answer closes its connection; each write right after one
        # goes out on a new connection, never on the closed one
        o = self.origin(lambda conn, rank, head: OK,
                        close_after=lambda conn, rank: True)
        gw = self.gateway(o)
        seq = self.acquire_ok("o/a.txt", gw=gw)["sequencer"]
        for i in range(5):
            self.assertEqual(self.get(gw).status, 200, i)
            # the origin's close has left it (on loopback, it is in the
            # gateway's socket once close() returned): the write comes
            # after it, as the row says, however loaded the machine
            self.assertTrue(harness.wait_until(
                lambda: o.hung_up >= 2 * i + 1, slack(5.0)))
            r = self.write(gw, "PUT", "/o/a.txt", b"%d" % i, seq)
            self.assertEqual(r.status, 200, (i, r))
        self.assertEqual(o.carried(), [(i, 0) for i in range(10)])

    def test_body_that_trickles_in_arrives_whole(self):
        o = self.origin(lambda conn, rank, head: OK)
        gw = self.gateway(o)
        seq = self.acquire_ok("o/a.txt", gw=gw)["sequencer"]
        body = bytes(range(256)) * 12
        s = self.raw_put_head(gw, "/o/a.txt", len(body), seq)
        for i in range(0, len(body), 1024):
            time.sleep(0.1)   # the cause: the body trickles in
            s.sendall(body[i:i + 1024])
        got = b""
        while b"\r\n\r\n" not in got:
            d = s.recv(65536)
            if not d:
                break
            got += d
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got)
        self.assertEqual(o.body(0), (body, True))

    def test_body_cut_off_by_its_client_never_completes_upstream(self):
        o = self.origin(lambda conn, rank, head: OK)
        gw = self.gateway(o)
        seq = self.acquire_ok("o/a.txt", gw=gw)["sequencer"]
        s = self.raw_put_head(gw, "/o/a.txt", 1000, seq)
        s.sendall(b"y" * 300)
        harness.wait_until(lambda: o.requests(), slack(5.0))
        s.close()
        self.assertTrue(harness.wait_until(lambda: o.body(0), slack(5.0)),
                        "the upstream request was left open")
        body, whole = o.body(0)
        self.assertFalse(whole)
        self.assertEqual(body, b"y" * 300)
        self.assert_alive(gw)
