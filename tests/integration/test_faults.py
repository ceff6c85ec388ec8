"""test_faults.py - what happens when things go wrong around the gateway:
Redis killed, hung or restarted empty, upstream down, a gateway killed,
several gateways on one Redis, and hostile or slow clients."""

import json
import os
import re
import socket
import threading
import time

import harness
from harness import LOCKS, TestCase, slack, wait_until
from origins import StandIn

REDIS_TIMEOUT_MS = 500


def retry_after_ok(r):
    v = r.header("Retry-After")
    return v is not None and re.match(r"^\s*\d+\s*$", v) is not None


class PrivateEnvTestCase(TestCase):
    """Each test starts its own processes."""
    uses_shared_env = False

    def setUp(self):
        super().setUp()

    def own(self, flags=(), gateways=1, redis=True, upstream=True,
            gateway_flags=None):
        env = self.start_env(flags, gateways, redis, upstream, gateway_flags)
        self.env = env
        self.gw = env.gw
        self.redis = env.redis
        return env

    def restart_redis_empty(self):
        """Kills Redis and starts a new, empty one on the same port (in
        cluster mode: a new, empty cluster on the same ports)."""
        fresh = self.redis.restart_empty()
        self.env.redis = fresh
        self.redis = fresh
        return fresh

    def wait_healthy(self, gw=None, timeout=None):
        last = {}

        def ok():
            try:
                last["r"] = self.health(gw)
            except OSError as e:
                last["r"] = e
                return False
            return last["r"].status == 200
        if not wait_until(ok, timeout or slack(6.0), 0.1):
            self.fail("health did not return to 200: %r" % (last.get("r"),))

    def retrying(self, fn, what, timeout=None):
        """Calls fn until it answers something other than 503, as a client
        honouring Retry-After would; returns that response."""
        deadline = time.monotonic() + (timeout or slack(3.0))
        while True:
            r = fn()
            if r.status != 503 or time.monotonic() > deadline:
                self.assertNotEqual(r.status, 503, "%s still 503 after Redis "
                                    "came back: %r" % (what, r))
                return r
            time.sleep(0.1)

    def assert_unavailable(self, r, what):
        self.assert_error(r, 503, "lock_store_unavailable", what)
        self.assertTrue(retry_after_ok(r), "%s: 503 without a valid "
                        "Retry-After (%r)" % (what, r.header("Retry-After")))


