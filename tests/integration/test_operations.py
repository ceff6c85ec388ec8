"""test_operations.py - what an operator relies on: the Prometheus metrics
(they move as the requests say, and promtool accepts them), the access and
audit log (a line for every write of Kleppmann's scenario, the refused one
included, and never a lease or a sequencer; reopened on SIGHUP), liveness
and readiness, and systemd's readiness notification."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import harness
from harness import LOCKS, TestCase, slack, wait_until
from storage import StoreTestCase

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise AssertionError("not a sample line: %r" % line)
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def sample(metrics, name, **labels):
    return metrics.get((name, frozenset(labels.items())), 0.0)


class MetricsTests(TestCase):
    """One gateway of its own per class; each test compares two scrapes
    around what it does."""

    def scrape(self, gw=None):
        r = (gw or self.gw).request("GET", "/_fence/v1/metrics")
        self.assertEqual(r.status, 200, r)
        ctype = r.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        return r.body.decode()

    def metrics(self, gw=None):
        return parse_metrics(self.scrape(gw))

    def metrics_after(self, before, requests, *counted):
        """The scrape once `requests` more requests than in `before` have
        completed, and each (endpoint, code, n) of `counted` has grown by
        n at least. A request is counted when its connection is done with
        it, which on another event loop can be a moment after its client
        read the answer, so a scrape right after an answer may not hold
        it yet; nor may `before` hold the last request of the test before,
        which is why the total alone does not say that this test's own
        requests are all in. Scrapes themselves are left out of the count."""
        def done(m):
            return sum(v - before.get(k, 0.0) for k, v in m.items()
                       if k[0] == "fencegate_http_requests_total"
                       and ("endpoint", "metrics") not in k[1])

        def grown(m):
            return all(sample(m, "fencegate_http_requests_total",
                              endpoint=e, code=c)
                       - sample(before, "fencegate_http_requests_total",
                                endpoint=e, code=c) >= n
                       for e, c, n in counted)
        m = wait_until(lambda: (lambda m: m if done(m) >= requests
                                and grown(m) else None)
                       (self.metrics()), slack(5.0), 0.02)
        self.assertIsNotNone(m, "%d requests were not all counted" % requests)
        return m

    def test_promtool_accepts_the_exposition_after_traffic(self):
        promtool = shutil.which("promtool")
        if not promtool:
            raise harness.SetupError("promtool (Debian package prometheus) "
                                     "is not installed")
        name = self.lock_name("prom")
        g = self.acquire_ok(name, ttl_ms=5000)
        self.renew(name, g["lease"])
        self.release_ok(name, g["lease"])
        self.req("PUT", "/" + name, raw=b"x")        # 428, no token
        self.req("GET", "/anything")                  # proxied read
        text = self.scrape()
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30)
        self.assertEqual(p.returncode, 0, "promtool: %s" % p.stdout.decode())
        for family in ("fencegate_http_requests_total",
                       "fencegate_http_request_duration_seconds",
                       "fencegate_lock_grants_total",
                       "fencegate_lock_releases_total",
                       "fencegate_lock_expiries_total",
                       "fencegate_fence_admitted_total",
                       "fencegate_fence_refused_total",
                       "fencegate_fence_admission_duration_seconds",
                       "fencegate_redis_script_duration_seconds",
                       "fencegate_upstream_duration_seconds",
                       "fencegate_upstream_responses_total",
                       "fencegate_waiters", "fencegate_upstream_transfers",
                       "fencegate_redis_up", "fencegate_upstream_up"):
            self.assertIn("# TYPE %s " % family, text)

    def test_no_label_carries_a_lock_name_or_a_path(self):
        name = self.lock_name("secret-name-xyz")
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        self.req("GET", "/secret-path-xyz/obj")
        text = self.scrape()
        self.assertNotIn("secret-name-xyz", text)
        self.assertNotIn("secret-path-xyz", text)
        labels = set()
        for (_, ls) in parse_metrics(text):
            labels |= {k for k, _ in ls}
        self.assertLessEqual(labels, {"endpoint", "code", "mode", "kind",
                                      "reason", "class", "script", "le",
                                      "version"})

    def test_lock_calls_move_their_counters(self):
        before = self.metrics()
        name = self.lock_name("calls")
        g = self.acquire_ok(name, ttl_ms=5000)
        self.assertEqual(self.acquire(name).status, 409)
        self.assertEqual(self.renew(name, g["lease"]).status, 200)
        self.release_ok(name, g["lease"])
        # the lease no longer holds: renew and release answer 410
        self.assertEqual(self.renew(name, g["lease"]).status, 410)
        self.assertEqual(self.release(name, g["lease"]).status, 410)
        s = self.acquire_ok(name, mode="shared")
        self.release_ok(name, s["lease"])
        after = self.metrics_after(before, 8)

        def d(name_, **labels):
            return sample(after, name_, **labels) - sample(before, name_, **labels)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="acquire", code="200"), 2)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="acquire", code="409"), 1)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="renew", code="200"), 1)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="renew", code="410"), 1)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="release", code="204"), 2)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="release", code="410"), 1)
        self.assertEqual(d("fencegate_lock_grants_total", mode="exclusive"), 1)
        self.assertEqual(d("fencegate_lock_grants_total", mode="shared"), 1)
        self.assertEqual(d("fencegate_lock_renewals_total"), 1)
        self.assertEqual(d("fencegate_lock_releases_total"), 2)
        self.assertEqual(d("fencegate_lock_expiries_total"), 2)
        self.assertEqual(d("fencegate_http_request_duration_seconds_count", endpoint="acquire"), 3)
        # every acquire ran the acquire script once, answered by Redis
        self.assertEqual(d("fencegate_redis_script_duration_seconds_count", script="acquire"), 3)
        self.assertEqual(d("fencegate_redis_script_duration_seconds_count", script="release"), 3)
        self.assertGreater(d("fencegate_redis_script_duration_seconds_sum", script="acquire"), 0)

    def test_fenced_writes_move_admitted_refused_and_upstream_counters(self):
        before = self.metrics()
        name = self.lock_name("fenced")
        g1 = self.acquire_ok(name)
        self.release_ok(name, g1["lease"])
        g2 = self.acquire_ok(name)
        hdr = lambda g: {"Fencing-Token": g["sequencer"]}
        r = self.req("PUT", "/" + name, raw=b"new", headers=hdr(g2))
        self.assertLess(r.status, 300, r)
        self.assert_error(self.req("PUT", "/" + name, raw=b"old", headers=hdr(g1)),
                          409, "stale_token")
        self.assert_error(self.req("PUT", "/" + name, raw=b"none"),
                          428, "token_required")
        self.assert_error(self.req("PUT", "/" + name, raw=b"bad",
                                   headers={"Fencing-Token": "fg1.nonsense"}),
                          400, "malformed_token")
        self.assertLess(self.req("GET", "/" + name, headers=hdr(g2)).status, 500)
        self.assertLess(self.req("GET", "/" + name).status, 500)
        after = self.metrics_after(before, 9, ("proxy_write", "409", 1),
                                   ("proxy_read", "200", 2))

        def d(name_, **labels):
            return sample(after, name_, **labels) - sample(before, name_, **labels)
        self.assertEqual(d("fencegate_fence_admitted_total", kind="write"), 1)
        self.assertEqual(d("fencegate_fence_admitted_total", kind="read"), 1)
        self.assertEqual(d("fencegate_fence_refused_total", reason="stale_token"), 1)
        self.assertEqual(d("fencegate_fence_refused_total", reason="token_required"), 1)
        self.assertEqual(d("fencegate_fence_refused_total", reason="malformed_token"), 1)
        self.assertEqual(d("fencegate_fence_admission_duration_seconds_count"), 5)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="proxy_write",
                           code=str(r.status)), 1)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="proxy_write",
                           code="409"), 1)
        self.assertEqual(d("fencegate_http_requests_total", endpoint="proxy_read",
                           code="200"), 2)
        # the write and both reads went upstream, and were answered
        self.assertEqual(d("fencegate_upstream_duration_seconds_count"), 3)
        self.assertEqual(d("fencegate_upstream_responses_total", **{"class": "2xx"}), 3)
        self.assertEqual(d("fencegate_proxy_received_bytes_total"), len(b"new"))
        self.assertEqual(sample(after, "fencegate_upstream_transfers"), 0)

    def test_parked_waiters_show_in_the_gauge_and_leave_it(self):
        name = self.lock_name("gauge")
        g = self.acquire_ok(name, ttl_ms=10000)
        base = sample(self.metrics(), "fencegate_waiters", kind="acquire")
        calls = [self.waiter(name, wait_ms=10000) for _ in range(3)]
        self.assertTrue(wait_until(
            lambda: sample(self.metrics(), "fencegate_waiters", kind="acquire")
            == base + 3, slack(5.0), 0.05),
            "three parked acquires did not show in fencegate_waiters")
        self.release_ok(name, g["lease"])
        # granted one by one, in their order of arrival
        pending = list(calls)
        deadline = time.monotonic() + slack(10.0)
        while pending and time.monotonic() < deadline:
            for c in [c for c in pending if c.done]:
                r = c.result(1.0)
                self.assertEqual(r.status, 200, r)
                self.release_ok(name, r.json["lease"])
                pending.remove(c)
            time.sleep(0.01)
        self.assertEqual(pending, [], "some waiters were never granted")
        self.assertTrue(wait_until(
            lambda: sample(self.metrics(), "fencegate_waiters", kind="acquire")
            == base, slack(5.0), 0.05), "the waiters did not leave the gauge")

    def test_health_gauges_say_up(self):
        m = self.metrics()
        self.assertEqual(sample(m, "fencegate_redis_up"), 1)
        self.assertEqual(sample(m, "fencegate_upstream_up"), 1)
        self.assertEqual(sample(m, "fencegate_build_info", version=self.version()), 1)

    def version(self):
        out = subprocess.run([harness.Gateway.executable(), "--version"],
                             stdout=subprocess.PIPE, timeout=10).stdout.decode()
        return re.search(r"(\d+\.\d+\.\d+)", out).group(1)

    def test_metrics_answer_only_get(self):
        r = self.req("POST", "/_fence/v1/metrics", body={})
        self.assert_error(r, 405, "method_not_allowed")


class ProbeTests(TestCase):
    """Liveness and readiness, with the dependencies up and down."""
    uses_shared_env = False

    def test_livez_and_readyz_answer_200_when_everything_is_up(self):
        env = self.start_env()
        r = env.gw.request("GET", "/_fence/v1/livez")
        self.assertEqual((r.status, r.json), (200, {"status": "alive"}))
        r = env.gw.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json, {"status": "ready", "redis": "up",
                                  "upstream": "up"})

    @harness.single_redis("stops the one redis-server")
    def test_redis_down_with_readyz_requires_redis_is_not_ready_but_alive(self):
        # by default readiness does not follow Redis (test_drain.py)
        env = self.start_env(flags=["--readyz-requires", "redis"])
        env.redis.stop()
        self.assertTrue(wait_until(
            lambda: env.gw.request("GET", "/_fence/v1/readyz").status == 503,
            slack(5.0), 0.05), "readyz stayed 200 with Redis down")
        r = env.gw.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.json["status"], "not_ready")
        self.assertEqual(r.json["redis"], "down")
        self.assertEqual(env.gw.request("GET", "/_fence/v1/livez").status, 200)

        def redis_up():
            m = parse_metrics(env.gw.request("GET", "/_fence/v1/metrics").body.decode())
            return sample(m, "fencegate_redis_up")
        self.assertTrue(wait_until(lambda: redis_up() == 0, slack(5.0), 0.05),
                        "fencegate_redis_up stayed 1 with Redis down")

    def test_upstream_down_with_readyz_requires_upstream_is_not_ready(self):
        env = self.start_env(flags=["--readyz-requires", "upstream"])
        env.upstream.stop()
        self.assertTrue(wait_until(
            lambda: env.gw.request("GET", "/_fence/v1/readyz").status == 503,
            slack(6.0), 0.1), "readyz stayed 200 with the upstream down")
        r = env.gw.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.json["upstream"], "down")
        self.assertIn("upstream", r.json["reason"])
        self.assertEqual(r.json["error"], "not_ready", r)
        self.assertIn("upstream", r.json["message"])
        self.assertEqual(env.gw.request("GET", "/_fence/v1/livez").status, 200)

    def test_upstream_down_is_ready_by_default(self):
        env = self.start_env()
        env.upstream.stop()
        self.assertTrue(wait_until(
            lambda: env.gw.request("GET", "/_fence/v1/health").status == 503,
            slack(6.0), 0.1), "health stayed 200 with the upstream down")
        r = env.gw.request("GET", "/_fence/v1/readyz")
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json["status"], r.json["upstream"]),
                         ("ready", "down"), r)

    def test_systemd_notify_says_ready_then_stopping(self):
        d = tempfile.mkdtemp(dir=harness.tmp_root())
        path = os.path.join(d, "notify.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(s.close)
        s.bind(path)
        s.settimeout(slack(10.0))
        env = harness.Env()
        os.environ["NOTIFY_SOCKET"] = path
        try:
            env.redis.start()
            env.upstream.start()
            self.addCleanup(env.stop)
            env.gw.start()
        finally:
            del os.environ["NOTIFY_SOCKET"]
        msg = s.recv(4096).decode()
        self.assertIn("READY=1", msg.split("\n"))
        self.assertIn("MAINPID=%d" % env.gw.proc.pid, msg.split("\n"))
        # ready means listening: a request is answered right away
        self.assertEqual(env.gw.request("GET", "/_fence/v1/livez").status, 200)
        env.gw.proc.send_signal(signal.SIGTERM)
        msg = s.recv(4096).decode()
        self.assertIn("STOPPING=1", msg.split("\n"))


class AuditLogTests(StoreTestCase):
    """The access log of a gateway in front of nginx, in both formats."""

    TTL_MS = 1000

    def log_file(self):
        d = tempfile.mkdtemp(prefix="access-", dir=harness.tmp_root())
        return os.path.join(d, "access.log")

    def lines(self, path, n_at_least=0):
        """The JSON lines of the log, once it has at least n of them."""
        def read():
            return [json.loads(l) for l in harness.complete_lines(path)]
        wait_until(lambda: len(read()) >= n_at_least, slack(5.0), 0.05)
        return read()

    def test_every_write_of_kleppmanns_scenario_has_a_line_the_refused_one_included(self):
        log = self.log_file()
        self.start_store(flags=["--access-log", log])
        path = self.obj("kleppmann")
        lock = self.lock_of(path)
        g1 = self.grant(path, ttl_ms=self.TTL_MS)
        # client 1 pauses past its lease; client 2 takes the lock
        self.assertTrue(wait_until(lambda: not self.state(lock)["held"],
                                   self.TTL_MS / 1000.0 + slack(3.0), 0.05))
        g2 = self.grant(path, ttl_ms=30000)
        w2 = self.put_ok(path, b"client 2\n", g2["sequencer"])
        w1 = self.put(path, b"client 1, stale\n", g1["sequencer"])
        self.assert_error(w1, 409, "stale_token")
        w0 = self.send("PUT", path, b"no token\n")
        self.assert_error(w0, 428, "token_required")
        wf = self.send("DELETE", path, token=g2["sequencer"][:-4] + "AAAA")
        self.assertEqual(wf.status, 403, wf)
        self.assert_stored(path, b"client 2\n")
        def writes_logged():
            return [l for l in self.lines(log) if l["path"] == path]
        wait_until(lambda: len(writes_logged()) >= 4, slack(5.0), 0.05)
        lines = self.lines(log)
        # lines are written as requests complete, so by status, not order
        writes = {l["status"]: l for l in lines if l["path"] == path}
        self.assertEqual(len([l for l in lines if l["path"] == path]), 4, lines)
        self.assertEqual(sorted(writes), sorted([w2.status, 409, 428, 403]))
        ok, stale, none, forged = (writes[w2.status], writes[409], writes[428],
                                   writes[403])
        self.assertEqual((ok["method"], stale["method"], none["method"],
                          forged["method"]), ("PUT", "PUT", "PUT", "DELETE"))
        self.assertEqual((ok["decision"], ok["lock"], ok["token"],
                          ok["upstream_status"]),
                         ("admitted", lock, g2["token"], w2.status))
        self.assertEqual(ok["bytes_in"], len(b"client 2\n"))
        self.assertEqual((stale["decision"], stale["error"], stale["lock"],
                          stale["token"], stale["current"],
                          stale["upstream_status"]),
                         ("stale_token", "stale_token", lock, g1["token"],
                          g2["token"], None))
        self.assertEqual((none["decision"], none["lock"], none["token"]),
                         ("token_required", lock, None))
        self.assertEqual((forged["decision"], forged["lock"]), ("forged_token", lock))
        for l in writes.values():
            self.assertEqual(l["endpoint"], "proxy_write")
            self.assertEqual(l["client"], "127.0.0.1")
            self.assertIsInstance(l["duration_ms"], (int, float))
            self.assertRegex(l["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        # the grants are in the log too, with their tokens
        grants = [l for l in lines if l["endpoint"] == "acquire"]
        self.assertEqual(sorted(l["token"] for l in grants),
                         sorted([g1["token"], g2["token"]]))
        # never a lease or a sequencer
        with open(log) as f:
            text = f.read()
        for secret in (g1["lease"], g2["lease"], g1["sequencer"],
                       g2["sequencer"], g1["sequencer"].split(".")[-1]):
            self.assertNotIn(secret, text)

    def test_text_format_has_one_key_value_line_per_request(self):
        log = self.log_file()
        self.start_store(flags=["--access-log", log,
                                "--access-log-format", "text"])
        path = self.obj("text")
        g = self.grant(path)
        self.put_ok(path, b"data\n", g["sequencer"])
        self.send("PUT", path + "?X-Amz-Signature=topsecret", b"x")
        def read():
            return [l.decode() for l in harness.complete_lines(log)]
        # a line is written once its request completed, which may be just
        # after the client read the answer
        def puts():
            return [l for l in read() if '"PUT %s"' % path in l]
        self.assertTrue(wait_until(lambda: len(puts()) >= 2, slack(5.0), 0.05))
        lines = read()
        put = puts()
        self.assertEqual(len(put), 2, lines)
        # the two requests may complete on different loops, so their lines
        # come in either order
        admitted = [l for l in put if " decision=admitted " in l]
        refused = [l for l in put if " decision=token_required " in l]
        self.assertEqual(len(admitted), 1, put)
        self.assertEqual(len(refused), 1, put)
        self.assertIn(" token=%d " % g["token"], admitted[0])
        self.assertIn(" lock=%s " % self.lock_of(path), admitted[0])
        self.assertNotIn("topsecret", "\n".join(lines))
        self.assertNotIn(g["lease"], "\n".join(lines))

    def test_a_path_cannot_forge_a_line(self):
        log = self.log_file()
        self.start_store(flags=["--access-log", log,
                                "--access-log-format", "text"])
        raw = (b"GET /a%0a\"b\x01c HTTP/1.1\r\nHost: x\r\n\r\n")
        harness.raw_exchange(self.gw.port, raw)

        def text_():
            with open(log, "rb") as f:
                return f.read()
        wait_until(lambda: b"/a%0a" in text_(), slack(5.0), 0.05)
        text = text_()
        mine = [l for l in text.split(b"\n") if b"/a%0a" in l]
        self.assertEqual(len(mine), 1, text)
        self.assertIn(b'"GET /a%0a\\x22b\\x01c" 400 ', mine[0])
        self.assertNotIn(b"\x01", text)

    def test_json_lines_stay_json_whatever_bytes_the_path_has(self):
        log = self.log_file()
        self.start_store(flags=["--access-log", log])
        for target in (b"/caf\xc3\xa9", b"/q\"uote\\back", b"/bad\xff\xfe",
                       b"/x" * 1500):
            harness.raw_exchange(self.gw.port, b"GET " + target +
                                 b"?sig=topsecret HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(wait_until(
            lambda: len([l for l in self.lines(log) if l["endpoint"] == "proxy_read"]) >= 4,
            slack(5.0), 0.05))
        paths = [l["path"] for l in self.lines(log) if l["endpoint"] == "proxy_read"]
        self.assertIn("/caf\u00e9", paths)
        self.assertIn('/q"uote\\back', paths)
        self.assertIn("/bad\u00ff\u00fe", paths)
        long = [p for p in paths if p.startswith("/x/x")]
        self.assertEqual(len(long), 1)
        self.assertEqual(long[0], ("/x" * 1500)[:2048] + "...")
        with open(log, "rb") as f:
            self.assertNotIn(b"topsecret", f.read())

    def test_sighup_reopens_the_log_for_logrotate(self):
        log = self.log_file()
        self.start_store(flags=["--access-log", log])

        def paths(p):
            if not os.path.exists(p):
                return []
            return [l["path"] for l in self.lines(p)
                    if l["endpoint"] == "proxy_read"]
        # a line is written when its request completes, which may be just
        # after the client read the answer: each is awaited before the
        # file moves under it
        self.send("GET", "/before-rotate")
        self.assertTrue(wait_until(lambda: paths(log) == ["/before-rotate"],
                                   slack(5.0), 0.05), paths(log))
        os.rename(log, log + ".1")
        self.send("GET", "/after-rename")   # still the old file
        self.assertTrue(wait_until(lambda: len(paths(log + ".1")) >= 2,
                                   slack(5.0), 0.05), paths(log + ".1"))
        self.gw.proc.send_signal(signal.SIGHUP)
        # the file appears before the gateway's lines go to it: the
        # gateway's own word says when they do

        def reopened():
            with open(self.gw.logpath, errors="replace") as f:
                return "access-log: reopened" in f.read()
        self.assertTrue(wait_until(reopened, slack(5.0), 0.05),
                        "SIGHUP did not reopen the log")
        self.assertTrue(os.path.exists(log),
                        "SIGHUP did not create the log again")
        self.send("GET", "/after-reopen")
        self.assertTrue(self.gw.alive())
        self.assertTrue(wait_until(lambda: len(paths(log)) >= 1, slack(5.0), 0.05))
        self.assertEqual(paths(log + ".1"), ["/before-rotate", "/after-rename"])
        self.assertEqual(paths(log), ["/after-reopen"])

    def test_an_access_log_that_cannot_be_opened_stops_the_start(self):
        p = subprocess.run([harness.Gateway.executable(), "--access-log",
                            "/nonexistent-dir/x/access.log"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=10)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn(b"access-log", p.stdout)
