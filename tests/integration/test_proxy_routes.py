"""test_proxy_routes.py - which lock guards a path: an upstream URL with a path of its
own, and route rules that are matched against the resolved request path.

The shared base (FenceCase: a gateway in front of a real store, the raw
requests and slow uploads these tests send) is fencecase.py."""

import uuid

import harness
from harness import slack, wait_until
from storage import on_both_origins, new_key_file, write_config
from fencecase import FenceCase


@on_both_origins
class UpstreamPathTests(FenceCase):
    """A gateway whose upstream URL has a path (/sub): nothing outside it
    can be read or written."""

    def setUp(self):
        super().setUp()
        self.use_shared()
        key, keypath = new_key_file()
        self.key = key
        self.sub = self.start_gateway(self.redis.port, self.store.port, [
            "--key-file", keypath, "--forward-token", "yes",
            "--upstream", "http://127.0.0.1:%d/sub" % self.store.port])
        self.gw = self.sub
        self.secret_path = "/secret-%s.txt" % uuid.uuid4().hex[:8]
        self.secret = ("the secret %s\n" % uuid.uuid4().hex).encode()
        self.store.put_file(self.secret_path, self.secret)
        self.inside = "/inside-%s.txt" % uuid.uuid4().hex[:8]
        self.inside_data = self.fixture("/sub" + self.inside)

    def climbing(self):
        s = self.secret_path
        return ["/.." + s, "/%2e%2e" + s, "/a/../.." + s, "//.." + s,
                "/..%2f" + s[1:], "/.%2e" + s, "/%2E%2E" + s,
                "/a//../.." + s, "/a/%2e%2e/%2e%2e" + s, "/..%2F" + s[1:],
                "/a/b/../../.." + s, "/%2e%2e%2f" + s[1:],
                "/%2E%2E%2F" + s[1:], "/a%2f..%2f..%2f" + s[1:]]

    def test_reads_cannot_leave_the_upstream_path(self):
        r = self.send("GET", self.inside)
        self.assertEqual((r.status, r.body), (200, self.inside_data),
                         "the upstream path prefix does not work")
        # answered before the mark: its line, however late Apache writes
        # it, is not taken for one the climbing paths caused
        mark = self.mark()
        for p in self.climbing():
            for method in ("GET", "HEAD", "PROPFIND", "OPTIONS"):
                with self.subTest(method=method, path=p):
                    r = self.send(method, p, headers=[("Depth", "0")])
                    self.assertNotIn(self.secret.strip(), r.body)
                    self.assertEqual(r.status, 400, r)
                    if method != "HEAD":
                        self.assert_error(r, 400, "bad_path", p)
        self.assert_nothing_upstream(mark, "reads above the upstream path")

    def test_writes_cannot_leave_the_upstream_path(self):
        lock = self.secret_path.strip("/")
        g = self.grant(lock)       # a lock whose name matches the target
        ig = self.grant(self.inside)
        mark = self.mark()
        for p in self.climbing():
            for method, body, extra in (
                    ("PUT", b"overwritten\n", []), ("DELETE", None, []),
                    ("MOVE", None, [("Destination", "/stolen.txt")]),
                    ("COPY", None, [("Destination", "/stolen.txt")])):
                with self.subTest(method=method, path=p):
                    r = self.send(method, p, body, headers=extra,
                                  token=g["sequencer"])
                    self.assert_error(r, 400, "bad_path", p)
            with self.subTest(method="MOVE onto", path=p):
                r = self.send("MOVE", self.inside, token=ig["sequencer"],
                              headers=[("Destination", p),
                                       ("Destination-Fencing-Token",
                                        g["sequencer"])])
                self.assertEqual(r.status, 400, r)
                self.assertIn(r.json.get("error"),
                              ("bad_destination", "bad_path"), r)
        self.assert_nothing_upstream(mark, "writes above the upstream path")
        self.assertEqual(self.store.read(self.secret_path), self.secret)
        self.assert_stored("/sub" + self.inside, self.inside_data)
        self.assert_absent("/stolen.txt")
        self.assert_absent("/sub/stolen.txt")

    def test_destination_is_forwarded_under_the_upstream_path(self):
        copied = "/copied-%s.txt" % uuid.uuid4().hex[:8]
        s = self.grant(self.inside)
        d = self.grant(copied)
        r = self.send("COPY", self.inside, token=s["sequencer"], headers=[
            ("Destination", "http://127.0.0.1:%d%s" % (self.gw.port, copied)),
            ("Destination-Fencing-Token", d["sequencer"])])
        self.assertIn(r.status, (201, 204), r)
        self.assert_stored("/sub" + copied, self.inside_data)
        self.assert_absent(copied)
        hits = self.writes_logged(r.test_id)
        self.assertEqual([(e.path, e.destination) for e in hits],
                         [("/sub" + self.inside, "http://127.0.0.1:%d/sub%s"
                           % (self.store.port, copied))])


