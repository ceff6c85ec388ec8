"""env.py - the one environment the client libraries' own test runners
(clients/python, clients/go, clients/c) and bench/clients.py run against:
real processes on free loopback ports, started here and stopped by PID.

What it starts, and hands to a runner as FG_TEST_* variables (the full
list is in docs/testing.md, "The client libraries"):
- one redis-server, shared by every gateway;
- nginx WebDAV, with the collections /app/ and /other/;
- two open-mode gateways in front of nginx (FG_TEST_GATEWAYS);
- one gateway with an auth-file and TLS, asking for client certificates
  (FG_TEST_AUTH_GATEWAY), its certificates made with the openssl CLI;
- with s3=True, radosgw and an S3-mode gateway (FG_TEST_S3_GATEWAY);
- a control endpoint (FG_TEST_CONTROL) through which a test stalls or
  restarts the Redis and stops or starts the first two gateways. A
  language's test can then fault the real thing without a process API of
  its own.

Invariant: everything started here is stopped by stop(), also when start()
fails half-way; the control endpoint acts only on what this module owns.
"""

import hashlib
import http.server
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness            # noqa: E402
import storage            # noqa: E402
import test_tls           # noqa: E402  (its openssl.cnf: one for both)
from harness import SetupError, slack   # noqa: E402


RIGHTS_APP = "lock:app/ observe:app/ read:app/"
RIGHTS_OTHER = "lock:other/ observe:other/ read:other/"


