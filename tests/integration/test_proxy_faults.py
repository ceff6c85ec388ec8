"""test_proxy_faults.py - the proxy when things around it fail: the
upstream is down (502, health says so) or slow (504 without a response
head in time; a fenced write that cannot finish before its lease runs out
is aborted, never completed late), Redis is down (503 before anything is
forwarded), and a client leaves in the middle of its upload (nginx never
stores the truncated object)."""

import os
import socket
import threading
import time

from harness import slack, wait_until
from origins import StandIn
from storage import on_both_origins, RawRequest, StoreTestCase

MIB = 1 << 20


def _delay(req):
    return float(req.query.get("delay", "0"))


def slow_upstream(port):
    """A stand-in upstream on `port`, slow as each request's query says:
    ?mode=head&delay=S: reads the whole body, then waits S seconds
    before the response head (watching whether the gateway hangs up).
    ?mode=read&delay=S: waits S seconds before reading the body at all,
    then reads what arrives until Content-Length or EOF.
    ?mode=body&delay=S: answers a head for 100 bytes and 3 of them, then
    sends nothing more for S seconds (watching whether the gateway hangs
    up).
    Answered in full, a request gets 201 "ok"."""
    o = StandIn(port)
    o.on(hold=_delay, status=201, body=b"ok\n")
    o.on(path=lambda r: r.query.get("mode") == "read", read_after=_delay,
         status=201, body=b"ok\n")
    o.on(path=lambda r: r.query.get("mode") == "body",
         stall=lambda r: (3, _delay(r)), body=b"abc" + b"." * 97)
    return o.start()


def upload_in_background(port, method, path, headers, body):
    """Sends a request with its whole body from a thread, ignoring send
    errors (the gateway may answer and close early); the main thread reads
    the answer from the returned RawRequest."""
    rq = RawRequest(port, method, path, headers + [
        ("Content-Length", str(len(body)))])

    def pump():
        try:
            view = memoryview(body)
            for i in range(0, len(view), 1 << 16):
                rq.sock.sendall(view[i:i + (1 << 16)])
        except OSError:
            pass
    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return rq, t


@on_both_origins
class UpstreamDownTests(StoreTestCase):

    def test_upstream_down_gets_502_upstream_unavailable_and_health_says_so(self):
        env = self.start_store(("--upstream-connect-timeout-ms", "500"),
                               start_nginx=False)
        path = self.obj()
        g = self.grant(path)
        last = {}

        # health: the upstream down, Redis up once every loop can serve
        def down():
            last["r"] = self.gw.request("GET", "/_fence/v1/health")
            return last["r"].json == {"redis": "up", "upstream": "down"}
        self.assertTrue(wait_until(down, slack(3.0)), last.get("r"))
        self.assertEqual(last["r"].status, 503, last["r"])
        w = self.put(path, b"nowhere\n", g["sequencer"])
        self.assert_error(w, 502, "upstream_unavailable", "fenced PUT")
        self.assertLess(w.elapsed, slack(2.5))
        r = self.send("GET", path)
        self.assert_error(r, 502, "upstream_unavailable", "GET")
        # the checks still come first: a write refused by them is answered
        # as such, not as 502
        self.assert_error(self.send("PUT", path, b"x"), 428,
                          "token_required")
        # the upstream comes back: health and writes recover by themselves
        env.store.start()

        def up():
            last["r"] = self.gw.request("GET", "/_fence/v1/health")
            return last["r"].status == 200
        self.assertTrue(wait_until(up, slack(4.0)), last.get("r"))
        self.assertEqual(last["r"].json, {"redis": "up", "upstream": "up"})
        self.assertEqual(self.store.log(), [], "nginx was down: nothing "
                         "should be logged before now")
        w2 = self.put_ok(path, b"arrived\n", g["sequencer"])
        self.assert_stored(path, b"arrived\n")
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=w2.test_id))
        self.assertEqual([e.test_id for e in self.store.log()
                          if e.method == "PUT"], [w2.test_id])

    def test_stale_write_gets_409_not_502_while_the_upstream_is_down(self):
        self.start_store(start_nginx=False)
        path = self.obj()
        a = self.grant(path)
        self.release_ok(self.lock_of(path), a["lease"])
        self.grant(path)
        r = self.put(path, b"stale\n", a["sequencer"])
        self.assert_error(r, 409, "stale_token")


