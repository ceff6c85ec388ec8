"""test_fencectl_auth.py - fencectl's identity, TLS and `break` (contract
v1.2): the bearer key from --key-file or FENCEGATE_KEY_FILE, sent as
`Authorization: Bearer` and never shown; --cacert, --cert and --key
against an https:// gateway, verification always on; 401, 403 and 429
too_many_failures in plain words with exit status 77; `fencectl break`.

Four kinds of gateway:
- a stand-in that records every request and answers as the test scripts
  it (what fencectl sends and how it reads each answer);
- nginx terminating TLS in front of a real gateway (fencectl's TLS client
  side: verification, --cacert, the client certificate it presents);
- the real gateway in open mode (break), with an auth-file (401, 403,
  rights), and serving TLS itself (tls-cert, tls-key, tls-client-ca).

Certificates and keys are made with the openssl command line, once per
run. Every wait is bounded, scaled by harness.slack().
"""

import base64
import hashlib
import http.client
import json
import os
import re
import shlex
import ssl
import subprocess
import tempfile

import harness
import origins
import test_fencectl as tf
from harness import LOCKS, slack

EXIT_NOTHING = 1
EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69
EXIT_NOT_OBTAINED = 75
EXIT_NOPERM = 77
EXIT_STALE = 79


def new_key():
    """A bearer key (RFC 6750 b64token) nobody else uses."""
    return base64.urlsafe_b64encode(os.urandom(24)).decode() + "+/="


def sha256_hex(key):
    return hashlib.sha256(key.encode()).hexdigest()


def write_file(path, data, mode=0o600):
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)
    return path


# ---------------------------------------------------------------------------
# TLS material, made with the openssl CLI once per run


class Pki:
    """A CA, a server certificate for 127.0.0.1 and localhost, client
    certificates with CN ops and CN nobody, and a second CA that signed
    none of them."""

    _made = None

    @classmethod
    def get(cls):
        if cls._made is None:
            cls._made = cls()
        return cls._made

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pki-", dir=harness.tmp_root())
        self.ca, self.ca_key = self._ca("fencegate test CA")
        self.other_ca, _ = self._ca("another CA")
        self.server, self.server_key = self._signed(
            "server", "127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth\n")
        self.ops, self.ops_key = self._signed(
            "ops", "ops", "extendedKeyUsage=clientAuth\n")
        self.nobody, self.nobody_key = self._signed(
            "nobody", "nobody", "extendedKeyUsage=clientAuth\n")
        self.ops_key_encrypted = self.p("ops-encrypted.key")
        self._openssl("pkey", "-in", self.ops_key, "-aes256", "-passout",
                      "pass:secret", "-out", self.ops_key_encrypted)

    def p(self, name):
        return os.path.join(self.dir, name)

    def _openssl(self, *args):
        try:
            subprocess.run(["openssl"] + list(args), check=True,
                           capture_output=True, timeout=60, cwd=self.dir)
        except FileNotFoundError:
            raise harness.SetupError("the openssl command is not installed")
        except subprocess.CalledProcessError as e:
            raise harness.SetupError("openssl %s failed: %s"
                                     % (" ".join(args), e.stderr.decode()))

    def _ca(self, cn):
        tag = re.sub(r"\W", "-", cn)
        cert, key = self.p(tag + ".pem"), self.p(tag + ".key")
        self._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes",
                      "-keyout", key, "-out", cert, "-days", "2", "-subj",
                      "/CN=" + cn)
        return cert, key

    def _signed(self, tag, cn, ext):
        key, csr, cert = (self.p(tag + ".key"), self.p(tag + ".csr"),
                          self.p(tag + ".pem"))
        extfile = write_file(self.p(tag + ".ext"), ext)
        self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                      "-out", csr, "-subj", "/CN=" + cn)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey",
                      self.ca_key, "-CAcreateserial", "-out", cert, "-days",
                      "2", "-extfile", extfile)
        return cert, key


# ---------------------------------------------------------------------------
# the stand-in gateway


class RecordingGatewayHandler(origins.Handler):
    """Records every request with all its headers, and answers what the
    test's script(method, path, headers) returns: (status, JSON or None)
    or (status, JSON or None, {extra response headers})."""

    def _answer(self):
        raw = origins.read_request_body(self)
        self.server.records.append({
            "method": self.command, "path": self.path,
            "body": json.loads(raw) if raw else None,
            "headers": {k.lower(): v for k, v in self.headers.items()}})
        answer = self.server.script(self.command, self.path, self.headers)
        status, payload = answer[0], answer[1]
        extra = answer[2] if len(answer) > 2 else {}
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        for k, v in extra.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer


# the stand-in grant of test_fencectl.py, the same here
from test_fencectl import LEASE, grant  # noqa: E402


def state(name, held, token=None):
    return {"name": name, "held": held, "mode": "exclusive" if held else None,
            "token": token, "holders": 1 if held else 0, "waiters": 0,
            "ttl_ms": 20000 if held else 0}