def owner_only(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


class Pki:
    """A CA, the gateway's server certificate and one client certificate
    (CN app-cert), made with the openssl CLI."""

    def __init__(self, d):
        self.dir = d
        self.cnf = owner_only(os.path.join(d, "openssl.cnf"),
                              test_tls.OPENSSL_CNF % {"dir": d})
        self.ca = self._cert("ca", "fencegate client-test CA", None, "ca_ext")
        self.server = self._cert("server", "127.0.0.1", "ca", "server_ext")
        self.client = self._cert("client", "app-cert", "ca", "client_ext")

    def key(self, name):
        return os.path.join(self.dir, name + ".key")

    def _run(self, *args):
        exe = shutil.which("openssl")
        if not exe:
            raise SetupError("the openssl CLI is not installed")
        r = subprocess.run([exe] + list(args), cwd=self.dir,
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            raise SetupError("openssl %s failed: %s"
                             % (args[0], r.stderr.decode("utf-8", "replace")))

    def _cert(self, name, cn, ca, ext):
        pem = os.path.join(self.dir, name + ".pem")
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", self.key(name), "-subj", "/CN=" + cn,
                  "-config", self.cnf]
        if ca is None:
            self._run("req", "-x509", *newkey, "-extensions", ext,
                      "-days", "30", "-out", pem)
        else:
            csr = os.path.join(self.dir, name + ".csr")
            self._run("req", "-new", *newkey, "-out", csr)
            self._run("x509", "-req", "-in", csr, "-CA",
                      os.path.join(self.dir, ca + ".pem"), "-CAkey",
                      self.key(ca), "-CAcreateserial", "-days", "30",
                      "-extfile", self.cnf, "-extensions", ext, "-out", pem)
        os.chmod(self.key(name), 0o600)
        return pem


class ClientEnv:
    """The environment; start() it, read variables(), stop() it."""

    def __init__(self, fencegate, fencectl=None, s3=True):
        harness.Config.bin = fencegate
        self.fencectl = fencectl
        self.with_s3 = s3
        self.dir = tempfile.mkdtemp(prefix="fg-clients-",
                                    dir=harness.tmp_root())
        self.redis = None
        self.store = None
        self.gateways = []        # the two open ones
        self.auth_gw = None
        self.s3_gw = None
        self.s3_store = None
        self.control = None
        self.keys = {}
        self.bucket = None
        self._lock = threading.Lock()   # one control action at a time

    # -- starting ---------------------------------------------------------

    def start(self):
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self):
        self.redis = harness.RedisServer().start()
        self.store = storage.Nginx().start()
        for coll in ("/app/", "/other/"):
            r = harness.http_request(self.store.port, "MKCOL", coll)
            if r.status not in (201, 405):
                raise SetupError("MKCOL %s on nginx: %r" % (coll, r))
        for _ in range(2):
            g = harness.Gateway(self.redis.port, self.store.port)
            self.gateways.append(g)
            g.start()
        self._start_auth_gateway()
        if self.with_s3:
            self._start_s3()
        for g in self.all_gateways():
            if not g.wait_healthy(slack(10.0)):
                raise SetupError("a gateway never got healthy:\n"
                                 + g.log_tail())
        self.control = _Control(self)
        self.dead_port = harness.free_port()

    def _start_auth_gateway(self):
        self.pki = Pki(tempfile.mkdtemp(prefix="pki-", dir=self.dir))
        for who in ("app", "other"):
            self.keys[who] = secrets.token_urlsafe(32)
        lines = ["app sha256:%s %s" % (_sha(self.keys["app"]), RIGHTS_APP),
                 "other sha256:%s %s" % (_sha(self.keys["other"]),
                                         RIGHTS_OTHER),
                 "app-cert cert %s" % RIGHTS_APP]
        auth = owner_only(os.path.join(self.dir, "auth"),
                          "\n".join(lines) + "\n")
        conf = owner_only(os.path.join(self.dir, "auth-gw.conf"), "".join(
            l + "\n" for l in ("auth-file " + auth,
                               "tls-cert " + self.pki.server,
                               "tls-key " + self.pki.key("server"),
                               "tls-client-ca " + self.pki.ca)))
        g = harness.Gateway(self.redis.port, self.store.port,
                            ["--config", conf])
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.pki.ca)
        g.ssl_context = ctx
        self.auth_gw = g
        g.start()

    def _start_s3(self):
        import s3env
        self.s3_store = s3env.Store().start()
        self.s3_key_id, self.s3_secret = s3env.CLIENT_KEY, s3env.CLIENT_SECRET
        creds = owner_only(os.path.join(self.dir, "s3creds"), "%s %s app\n"
                           % (self.s3_key_id, self.s3_secret))
        up = owner_only(os.path.join(self.dir, "s3store"), "%s\n%s\n"
                        % (s3env.STORE_KEY, s3env.STORE_SECRET))
        conf = owner_only(os.path.join(self.dir, "s3-gw.conf"), "".join(
            l + "\n" for l in ("upstream-api s3", "s3-credentials " + creds,
                               "upstream-s3-credentials " + up,
                               "s3-region " + s3env.REGION)))
        self.s3_gw = harness.Gateway(self.redis.port, self.s3_store.port,
                                     ["--config", conf])
        self.s3_gw.start()
        # the bucket is made at the store itself: making one through the
        # gateway needs a route lock that guards it
        self.bucket = "fg-client-tests"
        h = {"Host": "127.0.0.1:%d" % self.s3_store.port,
             "x-amz-content-sha256": s3env.EMPTY_SHA256}
        s3env.sign("PUT", "/" + self.bucket, "", h, s3env.EMPTY_SHA256,
                   key=s3env.STORE_KEY, secret=s3env.STORE_SECRET)
        r = s3env.send(self.s3_store.port, "PUT", "/" + self.bucket, h)
        if r.status != 200:
            raise SetupError("bucket creation at radosgw: %r" % r)

    def all_gateways(self):
        return [g for g in self.gateways + [self.auth_gw, self.s3_gw] if g]

    # -- what a runner is told -------------------------------------------

    def variables(self):
        v = {
            "FG_TEST_GATEWAYS": ",".join("http://127.0.0.1:%d" % g.port
                                         for g in self.gateways),
            "FG_TEST_STORE": "http://127.0.0.1:%d" % self.store.port,
            "FG_TEST_DEAD": "http://127.0.0.1:%d" % self.dead_port,
            "FG_TEST_AUTH_GATEWAY": "https://127.0.0.1:%d" % self.auth_gw.port,
            "FG_TEST_CA": self.pki.ca,
            "FG_TEST_KEY": self.keys["app"],
            "FG_TEST_OTHER_KEY": self.keys["other"],
            "FG_TEST_CLIENT_CERT": self.pki.client,
            "FG_TEST_CLIENT_KEY": self.pki.key("client"),
            "FG_TEST_CONTROL": "http://127.0.0.1:%d" % self.control.port,
            "FG_TEST_TMP": tempfile.mkdtemp(prefix="scratch-", dir=self.dir),
        }
        if self.fencectl:
            v["FG_TEST_FENCECTL"] = self.fencectl
        if self.s3_gw:
            import s3env
            v.update({
                "FG_TEST_S3_GATEWAY": "http://127.0.0.1:%d" % self.s3_gw.port,
                "FG_TEST_S3_KEY_ID": self.s3_key_id,
                "FG_TEST_S3_SECRET": self.s3_secret,
                "FG_TEST_S3_REGION": s3env.REGION,
                "FG_TEST_S3_BUCKET": self.bucket,
                "FG_TEST_S3_STORE": "http://127.0.0.1:%d" % self.s3_store.port,
                "FG_TEST_S3_STORE_KEY_ID": s3env.STORE_KEY,
                "FG_TEST_S3_STORE_SECRET": s3env.STORE_SECRET,
            })
        return v

    def log_paths(self):
        out = [g.logpath for g in self.all_gateways()]
        if self.redis:
            out.append(self.redis.logpath)
        if self.store:
            out += [self.store.error_log]
        return out

    # -- faults, asked for through the control endpoint ------------------

    def stall_redis(self, ms):
        p = self.redis.proc
        os.kill(p.pid, signal.SIGSTOP)
        t = threading.Timer(ms / 1000.0, _cont, (p,))
        t.daemon = True
        t.start()

    def restart_redis(self):
        with self._lock:
            self.redis = self.redis.restart_empty()

    def stop_gateway(self, i):
        with self._lock:
            self.gateways[i].stop()

    def start_gateway(self, i):
        with self._lock:
            old = self.gateways[i]
            if old.alive():
                return
            g = harness.Gateway(self.redis.port, self.store.port,
                                port=old.port)
            self.gateways[i] = g
            g.start()
            if not g.wait_healthy(slack(10.0)):
                raise SetupError("gateway %d did not get healthy" % i)

    def stop(self):
        if self.control:
            self.control.close()
            self.control = None
        for g in self.all_gateways():
            g.stop()
        for p in (self.s3_store, self.store, self.redis):
            if p is not None:
                try:
                    p.stop()
                except Exception:   # stopping the rest matters more
                    pass
        harness.stop_all()

    def sanitizer_reports(self):
        return [r for r in (g.sanitizer_report() for g in self.all_gateways())
                if r]