class RedisDownTests(StoreTestCase):

    def test_fenced_requests_get_503_lock_store_unavailable_and_nothing_reaches_nginx(self):
        env = self.start_store(("--redis-timeout-ms", "500",
                                "--forward-token", "yes"))
        path = self.obj()
        g = self.grant(path)
        self.put_ok(path, b"before\n", g["sequencer"])
        env.redis.kill()
        replies = []
        for method, body in (("PUT", b"during\n"), ("DELETE", None),
                             ("GET", None)):
            with self.subTest(method=method):
                r = self.send(method, path, body, token=g["sequencer"])
                replies.append(r)
                self.assert_error(r, 503, "lock_store_unavailable", method)
                ra = r.header("Retry-After")
                self.assertIsNotNone(ra, "503 without Retry-After")
                self.assertRegex(ra.strip(), r"^\d+$")
                self.assertLess(r.elapsed, 0.5 + slack(1.5))
        # an unfenced read needs no Redis
        plain = self.send("GET", path)
        self.assertEqual(plain.status, 200, plain)
        self.assertEqual(plain.body, b"before\n")
        self.assertTrue(self.store.wait_log(slack(2.0),
                                            test_id=plain.test_id))
        ids = {r.test_id for r in replies}
        self.assertEqual([e for e in self.store.log() if e.test_id in ids],
                         [])
        self.assert_stored(path, b"before\n")


