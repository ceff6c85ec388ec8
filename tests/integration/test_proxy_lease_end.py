"""test_proxy_lease_end.py - every end of a lease reaches its writes: a release, a break or
an expiry ends the writes admitted under the grant; writes waiting for
admission cost nothing while nothing changes; and waiters queued behind
a lock are served in order.

The shared base (FenceCase: a gateway in front of a real store, the raw
requests and slow uploads these tests send) is fencecase.py."""

import json
import socket
import time
import uuid

import harness
from harness import LOCKS, slack, wait_until
from storage import on_both_origins, RawRequest
from fencecase import (FenceCase, MIB, SlowUpload, given_back_total, head_bytes, refused_total, script_calls)


@on_both_origins
class ReleaseTests(FenceCase):

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

    def test_release_ends_writes_and_the_blocked_next_holder_writes_promptly(self):
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

    def test_release_ends_writes_and_an_acquire_right_after_writes_promptly(self):
        path = self.obj("release-cl", ext=".bin")
        lock = self.lock_of(path)
        a = super().grant(path, ttl_ms=30000)
        up, tid = self.start_old_write(path, a, total=4 * MIB)
        t_release = time.monotonic()
        self.release_ok(lock, a["lease"])
        b = self.grant(path, ttl_ms=10000)
        self.next_holder_writes_promptly(path, b, up, tid, t_release,
                                         b"acquired right after the release\n")

    def test_release_through_another_gateway_ends_writes(self):
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

    def test_release_of_one_of_two_holds_does_not_end_writes(self):
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


class WaitingWriteCostTests(FenceCase):
    """Two gateways on one Redis. A write admitted on gateway 1 is in
    flight when gateway 1 is paused (SIGSTOP), and its grant is released
    through gateway 2: gateway 1 cannot end it, so writes under the next
    holder's token must wait, at most the margin after the release. A
    large fence-margin-ms keeps them waiting through every measurement."""

    WAITERS = 50
    MARGIN_S = 10.0

    def test_waiting_writes_cost_redis_nothing_while_nothing_changes(self):
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


    def test_a_write_refused_after_waiting_is_counted_as_a_fence_refusal(self):
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


class WaiterTests(FenceCase):

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

    def test_departed_waiter_never_gets_the_lock(self):
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

    def test_grant_nobody_received_is_given_back(self):
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


    def test_reentry_whose_client_closed_is_taken_back_whole(self):
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

    def test_grant_to_a_waiter_whose_gateway_died_is_not_held_for_its_ttl(self):
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

    def test_try_once_grant_whose_client_closed_is_given_back(self):
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