class RedisFaultTests(PrivateEnvTestCase):

    def test_requests_get_503_lock_store_unavailable_with_retry_after_when_redis_is_killed(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        held = self.lock_name("held")
        g = self.acquire_ok(held, ttl_ms=60000)
        self.redis.kill()
        bound = REDIS_TIMEOUT_MS / 1000 + slack(1.5)
        calls = [
            ("acquire", lambda: self.acquire(self.lock_name("new"), body={})),
            ("acquire held", lambda: self.acquire(held, body={})),
            ("renew", lambda: self.renew(held, g["lease"], ttl_ms=5000)),
            ("release", lambda: self.release(held, g["lease"])),
            ("inspect", lambda: self.inspect(held)),
            ("check", lambda: self.check(g["sequencer"])),
        ]
        for what, fn in calls:
            r = fn()
            self.assert_unavailable(r, what)
            self.assertLess(r.elapsed, bound, what)
        self.assert_alive()
        h = self.health()
        self.assertEqual(h.status, 503, h)
        self.assertEqual(h.json, {"redis": "down", "upstream": "up"})

    def test_requests_get_503_within_the_redis_timeout_when_redis_hangs(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        held = self.lock_name("held")
        g = self.acquire_ok(held, ttl_ms=60000)
        self.redis.pause()
        try:
            bound = REDIS_TIMEOUT_MS / 1000 + slack(1.5)
            for what, fn in (
                    ("acquire", lambda: self.acquire(self.lock_name("n"),
                                                     body={})),
                    ("inspect", lambda: self.inspect(held)),
                    ("renew", lambda: self.renew(held, g["lease"])),
                    ("check", lambda: self.check(g["sequencer"]))):
                r = fn()
                self.assert_unavailable(r, what)
                self.assertLess(r.elapsed, bound, what)
            h = self.health()
            self.assertEqual(h.status, 503, h)
            self.assertEqual(h.json.get("redis"), "down")
            self.assertLess(h.elapsed, bound)
        finally:
            self.redis.resume()
        self.wait_healthy()
        s = self.retrying(lambda: self.inspect(held), "inspect").json
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.release_ok(held, g["lease"])

    def test_gateway_reconnects_by_itself_after_redis_restarts_empty(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.restart_redis_empty()
        self.wait_healthy()
        r = self.retrying(lambda: self.acquire(name, body={}), "acquire")
        self.assertEqual(r.status, 200, r)
        c = self.retrying(lambda: self.check(r.json["sequencer"]), "check")
        self.assertIs(c.json["valid"], True)
        self.assertGreater(r.json["token"], g["token"])

    def test_requests_succeed_soon_after_redis_restarts(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        # touch Redis from every worker thread's connection
        for _ in range(8):
            self.acquire_ok(self.lock_name())
        self.restart_redis_empty()
        # Redis answers PING again. The bound under test: within this time
        # every worker's connection must be back. No signal says each one
        # is (health stays 200 through a restart this quick), so this is
        # the time the test grants, not a stand-in for an event.
        time.sleep(slack(1.5))
        got = [self.acquire(self.lock_name(), body={}) for _ in range(8)]
        self.assertEqual([r.status for r in got], [200] * 8,
                         "503s although Redis has been back for %.1f s: %r"
                         % (slack(1.5), [r for r in got if r.status != 200]))
        self.assertEqual(self.health().status, 200)

    def test_tokens_keep_growing_after_redis_restarts_empty(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        names = [self.lock_name("n%d" % i) for i in range(3)]
        before = {}
        for n in names:
            for _ in range(5):
                g = self.acquire_ok(n)
                self.release_ok(n, g["lease"])
            before[n] = g["token"]
        for _ in range(2):
            self.restart_redis_empty()
            self.wait_healthy()
            for n in names:
                r = self.retrying(lambda: self.acquire(n, body={}), "acquire")
                self.assertEqual(r.status, 200, r)
                g = r.json
                self.assertGreater(g["token"], before[n], n)
                self.assert_token(g["token"])
                before[n] = g["token"]
                rr = self.retrying(lambda: self.release(n, g["lease"]),
                                   "release")
                self.assertEqual(rr.status, 204, rr)

    def test_old_sequencer_is_not_valid_after_redis_restarts_empty(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.restart_redis_empty()
        self.wait_healthy()
        b = self.retrying(lambda: self.check(g["sequencer"]), "check").json
        self.assertIs(b["valid"], False, b)
        g2 = self.retrying(lambda: self.acquire(name, body={}), "acquire").json
        self.assertEqual(self.check_ok(g["sequencer"])["reason"], "stale")
        self.assertIs(self.check_ok(g2["sequencer"])["valid"], True)

    def test_gateway_started_without_redis_reports_503_and_recovers_when_redis_starts(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)), redis=False)
        h = self.health()
        self.assertEqual(h.status, 503, h)
        self.assertEqual(h.json, {"redis": "down", "upstream": "up"})
        self.assert_unavailable(self.acquire(self.lock_name(), body={}),
                                "acquire")
        self.redis.start()
        self.wait_healthy()
        r = self.retrying(lambda: self.acquire(self.lock_name(), body={}),
                          "acquire")
        self.assertEqual(r.status, 200, r)

    def test_blocked_waiter_is_answered_when_redis_dies(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        name = self.lock_name()
        self.acquire_ok(name)
        w = self.waiter(name, wait_ms=2000)
        self.wait_waiters(name, 1)
        self.redis.kill()
        r = w.result(2.0 + slack(3.0))
        self.assertIn(r.status, (409, 503), r)
        self.assertIn(r.json.get("error"), ("lock_held",
                                            "lock_store_unavailable"))
        self.assert_alive()

    @harness.single_redis("restarts its one redis-server empty and times "
                          "the answer: a new cluster forms at its own pace")
    def test_blocked_waiter_whose_place_redis_lost_is_told_so_not_lock_held(self):
        # Redis comes back empty: the waiter's place is gone long before
        # its wait_ms; "not granted within wait_ms" would not be true
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        name = self.lock_name()
        self.acquire_ok(name, ttl_ms=60000)
        w = self.waiter(name, wait_ms=60000)
        self.wait_waiters(name, 1)
        # Redis has queued it; the gateway must have read that answer and
        # parked the request too, or the restart cuts the acquire's own
        # call, whose outcome is unknown: that is 503 unreachable, not a
        # wait that lost its place
        harness.wait_metric(self.gw, "fencegate_waiters", 1, slack(5.0),
                            kind="acquire")
        t0 = time.monotonic()
        self.restart_redis_empty()
        r = w.result(slack(20.0))
        self.assertLess(time.monotonic() - t0, slack(15.0), r)
        self.assert_unavailable(r, "the waiter Redis forgot")
        self.assertIn("place in the queue", r.json["message"], r)
        self.assert_alive()

    def test_process_survives_repeated_redis_restarts_under_load(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)))
        stop = threading.Event()
        errors = []

        def load():
            n = 0
            while not stop.is_set() and len(errors) < 5:
                n += 1
                name = "load/%d" % (n % 5)
                try:
                    r = self.gw.request("POST", LOCKS + name,
                                        body={"ttl_ms": 200, "wait_ms": 100},
                                        timeout=slack(5.0))
                    if r.status not in (200, 409, 503):
                        errors.append(repr(r))
                except OSError as e:
                    errors.append(repr(e))
        ts = [threading.Thread(target=load, daemon=True) for _ in range(4)]
        for t in ts:
            t.start()
        try:
            # the cause: load runs for a while before, between and after
            # the restarts
            for _ in range(2):
                time.sleep(0.4)
                self.restart_redis_empty()
            time.sleep(0.4)
        finally:
            stop.set()
            for t in ts:
                t.join(slack(10.0))
        self.assertEqual(errors[:5], [], "unexpected answers under load")
        self.assert_alive()
        self.wait_healthy()


class UpstreamHealthTests(PrivateEnvTestCase):

    def test_gateway_started_without_upstream_reports_503_upstream_down(self):
        self.own(upstream=False)
        # Redis comes up within milliseconds of the start; the upstream
        # never does
        self.wait_for(lambda: self.health().json.get("redis") == "up",
                      slack(5.0), "health to see Redis up")
        h = self.health()
        self.assertEqual(h.status, 503, h)
        self.assertEqual(h.json, {"redis": "up", "upstream": "down"})

    def test_lock_api_works_while_upstream_is_down(self):
        self.own(upstream=False)
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.assertIs(self.check_ok(g["sequencer"])["valid"], True)
        self.release_ok(name, g["lease"])

    def test_health_returns_to_200_when_upstream_comes_up(self):
        env = self.own(upstream=False)
        self.assertEqual(self.health().status, 503)
        env.upstream.start()
        self.wait_healthy()
        self.assertEqual(self.health().json, {"redis": "up", "upstream": "up"})

    def test_health_turns_503_when_upstream_goes_down(self):
        env = self.own()
        self.assertEqual(self.health().status, 200)
        env.upstream.stop()
        h = self.wait_for(lambda: (lambda r: r if r.status == 503 else None)
                          (self.health()), slack(6.0), "health 503", 0.1)
        self.assertEqual(h.json, {"redis": "up", "upstream": "down"})
        env.upstream = StandIn(env.upstream.port).start()
        self.wait_healthy()

    def test_health_reports_both_down(self):
        self.own(("--redis-timeout-ms", str(REDIS_TIMEOUT_MS)), redis=False,
                 upstream=False)
        h = self.health()
        self.assertEqual(h.status, 503)
        self.assertEqual(h.json, {"redis": "down", "upstream": "down"})


class TwoGatewayTests(TestCase):
    gateway_count = 2

    def setUp(self):
        super().setUp()
        self.a, self.b = self.env.gateways

    def test_lock_taken_through_one_gateway_is_held_as_seen_through_the_other(self):
        name = self.lock_name()
        g = self.acquire_ok(name, gw=self.a, value="leader-a")
        s = self.state(name, gw=self.b)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["value"], "leader-a")
        self.assert_error(self.acquire(name, body={}, gw=self.b), 409,
                          "lock_held")

    def test_waiter_on_one_gateway_is_granted_when_holder_on_the_other_releases(self):
        name = self.lock_name()
        g = self.acquire_ok(name, gw=self.a)
        w = self.waiter(name, gw=self.b, wait_ms=10000)
        self.wait_waiters(name, 1, gw=self.a)
        t_rel = time.monotonic()
        self.release_ok(name, g["lease"], gw=self.a)
        r = w.result(slack(3.0))
        self.assertEqual(r.status, 200, r)
        self.assertLess(w.t_end - t_rel, slack(1.0))
        self.assertGreater(r.json["token"], g["token"])

    def test_waiter_on_one_gateway_is_granted_when_holder_on_the_other_expires(self):
        name = self.lock_name()
        t0 = time.monotonic()
        self.acquire_ok(name, gw=self.a, ttl_ms=500)
        w = self.waiter(name, gw=self.b, wait_ms=10000)
        r = w.result(slack(5.0))
        self.assertEqual(r.status, 200, r)
        self.assertLess(w.t_end - t0, 0.5 + slack(1.0))

    def test_sequencer_from_one_gateway_checks_valid_on_the_other(self):
        name = self.lock_name()
        g = self.acquire_ok(name, gw=self.a)
        b = self.check_ok(g["sequencer"], gw=self.b)
        self.assertIs(b["valid"], True, b)
        self.assertEqual(b["token"], g["token"])
        self.assertEqual(b["name"], name)
        self.release_ok(name, g["lease"], gw=self.a)
        g2 = self.acquire_ok(name, gw=self.b)
        self.assertEqual(self.check_ok(g["sequencer"], gw=self.b)["reason"],
                         "stale")
        self.assertIs(self.check_ok(g2["sequencer"], gw=self.a)["valid"], True)
        self.assertEqual(self.check_ok(harness.tamper(g2["sequencer"]),
                                       gw=self.a)["reason"], "forged")

    def test_lease_from_one_gateway_can_be_renewed_reentered_and_released_on_the_other(self):
        name = self.lock_name()
        g = self.acquire_ok(name, gw=self.a, ttl_ms=5000)
        r = self.renew(name, g["lease"], gw=self.b, ttl_ms=9000)
        self.assertEqual(r.status, 200, r)
        re_ = self.acquire_ok(name, gw=self.b, lease=g["lease"])
        self.assertEqual(re_["holds"], 2)
        self.release_ok(name, g["lease"], gw=self.b)
        self.release_ok(name, g["lease"], gw=self.a)
        self.assertFalse(self.state(name, gw=self.a)["held"])

    def test_waiters_on_both_gateways_are_granted_in_fifo_order(self):
        name = self.lock_name()
        g = self.acquire_ok(name, gw=self.a)
        order = [self.b, self.a, self.b, self.a]
        ws = []
        for i, gw in enumerate(order):
            ws.append(self.waiter(name, gw=gw, wait_ms=20000))
            self.wait_waiters(name, i + 1)
        lease = g["lease"]
        for i, w in enumerate(ws):
            self.release_ok(name, lease, gw=order[i - 1] if i else self.a)
            r = w.result(slack(3.0))
            self.assertEqual(r.status, 200, r)
            for later in ws[i + 1:]:
                self.assertFalse(later.done, "waiter %d granted before %d"
                                 % (ws.index(later), i))
            lease = r.json["lease"]
        self.release_ok(name, lease)

    def test_tokens_increase_when_grants_alternate_between_gateways(self):
        name = self.lock_name()
        last = 0
        for gw in (self.a, self.b, self.a, self.b):
            g = self.acquire_ok(name, gw=gw)
            self.assertGreater(g["token"], last)
            last = g["token"]
            self.release_ok(name, g["lease"], gw=gw)

    def test_observe_on_one_gateway_answers_when_holder_on_the_other_releases(self):
        name = self.lock_name()
        g = self.acquire_ok(name, gw=self.a)
        parked = harness.metric_value(self.b, "fencegate_waiters",
                                      kind="observe")
        c = self.call("GET", LOCKS + name + "?wait_ms=10000&after=%d"
                      % g["token"], gw=self.b, timeout=20.0)
        harness.wait_metric(self.b, "fencegate_waiters", parked + 1,
                            slack(3.0), kind="observe")
        self.assertFalse(c.done)
        t_rel = time.monotonic()
        self.release_ok(name, g["lease"], gw=self.a)
        r = c.result(slack(3.0))
        self.assertEqual(r.status, 200, r)
        self.assertFalse(r.json["held"])
        self.assertLess(c.t_end - t_rel, slack(1.0))

    def test_shared_holders_through_both_gateways_share_one_token(self):
        name = self.lock_name()
        x = self.acquire_ok(name, gw=self.a, mode="shared")
        y = self.acquire_ok(name, gw=self.b, mode="shared")
        self.assertEqual(x["token"], y["token"])
        self.assertEqual(self.state(name, gw=self.b)["holders"], 2)


class GatewayLossTests(PrivateEnvTestCase):

    def test_tokens_and_leases_survive_a_gateway_restart(self):
        env = self.own()
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        env.gw.stop()
        g2 = harness.Gateway(env.redis.port, env.upstream.port,
                             port=env.gw.port)
        self.log_paths.append(g2.logpath)
        self.addCleanup(self._stop_gateway, g2)
        g2.start()
        g2.wait_healthy(slack(5.0))
        self.gw = g2
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertIs(self.check_ok(g["sequencer"])["valid"], True)
        self.assertEqual(self.renew(name, g["lease"]).status, 200)
        self.release_ok(name, g["lease"])
        self.assertGreater(self.acquire_ok(name)["token"], g["token"])

    def gone_silent(self, name):
        """A test of whether Redis' clock is past the liveness stamp of the
        one gateway with waiters on lock `name` now (field g:<its id> of
        the lock's state, which its ticks move on): from then on the
        handoff skips that gateway's waiters."""
        key = "fg:{%s}:s" % name
        st = self.redis.command("HGETALL", key)
        stamps = [f for f in st[::2] if f.startswith(b"g:")]
        self.assertEqual(len(stamps), 1, "the liveness stamps on %s: %r"
                         % (name, st))

        def silent():
            stamp = self.redis.command("HGET", key, stamps[0])
            sec, us = self.redis.command("TIME")
            return stamp is None or \
                int(stamp) < int(sec) * 1000 + int(us) // 1000
        return silent

    def test_waiter_of_a_killed_gateway_is_dropped_after_waiter_liveness(self):
        flags = ("--waiter-liveness-ms", "1000")
        env = self.own(flags, gateways=2)
        a, b = env.gateways
        name = self.lock_name()
        g = self.acquire_ok(name, gw=a)
        self.waiter(name, gw=b, wait_ms=30000, ttl_ms=60000)
        self.wait_waiters(name, 1, gw=a)
        silent = self.gone_silent(name)   # b's stamp
        b.kill()
        # b's silence outlasts waiter-liveness-ms: Redis' clock passes the
        # liveness stamp b's last tick left
        self.wait_for(silent, slack(3.0), "the killed gateway's liveness "
                      "stamp on %s to run out" % name)
        self.release_ok(name, g["lease"], gw=a)

        def free():
            s = self.state(name, gw=a)
            return not s["held"] and s["waiters"] == 0
        self.wait_for(free, slack(2.0),
                      "the dead gateway's waiter to be dropped (the lock "
                      "was handed to a waiter nobody can receive)")
        self.acquire_ok(name, gw=a)

    def test_waiter_of_a_killed_gateway_does_not_block_live_waiters(self):
        flags = ("--waiter-liveness-ms", "1000")
        env = self.own(flags, gateways=2)
        a, b = env.gateways
        name = self.lock_name()
        g = self.acquire_ok(name, gw=a)
        self.waiter(name, gw=b, wait_ms=30000, ttl_ms=60000)
        self.wait_waiters(name, 1, gw=a)
        silent = self.gone_silent(name)   # b's stamp, before a has one
        live = self.waiter(name, gw=a, wait_ms=30000)
        self.wait_waiters(name, 2, gw=a)
        b.kill()
        # b's silence outlasts waiter-liveness-ms: Redis' clock passes the
        # liveness stamp b's last tick left
        self.wait_for(silent, slack(3.0), "the killed gateway's liveness "
                      "stamp on %s to run out" % name)
        self.release_ok(name, g["lease"], gw=a)
        r = live.result(slack(3.0))
        self.assertEqual(r.status, 200, r)


class KeyFileTests(PrivateEnvTestCase):

    def test_gateways_with_the_same_key_file_accept_each_others_sequencers(self):
        key = os.path.join(harness.tmp_root(), "hmac-%s.key" % os.getpid())
        with open(key, "wb") as f:
            f.write(os.urandom(32))
        env = self.own(("--key-file", key), gateways=2)
        a, b = env.gateways
        name = self.lock_name()
        g = self.acquire_ok(name, gw=a)
        self.assertIs(self.check_ok(g["sequencer"], gw=b)["valid"], True)
        self.assertEqual(self.check_ok(harness.tamper(g["sequencer"]),
                                       gw=b)["reason"], "forged")


class HostileClientTests(TestCase):

    def test_huge_header_is_refused_and_server_stays_up(self):
        name = self.lock_name()
        req = ("POST %s%s HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n"
               "Content-Length: 2\r\n\r\n{}" % (LOCKS, name, "a" * 100000))
        raw = harness.raw_exchange(self.gw.port, req.encode(),
                                   timeout=slack(5.0))
        self.assertIn(harness.status_of(raw), (400, 413, 431, None),
                      raw[:200])
        self.assert_no_keys(name)
        self.assert_alive()
        self.assertEqual(self.health().status, 200)

    def test_thousands_of_headers_are_refused_and_server_stays_up(self):
        name = self.lock_name()
        hdrs = "".join("X-H%d: %s\r\n" % (i, "v" * 50) for i in range(3000))
        req = ("GET %s%s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (LOCKS, name, hdrs))
        raw = harness.raw_exchange(self.gw.port, req.encode(),
                                   timeout=slack(5.0))
        self.assertIn(harness.status_of(raw), (400, 413, 431, None),
                      raw[:200])
        self.assert_alive()

    def test_half_sent_requests_do_not_block_other_clients(self):
        socks = []
        try:
            for i in range(24):
                s = socket.create_connection(("127.0.0.1", self.gw.port),
                                             timeout=5)
                if i % 3 == 0:
                    s.sendall(b"GET /_fence/v1/he")
                elif i % 3 == 1:
                    s.sendall(b"POST " + (LOCKS + self.lock_name()).encode()
                              + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 100"
                              b"\r\n\r\n{\"ttl")
                else:
                    s.sendall(b"POST /_fence/v1/check HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            # the gateway holds every half request: accepted, read, waiting
            # for the rest
            harness.wait_read_by_server(self.gw.port, socks, slack(3.0))
            t0 = time.monotonic()
            name = self.lock_name("live")
            g = self.acquire_ok(name)
            self.assertEqual(self.health().status, 200)
            self.release_ok(name, g["lease"])
            self.assertLess(time.monotonic() - t0, slack(1.0))
        finally:
            for s in socks:
                s.close()
        self.assert_alive()

    def test_clients_disconnecting_mid_body_leave_no_trace(self):
        names = []
        peers = []
        for i in range(20):
            name = self.lock_name()
            names.append(name)
            s = socket.create_connection(("127.0.0.1", self.gw.port),
                                         timeout=5)
            s.sendall(b"POST " + (LOCKS + name).encode() + b" HTTP/1.1\r\n"
                      b"Host: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 40\r\n\r\n{\"ttl_ms\": 5000")
            peers.append(s.getsockname()[1])
            s.close()
        # the gateway has read every byte they sent (or closed them): what
        # it makes of a cut body is done by now
        harness.wait_read_by_server(self.gw.port, [], slack(3.0),
                                    peer_ports=peers)
        for n in names:
            self.assert_no_keys(n)
        self.assert_alive()

    def test_malformed_http_gets_400_or_close_and_server_stays_up(self):
        name = self.lock_name()
        path = (LOCKS + name).encode()
        for junk in (b"\x00\x01\x02\x03\r\n\r\n",
                     b"GET\r\n\r\n",
                     b"GET " + path + b" HTTP/9.9\r\nHost: x\r\n\r\n",
                     b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: -5\r\n\r\n{}",
                     b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: abc\r\n\r\n{}",
                     b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
                     b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                     b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"
                     b"2\r\n{}\r\n0\r\n\r\n",
                     b"GET /_fence/v1/health HTTP/1.1\r\nBad Header\r\n\r\n",
                     b"\xff\xfe\xfd " + path + b" HTTP/1.1\r\n\r\n",
                     b"GET " + b"/x" * 40000 + b" HTTP/1.1\r\n\r\n"):
            raw = harness.raw_exchange(self.gw.port, junk, timeout=slack(3.0),
                                       shut_write=True)
            st = harness.status_of(raw)
            self.assertTrue(st is None or 400 <= st < 600 or st == 200,
                            "%r -> %r" % (junk[:60], raw[:200]))
            self.assertTrue(self.gw.alive(), "died on %r" % junk[:60])
        self.assert_alive()
        self.assertEqual(self.health().status, 200)

    def test_many_concurrent_clients_are_all_served(self):
        name = self.lock_name()
        self.acquire_ok(name)
        cs = [self.call("GET", name) for _ in range(64)]
        for c in cs:
            r = c.result(slack(10.0))
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.json["held"])


class ConnectionLimitTests(PrivateEnvTestCase):

    def test_client_timeout_closes_a_stalled_connection(self):
        self.own(("--client-timeout-s", "1"))
        s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=1)
        s.sendall(b"GET /_fence/v1/health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        closed = False
        while time.monotonic() - t0 < 1 + slack(4.0):
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                closed = True
                break
            if not data or harness.status_of(data) in (408, 400):
                closed = True
                break
        s.close()
        self.assertTrue(closed, "stalled connection still open after %.1f s"
                        % (time.monotonic() - t0))
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)
        self.assert_alive()

    def test_max_header_bytes_refuses_larger_headers_and_serves_smaller(self):
        self.own(("--max-header-bytes", "4096"))
        small = self.req("GET", "/_fence/v1/health",
                         headers={"X-Pad": "p" * 1000})
        self.assertEqual(small.status, 200, small)
        req = ("GET /_fence/v1/health HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n"
               % ("p" * 8192)).encode()
        raw = harness.raw_exchange(self.gw.port, req, timeout=slack(5.0))
        self.assertIn(harness.status_of(raw), (400, 413, 431, None),
                      raw[:200])
        self.assert_alive()

    def test_connections_over_max_connections_do_not_break_the_server(self):
        self.own(("--max-connections", "16"))
        socks = []
        for _ in range(40):
            try:
                socks.append(socket.create_connection(
                    ("127.0.0.1", self.gw.port), timeout=2))
            except OSError:
                pass
        for s in socks:
            s.close()
        self.wait_for(lambda: self._health_ok(), slack(3.0),
                      "health after the connection flood", 0.1)
        self.assert_alive()

    def _health_ok(self):
        try:
            return self.health().status == 200
        except OSError:
            return False

    def test_blocked_waiters_do_not_use_up_worker_threads(self):
        self.own(("--threads", "2"))
        names = [self.lock_name("l%d" % i) for i in range(10)]
        for n in names:
            self.acquire_ok(n)
        ws = [self.waiter(n, wait_ms=10000) for n in names]
        for n in names:
            self.wait_waiters(n, 1)
        t0 = time.monotonic()
        self.assertEqual(self.health().status, 200)
        other = self.lock_name("other")
        g = self.acquire_ok(other)
        self.release_ok(other, g["lease"])
        self.assertLess(time.monotonic() - t0, slack(1.0))
        self.assertFalse(any(w.done for w in ws))
