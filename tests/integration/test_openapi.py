"""test_openapi.py - the lock API's OpenAPI document (contract v1.5): the
gateway serves docs/openapi.json byte for byte at
/_fence/v1/openapi.json, open like the probes; it is an OpenAPI 3.1
document; and the check every answer of the suite goes through
(apispec.py, from harness.http_request) refuses what the document does
not describe and passes what the gateway really answers."""

import hashlib
import json
import os
import re
import tempfile

import apispec
import harness
import matrix
from harness import LOCKS, TestCase

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                   "docs", "openapi.json")
PATH = "/_fence/v1/openapi.json"
JSON = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]


def doc_bytes():
    with open(DOC, "rb") as f:
        return f.read()


class Served(TestCase):

    def test_get_serves_docs_openapi_json_byte_for_byte_as_json(self):
        r = self.req("GET", PATH)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertEqual(r.header("Cache-Control"), "no-store")
        want = doc_bytes()
        self.assertEqual(len(r.body), len(want))
        self.assertEqual(hashlib.sha256(r.body).hexdigest(),
                         hashlib.sha256(want).hexdigest(),
                         "the served document differs from docs/openapi.json")

    def test_document_is_openapi_3_1_with_every_endpoint_of_the_api(self):
        d = json.loads(self.req("GET", PATH).body.decode("utf-8"))
        self.assertEqual(d["openapi"], "3.1.0")
        self.assertIsInstance(d["info"]["title"], str)
        self.assertIsInstance(d["info"]["version"], str)
        for p in ("/_fence/v1/locks/{name}", "/_fence/v1/locks",
                  "/_fence/v1/check", "/_fence/v1/route", "/_fence/v1/health",
                  "/_fence/v1/livez", "/_fence/v1/readyz",
                  "/_fence/v1/metrics", PATH):
            self.assertIn(p, d["paths"])
        lock = d["paths"]["/_fence/v1/locks/{name}"]
        for m in ("post", "patch", "delete", "get", "head"):
            self.assertIn(m, lock)
            self.assertTrue(lock[m]["responses"], m)
        # every error code of the gateway has its schema
        codes = {s["properties"]["error"]["const"]
                 for n, s in d["components"]["schemas"].items()
                 if n.startswith("Error_")}
        self.assertLessEqual({"bad_lock_name", "bad_request", "lock_held",
                              "lease_expired", "stale_token",
                              "lock_store_unavailable", "unauthenticated",
                              "forbidden", "not_found", "method_not_allowed",
                              "payload_too_large", "too_many_waiters",
                              "shutting_down", "not_ready", "internal"},
                             codes)

    def test_head_answers_200_without_a_body(self):
        r = self.req("HEAD", PATH)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertEqual(r.body, b"")

    def test_other_methods_are_405_with_allow_get(self):
        r = self.req("POST", PATH, body={})
        self.assert_error(r, 405, "method_not_allowed")
        self.assertEqual(r.header("Allow"), "GET")


class OpenUnderAuth(TestCase):
    """With an auth-file, the document needs no key, as health does."""

    uses_shared_env = False

    def test_served_without_a_key_when_an_auth_file_is_set(self):
        d = tempfile.mkdtemp(prefix="openapi-", dir=harness.tmp_root())
        auth = os.path.join(d, "auth")
        with open(auth, "w") as f:
            f.write("ci sha256:%s observe:*\n"
                    % hashlib.sha256(b"k" * 32).hexdigest())
        os.chmod(auth, 0o600)
        env = self.start_env(flags=["--auth-file", auth])
        r = env.gw.request("GET", PATH)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, doc_bytes())
        # while a lock call without a key is refused
        r = env.gw.request("GET", LOCKS + "a")
        self.assert_error(r, 401, "unauthenticated")


ERRORS_C = os.path.join(os.path.dirname(DOC), "..", "gateway", "base",
                        "errors.c")


def walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


