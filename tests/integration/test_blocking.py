"""test_blocking.py - blocked acquires (wait_ms > 0): FIFO grants, one
wake-up per release, waiters that leave (timeout, closed socket), hand-over
on expiry, and the per-lock queue bound."""

import json
import socket
import time

import harness
from harness import (LOCKS, RespClient, TestCase, slack, wait_lock_free,
                     wait_until)


class BlockingTests(TestCase):

    def test_blocked_acquire_on_free_lock_is_granted_at_once(self):
        name = self.lock_name()
        r = self.acquire(name, body={"wait_ms": 10000})
        self.assertEqual(r.status, 200, r)
        self.assertLess(r.elapsed, slack(1.0))

    def test_waiter_is_granted_when_the_holder_releases(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        w = self.waiter(name, wait_ms=10000, ttl_ms=7000)
        self.wait_waiters(name, 1)
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(w.done)
        t_rel = time.monotonic()
        self.release_ok(name, g["lease"])
        r = w.result(slack(3.0))
        self.assertEqual(r.status, 200, r)
        self.assertLess(w.t_end - t_rel, slack(1.0))
        b = r.json
        self.assert_lease(b["lease"])
        self.assertNotEqual(b["lease"], g["lease"])
        self.assertGreater(b["token"], g["token"])
        self.assertEqual(b["ttl_ms"], 7000)
        self.assertEqual(b["mode"], "exclusive")
        self.assertEqual(b["holds"], 1)
        self.assertEqual(b["name"], name)
        s = self.state(name)
        self.assertEqual(s["token"], b["token"])
        self.assertEqual(s["waiters"], 0)
        self.assertIs(self.check_ok(b["sequencer"])["valid"], True)
        self.release_ok(name, b["lease"])

    def test_waiters_are_granted_in_fifo_order_of_arrival(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        ws = []
        for i in range(5):
            ws.append(self.waiter(name, wait_ms=20000, owner="w%d" % i))
            # queued (its place in Redis taken) before the next one comes
            self.wait_waiters(name, i + 1)
        lease = g["lease"]
        order = []
        last_token = g["token"]
        for _ in range(5):
            self.release_ok(name, lease)
            got = self.wait_for(
                lambda: [i for i, w in enumerate(ws)
                         if w.done and i not in order], slack(3.0),
                "a waiter to be granted")
            self.assertEqual(len(got), 1, "one release woke %r" % got)
            i = got[0]
            order.append(i)
            r = ws[i].resp
            self.assertEqual(r.status, 200, r)
            self.assertGreater(r.json["token"], last_token)
            last_token = r.json["token"]
            lease = r.json["lease"]
        self.assertEqual(order, [0, 1, 2, 3, 4])
        self.release_ok(name, lease)

    def test_release_wakes_exactly_the_next_waiter(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        ws = []
        for i in range(3):
            ws.append(self.waiter(name, wait_ms=20000))
            self.wait_waiters(name, i + 1)
        self.release_ok(name, g["lease"])
        r0 = ws[0].result(slack(3.0))
        self.assertEqual(r0.status, 200)
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(ws[1].done)
        self.assertFalse(ws[2].done)
        s = self.state(name)
        self.assertEqual(s["waiters"], 2)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], r0.json["token"])
        self.release_ok(name, r0.json["lease"])
        r1 = ws[1].result(slack(3.0))
        self.assertEqual(r1.status, 200)
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(ws[2].done)
        self.assertEqual(self.state(name)["waiters"], 1)
        self.release_ok(name, r1.json["lease"])
        self.assertEqual(ws[2].result(slack(3.0)).status, 200)
        self.assertEqual(self.state(name)["waiters"], 0)

    def test_wait_ms_expiry_returns_409_lock_held_after_about_wait_ms(self):
        name = self.lock_name()
        self.acquire_ok(name)
        w = self.waiter(name, wait_ms=600)
        r = w.result(slack(5.0))
        self.assert_error(r, 409, "lock_held")
        dt = w.t_end - w.t_start
        self.assertGreaterEqual(dt, 0.55)
        self.assertLess(dt, 0.6 + slack(1.0))

    @harness.single_redis("pauses its redis-server's writers")
    def test_waiter_whose_client_closes_before_it_is_queued_leaves_the_queue(self):
        # The client leaves while its acquire is on its way through Redis
        # (its connection suspended, nobody reading it): Redis queues it
        # afterwards and answers. Whoever sees the close first, the
        # daemon before the handler runs again or the waiter's park, its
        # place must go back.
        name = self.lock_name()
        g = self.acquire_ok(name)
        body = json.dumps({"wait_ms": 20000, "ttl_ms": 60000}).encode()
        with RespClient(self.redis.port) as rc:
            def postponed():
                return [ln for ln in rc.command("CLIENT", "LIST").decode().splitlines()
                        if " cmd=fcall " in ln and "flags=b" in ln]
            self.assertEqual(postponed(), [], "a call already postponed")
            self.assertEqual(rc.command("CLIENT", "PAUSE", "1000", "WRITE"), "OK")
            s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
            self.addCleanup(s.close)
            s.sendall(b"POST " + (LOCKS + name).encode() + b" HTTP/1.1\r\n"
                      b"Host: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            self.assertTrue(wait_until(lambda: postponed() != [], slack(0.9), 0.005),
                            "the acquire never reached Redis during the pause")
            s.close()
            self.assertTrue(wait_until(lambda: postponed() == [], slack(5.0), 0.02),
                            "the acquire stayed postponed")
        t_run = time.monotonic()
        self.wait_waiters(name, 0, timeout=slack(1.5))
        self.assertLess(time.monotonic() - t_run, slack(1.5))
        self.release_ok(name, g["lease"])
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(self.state(name)["held"], "lock granted to a closed connection")

    def test_waiter_that_timed_out_leaves_the_queue(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        w = self.waiter(name, wait_ms=300)
        self.assertEqual(w.result(slack(5.0)).status, 409)
        self.wait_waiters(name, 0)
        self.release_ok(name, g["lease"])
        s = self.state(name)
        self.assertFalse(s["held"], "lock granted to a timed-out waiter")

    def test_waiter_whose_client_closes_the_socket_leaves_the_queue_within_1s(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        body = json.dumps({"wait_ms": 20000, "ttl_ms": 60000}).encode()
        s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        s.sendall(b"POST " + (LOCKS + name).encode() + b" HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.wait_waiters(name, 1)
        t_close = time.monotonic()
        s.close()
        self.wait_waiters(name, 0, timeout=slack(1.5))
        self.assertLess(time.monotonic() - t_close, slack(1.5))
        # the lock is not handed to the departed waiter
        self.release_ok(name, g["lease"])
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        st = self.state(name)
        self.assertFalse(st["held"], "lock granted to a closed connection")
        self.acquire_ok(name)

    def test_departed_waiter_does_not_hold_up_the_one_behind_it(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        body = json.dumps({"wait_ms": 20000}).encode()
        s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        s.sendall(b"POST " + (LOCKS + name).encode() + b" HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.wait_waiters(name, 1)
        w = self.waiter(name, wait_ms=20000)
        self.wait_waiters(name, 2)
        s.close()
        self.wait_waiters(name, 1, timeout=slack(1.5))
        self.release_ok(name, g["lease"])
        r = w.result(slack(3.0))
        self.assertEqual(r.status, 200, r)

    def test_expired_lock_is_handed_to_the_waiter_within_ttl_plus_slack(self):
        name = self.lock_name()
        t_req = time.monotonic()
        g = self.acquire_ok(name, ttl_ms=500)
        w = self.waiter(name, wait_ms=10000)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.assertGreater(r.json["token"], g["token"])
        dt = w.t_end - t_req
        self.assertGreaterEqual(dt, 0.45, "granted before the holder expired")
        self.assertLess(dt, 0.5 + slack(0.7))

    def test_waiter_gets_its_own_ttl_and_mode(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        ttl_s = slack(1.5)       # long enough to be inspected when loaded
        w = self.waiter(name, wait_ms=10000, ttl_ms=int(ttl_s * 1000),
                        mode="shared", value="from-waiter")
        self.wait_waiters(name, 1)
        self.release_ok(name, g["lease"])
        r = w.result(slack(3.0))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["mode"], "shared")
        self.assertEqual(r.json["ttl_ms"], int(ttl_s * 1000))
        s = self.state(name)
        self.assertEqual(s["mode"], "shared")
        self.assertEqual(s.get("value"), "from-waiter")
        # free by the waiter's own ttl_ms (and 200 ms) after its grant, as
        # before, but seen as soon as it is
        wait_lock_free(self, name, max(0.0, w.t_end + ttl_s + 0.2
                                       - time.monotonic()))

    def test_waiter_queued_on_free_but_delayed_lock_is_granted_after_delay(self):
        name = self.lock_name()
        self.acquire_ok(name, ttl_ms=200, lock_delay_ms=600)
        wait_lock_free(self, name)    # its lease over, its lock-delay not
        t0 = time.monotonic()
        w = self.waiter(name, wait_ms=5000)
        r = w.result(slack(5.0))
        self.assertEqual(r.status, 200, r)
        self.assertLess(w.t_end - t0, 0.6 + slack(1.0))

    def test_try_once_does_not_join_the_queue(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        for _ in range(3):
            self.assert_error(self.acquire(name, body={"wait_ms": 0}), 409,
                              "lock_held")
        self.assertEqual(self.state(name)["waiters"], 0)
        self.release_ok(name, g["lease"])
        self.assertFalse(self.state(name)["held"])

    def test_try_once_does_not_jump_the_queue_when_lock_becomes_free(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        w = self.waiter(name, wait_ms=10000)
        self.wait_waiters(name, 1)
        self.release_ok(name, g["lease"])
        r = self.acquire(name, body={})
        wr = w.result(slack(3.0))
        self.assertEqual(wr.status, 200, "the queued waiter lost the lock")
        self.assert_error(r, 409, "lock_held")

    def test_blocked_waiters_do_not_block_other_requests(self):
        names = [self.lock_name("held%d" % i) for i in range(12)]
        ws = []
        for n in names:
            self.acquire_ok(n)
            ws.append(self.waiter(n, wait_ms=10000))
        for n in names:
            self.wait_waiters(n, 1)
        t0 = time.monotonic()
        other = self.lock_name("free")
        g = self.acquire_ok(other)
        self.state(other)
        self.release_ok(other, g["lease"])
        self.assertEqual(self.health().status, 200)
        self.assertLess(time.monotonic() - t0, slack(1.0))

    def test_waiters_on_different_locks_are_independent(self):
        a, b = self.lock_name("a"), self.lock_name("b")
        ga, gb = self.acquire_ok(a), self.acquire_ok(b)
        wa, wb = self.waiter(a, wait_ms=10000), self.waiter(b, wait_ms=10000)
        self.wait_waiters(a, 1)
        self.wait_waiters(b, 1)
        self.release_ok(b, gb["lease"])
        self.assertEqual(wb.result(slack(3.0)).status, 200)
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(wa.done)
        self.release_ok(a, ga["lease"])
        self.assertEqual(wa.result(slack(3.0)).status, 200)

    def test_exclusive_waiter_waits_for_all_shared_holders(self):
        name = self.lock_name()
        a = self.acquire_ok(name, mode="shared")
        b = self.acquire_ok(name, mode="shared")
        w = self.waiter(name, wait_ms=10000)
        self.wait_waiters(name, 1)
        self.release_ok(name, a["lease"])
        # a window for a wrong grant to show: no event marks its absence
        time.sleep(0.2)
        self.assertFalse(w.done)
        self.release_ok(name, b["lease"])
        r = w.result(slack(3.0))
        self.assertEqual(r.status, 200)
        self.assertGreater(r.json["token"], a["token"])

    def test_inspect_waiters_count_drops_by_one_per_release(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        ws = []
        for i in range(4):
            ws.append(self.waiter(name, wait_ms=10000))
            self.wait_waiters(name, i + 1)
        self.assertEqual(self.state(name)["holders"], 1)
        lease = g["lease"]
        for i, left in enumerate((3, 2, 1, 0)):
            self.release_ok(name, lease)
            r = ws[i].result(slack(3.0))
            self.assertEqual(r.status, 200, r)
            s = self.state(name)
            self.assertEqual(s["waiters"], left, s)
            self.assertEqual(s["holders"], 1, s)
            lease = r.json["lease"]
        self.release_ok(name, lease)


class MaxWaitersTests(TestCase):
    gateway_flags = ("--max-waiters", "2")

    def test_waiter_beyond_max_waiters_gets_429_too_many_waiters(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        w1 = self.waiter(name, wait_ms=10000)
        self.wait_waiters(name, 1)
        w2 = self.waiter(name, wait_ms=10000)
        self.wait_waiters(name, 2)
        r = self.acquire(name, body={"wait_ms": 10000})
        self.assert_error(r, 429, "too_many_waiters")
        self.assertLess(r.elapsed, slack(1.0))
        self.assertEqual(self.state(name)["waiters"], 2)
        self.release_ok(name, g["lease"])
        r1 = w1.result(slack(3.0))
        self.assertEqual(r1.status, 200)
        self.release_ok(name, r1.json["lease"])
        self.assertEqual(w2.result(slack(3.0)).status, 200)

    def test_max_waiters_is_per_lock(self):
        a, b = self.lock_name("a"), self.lock_name("b")
        self.acquire_ok(a)
        self.acquire_ok(b)
        for _ in range(2):
            self.waiter(a, wait_ms=5000)
        self.wait_waiters(a, 2)
        self.waiter(b, wait_ms=5000)
        self.wait_waiters(b, 1)

    def test_queue_accepts_again_after_a_waiter_left(self):
        name = self.lock_name()
        self.acquire_ok(name)
        # the first waiter leaves at its wait_ms, long enough for the
        # second to queue and the third to be refused on a loaded machine
        leaving_s = slack(2.0)
        self.waiter(name, wait_ms=int(leaving_s * 1000))
        self.waiter(name, wait_ms=10000)
        self.wait_waiters(name, 2)
        self.assert_error(self.acquire(name, body={"wait_ms": 10000}), 429,
                          "too_many_waiters")
        self.wait_waiters(name, 1, timeout=leaving_s + slack(3.0))
        self.waiter(name, wait_ms=5000)
        self.wait_waiters(name, 2)
