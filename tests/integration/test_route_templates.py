"""test_route_templates.py - route templates (contract v1.4, "Route
templates" and "Which lock guards this?"): `route /orders/{id}/
orders/{id}` gives every path under an order that order's lock, in front
of a REST store (reststore.py) and of a WebDAV store (nginx), and the
route endpoint and `--check-config --route-test` say which lock and rule a
path gets."""

import hashlib
import os
import secrets
import subprocess
import uuid

import harness
import test_auth
from harness import Gateway, TestCase
from reststore import RestStore
from storage import write_config
from fencecase import FenceCase

ORDERS = "route /orders/{id}/ orders/{id}"


def route_of(gw, query):
    return harness.http_request(gw.port, "GET", "/_fence/v1/route" + query)


class RestRouteTests(TestCase):
    """A gateway with `route /orders/{id}/ orders/{id}` in front of a
    JSON-over-HTTP store."""

    uses_shared_env = False

    def setUp(self):
        super().setUp()
        env = harness.Env(["--config", write_config(ORDERS + "\n")],
                          origin=RestStore(), key_file=True)
        self.log_paths += env.log_paths()
        env.start()
        self.addCleanup(self._stop_env, env)
        self.env = env
        self.gw = env.gw
        self.redis = env.redis
        self.store = env.origin

    def write(self, method, path, doc=None, seq=None):
        headers = {"Fencing-Token": seq} if seq else None
        return harness.http_request(self.gw.port, method, path, body=doc,
                                    headers=headers)

    def assert_unchanged(self, path, doc, writes, what):
        self.assertEqual(self.store.get(path), (200, doc), what)
        self.assertEqual(self.store.writes(), writes,
                         "%s: the refused write reached the store" % what)

    def test_a_write_under_an_order_needs_that_orders_lock(self):
        item = "/orders/42/items/7"
        g42 = self.acquire_ok("orders/42", ttl_ms=30000)
        r = self.write("PUT", item, {"sku": "a", "n": 1}, g42["sequencer"])
        self.assertEqual(r.status, 201, r)
        doc = {"sku": "a", "n": 1}
        self.assert_unchanged(item, doc, 1, "the first PUT")

        # the per-object lock is not the one the route gives
        per = self.acquire_ok("orders/42/items/7", ttl_ms=30000)
        r = self.write("PUT", item, {"sku": "evil"}, per["sequencer"])
        self.assert_error(r, 403, "wrong_lock")
        self.assert_unchanged(item, doc, 1, "the per-object lock")
        # another order's lock guards another order only
        g43 = self.acquire_ok("orders/43", ttl_ms=30000)
        for method, body in (("PUT", {"sku": "evil"}), ("PATCH", {"n": 9}),
                             ("POST", {"sku": "new"}), ("DELETE", None)):
            with self.subTest(method=method):
                r = self.write(method, item, body, g43["sequencer"])
                self.assert_error(r, 403, "wrong_lock")
        self.assert_unchanged(item, doc, 1, "order 43's lock")
        r = self.write("PUT", item, {"sku": "evil"})
        self.assert_error(r, 428, "token_required")
        self.assert_unchanged(item, doc, 1, "no token")
        # order 43's own paths take order 43's lock
        r = self.write("PUT", "/orders/43/items/1", {"sku": "b"},
                       g43["sequencer"])
        self.assertEqual(r.status, 201, r)

        # a stale sequencer of the right lock
        self.release_ok("orders/42", g42["lease"])
        g42b = self.acquire_ok("orders/42", ttl_ms=30000)
        writes = self.store.writes()
        r = self.write("PUT", item, {"sku": "stale"}, g42["sequencer"])
        self.assert_error(r, 409, "stale_token")
        self.assert_unchanged(item, doc, writes, "the stale sequencer")

        # the current one passes, for every write method
        r = self.write("PATCH", item, {"n": 2}, g42b["sequencer"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store.get(item), (200, {"sku": "a", "n": 2}))
        r = self.write("POST", "/orders/42/items/", {"sku": "c"},
                       g42b["sequencer"])
        self.assertEqual(r.status, 201, r)
        made = r.header("Location")
        self.assertTrue(made and made.startswith("/orders/42/items/"), r)
        self.assertEqual(self.store.get(made), (200, {"sku": "c"}))
        r = self.write("DELETE", item, None, g42b["sequencer"])
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.store.get(item)[0], 404)

    def test_a_name_built_from_captures_must_be_a_lock_name(self):
        g = self.acquire_ok("orders/42", ttl_ms=30000)
        writes = self.store.writes()
        # a decoded space, or '*': no lock name
        for path in ("/orders/a%20b/items/1", "/orders/4*2/x"):
            with self.subTest(path=path):
                r = self.write("PUT", path, {"x": 1}, g["sequencer"])
                self.assert_error(r, 400, "bad_lock_name")
        self.assertEqual(self.store.writes(), writes)

    def test_the_route_endpoint_names_the_lock_the_proxy_checks(self):
        r = route_of(self.gw, "?path=/orders/42/items/7")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json, {"path": "/orders/42/items/7",
                                  "lock": "orders/42", "rule": ORDERS[6:]})
        # resolved as the proxy resolves it
        r = route_of(self.gw, "?path=//orders/x/..%2F43/./items")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["lock"], "orders/43")
        r = route_of(self.gw, "?path=/bucket/a.txt")
        self.assertEqual(r.json, {"path": "/bucket/a.txt",
                                  "lock": "bucket/a.txt", "rule": None})
        self.assert_error(route_of(self.gw, "?path=/orders/a%20b/1"), 400,
                          "bad_lock_name")
        self.assert_error(route_of(self.gw, "?path=/a%2520b"), 400,
                          "bad_lock_name")
        self.assert_error(route_of(self.gw, ""), 400, "bad_request")
        self.assert_error(route_of(self.gw, "?prefix=/x"), 400, "bad_request")
        self.assert_error(route_of(self.gw, "?path=/../x"), 400, "bad_path")
        r = harness.http_request(self.gw.port, "POST",
                                 "/_fence/v1/route?path=/x")
        self.assertEqual(r.status, 405, r)

        # and the lock it names is the one a write there is checked for
        r = route_of(self.gw, "?path=/orders/77/notes/1")
        g = self.acquire_ok(r.json["lock"], ttl_ms=30000)
        r = self.write("PUT", "/orders/77/notes/1", {"t": "x"}, g["sequencer"])
        self.assertEqual(r.status, 201, r)