# ---------------------------------------------------------------------------
# 8: route rules that would never match


class RouteRuleTests(FenceCase):
    """A route prefix that is not a resolved path can never match a
    resolved request path: the gateway resolves it when it reads it, and
    then the rule's lock guards the paths, or, when it cannot be resolved
    inside the upstream, refuses it at start (exit 2 with a reason)."""

    T = uuid.uuid4().hex[:6]
    RULES = (
        # (config line, resolved prefix, lock, a raw path under the prefix)
        ("route /r%s-orders%%2F42/ r%s-orders/42" % (T, T),
         "/r%s-orders/42/" % T, "r%s-orders/42" % T,
         "/r%s-orders%%2F42/" % T),
        ("route /r%s-a//b/ r%s-x" % (T, T), "/r%s-a/b/" % T, "r%s-x" % T,
         "/r%s-a//b/" % T),
        ("route /r%s-c/./d/ r%s-y" % (T, T), "/r%s-c/d/" % T, "r%s-y" % T,
         "/r%s-c/./d/" % T),
        ("route /../r%s-x/ r%s-z" % (T, T), None, "r%s-z" % T, None),
        ("route /r%s-e%%zz/ r%s-e" % (T, T), None, "r%s-e" % T, None),
        ("route /r%s-f%%00/ r%s-f" % (T, T), None, "r%s-f" % T, None),
    )

    def setUp(self):
        super().setUp()
        self.use_shared()

    def start_with_config(self, text):
        _, keypath = new_key_file()
        g = harness.Gateway(self.redis.port, self.store.port, [
            "--config", write_config(text), "--key-file", keypath])
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start(wait=False)

        def settled():
            if g.proc.poll() is not None:
                return "exited"
            try:
                harness.http_request(g.port, "GET", "/_fence/v1/health",
                                     timeout=1.0)
                return "up"
            except OSError:
                return None
        state = wait_until(settled, slack(10.0), 0.03)
        self.assertIsNotNone(state, "fencegate neither ran nor exited")
        return g, state

    def assert_refused_at_start(self, g, what):
        self.assertEqual(g.proc.returncode, 2, "%s: exit code" % what)
        with open(g.logpath, "rb") as f:
            lines = [ln for ln in f.read().decode("utf-8", "replace")
                     .splitlines() if ln.strip() and not ln.startswith("###")]
        self.assertTrue(lines, "%s: exit 2 without a reason" % what)

    def assert_rule_applies(self, g, prefix, lock, raw_prefix, what):
        n = uuid.uuid4().hex[:8]
        obj = prefix + "obj-" + n
        per = self.grant(obj, gw=g)
        r = self.put(obj, b"evil\n", per["sequencer"], gw=g)
        self.assert_error(r, 403, "wrong_lock", "%s: the per-object lock "
                          "wrote under the route" % what)
        self.assertEqual(self.store.wait_log(slack(0.3), test_id=r.test_id),
                         [])
        self.assert_absent(obj)
        rg = self.grant(lock, gw=g)
        self.put_ok(obj, b"route\n", rg["sequencer"], gw=g)
        self.assert_stored(obj, b"route\n", what)
        self.put_ok(raw_prefix + "raw-" + n, b"raw\n", rg["sequencer"], gw=g)
        self.assert_stored(prefix + "raw-" + n, b"raw\n", what)
        self.release_ok(lock, rg["lease"], gw=g)
        self.release_ok(self.lock_of(obj), per["lease"], gw=g)

    def test_route_rules_that_would_never_match_are_refused_or_resolved(self):
        for line, prefix, lock, raw_prefix in self.RULES:
            with self.subTest(rule=line):
                g, state = self.start_with_config(line + "\n")
                if prefix is None:
                    self.assertEqual(state, "exited", "%s: accepted" % line)
                    self.assert_refused_at_start(g, line)
                else:
                    self.assertEqual(state, "up", "%s: refused:\n%s"
                                     % (line, g.log_tail(5)))
                    self.assert_rule_applies(g, prefix, lock, raw_prefix,
                                             line)
                g.stop()
        # the resolvable rules together apply each; one bad rule among
        # them is still refused
        good = [r for r in self.RULES if r[1] is not None]
        g, state = self.start_with_config("".join(r[0] + "\n" for r in good))
        self.assertEqual(state, "up")
        for line, prefix, lock, raw_prefix in good:
            with self.subTest(rule=line, config="all good rules"):
                self.assert_rule_applies(g, prefix, lock, raw_prefix, line)
        g.stop()
        g, state = self.start_with_config("".join(r[0] + "\n"
                                                  for r in self.RULES))
        self.assertEqual(state, "exited")
        self.assert_refused_at_start(g, "all rules")


# ---------------------------------------------------------------------------
# 10: a departed waiter never gets the lock; a grant nobody received
