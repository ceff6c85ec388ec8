"""test_drain.py - contract v1.3 "Stopping" and "Readiness", against the
real processes (redis-server, an nginx WebDAV store, fencegate):

- SIGTERM drains: readiness is 503 at once and requests are still served
  during drain-delay-ms; then the gateway stops accepting (a new
  connection is refused), parked acquires and observers, and a write
  waiting for an older write of its lock, are answered 503 shutting_down
  with Retry-After, while a lock call held in Redis and a
  slow chunked upload to nginx finish: the call is answered 200, the
  upload lands whole, and the process exits 0 once they are done.
- An upload still running at drain-timeout-ms is ended as at a lease's
  end: nothing of it lands at the store, the process exits 0 no sooner
  than the bound, and the log says how many requests were ended.
- A second SIGTERM ends at once, whether it comes during drain-delay-ms
  or while the drain waits for an upload; SIGINT drains like SIGTERM.
- Readiness is 200 with Redis down unless `readyz-requires redis` is set
  (then 503 naming Redis); health still says Redis is down either way.

The uploads drip from a thread of this process until the test ends them,
so a gateway that cuts one short, or one that waits for it, is seen
whatever the machine's load; no sleep stands in for a synchronisation.
"""

import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid

import harness
import matrix
from harness import LOCKS, slack, wait_until
from storage import RawRequest, StoreTestCase
from test_request_path import (client_list, node_command, node_port_of,
                         recorded_writes)

FIRST_CHUNK = 1 << 20          # 1 MiB at once, then a drip
DRIP_EVERY_S = 0.05


def blocked_fcalls(port):
    """Clients of one Redis blocked in an FCALL (CLIENT PAUSE holds it)."""
    return [f for f in client_list(port)
            if f.get("cmd") == "fcall" and "b" in f.get("flags", "")]