def err_answer(status, code, message):
    return status, {"error": code, "message": message}


UNAUTHENTICATED = (401, {"error": "unauthenticated",
                         "message": "a known bearer key or client "
                                    "certificate is required"},
                   {"WWW-Authenticate": 'Bearer realm="fencegate"'})
STALE = err_answer(409, "stale_token",
                   "a newer token exists, or this grant ended")


class AuthTestCase(tf.FencectlTestCase):
    """FencectlTestCase whose fencectl never inherits a key file from the
    environment the suite runs in."""

    def env_for(self, gw=None, **extra):
        env = super().env_for(gw)
        env.pop("FENCEGATE_KEY_FILE", None)
        env.update(extra)
        return env

    def key_file(self, key, name=None, ending="\n"):
        return write_file(self.path(name or "key-%d" % len(key)),
                          key + ending)

    def assert_no_secret(self, secret, *texts):
        for t in texts:
            self.assertNotIn(secret, t, "a secret was shown")

    def assert_one_line(self, err):
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("fencectl: "), err)


class StandInTests(AuthTestCase):
    """What fencectl sends, and what it makes of each answer, seen by a
    stand-in gateway."""
    axes = ("build",)       # fencectl against a stand-in gateway
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.fake = origins.StandIn(handler=RecordingGatewayHandler).start()
        self.addCleanup(self.fake.stop)
        self.key = new_key()
        self.kf = self.key_file(self.key)

    def url(self, gw=None):
        return "http://127.0.0.1:%d" % self.fake.port

    def script(self, fn):
        self.fake.server.script = fn

    def sent(self, method=None):
        return [r for r in self.fake.records
                if method is None or r["method"] == method]

    def lock_answers(self, name):
        def answer(method, path, headers):
            if method == "POST" and path.endswith("/check"):
                return 200, {"valid": True, "name": name, "token": 5,
                             "mode": "exclusive"}
            if method == "POST":
                return 200, grant(name)
            if method == "PATCH":
                return 200, {"name": name, "token": 5, "ttl_ms": 30000}
            if method == "GET":
                return 200, state(name, True, 5)
            return 204, None
        return answer

    # -- the key ----------------------------------------------------------

    def test_the_key_goes_as_a_bearer_header_on_every_call(self):
        name = "jobs/x"
        self.script(self.lock_answers(name))
        runs = [
            ("lock", name, "--", "true"),
            ("acquire", name),
            ("renew", name, "--lease", LEASE),
            ("release", name, "--lease", LEASE),
            ("inspect", name),
            ("check", "fg1.stand-in.5"),
            ("break", name),
        ]
        for args in runs:
            rc, out, err = self.fc("--key-file", self.kf, *args)
            self.assertEqual(rc, 0, (args, err))
        methods = [(r["method"], r["path"].endswith("/livez"))
                   for r in self.sent()]
        # lock: livez (it waits: on a gateway that answers), acquire and
        # release; break: inspect, then the break
        self.assertEqual(methods, [("GET", True), ("POST", False),
                                   ("DELETE", False), ("POST", False),
                                   ("PATCH", False), ("DELETE", False),
                                   ("GET", False), ("POST", False),
                                   ("GET", False), ("DELETE", False)])
        for r in self.sent():
            self.assertEqual(r["headers"].get("authorization"),
                             "Bearer " + self.key, r)

    def test_without_a_key_no_authorization_is_sent(self):
        self.script(self.lock_answers("x"))
        rc, out, err = self.fc("inspect", "x")
        self.assertEqual(rc, 0, err)
        rc, out, err = self.fc("lock", "x", "--", "true")
        self.assertEqual(rc, 0, err)
        for r in self.sent():
            self.assertNotIn("authorization", r["headers"])

    def test_one_line_end_of_the_file_is_not_part_of_the_key(self):
        self.script(self.lock_answers("x"))
        for ending in ("", "\n", "\r\n"):
            kf = self.key_file(self.key, "k" + str(len(ending)), ending)
            rc, out, err = self.fc("--key-file", kf, "inspect", "x")
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.sent()[-1]["headers"]["authorization"],
                             "Bearer " + self.key, repr(ending))

    def test_fencegate_key_file_is_used_and_the_flag_wins(self):
        self.script(self.lock_answers("x"))
        other = new_key()
        okf = self.key_file(other, "other")
        env = self.env_for(FENCEGATE_KEY_FILE=self.kf)
        rc, out, err = self.fc("inspect", "x", env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.sent()[-1]["headers"]["authorization"],
                         "Bearer " + self.key)
        rc, out, err = self.fc("inspect", "x", "--key-file", okf, env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.sent()[-1]["headers"]["authorization"],
                         "Bearer " + other)
        # the flag wins even over an environment that names a bad file
        env = self.env_for(FENCEGATE_KEY_FILE=self.path("no-such-file"))
        rc, out, err = self.fc("inspect", "x", "--key-file", okf, env=env)
        self.assertEqual(rc, 0, err)

    def test_a_key_file_that_cannot_be_used_exits_64_before_any_call(self):
        self.script(self.lock_answers("x"))
        secret = "s3cr3tkey"
        cases = {
            "empty": ("", "is empty"),
            "newline-only": ("\n", "is empty"),
            "too-long": ("k" * 1025 + "\n", "more than 1024 bytes"),
            "blank": (secret + " x\n", "cannot contain"),
            "two-lines": (secret + "\n" + secret + "\n", "cannot contain"),
            "nul": (secret + "\0\n", "cannot contain"),
            "not-ascii": (secret + "\u00e9\n", "cannot contain"),
        }
        for tag, (data, why) in cases.items():
            kf = write_file(self.path("bad-" + tag), data)
            for args, env in (
                    (("--key-file", kf, "inspect", "x"), None),
                    (("inspect", "x"),
                     self.env_for(FENCEGATE_KEY_FILE=kf)),
                    (("lock", "x", "--key-file", kf, "--", "true"), None)):
                rc, out, err = self.fc(*args, env=env)
                self.assertEqual(rc, EXIT_USAGE, (tag, args, err))
                self.assertIn(kf, err, tag)
                self.assertIn(why, err, tag)
                self.assertIn("FENCEGATE_KEY_FILE" if env else "--key-file",
                              err, tag)
                self.assert_no_secret(secret, out, err)
                self.assertEqual(out, "")
        rc, out, err = self.fc("--key-file", self.path("missing"), "inspect",
                               "x")
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assertIn("cannot read it", err)
        self.assertEqual(self.sent(), [], "a call was made with a bad key")

    def test_the_key_never_shows_in_output_argv_or_the_commands_env(self):
        name = "jobs/x"
        self.script(self.lock_answers(name))
        rc, out, err = self.fc("--json", "--key-file", self.kf, "acquire",
                               name)
        self.assertEqual(rc, 0, err)
        self.assert_no_secret(self.key, out, err)
        # the running fencectl's argv and the command's environment
        script = ("tr '\\0' ' ' < /proc/$PPID/cmdline %s; env %s"
                  % (tf.publish(self.path("argv")),
                     tf.publish(self.path("env"))))
        rc, out, err = self.fc("lock", name, "--key-file", self.kf, "--",
                               "sh", "-c", script)
        self.assertEqual(rc, 0, err)
        argv, env = self.read("argv"), self.read("env")
        self.assertIn(self.kf, argv)
        self.assertIn("FENCE_SEQUENCER=", env)
        self.assert_no_secret(self.key, argv, env, out, err)
        # answers that name no principal or no right do not echo it either
        for answer in (UNAUTHENTICATED,
                       err_answer(403, "forbidden", "needs lock: on jobs/x"),
                       err_answer(400, "bad_request", "no")):
            self.script(lambda m, p, h, a=answer: a)
            for args in (("inspect", name), ("--json", "acquire", name),
                         ("lock", name, "--", "true")):
                rc, out, err = self.fc("--key-file", self.kf, *args)
                self.assertNotEqual(rc, 0)
                self.assert_no_secret(self.key, out, err)

    # -- 401, 403, 429 ----------------------------------------------------

    def test_401_without_a_key_says_how_to_present_one_and_exits_77(self):
        self.script(lambda m, p, h: UNAUTHENTICATED)
        rc, out, err = self.fc("inspect", "x")
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assert_one_line(err)
        self.assertIn("the gateway does not know who you are: pass "
                      "--key-file (or FENCEGATE_KEY_FILE) or a client "
                      "certificate (--cert/--key)", err)

    def test_401_with_a_key_says_the_key_is_not_accepted_and_exits_77(self):
        self.script(lambda m, p, h: UNAUTHENTICATED)
        for args in (("inspect", "x"), ("acquire", "x"), ("check", "fg1.x"),
                     ("release", "x", "--lease", LEASE), ("break", "x")):
            rc, out, err = self.fc("--key-file", self.kf, *args)
            self.assertEqual(rc, EXIT_NOPERM, (args, err))
            self.assert_one_line(err)
            self.assertIn("the gateway does not accept this key (from %s)"
                          % self.kf, err, args)
            self.assert_no_secret(self.key, out, err)

    def test_403_says_which_right_is_lacking_and_exits_77(self):
        self.script(lambda m, p, h: err_answer(
            403, "forbidden", "needs lock: on jobs/x"))
        for args in (("acquire", "jobs/x"), ("lock", "jobs/x", "--", "true"),
                     ("inspect", "jobs/x"),
                     ("renew", "jobs/x", "--lease", LEASE)):
            rc, out, err = self.fc("--key-file", self.kf, *args)
            self.assertEqual(rc, EXIT_NOPERM, (args, err))
            self.assert_one_line(err)
            self.assertIn("lacks the right: needs lock: on jobs/x", err)

    def test_429_too_many_failures_is_said_plainly_and_exits_77(self):
        self.script(lambda m, p, h: (
            429, {"error": "too_many_failures",
                  "message": "too many unknown keys from this address; "
                             "try again later"},
            {"Retry-After": "30"}))
        rc, out, err = self.fc("--key-file", self.kf, "inspect", "x")
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assert_one_line(err)
        self.assertIn("refuses calls from this address for 30s, after too "
                      "many unknown keys", err)
        # a full queue is still a lock not obtained
        self.script(lambda m, p, h: err_answer(429, "too_many_waiters",
                                               "the queue is full"))
        rc, out, err = self.fc("acquire", "x")
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)

    def test_refusals_end_a_wait_at_once_instead_of_being_asked_again(self):
        for answer in (UNAUTHENTICATED,
                       err_answer(403, "forbidden", "needs lock: on x"),
                       (429, {"error": "too_many_failures",
                              "message": "later"}, {"Retry-After": "9"})):
            self.fake.server.records.clear()
            self.script(lambda m, p, h, a=answer: a)
            rc, out, err = self.fc("lock", "x", "--wait", "forever", "--",
                                   "true", timeout=slack(10.0))
            self.assertEqual(rc, EXIT_NOPERM, err)
            self.assertNotIn("still trying", err)
            self.assertEqual(len(self.sent("POST")), 1, err)
            self.fake.server.records.clear()
            rc, out, err = self.fc("inspect", "x", "--watch",
                                   timeout=slack(10.0))
            self.assertEqual(rc, EXIT_NOPERM, err)
            self.assertEqual(len(self.sent("GET")), 1, err)

    # -- break ------------------------------------------------------------

    def test_break_learns_the_token_then_breaks_exactly_that_one(self):
        name = "jobs/x"
        self.script(lambda m, p, h: (200, state(name, True, 42))
                    if m == "GET" else (204, None))
        rc, out, err = self.fc("break", name)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "broke lock 'jobs/x', token 42\n")
        get, delete = self.sent()
        self.assertEqual((get["method"], get["path"]),
                         ("GET", LOCKS + name))
        self.assertEqual((delete["method"], delete["path"]),
                         ("DELETE", LOCKS + name))
        self.assertEqual(delete["headers"].get("fence-break"), "42")
        self.assertNotIn("fence-lease", delete["headers"])
        self.assertIsNone(delete["body"])
        self.fake.server.records.clear()
        rc, out, err = self.fc("--json", "break", name)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"name": name, "token": 42,
                                           "broken": True})

    def test_break_with_token_makes_one_call(self):
        self.script(lambda m, p, h: (204, None))
        rc, out, err = self.fc("break", "x", "--token", "7")
        self.assertEqual((rc, out, err), (0, "broke lock 'x', token 7\n", ""))
        self.assertEqual([(r["method"], r["headers"].get("fence-break"))
                          for r in self.sent()], [("DELETE", "7")])

    def test_break_of_a_free_lock_exits_1_and_breaks_nothing(self):
        self.script(lambda m, p, h: (200, state("x", False, 9))
                    if m == "GET" else (204, None))
        rc, out, err = self.fc("break", "x")
        self.assertEqual(rc, EXIT_NOTHING, err)
        self.assertEqual(out, "")
        self.assertIn("lock 'x' is free: nothing to break", err)
        self.assertEqual(self.sent("DELETE"), [])

    def test_break_of_a_token_that_does_not_hold_exits_79(self):
        self.script(lambda m, p, h: STALE)
        rc, out, err = self.fc("break", "x", "--token", "7")
        self.assertEqual(rc, EXIT_STALE, err)
        self.assertIn("token 7 is not the current grant of lock 'x'", err)
        self.assertIn("nothing was broken", err)
        # the grant ended between the inspect and the break: not chased
        self.fake.server.records.clear()
        self.script(lambda m, p, h: (200, state("x", True, 8))
                    if m == "GET" else STALE)
        rc, out, err = self.fc("break", "x")
        self.assertEqual(rc, EXIT_STALE, err)
        self.assertIn("token 8 no longer holds it", err)
        self.assertEqual(len(self.sent("DELETE")), 1)

    def test_break_without_the_admin_right_exits_77(self):
        self.script(lambda m, p, h: (200, state("x", True, 8))
                    if m == "GET" else
                    err_answer(403, "forbidden", "needs admin: on x"))
        rc, out, err = self.fc("--key-file", self.kf, "break", "x")
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assert_one_line(err)
        self.assertIn("cannot break lock 'x': the principal lacks the right: "
                      "needs admin: on x", err)

    def test_break_usage_errors(self):
        for args in (("break",), ("break", "x", "--token", "0"),
                     ("break", "x", "--token", "-1"),
                     ("break", "x", "--token", "9007199254740992"),
                     ("break", "x", "--token", "7x"),
                     ("break", "x", "--token", ""),
                     ("break", "x", "--lease", LEASE),
                     ("break", "x", "y")):
            rc, out, err = self.fc(*args)
            self.assertEqual(rc, EXIT_USAGE, (args, err))
            self.assertIn("fencectl break --help", err)
        self.assertEqual(self.sent(), [])

    # -- TLS options that cannot work -------------------------------------

    def test_tls_options_that_cannot_work_are_usage_errors(self):
        pki = Pki.get()
        https = "https://127.0.0.1:%d" % self.fake.port
        cases = [
            (("--cacert", pki.ca, "inspect", "x"), "https:// gateway"),
            (("--cert", pki.ops, "--key", pki.ops_key, "inspect", "x"),
             "https:// gateway"),
            (("--gateway", https, "--key", pki.ops_key, "inspect", "x"),
             "give --cert too"),
            (("--gateway", https, "--cacert", self.path("nope"), "inspect",
              "x"), "--cacert"),
            (("--gateway", https, "--cert", self.path("nope"), "inspect",
              "x"), "--cert"),
        ]
        for args, why in cases:
            rc, out, err = self.fc(*args)
            self.assertEqual(rc, EXIT_USAGE, (args, err))
            self.assertIn(why, err, args)
        self.assertEqual(self.sent(), [])


