"""test_auth.py - who may (contract v1.2): principals from auth-file,
bearer keys, rights over lock-name prefixes, 401/403/429 answers, a grant
that belongs to its principal, Break for admins, proxy-auth, the access
log's principal, the refusal metrics, reload on SIGHUP, open mode's
warning and its refusal off loopback, and `fencegate --new-key`."""

import hashlib
import http.client
import json
import os
import re
import secrets
import signal
import subprocess
import tempfile
import time

import harness
from harness import LOCKS, Gateway, TestCase, slack, wait_until
from origins import StandIn

KEYS = {n: secrets.token_urlsafe(32) for n in
        ("ci", "ops", "reader", "nobody", "late", "writer")}


def sha(key):
    return hashlib.sha256(key.encode()).hexdigest()


def auth_lines(extra=()):
    return "\n".join([
        "# NAME   CREDENTIAL   RIGHTS",
        "ci       sha256:%s    lock:jobs/ observe:*" % sha(KEYS["ci"]),
        "ops      sha256:%s    admin:* metrics" % sha(KEYS["ops"]),
        "reader   sha256:%s    read:docs/ observe:docs/" % sha(KEYS["reader"]),
        "nobody   sha256:%s" % sha(KEYS["nobody"]),
        "writer   sha256:%s    lock:docs/" % sha(KEYS["writer"]),
        "certops  cert         admin:*",
    ] + list(extra)) + "\n"


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def bearer(who):
    return {"Authorization": "Bearer " + KEYS[who]}


class AuthCase(TestCase):
    """A gateway of its own with an auth-file (and an access log)."""

    uses_shared_env = False
    extra_flags = ()

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(dir=harness.tmp_root())
        self.auth_file = write_file(os.path.join(self.dir, "auth"), auth_lines())
        self.access_log = os.path.join(self.dir, "access.log")
        self.redis = harness.new_redis()
        self.redis.start()
        self.addCleanup(self.redis.stop)
        self.upstream = StandIn().start()
        self.addCleanup(self.upstream.stop)
        self.gw = self.start_gateway(
            self.redis.port, self.upstream.port,
            ["--auth-file", self.auth_file, "--access-log", self.access_log]
            + list(self.extra_flags))
        self.assertTrue(self.gw.wait_healthy(slack(10.0)), self.gw.log_tail())

    def api(self, who, method, name, body=None, headers=None):
        h = dict(bearer(who)) if who else {}
        h.update(headers or {})
        return self.gw.request(method, LOCKS + name, body=body, headers=h)

    def take(self, who, name, **fields):
        r = self.api(who, "POST", name, body=fields)
        self.assertEqual(r.status, 200, r)
        return r.json

    def assert_refused(self, r, status, code):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.json["error"], code, r)
        for k in KEYS.values():
            self.assertNotIn(k, r.body.decode(errors="replace"))

    def log_lines(self):
        def some():
            return os.path.exists(self.access_log) and \
                os.path.getsize(self.access_log) > 0
        wait_until(some, slack(5.0))
        return [json.loads(line)
                for line in harness.complete_lines(self.access_log)]


class WhoAsks(AuthCase):

    def test_no_credential_is_401_with_www_authenticate(self):
        r = self.api(None, "POST", "jobs/a")
        self.assert_refused(r, 401, "unauthenticated")
        self.assertEqual(r.header("WWW-Authenticate"), 'Bearer realm="fencegate"')
        self.assertEqual(self.redis.keys("*{jobs/a}*"), [])

    def test_unknown_key_and_other_schemes_are_401(self):
        for h in ({"Authorization": "Bearer " + secrets.token_urlsafe(32)},
                  {"Authorization": "Basic Y2k6cGFzcw=="},
                  {"Authorization": "Bearer"},
                  {"Authorization": "Bearer not a token"},
                  {"Authorization": "Bearer " + KEYS["ci"] + "x"}):
            r = self.gw.request("GET", LOCKS + "jobs/a", headers=h)
            self.assert_refused(r, 401, "unauthenticated")
            self.assertEqual(r.header("WWW-Authenticate"),
                             'Bearer realm="fencegate"')

    def test_scheme_is_case_insensitive(self):
        r = self.gw.request("GET", LOCKS + "jobs/a",
                            headers={"Authorization": "bearer " + KEYS["ci"]})
        self.assertEqual(r.status, 200, r)

    def test_health_livez_readyz_stay_open(self):
        for p in ("health", "livez", "readyz"):
            r = self.gw.request("GET", "/_fence/v1/" + p)
            self.assertEqual(r.status, 200, (p, r))

    def test_a_known_key_without_rights_is_403_naming_the_right(self):
        r = self.api("nobody", "POST", "jobs/b")
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("lock:", r.json["message"])
        self.assertIn("jobs/b", r.json["message"])
        self.assertEqual(self.redis.keys("*{jobs/b}*"), [])

    def test_every_refusal_leaves_no_lock_state(self):
        self.api(None, "POST", "other/x")
        self.api("ci", "POST", "other/x")
        self.api("reader", "POST", "docs/x")
        self.assertEqual(self.redis.keys("*{other/x}*"), [])
        self.assertEqual(self.redis.keys("*{docs/x}*"), [])


