"""What reaches the storage on every upstream connection, whichever client
carries it (contract v1.3.1): a write is sent once, and an answer reaches
only its request.

The gateway's own client carries requests to an upstream given by its IP
address over plain http; libcurl carries them to one given by name, and
over https. Each test runs on all of them against a scripted origin that misbehaves
as a store that crashed after acting, a proxy that drops connections, or
a store that breaks HTTP's framing would.
"""

import ssl
import threading

import harness
from harness import slack
from test_tls import pki
from origins import StandIn
from test_upstream_client import OK

WRITES = (
    # (method, body, extra headers: a Destination needs its own token)
    ("PUT", b"once", {}),
    ("PUT", b"", {}),
    ("POST", b"", {}),
    ("POST", b"body", {}),
    ("DELETE", None, {}),
    ("MKCOL", None, {}),
    ("PROPPATCH", b"<?xml version='1.0'?><propertyupdate xmlns='DAV:'/>", {}),
    ("COPY", None, {"Destination": "b.txt"}),
    ("MOVE", None, {"Destination": "b.txt"}),
)
READS = (b"GET", b"HEAD", b"OPTIONS", b"PROPFIND")
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
# what a misbehaving origin sends where no answer is due: an answer of its
# own, so that a request that read it would get it whole
EVIL = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Origin: evil\r\n\r\nEVIL"


def method_of(head):
    return head.split(b" ", 1)[0]