class SlowUpstreamTests(StoreTestCase):

    def slow_env(self, flags):
        env = self.start_env(flags, upstream=False)
        self.slow = slow_upstream(env.upstream.port)
        self.addCleanup(self.slow.stop)
        self.gw = env.gw
        self.redis = env.redis
        # Env.start() waits for health only when it started the upstream
        # itself: wait here, or a first acquire may come before the
        # gateway has found Redis (a cluster's slot map takes a moment)
        self.assertTrue(env.gw.wait_healthy(slack(10.0)),
                        "the gateway did not get ready: " + env.gw.log_tail())
        return env

    def test_no_response_head_within_upstream_timeout_gets_504_upstream_timeout(self):
        self.slow_env(("--upstream-timeout-ms", "500"))
        r = self.send("GET", "/slow/get?mode=head&delay=3")
        self.assert_error(r, 504, "upstream_timeout", "GET")
        self.assertGreater(r.elapsed, 0.45)
        self.assertLess(r.elapsed, 0.5 + slack(1.5))
        g = self.grant("slow/put")
        w = self.put("/slow/put?mode=head&delay=3", b"body\n",
                     g["sequencer"])
        self.assert_error(w, 504, "upstream_timeout", "fenced PUT")
        self.assertLess(w.elapsed, 0.5 + slack(1.5))
        # the gateway hung up on the upstream at its timeout
        rec = self.slow.records_for("/slow/put")
        self.assertEqual(len(rec), 1, self.slow.records)
        self.assertTrue(wait_until(lambda: rec[0].get("done"), slack(4.0)))
        self.assertIsNotNone(rec[0]["hung_up_at"],
                             "the upstream connection stayed open")
        self.assertFalse(rec[0]["answered"])

    def test_response_body_that_stalls_for_upstream_timeout_is_cut_and_the_upstream_hung_up_on(self):
        # as nginx's proxy_read_timeout: the wait for more of the body is
        # bounded like the wait for the head
        self.slow_env(("--upstream-timeout-ms", "500"))
        s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=10)
        t0 = time.monotonic()
        s.sendall(b"GET /slow/body?mode=body&delay=8 HTTP/1.1\r\n"
                  b"Host: x\r\n\r\n")
        got = b""
        while True:
            try:
                d = s.recv(65536)
            except OSError:
                break
            if not d:
                break
            got += d
        elapsed = time.monotonic() - t0
        s.close()
        head, _, body = got.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), got)
        self.assertEqual(body, b"abc", got)       # cut short, not padded
        self.assertGreater(elapsed, 0.45)
        self.assertLess(elapsed, 0.5 + slack(2.0))
        rec = self.slow.records_for("/slow/body")
        self.assertEqual(len(rec), 1, self.slow.records)
        self.assertTrue(wait_until(lambda: rec[0].get("done"), slack(4.0)))
        self.assertIsNotNone(rec[0]["hung_up_at"],
                             "the upstream connection stayed open")
        self.assertTrue(self.gw.alive())

    def test_fenced_write_the_upstream_reads_too_slowly_is_aborted_at_its_deadline_not_completed_late(self):
        # margin 250 ms: the write must be done by ttl - 250 ms; the
        # upstream does not read its body before a second after the lease.
        # The lease leaves room for the grant's answer and the PUT's
        # admission on a loaded machine: the write must be admitted first
        ttl_ms = int(slack(2000))
        deadline_s = (ttl_ms - 250) / 1000.0
        self.slow_env(())
        t_asked = time.monotonic()   # the deadline runs from the grant
        g = self.grant("slow/late", ttl_ms=ttl_ms)
        t0 = time.monotonic()
        body = b"L" * (48 * MIB)
        rq, pump = upload_in_background(
            self.gw.port, "PUT", "/slow/late?mode=read&delay=%.1f"
            % (ttl_ms / 1000.0 + 1.0),
            [("Fencing-Token", g["sequencer"]), ("X-Test-Id", "late")],
            body)
        try:
            r = rq.read_response(slack(10.0) + ttl_ms / 1000.0)
            t_answer = time.monotonic() - t0
        finally:
            rq.close()
        self.assertIsNotNone(r, "no answer: the connection was closed")
        self.assert_error(r, 409, "stale_token", "write past its deadline")
        self.assertEqual(r.json.get("token"), g["token"])
        self.assertIn("aborted upstream", r.json["message"], r)
        self.assertGreater(t_answer + (t0 - t_asked), deadline_s - 0.25)
        self.assertLess(t_answer, deadline_s + slack(1.0))
        rec = self.slow.records_for("/slow/late")
        self.assertEqual(len(rec), 1, self.slow.records)
        self.assertTrue(wait_until(lambda: rec[0].get("done"), slack(8.0)),
                        "the upstream never finished reading")
        self.assertFalse(rec[0]["complete"], "the upstream received the "
                         "whole body of a write whose lease had run out")
        self.assertLess(rec[0]["got"], len(body))
        self.assertFalse(rec[0]["answered"])

    def test_fenced_write_without_a_response_head_by_its_deadline_gets_409_and_the_upstream_is_hung_up_on(self):
        self.slow_env(())
        g = self.grant("slow/head", ttl_ms=1000)
        r = self.put("/slow/head?mode=head&delay=3", b"small\n",
                     g["sequencer"])
        self.assert_error(r, 409, "stale_token")
        # its whole request had left: the answer does not claim it was
        # not applied
        self.assertIn("may have applied", r.json["message"], r)
        self.assertLess(r.elapsed, 0.75 + slack(1.0))
        rec = self.slow.records_for("/slow/head")
        self.assertEqual(len(rec), 1)
        self.assertTrue(wait_until(lambda: rec[0].get("done"), slack(5.0)))
        self.assertIsNotNone(rec[0]["hung_up_at"])
        self.assertLess(rec[0]["hung_up_at"] - rec[0]["t"],
                        0.75 + slack(0.5))
        self.assertFalse(rec[0]["answered"])


    def test_fenced_write_sent_whole_before_its_deadline_gets_the_storages_answer_within_the_margin(self):
        # ttl 4000 ms, margin 2000 ms: the deadline is at ~2.0 s. The whole
        # body left at once; the storage answers at ~2.5 s, inside the
        # margin the write's record still covers: that answer is passed
        # on, not "aborted" for a write the storage applied. The lease's
        # end leaves 1.5 s for the grant, the admission and the connect.
        self.slow_env(("--fence-margin-ms", "2000"))
        g = self.grant("slow/grace", ttl_ms=4000)
        r = self.put("/slow/grace?mode=head&delay=2.5", b"small\n",
                     g["sequencer"])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.body, b"ok\n")
        self.assertGreater(r.elapsed, 2.0)
        rec = self.slow.records_for("/slow/grace")
        self.assertEqual(len(rec), 1, self.slow.records)
        self.assertTrue(wait_until(lambda: rec[0].get("done"), slack(3.0)))
        self.assertTrue(rec[0]["answered"])
        self.assertIsNone(rec[0]["hung_up_at"])

    def test_stale_token_answer_of_a_write_aborted_at_its_deadline_has_token_and_current(self):
        # the contract's row: 409 stale_token, body also has "token" and
        # "current", whichever way the grant was found to be over
        self.slow_env(())
        g = self.grant("slow/body", ttl_ms=1000)
        r = self.put("/slow/body?mode=head&delay=2", b"small\n",
                     g["sequencer"])
        self.assert_error(r, 409, "stale_token")
        self.assertEqual(r.json.get("token"), g["token"], r)
        self.assertIn("current", r.json, r)
        self.assertIsInstance(r.json["current"], int, r)
        self.assertGreaterEqual(r.json["current"], g["token"], r)