class Rights(AuthCase):

    def test_lock_right_covers_its_prefix_only(self):
        g = self.take("ci", "jobs/build-1")
        self.assertEqual(self.api("ci", "PATCH", "jobs/build-1",
                                  body={"lease": g["lease"]}).status, 200)
        r = self.api("ci", "POST", "deploy/prod")
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("lock:", r.json["message"])
        r = self.api("ci", "DELETE", "jobs/build-1",
                     headers={"Fence-Lease": g["lease"]})
        self.assertEqual(r.status, 204, r)

    def test_prefix_is_a_string_prefix(self):
        # lock:jobs/ does not cover "jobsX" nor "jobs" itself
        for n in ("jobsX/a", "jobs"):
            self.assert_refused(self.api("ci", "POST", n), 403, "forbidden")

    def test_observe_right(self):
        self.assertEqual(self.api("reader", "GET", "docs/readme").status, 200)
        r = self.api("reader", "GET", "jobs/x")
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("observe:", r.json["message"])
        # lock: includes observe: of the same prefix; observe:* everything
        self.assertEqual(self.api("ci", "GET", "anything/at/all").status, 200)

    def test_admin_includes_lock(self):
        g = self.take("ops", "deploy/prod")
        self.assertEqual(self.api("ops", "DELETE", "deploy/prod",
                                  headers={"Fence-Lease": g["lease"]}).status, 204)

    def test_check_needs_observe_on_the_sequencers_lock(self):
        g = self.take("ci", "jobs/c")
        body = {"sequencer": g["sequencer"]}
        r = self.gw.request("POST", "/_fence/v1/check", body=body,
                            headers=bearer("reader"))
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("observe:", r.json["message"])
        r = self.gw.request("POST", "/_fence/v1/check", body=body,
                            headers=bearer("ci"))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.json["valid"])
        r = self.gw.request("POST", "/_fence/v1/check", body=body)
        self.assert_refused(r, 401, "unauthenticated")

    def test_metrics_right(self):
        r = self.gw.request("GET", "/_fence/v1/metrics", headers=bearer("ci"))
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("metrics", r.json["message"])
        r = self.gw.request("GET", "/_fence/v1/metrics", headers=bearer("ops"))
        self.assertEqual(r.status, 200, r)
        self.assert_refused(self.gw.request("GET", "/_fence/v1/metrics"),
                            401, "unauthenticated")


class GrantBelongsToItsPrincipal(AuthCase):

    def test_a_leaked_lease_is_not_enough(self):
        g = self.take("ci", "jobs/owned")
        lease = g["lease"]
        # ops has admin:* (so lock: on it), but the grant is ci's
        r = self.api("ops", "PATCH", "jobs/owned", body={"lease": lease})
        self.assert_refused(r, 403, "forbidden")
        r = self.api("ops", "DELETE", "jobs/owned", headers={"Fence-Lease": lease})
        self.assert_refused(r, 403, "forbidden")
        r = self.api("ops", "POST", "jobs/owned", body={"lease": lease})
        self.assert_refused(r, 403, "forbidden")
        st = self.api("ci", "GET", "jobs/owned").json
        self.assertTrue(st["held"])
        self.assertEqual(st["token"], g["token"])
        self.assertEqual(st["holders"], 1)
        # its own principal may
        r = self.api("ci", "POST", "jobs/owned", body={"lease": lease})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["holds"], 2)
        self.assertEqual(self.api("ci", "PATCH", "jobs/owned",
                                  body={"lease": lease}).status, 200)
        for _ in range(2):
            self.assertEqual(self.api("ci", "DELETE", "jobs/owned",
                                      headers={"Fence-Lease": lease}).status, 204)

    def test_a_lease_that_no_longer_holds_is_410_whoever_asks(self):
        g = self.take("ci", "jobs/gone")
        self.assertEqual(self.api("ci", "DELETE", "jobs/gone",
                                  headers={"Fence-Lease": g["lease"]}).status, 204)
        r = self.api("ops", "DELETE", "jobs/gone", headers={"Fence-Lease": g["lease"]})
        self.assert_refused(r, 410, "lease_expired")
        r = self.api("ops", "PATCH", "jobs/gone", body={"lease": g["lease"]})
        self.assert_refused(r, 410, "lease_expired")

    def test_a_waiters_grant_belongs_to_the_waiter(self):
        g = self.take("ci", "jobs/queue")
        w = self.call_as("ops", "jobs/queue", {"wait_ms": 20000})
        self.assertTrue(wait_until(
            lambda: self.api("ci", "GET", "jobs/queue").json["waiters"] == 1,
            slack(5.0)))
        self.assertEqual(self.api("ci", "DELETE", "jobs/queue",
                                  headers={"Fence-Lease": g["lease"]}).status, 204)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        lease = r.json["lease"]
        r = self.api("ci", "PATCH", "jobs/queue", body={"lease": lease})
        self.assert_refused(r, 403, "forbidden")
        self.assertEqual(self.api("ops", "DELETE", "jobs/queue",
                                  headers={"Fence-Lease": lease}).status, 204)

    def call_as(self, who, name, body):
        c = harness.Call(self.gw.port, "POST", LOCKS + name, body=body,
                         timeout=slack(30.0), headers=bearer(who))
        c.start()
        return c