class Upload:
    """A chunked PUT through the gateway that this test paces: 1 MiB at
    once, then a small chunk every DRIP_EVERY_S from a thread until
    finish() or a send error. `sent` is every body byte handed over."""

    def __init__(self, port, path, token):
        self.test_id = uuid.uuid4().hex
        self.rq = RawRequest(port, "PUT", path, [
            ("Fencing-Token", token), ("X-Test-Id", self.test_id),
            ("Transfer-Encoding", "chunked")])
        first = os.urandom(FIRST_CHUNK // 2).hex().encode()
        self.sent = bytearray()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.broken = False
        self._send(first)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _send(self, data):
        with self._lock:
            self.rq.send_chunk(data)
            self.sent += data

    def _run(self):
        i = 0
        while not self._stop.wait(DRIP_EVERY_S):
            i += 1
            try:
                self._send(b"drip %06d\n" % i)
            except OSError:
                self.broken = True
                return

    def stop(self):
        self._stop.set()
        self.thread.join(slack(5.0))

    def finish(self, timeout):
        """Ends the body; the gateway's answer, or None if it closed."""
        self.stop()
        try:
            with self._lock:
                self.rq.send_chunk(b"last\n")
                self.sent += b"last\n"
                self.rq.end_chunks()
        except OSError:
            return None
        return self.rq.read_response(timeout)

    def close(self):
        self.stop()
        self.rq.close()


class DrainTests(StoreTestCase):
    """Each test stops its own gateway."""

    def start_gateway(self, *flags):
        env = self.start_store(flags=["--log-level", "info",
                                      "--redis-timeout-ms", "20000"]
                               + list(flags))
        return env.gw

    def log_text(self, g):
        with open(g.logpath, "r", errors="replace") as f:
            return f.read()

    def wait_log(self, g, pattern, what, timeout=None):
        rx = re.compile(pattern)
        self.wait_for(lambda: rx.search(self.log_text(g)),
                      timeout or slack(5.0), what)

    def wait_exit(self, g, timeout, what="fencegate to exit"):
        try:
            rc = g.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.fail("%s: still running %.1f s later" % (what, timeout))
        g.stopped_rc = rc
        # it is meant to have exited: not a gateway that died
        self.env.gateways.remove(g)
        report = g.sanitizer_report()
        self.assertIsNone(report, "sanitizer report:\n%s" % report)
        return rc

    def refused(self, g):
        """Is a new connection to the gateway refused?"""
        try:
            s = socket.create_connection(("127.0.0.1", g.port), timeout=2.0)
        except ConnectionRefusedError:
            return True
        s.close()
        return False

    def upload(self, g, path, token):
        spooled = set(self.store.body_temp_files())
        up = Upload(g.port, path, token)
        self.addCleanup(up.close)
        self.wait_for(lambda: recorded_writes(self.redis, self.lock_of(path))
                      == 1, slack(5.0), "the upload to be admitted")
        self.wait_for(lambda: set(self.store.body_temp_files()) - spooled,
                      slack(5.0), "the upload to reach nginx")
        return up

    def park_waiter_and_observer(self, g, lock, token, **fields):
        """A blocked acquire and an observer of `lock` (held with `token`)
        on gateway g, both parked; returns their calls."""
        waiter = self.waiter(lock, gw=g, wait_ms=60000, **fields)
        self.wait_waiters(lock, 1, gw=g)
        observer = self.call("GET", "%s?wait_ms=60000&after=%d"
                             % (lock, token), gw=g, timeout=slack(70.0))

        def observers():
            m = g.request("GET", "/_fence/v1/metrics").body.decode()
            found = re.search(r'^fencegate_waiters\{kind="observe"\} (\d+)$',
                              m, re.M)
            return found and int(found.group(1)) == 1
        self.wait_for(observers, slack(5.0), "the observer to park")
        return waiter, observer

    def assert_shutting_down(self, r, what):
        self.assert_error(r, 503, "shutting_down", what)
        self.assertIsNotNone(r.header("Retry-After"), "%s: %r" % (what, r))

    # -- a drain that ends by itself ----------------------------------------

    def test_sigterm_answers_waiters_503_shutting_down_lets_a_lock_call_and_an_upload_finish_and_exits_0(self):
        g = self.start_gateway("--drain-timeout-ms", "120000")
        # a blocked acquire and an observer, parked
        wlock = self.lock_name("waited")
        held = self.acquire_ok(wlock, gw=g, ttl_ms=60000)
        waiter, observer = self.park_waiter_and_observer(
            g, wlock, held["token"], ttl_ms=5000)
        # an upload streaming to nginx
        path = self.obj("streaming")
        a = self.grant(path, gw=g, ttl_ms=120000)
        up = self.upload(g, path, a["sequencer"])
        # a renewal held in Redis: the server of its lock runs no write
        # until unpaused
        clock = self.lock_name("renewed")
        c = self.acquire_ok(clock, gw=g, ttl_ms=60000)
        node = node_port_of(self.redis, clock)
        self.assertEqual(node_command(node, "CLIENT", "PAUSE", "60000",
                                      "WRITE"), "OK")
        self.addCleanup(node_command, node, "CLIENT", "UNPAUSE")
        renew = self.call("PATCH", clock, body={"lease": c["lease"],
                                                "ttl_ms": 60000}, gw=g,
                          timeout=slack(60.0))
        self.wait_for(lambda: blocked_fcalls(node), slack(5.0),
                      "the renewal to be held in Redis")

        t_term = time.monotonic()
        g.proc.send_signal(signal.SIGTERM)
        # parked calls: 503 shutting_down, at once
        w = waiter.result(slack(5.0))
        self.assert_shutting_down(w, "the parked acquire")
        self.assertLess(waiter.t_end - t_term, slack(2.0))
        o = observer.result(slack(5.0))
        self.assert_shutting_down(o, "the parked observer")
        # no longer accepting (drain-delay-ms is 0)
        self.wait_log(g, r"draining: no longer accepting",
                      "the gateway to stop accepting")
        self.assertTrue(self.refused(g), "a new connection was accepted "
                        "while draining")
        # what is in flight goes on: the process waits for it
        self.assertFalse(renew.done, "the held renewal was answered: %r"
                         % renew.resp)
        self.assertIsNone(g.proc.poll(), "fencegate exited with a renewal "
                          "and an upload in flight")
        self.assertEqual(node_command(node, "CLIENT", "UNPAUSE"), "OK")
        r = renew.result(slack(10.0))
        self.assertEqual(r.status, 200, "the renewal in flight: %r" % r)
        # the upload still streams, and lands whole
        self.assertFalse(up.broken, "the upload was cut while draining")
        done = up.finish(slack(10.0))
        self.assertIsNotNone(done, "the gateway closed the upload")
        self.assertIn(done.status, (201, 204), "the upload: %r" % done)
        self.assertEqual(self.wait_exit(g, slack(10.0)), 0)
        self.assert_stored(path, bytes(up.sent), "the upload in flight")
        log = self.log_text(g)
        self.assertIn("drained: every request in flight finished", log)
        self.assertNotIn(held["lease"], log)
        self.assertNotIn(c["lease"], log)

    def test_sigint_drains_like_sigterm(self):
        g = self.start_gateway("--drain-timeout-ms", "120000")
        wlock = self.lock_name("waited")
        self.acquire_ok(wlock, gw=g, ttl_ms=60000)
        waiter = self.waiter(wlock, gw=g, wait_ms=60000)
        self.wait_waiters(wlock, 1, gw=g)
        path = self.obj("streaming")
        a = self.grant(path, gw=g, ttl_ms=120000)
        up = self.upload(g, path, a["sequencer"])
        g.proc.send_signal(signal.SIGINT)
        self.assert_shutting_down(waiter.result(slack(5.0)),
                                  "the parked acquire")
        self.wait_log(g, r"draining: no longer accepting",
                      "the gateway to stop accepting")
        self.assertIsNone(g.proc.poll(), "fencegate exited with an upload "
                          "in flight")
        done = up.finish(slack(10.0))
        self.assertIsNotNone(done, "the gateway closed the upload")
        self.assertIn(done.status, (201, 204), "the upload: %r" % done)
        self.assertEqual(self.wait_exit(g, slack(10.0)), 0)
        self.assert_stored(path, bytes(up.sent), "the upload in flight")

    @harness.single_redis("stops the one redis-server")
    def test_sigterm_with_redis_down_answers_waiters_shutting_down_not_redis_down(self):
        env = self.start_store(flags=["--redis-timeout-ms", "500"])
        g = env.gw
        wlock = self.lock_name("waited")
        held = self.acquire_ok(wlock, gw=g, ttl_ms=60000)
        waiter, observer = self.park_waiter_and_observer(
            g, wlock, held["token"])
        env.redis.stop()
        self.wait_for(lambda: g.request("GET", "/_fence/v1/health").status
                      == 503, slack(5.0), "health to say Redis is down")
        g.proc.send_signal(signal.SIGTERM)
        # the stop is the gateway's own: never blamed on Redis
        self.assert_shutting_down(waiter.result(slack(5.0)),
                                  "the parked acquire")
        self.assert_shutting_down(observer.result(slack(5.0)),
                                  "the parked observer")
        self.assertEqual(self.wait_exit(g, slack(10.0)), 0)

    def test_a_write_waiting_for_an_older_write_is_answered_503_shutting_down_and_never_forwarded(self):
        # a margin of a minute: the cut write's record holds newer tokens
        # back that long, so the newer write waits until the stop
        g = self.start_gateway("--fence-margin-ms", "60000")
        path = self.obj("ordered")
        lock = self.lock_of(path)
        old = self.grant(path, gw=g, ttl_ms=180000)
        up = self.upload(g, path, old["sequencer"])
        # the release cuts the older write; its record runs on
        self.release_ok(lock, old["lease"], gw=g)
        self.wait_log(g, r"ended by a release: aborted upstream",
                      "the released write to be cut off")
        up.close()   # its client leaves: nothing of it is in flight
        new = self.grant(path, gw=g, ttl_ms=180000)
        tid = uuid.uuid4().hex
        out = {}

        def put():
            out["r"] = self.send("PUT", path, b"newer\n", gw=g,
                                 token=new["sequencer"], test_id=tid,
                                 timeout=slack(60.0))
        t = threading.Thread(target=put, daemon=True)
        t.start()

        def admit_waiters():
            m = g.request("GET", "/_fence/v1/metrics").body.decode()
            found = re.search(r'^fencegate_waiters\{kind="admit"\} (\d+)$',
                              m, re.M)
            return found and int(found.group(1)) == 1
        self.wait_for(admit_waiters, slack(5.0),
                      "the newer write to wait for the older one")
        g.proc.send_signal(signal.SIGTERM)
        t.join(slack(5.0))
        self.assertFalse(t.is_alive(), "the waiting write was not answered")
        self.assert_shutting_down(out["r"], "the waiting write")
        self.assertEqual(self.wait_exit(g, slack(10.0)), 0)
        self.assertEqual(self.store.log_for(test_id=tid), [],
                         "the waiting write reached nginx")
        self.assert_absent(path, "the cut and the refused write")

    # -- drain-delay-ms -------------------------------------------------------

    def test_readyz_is_503_during_drain_delay_while_requests_are_still_served_and_a_second_sigterm_ends_at_once(self):
        g = self.start_gateway("--drain-delay-ms", "600000")
        self.assertEqual(g.request("GET", "/_fence/v1/readyz").status, 200)
        # health is what the maintenance thread last found: let it find
        # both up before the drain, whose health must stay 200
        self.assertTrue(g.wait_healthy(slack(5.0)), "health never 200")
        path = self.obj("during-delay")
        g.proc.send_signal(signal.SIGTERM)
        self.wait_log(g, r"signal 15: draining", "the drain to begin")
        r = g.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json["status"], "not_ready", r)
        self.assertEqual(r.json["reason"], "shutting down", r)
        # an error body like every other, and a time to ask again
        self.assertEqual((r.json["error"], r.json["message"]),
                         ("shutting_down", "shutting down"), r)
        self.assertEqual(r.header("Retry-After"), "1", r)
        # still accepting and serving: a new connection, a lock call, a
        # fenced write, a read, health
        a = self.grant(path, gw=g, ttl_ms=30000)
        self.put_ok(path, b"written during drain-delay\n", a["sequencer"],
                    gw=g)
        got = self.send("GET", path, gw=g)
        self.assertEqual((got.status, got.body),
                         (200, b"written during drain-delay\n"))
        self.assertEqual(g.request("GET", "/_fence/v1/health").status, 200)
        self.release_ok(self.lock_of(path), a["lease"], gw=g)
        # a parked waiter during the delay is not answered yet
        wlock = self.lock_name("waited")
        self.acquire_ok(wlock, gw=g, ttl_ms=60000)
        waiter = self.waiter(wlock, gw=g, wait_ms=60000)
        self.wait_waiters(wlock, 1, gw=g)
        self.assertFalse(waiter.done, "a waiter was answered during "
                         "drain-delay-ms: %r" % waiter.resp)
        # the second SIGTERM: at once
        t0 = time.monotonic()
        g.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_exit(g, slack(5.0)), 0)
        self.assertLess(time.monotonic() - t0, slack(5.0))
        w = waiter.result(slack(5.0))
        self.assert_shutting_down(w, "the parked acquire")
        self.assertIn("a second stop signal", self.log_text(g))

    @harness.single_redis("pauses the one redis-server")
    def test_a_second_sigterm_ends_at_once_while_redis_takes_calls_and_never_answers(self):
        # the gateway's own calls to Redis (its maintenance thread's ping)
        # wait up to redis-timeout-ms, 20 s here: a second signal does
        # not wait for them
        g = self.start_gateway()
        self.env.redis.pause()
        self.addCleanup(self.env.redis.resume)
        # a ping is under way, and unanswered: bytes the gateway sent wait
        # unread on the paused Redis' side of one of its connections
        rport = self.env.redis.port

        def unanswered():
            mine = harness.tcp_local_ports(g.proc.pid, {rport})
            return any(unread for _, unread in
                       harness.tcp_server_side(rport, mine).values())
        t_paused = time.monotonic()
        self.wait_for(unanswered, slack(5.0),
                      "the gateway to send the paused Redis a call")
        # that call may be a loop's; the maintenance thread pings once a
        # second (nothing outside tells its connection from the loops'),
        # so 1.5 s (scaled) after the pause one of its pings is among them
        time.sleep(max(0.0, t_paused + slack(1.5) - time.monotonic()))
        g.proc.send_signal(signal.SIGTERM)
        self.wait_log(g, r"signal 15: draining", "the drain to begin")
        t0 = time.monotonic()
        g.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_exit(g, slack(5.0)), 0)
        self.assertLess(time.monotonic() - t0, slack(2.0))
        self.assertIn("a second stop signal", self.log_text(g))

    # -- drain-timeout-ms ----------------------------------------------------

    def test_an_upload_still_running_at_drain_timeout_is_ended_and_nothing_of_it_lands(self):
        bound_s = 1.5
        g = self.start_gateway("--drain-timeout-ms", str(int(bound_s * 1000)))
        path = self.obj("cut")
        a = self.grant(path, gw=g, ttl_ms=120000)
        up = self.upload(g, path, a["sequencer"])
        # the bound runs from the signal: the lower bound is judged from
        # just before it was sent, whatever the stop's log line took
        t_sent = time.monotonic()
        g.proc.send_signal(signal.SIGTERM)
        self.wait_log(g, r"draining: no longer accepting",
                      "the gateway to stop accepting")
        rc = self.wait_exit(g, bound_s + slack(10.0))
        t_exit = time.monotonic()
        self.assertEqual(rc, 0)
        # it waited for the bound: the upload kept streaming until then
        self.assertGreater(t_exit - t_sent, bound_s - 0.05,
                           "fencegate exited %.2f s after the signal, "
                           "before drain-timeout-ms" % (t_exit - t_sent))
        r = up.finish(slack(5.0))
        # answered (if at all) as the gateway's stop, not a lease's end
        if r is not None:
            self.assert_shutting_down(r, "the upload cut at the bound")
        up.close()
        # nginx: the upload ended unapplied; nothing of it was stored
        self.wait_for(lambda: self.store.log_for(test_id=up.test_id),
                      slack(5.0), "nginx to log the cut upload")
        for e in self.store.log_for(test_id=up.test_id):
            self.assertFalse(e.applied, "nginx applied the cut upload: %r"
                             % e)
        self.assert_absent(path, "the upload cut at drain-timeout-ms")
        log = self.log_text(g)
        self.assertIn("still running when the gateway stopped: aborted upstream",
                      log)
        self.assertRegex(log, r"drain ended at drain-timeout-ms: 1 request "
                         r"still in flight ended")

    def test_a_second_sigterm_while_an_upload_drains_ends_it_at_once_unapplied(self):
        g = self.start_gateway("--drain-timeout-ms", "600000")
        path = self.obj("second")
        a = self.grant(path, gw=g, ttl_ms=120000)
        up = self.upload(g, path, a["sequencer"])
        g.proc.send_signal(signal.SIGTERM)
        self.wait_log(g, r"draining: no longer accepting",
                      "the gateway to stop accepting")
        self.assertIsNone(g.proc.poll())
        t0 = time.monotonic()
        g.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_exit(g, slack(5.0)), 0)
        self.assertLess(time.monotonic() - t0, slack(5.0))
        up.close()
        self.wait_for(lambda: self.store.log_for(test_id=up.test_id),
                      slack(5.0), "nginx to log the cut upload")
        for e in self.store.log_for(test_id=up.test_id):
            self.assertFalse(e.applied, "nginx applied the cut upload: %r"
                             % e)
        self.assert_absent(path, "the upload cut by a second SIGTERM")
        self.assertRegex(self.log_text(g), r"drain ended by a second signal: "
                         r"1 request still in flight ended")