class RouteEndpointAuthTests(TestCase):
    """With an auth-file, the route endpoint answers any known principal,
    whatever its rights, and no one else."""

    uses_shared_env = False
    KEY = secrets.token_urlsafe(32)

    def setUp(self):
        super().setUp()
        auth = write_config("nobody sha256:%s\n"
                            % hashlib.sha256(self.KEY.encode()).hexdigest())
        os.chmod(auth, 0o600)
        env = harness.Env(["--config", write_config(ORDERS + "\n"),
                           "--auth-file", auth],
                          origin=RestStore(), key_file=True)
        self.log_paths += env.log_paths()
        env.start()
        self.addCleanup(self._stop_env, env)
        self.gw = env.gw
        self.redis = env.redis

    def ask(self, headers=None):
        return harness.http_request(self.gw.port, "GET",
                                    "/_fence/v1/route?path=/orders/42/x",
                                    headers=headers)

    def test_any_known_principal_may_ask(self):
        r = self.ask({"Authorization": "Bearer " + self.KEY})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["lock"], "orders/42")
        self.assert_error(self.ask(), 401, "unauthenticated")
        self.assert_error(self.ask({"Authorization": "Bearer "
                                    + secrets.token_urlsafe(32)}),
                          401, "unauthenticated")


class RouteTestFlagTests(TestCase):
    """`fencegate --check-config --route-test PATH`: the lock and rule a
    path gets, without starting anything."""

    axes = ("build",)       # --check-config: no Redis
    uses_shared_env = False

    def run_check(self, config, *paths):
        argv = [Gateway.executable(), "--check-config", "--config",
                write_config(config)]
        for p in paths:
            argv += ["--route-test", p]
        r = subprocess.run(argv, capture_output=True, timeout=30)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def test_route_test_prints_the_lock_and_the_rule(self):
        rc, out, err = self.run_check(
            ORDERS + "\nroute /{bucket}/ {bucket}\n",
            "/orders/42/items/7", "/b/k", "//orders/x/../43/y")
        self.assertEqual(rc, 0, out + err)
        lines = out.splitlines()
        self.assertIn("/orders/42/items/7 -> lock orders/42 (rule "
                      "/orders/{id}/ orders/{id})", lines)
        self.assertIn("/b/k -> lock b (rule /{bucket}/ {bucket})", lines)
        self.assertIn("//orders/x/../43/y -> lock orders/43 (rule "
                      "/orders/{id}/ orders/{id})", lines)
        rc, out, err = self.run_check(ORDERS + "\n", "/bucket/a.txt")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("/bucket/a.txt -> lock bucket/a.txt (default)",
                      out.splitlines())

    def test_route_test_of_no_lock_name_exits_2(self):
        rc, out, err = self.run_check(ORDERS + "\n", "/orders/a%20b/1")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("bad_lock_name", out)
        rc, out, err = self.run_check(ORDERS + "\n", "/a%20b")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("bad_lock_name", out)

    def test_bad_templates_are_bad_settings(self):
        for line in ("route /orders/{id}/ orders/{other}",
                     "route /orders{id}/ x", "route /orders/{id/ x",
                     "route /orders/id}/ x", "route /o/{id}/ {id}/"):
            with self.subTest(line=line):
                rc, out, err = self.run_check(line + "\n")
                self.assertEqual(rc, 2, out + err)
                self.assertIn("route", out + err)