@on_both_origins
class ClientGoneTests(StoreTestCase):

    def setUp(self):
        super().setUp()
        self.use_shared()

    def gone_mid_body(self, path, chunked, reset):
        g = self.grant(path)
        tid = "gone-%d" % time.monotonic_ns()
        hdrs = [("Fencing-Token", g["sequencer"]), ("X-Test-Id", tid)]
        size = 4 * MIB
        hdrs.append(("Transfer-Encoding", "chunked") if chunked
                    else ("Content-Length", str(size)))
        spooled = set(self.store.body_temp_files())
        rq = RawRequest(self.gw.port, "PUT", path, hdrs)
        half = os.urandom(size // 2)
        if chunked:
            for i in range(0, len(half), 256 * 1024):
                rq.send_chunk(half[i:i + 256 * 1024])
        else:
            rq.send(half)
        # the upstream request is under way before the client leaves: the
        # store spools its body (the sockets alone hold two MiB)
        self.wait_for(lambda: set(self.store.body_temp_files()) - spooled,
                      slack(5.0), "the store to receive the upload")
        if reset:
            rq.abort()
        else:
            rq.close()
        hits = self.store.wait_log(slack(5.0), test_id=tid)
        self.assertEqual(len(hits), 1, "nginx never saw the upload end: %r"
                         % hits)
        self.assertFalse(hits[0].applied, "nginx completed a truncated "
                         "upload: %r" % hits[0])
        self.assertLess(hits[0].request_length, size)
        self.assert_absent(path, "after the client left mid-body")
        self.assertTrue(wait_until(lambda: not self.store.body_temp_files(),
                                   slack(2.0)))
        # the aborted write does not hold up the next one
        w = self.put(path, b"whole\n", g["sequencer"])
        self.assertEqual(w.status, 201, w)
        self.assertLess(w.elapsed, slack(1.0))
        self.assert_stored(path, b"whole\n")

    def test_client_closing_mid_content_length_body_leaves_no_object(self):
        self.gone_mid_body(self.obj("cl", ext=".bin"), False, False)

    def test_client_resetting_mid_content_length_body_leaves_no_object(self):
        self.gone_mid_body(self.obj("rst", ext=".bin"), False, True)

    def test_client_closing_mid_chunked_body_leaves_no_object(self):
        self.gone_mid_body(self.obj("chunked", ext=".bin"), True, False)