class Break(AuthCase):

    def test_break_needs_admin(self):
        g = self.take("ci", "jobs/stuck")
        r = self.api("ci", "DELETE", "jobs/stuck",
                     headers={"Fence-Break": str(g["token"])})
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("admin:", r.json["message"])
        self.assertTrue(self.api("ci", "GET", "jobs/stuck").json["held"])

    def test_an_operator_breaks_a_stuck_lock_and_the_stale_write_is_refused(self):
        g = self.take("ci", "jobs/stuck2", ttl_ms=3600000)
        r = self.api("ops", "DELETE", "jobs/stuck2",
                     headers={"Fence-Break": str(g["token"])})
        self.assertEqual(r.status, 204, r)
        self.assertTrue(wait_until(lambda: any(
            l["endpoint"] == "break" and l["principal"] == "ops" and
            l["status"] == 204 and l["token"] == g["token"]
            for l in self.log_lines()), slack(5.0)), self.log_lines())
        self.assertFalse(self.api("ci", "GET", "jobs/stuck2").json["held"])
        r = self.gw.request("PUT", "/jobs/stuck2", raw=b"late",
                            headers={"Fencing-Token": g["sequencer"]})
        self.assert_refused(r, 409, "stale_token")
        self.assertEqual([x for x in self.upstream.records if x["method"] == "PUT"], [])
        r = self.api("ci", "PATCH", "jobs/stuck2", body={"lease": g["lease"]})
        self.assert_refused(r, 410, "lease_expired")
        g2 = self.take("ci", "jobs/stuck2")
        self.assertGreater(g2["token"], g["token"])

    def test_break_of_another_token_or_a_free_lock_is_409(self):
        g = self.take("ci", "jobs/b409")
        r = self.api("ops", "DELETE", "jobs/b409",
                     headers={"Fence-Break": str(g["token"] + 1)})
        self.assert_refused(r, 409, "stale_token")
        self.assertEqual(self.api("ci", "DELETE", "jobs/b409",
                                  headers={"Fence-Lease": g["lease"]}).status, 204)
        r = self.api("ops", "DELETE", "jobs/b409",
                     headers={"Fence-Break": str(g["token"])})
        self.assert_refused(r, 409, "stale_token")