def _cont(p):
    try:
        os.kill(p.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def _sha(key):
    return hashlib.sha256(key.encode()).hexdigest()


class _Control:
    """The control endpoint: a loopback HTTP server on its own thread.
    Every action answers once it is done (a stall once it began)."""

    def __init__(self, env):
        self.env = env
        handler = self._handler()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        env = self.env

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/health":
                    return self.answer(200, {"ok": True})
                self.answer(404, {"error": "not_found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(min(n, 1 << 16))
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query)
                parts = u.path.strip("/").split("/")
                try:
                    if parts == ["redis", "stall"]:
                        ms = int(q.get("ms", ["0"])[0])
                        if not 0 < ms <= 60000:
                            return self.answer(400, {"error": "ms: 1-60000"})
                        env.stall_redis(ms)
                    elif parts == ["redis", "restart"]:
                        env.restart_redis()
                    elif len(parts) == 3 and parts[0] == "gateway" and \
                            parts[1] in ("0", "1") and \
                            parts[2] in ("stop", "start"):
                        i = int(parts[1])
                        if parts[2] == "stop":
                            env.stop_gateway(i)
                        else:
                            env.start_gateway(i)
                    else:
                        return self.answer(404, {"error": "not_found"})
                except Exception as e:   # the test that asked is told
                    return self.answer(500, {"error": repr(e)})
                self.answer(200, {"ok": True})

        return H