class Consistent(TestCase):
    """The document agrees with itself and with the gateway's one table
    of error answers (gateway/base/errors.c)."""

    uses_shared_env = False
    axes = matrix.NOTHING

    def test_every_reference_resolves_and_operation_ids_are_unique(self):
        with open(DOC, encoding="utf-8") as f:
            raw = json.load(f)
        for n in walk(raw):
            r = n.get("$ref")
            if isinstance(r, str):
                self.assertTrue(r.startswith("#/"), r)
                t = raw
                for part in r[2:].split("/"):
                    self.assertIn(part, t, r)
                    t = t[part]
        ids = [op["operationId"] for item in raw["paths"].values()
               for m, op in item.items() if isinstance(op, dict)
               and "operationId" in op]
        self.assertEqual(len(ids), len(set(ids)), ids)
        self.assertTrue(apispec.document()["paths"])

    def test_every_example_of_an_answer_matches_its_schema(self):
        doc = apispec.document()
        js = apispec._load()["jsonschema"]
        seen = 0
        for n in walk([doc["paths"], doc["x-fencegate-other-paths"]]):
            media = n.get("application/json")
            if not isinstance(media, dict) or "schema" not in media:
                continue
            for name, ex in media.get("examples", {}).items():
                v = js.Draft202012Validator(media["schema"])
                errs = [e.message for e in v.iter_errors(ex["value"])]
                self.assertEqual(errs, [], "example %s: %r" % (name, ex))
                seen += 1
        self.assertGreater(seen, 50)

    def test_error_codes_and_their_statuses_are_the_gateways(self):
        with open(ERRORS_C, encoding="utf-8") as f:
            table = dict((code, int(st)) for st, code in re.findall(
                r'\[FG_E_\w+\] = \{ (\d+), "(\w+)"', f.read()))
        self.assertGreater(len(table), 20)
        with open(DOC, encoding="utf-8") as f:
            raw = json.load(f)
        schemas = {n[len("Error_"):]: s for n, s in
                   raw["components"]["schemas"].items()
                   if n.startswith("Error_")}
        self.assertEqual(set(schemas), set(table))
        for code, s in schemas.items():
            self.assertEqual(s["properties"]["error"]["const"], code)
        # a code appears only under responses of its own status
        for n in walk(raw):
            for st, resp in n.items() if "200" in n or "400" in n else ():
                if not (st.isdigit() and isinstance(resp, dict)):
                    continue
                for c in walk(resp.get("content", {})):
                    for code in c.get("discriminator", {}).get("mapping", {}):
                        self.assertEqual(table[code], int(st),
                                         "%s under %s" % (code, st))