class ProxyAuth(AuthCase):

    extra_flags = ("--proxy-auth", "required")

    def proxied(self, who, method, path, raw=None, headers=None):
        h = [("Fence-Authorization", "Bearer " + KEYS[who])] if who else []
        if isinstance(headers, dict):
            headers = list(headers.items())
        h += headers or []
        if not any(k == "Fence-Authorization" for k, _ in h) and \
                len({k for k, _ in h}) == len(h):
            return self.gw.request(method, path, raw=raw, headers=dict(h))
        return self.raw_request(method, path, raw, h)

    def raw_request(self, method, path, raw, headers):
        """A request whose headers may repeat a name."""
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in headers:
                conn.putheader(k, v)
            body = raw or b""
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            r = conn.getresponse()
            return harness.Response(r.status, r.reason, r.getheaders(),
                                    r.read(), 0)
        finally:
            conn.close()

    def test_reads_need_a_principal_with_read(self):
        self.assert_refused(self.proxied(None, "GET", "/docs/a"), 401,
                            "unauthenticated")
        r = self.proxied("reader", "GET", "/docs/a")
        self.assertEqual(r.status, 200, r)
        r = self.proxied("reader", "GET", "/jobs/a")
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("read:", r.json["message"])
        # the API's Authorization does not name a principal to the proxy
        r = self.gw.request("GET", "/docs/a", headers=bearer("reader"))
        self.assert_refused(r, 401, "unauthenticated")

    def test_a_collection_read_needs_read_on_everything_under_it(self):
        self.assertEqual(self.proxied("reader", "GET", "/docs/").status, 200)
        self.assertEqual(self.proxied("reader", "PROPFIND", "/docs/",
                                      headers={"Depth": "1"}).status, 200)
        r = self.proxied("reader", "GET", "/")
        self.assert_refused(r, 403, "forbidden")
        r = self.proxied("reader", "PROPFIND", "/",
                         headers={"Depth": "infinity"})
        self.assert_refused(r, 403, "forbidden")

    def test_writes_need_lock_as_well_as_the_sequencer(self):
        g = self.take("ops", "docs/w")
        r = self.proxied("reader", "PUT", "/docs/w", raw=b"x",
                         headers={"Fencing-Token": g["sequencer"]})
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("lock:", r.json["message"])
        r = self.proxied(None, "PUT", "/docs/w", raw=b"x",
                         headers={"Fencing-Token": g["sequencer"]})
        self.assert_refused(r, 401, "unauthenticated")
        self.assertEqual([x for x in self.upstream.records if x["method"] == "PUT"], [])
        r = self.proxied("ops", "PUT", "/docs/w", raw=b"x",
                         headers={"Fencing-Token": g["sequencer"]})
        self.assertEqual(r.status, 200, r)

    def test_a_copy_needs_read_on_its_source(self):
        g = self.take("writer", "docs/copy")
        hdrs = {"Destination": "/docs/copy", "Overwrite": "F",
                "Destination-Fencing-Token": g["sequencer"]}
        r = self.proxied("writer", "COPY", "/secret/payroll", headers=hdrs)
        self.assert_refused(r, 403, "forbidden")
        self.assertIn("read:", r.json["message"])
        self.assertIn("secret/payroll", r.json["message"])
        self.assertEqual([x for x in self.upstream.records if x["method"] == "COPY"], [])
        r = self.proxied("writer", "COPY", "/docs/orig", headers=hdrs)
        self.assertEqual(r.status, 200, r)

    def test_a_repeated_depth_is_refused(self):
        r = self.proxied("reader", "PROPFIND", "/docs/a",
                         headers=[("Depth", "0"), ("Depth", "infinity")])
        self.assert_refused(r, 400, "bad_request")
        self.assertIn("Depth", r.json["message"])
        self.assertEqual(self.upstream.records, [])

    def test_who_asks_comes_before_what_the_routes_say(self):
        # "/" maps to no lock: a stranger learns nothing but 401
        r = self.proxied(None, "PUT", "/", raw=b"x")
        self.assert_refused(r, 401, "unauthenticated")
        r = self.proxied("reader", "PUT", "/", raw=b"x")
        self.assert_refused(r, 400, "bad_lock_name")

    def test_fence_authorization_never_reaches_the_upstream(self):
        g = self.take("ops", "docs/h")
        self.assertEqual(self.proxied("ops", "PUT", "/docs/h", raw=b"x",
                                      headers={"Fencing-Token": g["sequencer"]}).status, 200)
        self.assertEqual(self.proxied("reader", "GET", "/docs/h").status, 200)
        recs = self.upstream.records
        self.assertEqual(len(recs), 2, recs)
        for x in recs:
            self.assertNotIn("fence-authorization",
                             {k.lower() for k, _ in x["headers"]})
            for k in KEYS.values():
                self.assertNotIn(k, json.dumps(x["headers"]))