class UpstreamOnceTests(harness.TestCase):
    uses_shared_env = False
    BACKENDS = ("ip", "name", "https")

    def origin(self, answer, backend, close_after=lambda conn, rank: False):
        tls = None
        if backend == "https":
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(pki().path("store"), pki().key("store"))
        o = StandIn(script=answer, close_after=close_after, tls=tls).start()
        self.addCleanup(o.stop)
        return o

    def gateway(self, origin, backend):
        """One loop (one pool of upstream connections) in front of
        `origin`: by its address (the gateway's own client), by name, or
        by name over https (libcurl)."""
        if not hasattr(self, "_redis_env"):
            self._redis_env = self.start_env(gateways=0, upstream=False)
        flags = ["--threads", "1"]
        if backend == "name":
            flags += ["--upstream", "http://localhost:%d" % origin.port]
        elif backend == "https":
            flags += ["--upstream", "https://localhost:%d" % origin.port,
                      "--upstream-ca", pki().path("ca")]
        return self.start_gateway(self._redis_env.redis.port, origin.port,
                                  flags)

    def send(self, gw, method, path="/o/a.txt", body=None, headers=None):
        return harness.http_request(gw.port, method, path, raw=body,
                                    headers=headers or {},
                                    timeout=slack(10.0))

    def sent(self, o, method):
        return sum(1 for _, _, h in o.requests()
                   if method_of(h) == method.encode())

    # -- a write is sent once --------------------------------------------

    def test_a_write_whose_connection_closes_unanswered_is_sent_once(self):
        # the origin answers every read, and reads every write whole and
        # closes its connection without a word: as a store that crashed
        # after acting, or a proxy that dropped the connection. libcurl
        # would send a write without a body again on a new connection.
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                o = self.origin(
                    lambda conn, rank, head:
                    (OK if method_of(head) == b"GET" else NOT_FOUND)
                    if method_of(head) in READS else None, backend)
                gw = self.gateway(o, backend)
                d = "o/%s/" % backend
                a = self.acquire_ok(d + "a.txt", gw=gw)["sequencer"]
                b = self.acquire_ok(d + "b.txt", gw=gw)["sequencer"]
                for method, body, extra in WRITES:
                    with self.subTest(method=method, body=body):
                        # a kept-alive connection for the write to meet
                        self.assertEqual(self.send(gw, "GET").status, 200)
                        before = self.sent(o, method)
                        h = {"Fencing-Token": a}
                        if "Destination" in extra:
                            h["Destination"] = "/" + d + extra["Destination"]
                            h["Destination-Fencing-Token"] = b
                        r = self.send(gw, method, "/" + d + "a.txt", body, h)
                        self.assert_error(r, 502, "upstream_unavailable")
                        self.assertEqual(self.sent(o, method) - before, 1,
                                         "the write reached the store more "
                                         "than once")
                # the gateway goes on: a read still gets its answer
                self.assertEqual(self.send(gw, "GET").body, b"abc")

    def test_a_read_is_sent_again_once_and_only_on_a_new_connection(self):
        # every connection answers its first request and closes under the
        # next one: a GET that meets a closed connection goes out again,
        # once, on a new connection; when that one closes too, it is 502
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                first = {}

                def answer(conn, rank, head):
                    if rank > 0:
                        return None
                    if first.setdefault("conn", conn) == conn:
                        return OK
                    return None   # the new connection closes too

                o = self.origin(answer, backend)
                gw = self.gateway(o, backend)
                self.assertEqual(self.send(gw, "GET").status, 200)
                before = self.sent(o, "GET")
                r = self.send(gw, "GET")
                self.assert_error(r, 502, "upstream_unavailable")
                self.assertEqual(self.sent(o, "GET") - before, 2)
                ranks = [k for _, k, h in o.requests()
                         if method_of(h) == b"GET"][-2:]
                self.assertEqual(ranks, [1, 0], "sent again on a reused "
                                 "connection")

    def test_a_read_meets_several_closed_connections_and_is_sent_twice(self):
        # three idle kept-alive connections, all closed by the origin under
        # their next request (a store that restarted): libcurl 7.88 would
        # try the GET on each of them in turn and then on a new one; it
        # goes out once more, on a new connection, and no more
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                three = threading.Barrier(3, timeout=slack(10.0))

                def answer(conn, rank, head):
                    if rank > 0:
                        return None
                    if b"/o/warm" in head.split(b"\r\n", 1)[0]:
                        three.wait()   # one connection each
                    return OK

                o = self.origin(answer, backend)
                gw = self.gateway(o, backend)
                out = []
                ts = [threading.Thread(target=lambda: out.append(
                    self.send(gw, "GET", "/o/warm").status)) for _ in range(3)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                self.assertEqual(out, [200] * 3)
                before = len(o.requests())
                r = self.send(gw, "GET")
                self.assertEqual((r.status, r.body), (200, b"abc"))
                ranks = [k for _, k, _ in o.requests()[before:]]
                self.assertEqual(ranks, [1, 0], "sent other than once more "
                                 "on a new connection")

    # -- an answer reaches only its request ------------------------------

    def out_of_step(self, backend, first, method="GET", headers=None):
        """`first` answers the first request on every connection; a
        connection used again after it answers with EVIL. A GET sent
        after `method` must get its own answer, on a new connection."""
        seen = []

        def answer(conn, rank, head):
            seen.append(head)
            if len(seen) == 1:
                return first
            return EVIL if rank > 0 else OK

        o = self.origin(answer, backend)
        gw = self.gateway(o, backend)
        self.send(gw, method, headers=headers)
        r = self.send(gw, "GET")
        self.assertEqual((r.status, r.body), (200, b"abc"),
                         "a GET got bytes that were not its answer")
        self.assertEqual([k for _, k, _ in o.requests()], [0, 0],
                         "the connection was used again")

    def test_head_answer_closes_its_connection(self):
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                self.out_of_step(backend, b"HTTP/1.1 200 OK\r\n"
                                 b"Content-Length: 5\r\n\r\n", "HEAD")

    def test_204_and_304_that_announce_a_body_close_their_connection(self):
        for backend in self.BACKENDS:
            for head in (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                         b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
                         b"HTTP/1.1 204 No Content\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n"):
                with self.subTest(backend=backend, head=head):
                    self.out_of_step(backend, head, "GET",
                                     {"If-None-Match": '"x"'})

    def test_interim_answer_that_announces_a_body_closes_its_connection(self):
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                self.out_of_step(backend, b"HTTP/1.1 102 Processing\r\n"
                                 b"Content-Length: 5\r\n\r\n" + OK)

    def test_extra_bytes_after_an_answer_close_its_connection(self):
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                self.out_of_step(backend, OK + EVIL)

    def test_bytes_on_an_idle_connection_close_it(self):
        # the origin answers, and once the gateway has the whole answer
        # (the connection idles), says more unasked on that connection
        for backend in ("ip", "name"):
            with self.subTest(backend=backend):
                o = self.origin(lambda conn, rank, head:
                                OK if rank == 0 else EVIL, backend)
                gw = self.gateway(o, backend)
                self.assertEqual(self.send(gw, "GET").body, b"abc")
                (conn, _, _), = o.requests()
                o.push(conn, EVIL)
                r = self.send(gw, "GET")
                self.assertEqual((r.status, r.body), (200, b"abc"))
                self.assertEqual([k for _, k, _ in o.requests()], [0, 0])

    def test_clean_answers_keep_their_connection(self):
        # the other side of the rows above: a 200 and a 204 without a
        # body announced leave the connection to the next request
        for backend in self.BACKENDS:
            with self.subTest(backend=backend):
                o = self.origin(
                    lambda conn, rank, head:
                    b"HTTP/1.1 204 No Content\r\n\r\n"
                    if method_of(head) == b"DELETE" else OK, backend)
                gw = self.gateway(o, backend)
                path = "/o/%s/a.txt" % backend
                seq = self.acquire_ok(path[1:], gw=gw)["sequencer"]
                self.assertEqual(self.send(gw, "GET").status, 200)
                r = self.send(gw, "DELETE", path,
                              headers={"Fencing-Token": seq})
                self.assertEqual(r.status, 204, r)
                self.assertEqual(self.send(gw, "GET").body, b"abc")
                self.assertEqual([k for _, k, _ in o.requests()],
                                 [0, 1, 2])