class ValidatorRefuses(TestCase):
    """The check refuses answers the document does not describe: each
    case is a real answer's shape with one thing wrong."""

    uses_shared_env = False
    axes = matrix.NOTHING   # the document and the check alone

    GRANT = {"name": "a/b", "lease": "KZIQOOfuWzLlMmuDA_3biw",
             "token": 1795251839839014, "mode": "exclusive", "ttl_ms": 30000,
             "sequencer": "fg1.YS9i.x.1795251839839014."
                          "kyVkF7Ar3e84TQPOyMQOq3ZGkNfqe-3yqR2PJhSnkgk",
             "holds": 1}

    def refused(self, method, target, status, body, headers=JSON,
                because=None):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self.assertRaises(AssertionError) as cm:
            apispec.check(method, target, status, headers, raw)
        if because:
            self.assertIn(because, str(cm.exception))
        self.assertIn(target.split("?")[0], str(cm.exception))
        return str(cm.exception)

    def passes(self, method, target, status, body, headers=JSON):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        apispec.check(method, target, status, headers, raw)

    def test_a_grant_as_the_gateway_gives_it_passes(self):
        self.passes("POST", LOCKS + "a/b", 200, self.GRANT)

    def test_a_wrong_status_for_the_path_is_refused(self):
        # acquire never answers 404, renew never 409, release never 200
        self.refused("POST", LOCKS + "a/b", 404,
                     {"error": "not_found", "message": "x"},
                     because="status 404")
        self.refused("PATCH", LOCKS + "a/b", 409,
                     {"error": "lock_held", "message": "x"},
                     because="status 409")
        self.refused("DELETE", LOCKS + "a/b", 200, {}, because="status 200")

    def test_a_missing_required_field_is_refused(self):
        g = dict(self.GRANT)
        del g["sequencer"]
        self.refused("POST", LOCKS + "a/b", 200, g, because="sequencer")
        self.refused("GET", "/_fence/v1/health", 200, {"redis": "up"},
                     because="upstream")

    def test_a_wrong_type_is_refused(self):
        self.refused("POST", LOCKS + "a/b", 200,
                     dict(self.GRANT, token="1795251839839014"),
                     because="token")
        self.refused("POST", LOCKS + "a/b", 200, dict(self.GRANT, holds=0),
                     because="holds")
        self.refused("GET", LOCKS + "a/b", 200,
                     {"name": "a/b", "held": "yes", "mode": None,
                      "token": None, "holders": 0, "waiters": 0,
                      "ttl_ms": 0, "delay_ms": 0}, because="held")

    def test_an_unknown_field_is_refused_where_the_shape_is_fixed(self):
        self.refused("POST", LOCKS + "a/b", 200,
                     dict(self.GRANT, expires_at=1), because="expires_at")

    def test_an_unknown_error_code_is_refused(self):
        self.refused("POST", LOCKS + "a/b", 409,
                     {"error": "lock_busy", "message": "the lock is held"},
                     because="'lock_busy'")
        # a code of another status is unknown for this one too
        self.refused("POST", LOCKS + "a/b", 409,
                     {"error": "lease_expired", "message": "x"},
                     because="'lease_expired'")

    def test_an_error_without_its_fields_is_refused(self):
        self.refused("DELETE", LOCKS + "a/b", 409,
                     {"error": "stale_token", "message": "x",
                      "token": 5}, because="current")

    def test_a_required_header_that_is_missing_is_refused(self):
        body = {"error": "lock_store_unavailable", "message": "x"}
        self.refused("GET", LOCKS + "a/b", 503, body,
                     because="Retry-After")
        self.passes("GET", LOCKS + "a/b", 503, body,
                    headers=JSON + [("Retry-After", "1")])
        self.refused("PUT", LOCKS + "a/b", 405,
                     {"error": "method_not_allowed", "message": "x"},
                     because="Allow")

    def test_a_wrong_content_type_is_refused(self):
        self.refused("GET", "/_fence/v1/metrics", 200, b"# x\n",
                     headers=JSON, because="Content-Type")
        self.passes("GET", "/_fence/v1/metrics", 200, b"# x\n",
                    headers=[("Content-Type",
                              "text/plain; version=0.0.4; charset=utf-8"),
                             ("Cache-Control", "no-store")])

    def test_a_body_that_is_not_json_is_refused(self):
        self.refused("GET", "/_fence/v1/livez", 200, b"alive",
                     because="not JSON")

    def test_an_unknown_path_must_be_404_not_found(self):
        self.passes("GET", "/_fence/v1/nope", 404,
                    {"error": "not_found", "message": "no such endpoint"})
        self.refused("GET", "/_fence/v1/nope", 200, {"status": "alive"},
                     because="status 200")

    def test_answers_outside_the_lock_api_are_not_checked(self):
        self.passes("GET", "/bucket/a.txt", 200, b"<html>",
                    headers=[("Content-Type", "text/html")])


class ValidatorPassesRealAnswers(TestCase):
    """Real answers of a gateway, handed to the check directly (as
    harness.http_request does for every request)."""

    def test_real_answers_of_a_lock_cycle_pass(self):
        name = self.lock_name()
        g = self.acquire_ok(name, owner="me", value="v")
        r = self.inspect(name)
        apispec.check("GET", LOCKS + name, r.status, r.header_list, r.body)
        self.assertTrue(r.json["held"])
        r = self.req("GET", "/_fence/v1/locks?prefix=" + name)
        apispec.check("GET", "/_fence/v1/locks", r.status, r.header_list,
                      r.body)
        self.assertEqual(r.json["locks"][0]["name"], name)
        r = self.release(name, g["lease"])
        self.assertEqual(r.status, 204, r)
        apispec.check("DELETE", LOCKS + name, r.status, r.header_list, r.body)
        r = self.req("GET", "/_fence/v1/metrics")
        apispec.check("GET", "/_fence/v1/metrics", r.status, r.header_list,
                      r.body)