class ProxyOpen(AuthCase):
    """proxy-auth off (the default): proxied requests need no principal,
    and Fence-Authorization is dropped all the same."""

    def test_reads_pass_and_the_header_is_dropped(self):
        r = self.gw.request("GET", "/jobs/a",
                            headers={"Fence-Authorization": "Bearer " + KEYS["ci"]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.gw.request("GET", "/jobs/a").status, 200)
        for x in self.upstream.records:
            self.assertNotIn("fence-authorization",
                             {k.lower() for k, _ in x["headers"]})


class Audit(AuthCase):

    def test_access_log_names_the_principal_and_never_a_key(self):
        self.take("ci", "jobs/audit")
        self.api(None, "GET", "jobs/audit")
        self.api("reader", "GET", "jobs/audit")
        self.gw.request("GET", LOCKS + "jobs/audit",
                        headers={"Authorization": "Bearer " + secrets.token_urlsafe(20)})
        def lock_lines():
            return [l for l in self.log_lines() if l["path"].startswith(LOCKS)]
        wait_until(lambda: len(lock_lines()) >= 4, slack(5.0))
        lines = lock_lines()
        # a line is written when its request completes, on whichever
        # loop served it: the four come in any order
        def key(t):
            return (t[0], t[1] or "")
        self.assertEqual(sorted(((l["status"], l["principal"]) for l in lines),
                                key=key),
                         sorted([(200, "ci"), (401, None), (403, "reader"),
                                 (401, None)], key=key))
        with open(self.access_log) as f:
            text = f.read()
        for k in KEYS.values():
            self.assertNotIn(k, text)
        with open(self.gw.logpath) as f:
            text = f.read()
        for k in KEYS.values():
            self.assertNotIn(k, text)

    def test_refusals_are_counted_by_reason(self):
        def count(reason):
            r = self.gw.request("GET", "/_fence/v1/metrics", headers=bearer("ops"))
            for line in r.body.decode().splitlines():
                if line.startswith('fencegate_auth_refused_total{reason="%s"}' % reason):
                    return float(line.split()[-1])
            return None
        u0, f0 = count("unauthenticated"), count("forbidden")
        self.assertIsNotNone(u0)
        self.assertIsNotNone(f0)
        self.api(None, "GET", "jobs/m")
        self.api(None, "GET", "jobs/m")
        self.api("reader", "GET", "jobs/m")
        self.assertTrue(wait_until(lambda: count("unauthenticated") == u0 + 2 and
                                   count("forbidden") == f0 + 1, slack(5.0)),
                        (count("unauthenticated"), count("forbidden")))


class AuditText(AuthCase):

    extra_flags = ("--access-log-format", "text")

    def test_text_lines_name_the_principal_or_a_dash(self):
        self.take("ci", "jobs/text")
        self.api(None, "GET", "jobs/text")

        def lines():
            return [l.decode() for l in harness.complete_lines(self.access_log)
                    if (LOCKS + "jobs/text").encode() in l]
        self.assertTrue(wait_until(lambda: len(lines()) >= 2, slack(5.0)))
        got = lines()
        self.assertEqual(len(got), 2, got)
        # written as each request completes, on the loop that served it:
        # in either order
        ok = [l for l in got if " 200 " in l]
        refused = [l for l in got if " 401 " in l]
        self.assertEqual((len(ok), len(refused)), (1, 1), got)
        self.assertIn(" principal=ci ", ok[0])
        self.assertIn(" principal=- ", refused[0])


class Guessing(AuthCase):

    extra_flags = ("--threads", "1")

    def test_a_burst_of_unknown_keys_is_refused_before_hashing(self):
        wrong = {"Authorization": "Bearer " + secrets.token_urlsafe(32)}
        t0 = time.monotonic()
        statuses = [self.gw.request("GET", LOCKS + "jobs/g", headers=wrong).status
                    for _ in range(150)]
        took = time.monotonic() - t0
        self.assertIn(429, statuses)
        first = statuses.index(429)
        # the burst (100) and what refilled meanwhile (2 a second)
        self.assertTrue(all(s == 401 for s in statuses[:first]), statuses)
        self.assertGreaterEqual(first, 100, statuses)
        self.assertLessEqual(first, 100 + 2 * took + 1, statuses)
        r = self.gw.request("GET", LOCKS + "jobs/g", headers=wrong)
        self.assert_refused(r, 429, "too_many_failures")
        self.assertIsNotNone(r.header("Retry-After"))
        # what needs no key is not refused
        self.assertEqual(self.gw.request("GET", "/_fence/v1/health").status, 200)
        # the budget comes back with time
        self.assertTrue(wait_until(
            lambda: self.api("ci", "GET", "jobs/g").status == 200, slack(5.0)))


def budget_set(host):
    """The set of the unknown-key budgets (gateway/access/budget.c) an
    IPv4 client falls into: FNV-1a of its v4-mapped IPv6 address, modulo
    the 64 sets."""
    h = 2166136261
    for c in bytes(10) + b"\xff\xff" + bytes(int(x) for x in host.split(".")):
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h % 64


def colliding(n):
    """n loopback addresses of one budget set (127.0.0.1's is left out, as
    the suite's own requests come from there)."""
    want = budget_set("127.0.0.2")
    assert want != budget_set("127.0.0.1")
    out = ["127.0.%d.%d" % (y, x) for y in range(256) for x in range(2, 255)
           if budget_set("127.0.%d.%d" % (y, x)) == want]
    return out[:n]


class FromAddresses(AuthCase):
    """Clients on several loopback addresses (all of 127.0.0.0/8 is this
    machine's), one loop: one table of budgets."""

    extra_flags = ("--threads", "1")

    def status_from(self, source, headers):
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port,
                                          timeout=10.0,
                                          source_address=(source, 0))
        try:
            conn.request("GET", LOCKS + "jobs/g", headers=headers)
            r = conn.getresponse()
            r.read()
            return r.status
        finally:
            conn.close()

    def guess(self, source, most=150):
        """Unknown keys from source until the first 429 (at most `most`):
        how many were answered 401."""
        wrong = {"Authorization": "Bearer " + secrets.token_urlsafe(32)}
        n = 0
        while n < most:
            st = self.status_from(source, wrong)
            if st == 429:
                return n
            self.assertEqual(st, 401)
            n += 1
        return n

    def test_addresses_taking_turns_share_their_sets_budget(self):
        # Six addresses of one set (of four budgets), each guessing until
        # it is refused and then leaving its place to the next: a newcomer
        # takes over what the place it takes had left, so together they
        # get no more than the set's four budgets and what refills.
        addrs = colliding(6)
        t0 = time.monotonic()
        turns = [self.guess(a) for _ in range(3) for a in addrs]
        took = time.monotonic() - t0
        # the first address met the contract's 401 for its first 100
        self.assertGreaterEqual(turns[0], 100, turns)
        self.assertLessEqual(sum(turns), 4 * (100 + 2 * took), (turns, took))
        # another set's address is untouched
        self.assertEqual(self.status_from("127.0.0.1", bearer("ci")), 200)

    def test_a_few_guessers_cost_the_other_addresses_of_their_set_nothing(self):
        # Three guessers keep three of the set's four places, spent; the
        # other addresses of the set share the fourth, which is full, so
        # a newcomer still has its 100.
        g1, g2, g3, b1, b2 = colliding(5)
        for g in (g1, g2, g3):
            self.assertGreaterEqual(self.guess(g), 100)
        for b in (b1, b2, b1):
            self.assertEqual(self.status_from(b, bearer("ci")), 200)
        self.assertGreaterEqual(self.guess(b2), 100)