class ReadinessTests(StoreTestCase):
    """Readiness follows Redis only when readyz-requires says so."""

    @harness.single_redis("stops the one redis-server")
    def test_readyz_stays_200_with_redis_down_by_default(self):
        env = self.start_store(flags=["--redis-timeout-ms", "500"])
        g = env.gw
        self.assertTrue(g.wait_healthy(slack(5.0)))
        env.redis.stop()
        self.wait_for(lambda: g.request("GET", "/_fence/v1/health").status
                      == 503, slack(5.0), "health to say Redis is down")
        r = g.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["status"], "ready", r)
        self.assertEqual(r.json["redis"], "down", r)
        self.assertNotIn("reason", r.json)

    @harness.single_redis("stops the one redis-server")
    def test_readyz_requires_redis_follows_redis(self):
        env = self.start_store(flags=["--redis-timeout-ms", "500",
                                      "--readyz-requires", "redis"])
        g = env.gw
        self.assertTrue(g.wait_healthy(slack(5.0)))
        r = g.request("GET", "/_fence/v1/readyz")
        self.assertEqual((r.status, r.json["status"]), (200, "ready"), r)
        env.redis.stop()
        self.wait_for(lambda: g.request("GET", "/_fence/v1/readyz").status
                      == 503, slack(5.0), "readyz to follow Redis down")
        r = g.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.json["status"], "not_ready", r)
        self.assertEqual(r.json["redis"], "down", r)
        self.assertIn("redis", r.json["reason"], r)
        self.assertEqual(g.request("GET", "/_fence/v1/livez").status, 200)
        env.redis.start()
        self.wait_for(lambda: g.request("GET", "/_fence/v1/readyz").status
                      == 200, slack(10.0), "readyz to follow Redis up")

    @matrix.pin("a start-up refusal that never reaches a Redis",
                redis="single")
    def test_a_bad_readyz_requires_is_a_start_up_error(self):
        p = subprocess.run([harness.Gateway.executable(), "--readyz-requires",
                            "redis,sentinel"], capture_output=True,
                           timeout=slack(10.0))
        self.assertEqual(p.returncode, 2, p)
        self.assertIn(b"readyz-requires: 'redis,sentinel' is not a comma "
                      b"list of redis and upstream, or none", p.stderr)