# ---------------------------------------------------------------------------
# fencectl's TLS client against nginx terminating TLS before a real gateway


class TlsFront(harness.Process):
    """nginx on a free loopback port, serving TLS with the test server
    certificate, asking for (not requiring) a client certificate from the
    test CA, and passing every request to a gateway. Its access log says,
    per request, whether a client certificate was verified and whose."""

    def __init__(self, pki, backend_port):
        self.port = harness.free_port()
        self.pki = pki
        self.backend_port = backend_port
        self.dir = tempfile.mkdtemp(prefix="tls-front-",
                                    dir=harness.tmp_root())
        self.access_log = os.path.join(self.dir, "access.log")
        self.error_log = os.path.join(self.dir, "error.log")

    def config_text(self):
        q = json.dumps   # a double-quoted nginx string
        tmp = os.path.join(self.dir, "tmp")
        lines = ["daemon off;", "master_process off;", "worker_processes 1;"]
        if os.getuid() == 0:
            lines.append("user root;")
        lines += [
            "pid %s;" % q(os.path.join(self.dir, "nginx.pid")),
            "error_log %s info;" % q(self.error_log),
            "events { worker_connections 64; }",
            "http {",
            "  client_body_temp_path %s;" % q(tmp + "/body"),
            "  proxy_temp_path %s;" % q(tmp + "/proxy"),
            "  fastcgi_temp_path %s;" % q(tmp + "/fastcgi"),
            "  uwsgi_temp_path %s;" % q(tmp + "/uwsgi"),
            "  scgi_temp_path %s;" % q(tmp + "/scgi"),
            "  log_format front '$ssl_client_verify|$ssl_client_s_dn|"
            "$request_method|$request_uri|$status';",
            "  access_log %s front;" % q(self.access_log),
            "  server {",
            "    listen 127.0.0.1:%d ssl;" % self.port,
            "    ssl_certificate %s;" % q(self.pki.server),
            "    ssl_certificate_key %s;" % q(self.pki.server_key),
            "    ssl_client_certificate %s;" % q(self.pki.ca),
            "    ssl_verify_client optional;",
            "    location / {",
            "      proxy_pass http://127.0.0.1:%d;" % self.backend_port,
            "      proxy_http_version 1.1;",
            "      proxy_buffering off;",
            "      proxy_read_timeout 600s;",
            "    }",
            "  }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def answers(self):
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        try:
            c = http.client.HTTPSConnection("127.0.0.1", self.port,
                                            context=ctx, timeout=2.0)
            c.request("GET", "/_fence/v1/health")
            c.getresponse().read()
            c.close()
            return True
        except (OSError, ssl.SSLError, http.client.HTTPException):
            return False

    def start(self):
        import storage
        exe = storage._nginx_executable()
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        conf = os.path.join(self.dir, "nginx.conf")
        write_file(conf, self.config_text(), 0o644)
        out_path = os.path.join(self.dir, "stderr.log")
        with open(out_path, "ab") as out:
            self.proc = harness.spawn([exe, "-p", self.dir + os.sep, "-c",
                                       conf, "-e", self.error_log],
                                      stdout=out, stderr=subprocess.STDOUT,
                                      cwd=self.dir)
        if not harness.wait_until(self.answers, slack(10.0), 0.02):
            rc = self.proc.poll()
            self.stop()
            raise harness.SetupError(
                "nginx (TLS front) on port %d did not answer (exit %s):\n%s"
                "\n%s" % (self.port, rc, harness.file_tail(out_path),
                          harness.file_tail(self.error_log)))
        return self

    def log(self):
        try:
            with open(self.access_log) as f:
                return [ln.rstrip("\n").split("|") for ln in f if ln.strip()]
        except FileNotFoundError:
            return []


class TlsClientTests(AuthTestCase):
    """fencectl over TLS, against nginx terminating TLS in front of the
    class's (open) gateway."""

    def setUp(self):
        super().setUp()
        self.pki = Pki.get()
        self.front = TlsFront(self.pki, self.gw.port).start()
        self.addCleanup(self.front.stop)
        self.log_paths += [self.front.error_log]

    def url(self, gw=None):
        return "https://127.0.0.1:%d" % self.front.port

    def front_lines(self, uri_part):
        return [ln for ln in self.front.log() if uri_part in ln[3]]

    def wait_front_lines(self, uri, n):
        """The front's log lines for exactly this request URI, once there
        are n of them (nginx writes a line as its request ends, which may
        be just after the client has read the answer)."""
        def lines():
            got = [ln for ln in self.front.log() if ln[3] == uri]
            return got if len(got) >= n else None
        return self.wait_for(lines, slack(5.0), "%d log lines for %s"
                             % (n, uri))

    def test_cacert_verifies_the_gateway_and_calls_go_over_tls(self):
        name = self.lock_name()
        rc, out, err = self.fc("--cacert", self.pki.ca, "inspect", name)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("held: false", out)
        rc, out, err = self.fc("--cacert", self.pki.ca, "lock", name,
                               "--ttl", "2s", "--", "sh", "-c",
                               "echo $FENCE_TOKEN")
        self.assertEqual(rc, 0, err)
        self.assertGreater(int(out.strip()), 0)
        self.assertFalse(self.held(name), "not released over TLS")
        methods = [ln[2] for ln in self.wait_front_lines(LOCKS + name, 3)]
        self.assertEqual(methods, ["GET", "POST", "DELETE"])

    def test_a_gateway_that_does_not_verify_is_one_plain_line_and_69(self):
        name = self.lock_name()
        rc, out, err = self.fc("inspect", name)
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assert_one_line(err)
        self.assertRegex(err, r"cannot verify the gateway's certificate: "
                              r".+; pass --cacert\n$")
        rc, out, err = self.fc("--cacert", self.pki.other_ca, "inspect",
                               name)
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assert_one_line(err)
        self.assertIn("cannot verify the gateway's certificate against "
                      "--cacert '%s'" % self.pki.other_ca, err)
        # nothing went past the handshake
        self.assertEqual(self.front_lines(name), [])

    def test_a_wait_is_not_retried_on_a_certificate_that_does_not_verify(
            self):
        rc, out, err = self.fc("lock", self.lock_name(), "--wait", "forever",
                               "--", "true", timeout=slack(10.0))
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertNotIn("still trying", err)
        self.assert_one_line(err)

    def test_cert_and_key_present_the_client_certificate(self):
        name = self.lock_name()
        rc, out, err = self.fc("--cacert", self.pki.ca, "--cert",
                               self.pki.ops, "--key", self.pki.ops_key,
                               "inspect", name)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.fc("--cacert", self.pki.ca, "inspect",
                               name + "-none")
        self.assertEqual(rc, 0, err)
        (with_cert,) = self.wait_front_lines(LOCKS + name, 1)
        (without,) = self.wait_front_lines(LOCKS + name + "-none", 1)
        self.assertEqual(with_cert[0], "SUCCESS", with_cert)
        self.assertIn("CN=ops", with_cert[1])
        self.assertEqual(without[0], "NONE", without)

    def test_an_encrypted_client_key_is_refused_not_prompted_for(self):
        rc, out, err = self.fc("--cacert", self.pki.ca, "--cert",
                               self.pki.ops, "--key",
                               self.pki.ops_key_encrypted, "inspect", "x")
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assert_one_line(err)
        self.assertIn("cannot use the TLS files given", err)


# ---------------------------------------------------------------------------
# the real gateway


class BreakTests(AuthTestCase):
    """fencectl break against the gateway in open mode (no auth-file)."""

    def test_break_ends_the_current_grant_and_says_its_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        rc, out, err = self.fc("break", name)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "broke lock '%s', token %d\n"
                         % (name, g["token"]))
        self.assertFalse(self.held(name), "the lock is still held")
        r = self.release(name, g["lease"])
        self.assert_error(r, 410, "lease_expired", "release after a break")
        nxt = self.acquire_ok(name)
        self.assertGreater(nxt["token"], g["token"])
        self.release_ok(name, nxt["lease"])

    def test_break_with_the_current_token(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        got = self.fc_json("break", name, "--token", str(g["token"]))
        self.assertEqual(got, {"name": name, "token": g["token"],
                               "broken": True})
        self.assertFalse(self.held(name))

    def test_break_with_another_token_exits_79_and_leaves_the_grant(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000)
        for other in (g["token"] + 1, g["token"] - 1):
            rc, out, err = self.fc("break", name, "--token", str(other))
            self.assertEqual(rc, EXIT_STALE, err)
            self.assertIn("nothing was broken", err)
        s = self.state(name)
        self.assertEqual((s["held"], s["token"]), (True, g["token"]))
        self.release_ok(name, g["lease"])

    def test_break_of_a_free_lock(self):
        never = self.lock_name()
        rc, out, err = self.fc("break", never)
        self.assertEqual(rc, EXIT_NOTHING, err)
        self.assertIn("is free: nothing to break", err)
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.release_ok(name, g["lease"])
        rc, out, err = self.fc("break", name)
        self.assertEqual(rc, EXIT_NOTHING, err)
        # with the token of the grant that has ended: 409 stale_token
        rc, out, err = self.fc("break", name, "--token", str(g["token"]))
        self.assertEqual(rc, EXIT_STALE, err)

    def test_break_stops_the_holders_command_with_a_lost_lease(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--ttl", "2s", "--", "sh", "-c",
                        "touch %s; i=0; while [ $i -lt 1500 ]; do sleep "
                        "0.02; i=$((i+1)); done"
                        % shlex.quote(self.path("running")))
        self.wait_for_file("running")
        rc, out, err = self.fc("break", name)
        self.assertEqual(rc, 0, err)
        self.assertEqual(bg.wait(slack(10.0)), tf.EXIT_LEASE_LOST,
                         bg.err())
        self.assertIn("lost", bg.err())


class AuthTests(AuthTestCase):
    """fencectl against a gateway started with an auth-file."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        d = tempfile.mkdtemp(prefix="auth-", dir=harness.tmp_root())
        cls.keys = {n: new_key() for n in ("ci", "ops", "reader",
                                           "stranger")}
        cls.key_files = {n: write_file(os.path.join(d, n + ".key"),
                                       k + "\n")
                         for n, k in cls.keys.items()}
        cls.auth_file = write_file(os.path.join(d, "auth"), "".join(
            "%s sha256:%s %s\n" % (n, sha256_hex(cls.keys[n]), rights)
            for n, rights in (("ci", "lock:jobs/ observe:*"),
                              ("ops", "admin:*"),
                              ("reader", "observe:*"))))
        cls.gateway_flags = ("--auth-file", cls.auth_file)

    def as_(self, who, *args, **kw):
        return self.fc("--key-file", self.key_files[who], *args, **kw)

    def job(self):
        return "jobs/" + self.lock_name()

    def test_no_key_is_401_in_plain_words(self):
        rc, out, err = self.fc("inspect", self.job())
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assert_one_line(err)
        self.assertIn("the gateway does not know who you are: pass "
                      "--key-file (or FENCEGATE_KEY_FILE)", err)

    def test_an_unknown_key_is_401_naming_the_file_not_the_key(self):
        rc, out, err = self.as_("stranger", "acquire", self.job())
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assert_one_line(err)
        self.assertIn("the gateway does not accept this key (from %s)"
                      % self.key_files["stranger"], err)
        self.assert_no_secret(self.keys["stranger"], out, err)

    def test_a_key_with_the_right_takes_and_runs(self):
        name = self.job()
        rc, out, err = self.as_("ci", "lock", name, "--", "sh", "-c",
                                "echo $FENCE_TOKEN")
        self.assertEqual(rc, 0, err)
        self.assertGreater(int(out), 0)
        env = self.env_for(FENCEGATE_KEY_FILE=self.key_files["ci"])
        rc, out, err = self.fc("lock", name, "--", "true", env=env)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.as_("reader", "inspect", name)
        self.assertEqual(rc, 0, err)
        self.assertIn("held: false", out)
        self.assert_no_secret(self.keys["ci"], out, err)

    def test_a_missing_right_is_403_naming_it_and_a_wait_ends(self):
        rc, out, err = self.as_("ci", "acquire", "other/" + self.lock_name())
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assert_one_line(err)
        self.assertRegex(err, r"lacks the right: .*lock")
        # a lock with no --wait waits forever; a 403 ends it at once
        rc, out, err = self.as_("reader", "lock", self.job(), "--", "true",
                                timeout=slack(10.0))
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assertRegex(err, r"lacks the right: .*lock")

    def test_break_needs_admin(self):
        name = self.job()
        rc, out, err = self.as_("ci", "--json", "acquire", name, "--ttl",
                                "60s")
        self.assertEqual(rc, 0, err)
        token = json.loads(out)["token"]
        rc, out, err = self.as_("ci", "break", name)
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assertRegex(err, r"lacks the right: .*admin")
        rc, out, err = self.as_("ops", "break", name)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "broke lock '%s', token %d\n" % (name, token))


class GatewayTlsTests(AuthTestCase):
    """fencectl against the gateway serving TLS itself (tls-cert, tls-key,
    tls-client-ca), with an auth-file that knows ops by its certificate
    and ci by its key."""
    uses_shared_env = False
    _env = None
    _error = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pki = Pki.get()
        d = tempfile.mkdtemp(prefix="auth-tls-", dir=harness.tmp_root())
        cls.ci_key = new_key()
        cls.ci_key_file = write_file(os.path.join(d, "ci.key"),
                                     cls.ci_key + "\n")
        cls.auth_file = write_file(os.path.join(d, "auth"),
                                   "ci sha256:%s lock:jobs/ observe:*\n"
                                   "ops cert admin:*\n"
                                   % sha256_hex(cls.ci_key))

    @classmethod
    def tearDownClass(cls):
        env, cls._env = cls._env, None
        if env is not None:
            gw, redis, upstream = env
            gw.stop()
            r = gw.sanitizer_report()
            if r:
                harness.LATE_FAILURES.append("GatewayTlsTests: sanitizer "
                                             "report:\n" + r)
            upstream.stop()
            redis.stop()
        super().tearDownClass()

    @classmethod
    def tls_gateway(cls):
        """The class's TLS gateway, started on first use; a start that
        failed fails every test of the class, with its reason."""
        if cls._error:
            raise harness.SetupError("the TLS gateway failed earlier: "
                                     + cls._error)
        if cls._env is not None and cls._env[0].alive():
            return cls._env[0]
        try:
            return cls._start_tls_gateway()
        except harness.SetupError as e:
            cls._error = str(e)
            raise

    @classmethod
    def _start_tls_gateway(cls):
        redis = harness.new_redis()
        redis.start()
        upstream = origins.StandIn().start()
        gw = harness.Gateway(redis.port, upstream.port, [
            "--tls-cert", cls.pki.server, "--tls-key", cls.pki.server_key,
            "--tls-client-ca", cls.pki.ca, "--auth-file", cls.auth_file])
        cls._env = (gw, redis, upstream)
        gw.start(wait=False)
        ctx = ssl.create_default_context(cafile=cls.pki.ca)

        def answers():
            try:
                c = http.client.HTTPSConnection("127.0.0.1", gw.port,
                                                context=ctx, timeout=2.0)
                c.request("GET", "/_fence/v1/health")
                c.getresponse().read()
                c.close()
                return "https"
            except (OSError, ssl.SSLError, http.client.HTTPException):
                pass
            try:
                harness.http_request(gw.port, "GET", "/_fence/v1/health",
                                     timeout=2.0)
                return "http"   # a listener that does not speak TLS
            except (OSError, http.client.HTTPException):
                return None
        got = harness.wait_until(lambda: answers() or
                                 ("exited" if not gw.alive() else None),
                                 slack(20.0))
        if got != "https":
            raise harness.SetupError(
                "the gateway started with tls-cert, tls-key and "
                "tls-client-ca %s on port %d; its stderr:\n%s"
                % ({"http": "answers plain HTTP, not HTTPS",
                    "exited": "exited (%s)" % gw.proc.poll()}.get(
                        got, "did not answer HTTPS"),
                   gw.port, gw.log_tail()))
        return gw

    def setUp(self):
        super().setUp()
        self.tgw = self.tls_gateway()
        self.log_paths.append(self.tgw.logpath)

    def url(self, gw=None):
        return "https://127.0.0.1:%d" % self.tgw.port

    def test_https_gateway_with_cacert(self):
        name = "jobs/" + self.lock_name()
        rc, out, err = self.fc("--cacert", self.pki.ca, "--key-file",
                               self.ci_key_file, "lock", name, "--ttl", "2s",
                               "--", "sh", "-c", "echo $FENCE_TOKEN")
        self.assertEqual(rc, 0, err)
        self.assertGreater(int(out), 0)
        rc, out, err = self.fc("--cacert", self.pki.ca, "--key-file",
                               self.ci_key_file, "inspect", name)
        self.assertEqual(rc, 0, err)
        self.assertIn("held: false", out)

    def test_https_gateway_without_cacert_is_one_plain_line_and_69(self):
        rc, out, err = self.fc("--key-file", self.ci_key_file, "inspect",
                               "jobs/x")
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assert_one_line(err)
        self.assertRegex(err, r"cannot verify the gateway's certificate: "
                              r".+; pass --cacert\n$")

    def test_a_client_certificate_names_its_principal(self):
        name = "jobs/" + self.lock_name()
        rc, out, err = self.fc("--cacert", self.pki.ca, "--key-file",
                               self.ci_key_file, "--json", "acquire", name,
                               "--ttl", "60s")
        self.assertEqual(rc, 0, err)
        token = json.loads(out)["token"]
        rc, out, err = self.fc("--cacert", self.pki.ca, "--cert",
                               self.pki.ops, "--key", self.pki.ops_key,
                               "break", name)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "broke lock '%s', token %d\n" % (name, token))

    def test_no_credential_or_an_unknown_certificate_is_401(self):
        rc, out, err = self.fc("--cacert", self.pki.ca, "inspect", "jobs/x")
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assertIn("the gateway does not know who you are", err)
        rc, out, err = self.fc("--cacert", self.pki.ca, "--cert",
                               self.pki.nobody, "--key", self.pki.nobody_key,
                               "inspect", "jobs/x")
        self.assertEqual(rc, EXIT_NOPERM, err)
        self.assertIn("it knows no principal by this client certificate "
                      "(--cert '%s')" % self.pki.nobody, err)