class ProxyAuthNestedRoute(AuthCase):
    """A route that starts inside a collection gives that part of the tree
    to its own lock: a read of the collection touches it too."""

    def setUp(self):
        d = tempfile.mkdtemp(dir=harness.tmp_root())
        conf = write_file(os.path.join(d, "fencegate.conf"),
                          "route /docs/secret/ sec\n"
                          "route /open/ pub\n"
                          "route /open/inner/ sec\n")
        self.extra_flags = ("--proxy-auth", "required", "--config", conf)
        super().setUp()

    def read(self, who, method, path, depth=None):
        h = {"Fence-Authorization": "Bearer " + KEYS[who]}
        if depth:
            h["Depth"] = depth
        return self.gw.request(method, path, headers=h)

    def test_a_collection_read_needs_read_on_the_routes_inside_it(self):
        n = len(self.upstream.records)
        for method, path, depth in (("GET", "/docs/secret/x", None),
                                    ("GET", "/docs/", None),
                                    ("PROPFIND", "/docs/", "1"),
                                    ("PROPFIND", "/docs/", "infinity"),
                                    ("PROPFIND", "/docs", "1"),
                                    ("GET", "/open/", None)):
            with self.subTest(method=method, path=path, depth=depth):
                r = self.read("reader", method, path, depth)
                self.assert_refused(r, 403, "forbidden")
        self.assertIn("read: on lock sec",
                      self.read("reader", "GET", "/docs/").json["message"])
        self.assertEqual(self.upstream.records[n:], [])
        # what the secret route does not reach, and a principal that may
        # read it all
        self.assertEqual(self.read("reader", "GET", "/docs/a").status, 200)
        for method, path, depth in (("GET", "/docs/", None),
                                    ("PROPFIND", "/docs/", "infinity"),
                                    ("GET", "/open/", None)):
            with self.subTest(who="ops", path=path):
                self.assertEqual(self.read("ops", method, path, depth).status,
                                 200)