class TeamSubtreeTests(FenceCase):
    """A WebDAV store (nginx) with `route /teams/{team}/ teams/{team}`: a
    team's collection, made and deleted whole, is that team's lock's."""

    store_config = "route /teams/{team}/ teams/{team}\n"

    def setUp(self):
        super().setUp()
        self.use_shared()
        self.store.mkdir("/teams/")
        self.team = "t" + uuid.uuid4().hex[:10]
        self.other = "t" + uuid.uuid4().hex[:10]

    def test_a_teams_collection_is_its_locks(self):
        t = "/teams/%s/" % self.team
        mine = self.grant("teams/" + self.team)
        theirs = self.grant("teams/" + self.other)
        r = self.send("MKCOL", t, token=theirs["sequencer"])
        self.assert_error(r, 403, "wrong_lock")
        self.assert_absent(t)
        r = self.send("MKCOL", t, token=mine["sequencer"])
        self.assertEqual(r.status, 201, r)
        r = self.send("MKCOL", t + "sub/", token=mine["sequencer"])
        self.assertEqual(r.status, 201, r)
        self.put_ok(t + "sub/f.txt", b"one\n", mine["sequencer"])
        self.assert_stored(t + "sub/f.txt", b"one\n")

        # the whole collection: another team's lock, and the collection of
        # all teams, which no one lock guards
        r = self.send("DELETE", t, token=theirs["sequencer"])
        self.assert_error(r, 403, "wrong_lock")
        every = self.grant("teams")
        r = self.send("DELETE", "/teams/", token=every["sequencer"])
        self.assert_error(r, 403, "subtree_unguarded")
        self.assert_stored(t + "sub/f.txt", b"one\n")

        # a stale sequencer of the team's own lock
        self.release_ok("teams/" + self.team, mine["lease"])
        again = self.grant("teams/" + self.team)
        r = self.send("DELETE", t, token=mine["sequencer"])
        self.assert_error(r, 409, "stale_token")
        self.assert_stored(t + "sub/f.txt", b"one\n")

        r = self.send("DELETE", t, token=again["sequencer"])
        self.assertIn(r.status, (200, 204), r)
        self.assert_absent(t + "sub/f.txt")
        self.assert_absent(t)

    def test_the_route_endpoint_and_the_store_agree(self):
        r = route_of(self.gw, "?path=/teams/%s/sub/f.txt" % self.team)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["lock"], "teams/" + self.team)
        self.assertEqual(r.json["rule"], "/teams/{team}/ teams/{team}")


class ProxyAuthTemplateTests(test_auth.AuthCase):
    """With `proxy-auth required`, a read of a collection reaches every
    lock a template inside it can give: `read:` on the lock the collection
    fixes, or on every name the template can make."""

    def setUp(self):
        self.extra_flags = ("--proxy-auth", "required", "--config",
                            write_config("route /docs/{team}/ team-{team}\n"))
        super().setUp()

    def read(self, who, path):
        return self.gw.request("GET", path, headers={
            "Fence-Authorization": "Bearer " + test_auth.KEYS[who]})

    def test_a_collection_read_needs_read_on_what_templates_inside_give(self):
        n = len(self.upstream.records)
        # reader has read:docs/, but every team's lock is team-...
        for path in ("/docs/", "/docs/a/", "/docs/a/x"):
            with self.subTest(path=path):
                self.assert_refused(self.read("reader", path), 403,
                                    "forbidden")
        self.assertIn("team-", self.read("reader", "/docs/").json["message"])
        self.assertEqual(self.upstream.records[n:], [])
        for path in ("/docs/", "/docs/a/", "/docs/a/x"):
            with self.subTest(who="ops", path=path):
                self.assertEqual(self.read("ops", path).status, 200)