class Reload(AuthCase):

    def test_sighup_reads_the_file_again_and_a_bad_one_keeps_the_old(self):
        self.assert_refused(self.api("late", "GET", "jobs/r"), 401, "unauthenticated")
        write_file(self.auth_file, auth_lines(
            ["late  sha256:%s  observe:*" % sha(KEYS["late"])]))
        self.gw.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(
            lambda: self.api("late", "GET", "jobs/r").status == 200, slack(5.0)),
            self.gw.log_tail())
        write_file(self.auth_file, "late sha256:nothex observe:*\n")
        self.gw.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(
            lambda: "not reloaded" in open(self.gw.logpath).read(), slack(5.0)),
            self.gw.log_tail())
        self.assertEqual(self.api("late", "GET", "jobs/r").status, 200)
        self.assertEqual(self.api("ci", "GET", "jobs/r").status, 200)
        self.assertTrue(self.gw.alive())

    def reloads(self):
        with open(self.gw.logpath, errors="replace") as f:
            return len(re.findall(r"auth-file \S+ reloaded: ", f.read()))

    def reload(self, extra):
        """Writes the auth-file and sends SIGHUP; returns once the gateway
        says the new table is in force (a request's answer under the old
        one proves nothing)."""
        before = self.reloads()
        write_file(self.auth_file, auth_lines(extra))
        self.gw.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(lambda: self.reloads() > before,
                                   slack(5.0), 0.02), self.gw.log_tail())

    def background(self, who, method, path, body=None):
        c = harness.Call(self.gw.port, method, path, body=body,
                         timeout=slack(30.0), headers=bearer(who))
        c.start()
        return c

    def observers(self):
        r = self.gw.request("GET", "/_fence/v1/metrics", headers=bearer("ops"))
        for line in r.body.decode().splitlines():
            if line.startswith('fencegate_waiters{kind="observe"}'):
                return int(float(line.split()[-1]))
        return None

    def test_a_waiter_whose_right_went_in_a_reload_is_not_granted(self):
        # A blocked acquire was let in under the old table; its grant is
        # answered under the one in force then, and goes back at once.
        late = "late  sha256:%s  lock:jobs/" % sha(KEYS["late"])
        for what, after, status, code in (
                ("removed", [], 401, "unauthenticated"),
                ("narrowed", ["late  sha256:%s  observe:*" % sha(KEYS["late"])],
                 403, "forbidden"),
                ("rekeyed", ["late  sha256:%s  lock:jobs/" % sha("another")],
                 401, "unauthenticated")):
            with self.subTest(what=what):
                name = "jobs/revoked-" + what
                self.reload([late])
                self.assertTrue(wait_until(
                    lambda: self.api("late", "GET", name).status == 200,
                    slack(5.0)), self.gw.log_tail())
                g = self.take("ci", name)
                w = self.background("late", "POST", LOCKS + name,
                                    {"wait_ms": 20000})
                self.assertTrue(wait_until(
                    lambda: self.api("ci", "GET", name).json["waiters"] == 1,
                    slack(5.0)))
                self.reload(after)
                self.assertTrue(wait_until(
                    lambda: self.api("late", "POST", name).status == status,
                    slack(5.0)), self.gw.log_tail())
                self.assertEqual(self.api("ci", "DELETE", name, headers={
                    "Fence-Lease": g["lease"]}).status, 204)
                self.assert_refused(w.result(slack(10.0)), status, code)
                # given back, not held to its ttl
                self.assertTrue(wait_until(
                    lambda: not self.api("ci", "GET", name).json["held"],
                    slack(5.0)), self.api("ci", "GET", name))

    def test_an_observer_whose_right_went_in_a_reload_is_not_answered(self):
        self.reload(["late  sha256:%s  observe:jobs/" % sha(KEYS["late"])])
        self.assertTrue(wait_until(
            lambda: self.api("late", "GET", "jobs/watched").status == 200,
            slack(5.0)), self.gw.log_tail())
        g = self.take("ci", "jobs/watched")
        w = self.background("late", "GET", LOCKS + "jobs/watched?wait_ms=20000"
                            "&after=%d" % g["token"])
        self.assertTrue(wait_until(lambda: self.observers() == 1, slack(5.0)))
        self.reload([])
        self.assertTrue(wait_until(
            lambda: self.api("late", "GET", "jobs/watched").status == 401,
            slack(5.0)), self.gw.log_tail())
        self.assertEqual(self.api("ci", "DELETE", "jobs/watched", headers={
            "Fence-Lease": g["lease"]}).status, 204)
        self.assert_refused(w.result(slack(10.0)), 401, "unauthenticated")


class StartUp(TestCase):

    axes = ("build",)       # a fencegate that never reaches a Redis
    uses_shared_env = False

    def run_gateway(self, flags, timeout=10.0):
        p = subprocess.run([Gateway.executable()] + flags, capture_output=True,
                           timeout=slack(timeout))
        return p.returncode, p.stderr.decode(errors="replace")

    def test_open_off_loopback_is_refused_naming_allow_open(self):
        rc, err = self.run_gateway(["--listen", "0.0.0.0:%d" % harness.free_port(),
                                    "--redis", "127.0.0.1:1"])
        self.assertEqual(rc, 2, err)
        self.assertIn("allow-open yes", err)
        self.assertIn("auth-file", err)

    def test_allow_open_starts_with_a_warning_naming_auth_file(self):
        g = Gateway(1, 1, ["--listen", "0.0.0.0:%d" % harness.free_port(),
                           "--redis", "127.0.0.1:1", "--allow-open", "yes"],
                    add_defaults=False)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.port = int(g.flags[1].rsplit(":", 1)[1])
        g.start()
        self.assertTrue(wait_until(lambda: "no auth-file" in open(g.logpath).read(),
                                   slack(5.0)), g.log_tail())

    def test_an_upstream_password_is_never_logged(self):
        g = Gateway(1, 1, ["--listen", "127.0.0.1:%d" % harness.free_port(),
                           "--redis", "127.0.0.1:1", "--upstream",
                           "http://store:s3cretpw@127.0.0.1:%d" % harness.free_port()],
                    add_defaults=False)
        g.port = int(g.flags[1].rsplit(":", 1)[1])
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        self.assertTrue(wait_until(lambda: "listening on" in open(g.logpath).read(),
                                   slack(5.0)), g.log_tail())
        text = open(g.logpath).read().split("\n", 1)[1]  # past the harness's argv line
        self.assertNotIn("s3cretpw", text)

    def test_a_bad_auth_file_is_exit_2(self):
        d = tempfile.mkdtemp(dir=harness.tmp_root())
        for text in ("ci sha256:abc lock:*\n", "ci cert lokc:*\n",
                     "ci cert lock:*\nci cert observe:*\n"):
            f = write_file(os.path.join(d, "auth"), text)
            rc, err = self.run_gateway(["--listen", "127.0.0.1:%d" % harness.free_port(),
                                        "--auth-file", f, "--redis", "127.0.0.1:1"])
            self.assertEqual(rc, 2, (text, err))
            self.assertIn("auth-file", err)
            self.assertIn("line 1", err)
        rc, err = self.run_gateway(["--auth-file", os.path.join(d, "missing"),
                                    "--redis", "127.0.0.1:1"])
        self.assertEqual(rc, 2, err)

    def test_new_key_prints_a_key_and_its_line(self):
        p = subprocess.run([Gateway.executable(), "--new-key", "deployer"],
                           capture_output=True, timeout=slack(10.0))
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.decode().splitlines()
        key = out[0].strip()
        self.assertGreaterEqual(len(key), 43)
        line = [l for l in out if l.startswith("deployer ")][0]
        self.assertIn("sha256:" + sha(key), line)
        p2 = subprocess.run([Gateway.executable(), "--new-key", "deployer"],
                            capture_output=True, timeout=slack(10.0))
        self.assertNotEqual(p2.stdout.decode().splitlines()[0].strip(), key)
        p3 = subprocess.run([Gateway.executable(), "--new-key", "bad name"],
                            capture_output=True, timeout=slack(10.0))
        self.assertEqual(p3.returncode, 2)


class Listing(AuthCase):
    """contract v1.3: the listing needs observe: on a prefix the asked
    prefix starts with, and shows each holder's principal."""

    def listing(self, who, prefix=None):
        q = "" if prefix is None else "?prefix=" + prefix
        return self.gw.request("GET", "/_fence/v1/locks" + q,
                               headers=bearer(who) if who else {})

    def test_listing_needs_observe_on_the_prefix_and_names_principals(self):
        g = self.take("ci", "jobs/nightly", owner="cron")
        d = self.take("writer", "docs/a")
        # reader observes docs/ only
        r = self.listing("reader", "docs/")
        self.assertEqual(r.status, 200, r)
        self.assertEqual([e["name"] for e in r.json["locks"]], ["docs/a"])
        self.assertEqual(r.json["locks"][0]["holders"][0]["principal"],
                         "writer")
        self.assertEqual(self.listing("reader", "docs/a").status, 200)
        for pfx in (None, "", "doc", "jobs/"):
            r = self.listing("reader", pfx)
            self.assert_refused(r, 403, "forbidden")
            self.assertIn("observe", r.json["message"])
        self.assert_refused(self.listing("nobody", "jobs/"), 403, "forbidden")
        self.assert_refused(self.listing(None, "jobs/"), 401,
                            "unauthenticated")
        # ci observes everything
        r = self.listing("ci")
        self.assertEqual(r.status, 200, r)
        by = {e["name"]: e for e in r.json["locks"]}
        self.assertEqual(set(by), {"jobs/nightly", "docs/a"})
        h = by["jobs/nightly"]["holders"][0]
        self.assertEqual((h["owner"], h["principal"]), ("cron", "ci"))
        for lease in (g["lease"], d["lease"]):
            self.assertNotIn(lease.encode(), r.body)
