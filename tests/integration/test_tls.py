"""test_tls.py - TLS on both sides of the gateway (contract v1.2, "TLS").

The listener: with tls-cert and tls-key the gateway serves HTTPS only,
TLS 1.2 or 1.3 (a client that truly offers 1.1 or 1.0 is refused; the
same client is shown to get 1.1 and 1.0 from an openssl s_server, so the
refusal is the gateway's), the lock API and proxied reads and writes work
over it (bodies large enough to suspend and resume the connection, a
blocked acquire, a client leaving mid-body), a plain-HTTP request to it
gets no answer, and SIGHUP takes a new certificate for new handshakes
while a keep-alive connection opened before goes on; a certificate that
does not load on SIGHUP leaves the old one serving, and one that does not
load at start-up is exit 2.

Client certificates (tls-client-ca): asked for, never required; a
certificate that verifies names its CN (seen here in the debug line the
gateway logs when it verified one), one from another CA, an expired one,
or one whose CN cannot name a principal does not; the answer is kept per
connection until the client CA is reloaded.

The upstream: an nginx WebDAV store over https is verified against
upstream-ca (a store the system's CAs do not know is 502
upstream_unavailable, and the gateway's log names the certificate
problem), its connections are reused, and upstream-cert/upstream-key are
presented to a store that asks for a client certificate.

Every certificate is made here with the openssl CLI, in the run's temp dir.
"""

import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import harness
from harness import LOCKS, SetupError, slack, spawn
from origins import StandIn
import storage

HEALTH = "/_fence/v1/health"
OBSERVE = "/_fence/v1/locks/tls/observed"

OPENSSL_CNF = """\
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = unused
[ ca_ext ]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[ server_ext ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ client_ext ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ ca ]
default_ca = past
[ past ]
database = %(dir)s/index.txt
new_certs_dir = %(dir)s
serial = %(dir)s/serial
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[ any ]
commonName = supplied
"""


def _openssl():
    exe = shutil.which("openssl")
    if not exe:
        raise SetupError("the openssl CLI is not installed: the TLS tests "
                         "cannot make their certificates")
    return exe


class Pki:
    """Two CAs and the certificates the tests use, as PEM files in a
    private directory: self.path(name) is "<name>.pem", self.key(name)
    "<name>.key"."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pki-", dir=harness.tmp_root())
        self.cnf = os.path.join(self.dir, "openssl.cnf")
        with open(self.cnf, "w") as f:
            f.write(OPENSSL_CNF % {"dir": self.dir})
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write("1000\n")
        self.ca("ca", "fencegate test CA")
        self.ca("other-ca", "another CA")
        self.leaf("gateway-one", "ca", "server_ext")
        self.leaf("gateway-two", "ca", "server_ext")
        self.leaf("store", "ca", "server_ext")
        self.leaf("ops", "ca", "client_ext")
        self.leaf("ci", "ca", "client_ext")
        self.leaf("fencegate", "ca", "client_ext")
        self.leaf("stranger", "other-ca", "client_ext")
        self.leaf("ops team", "ca", "client_ext", name="bad-cn")
        self.leaf("ops/CN=admin", "ca", "client_ext", name="two-cns")
        # the longest CN that names a principal (openssl itself makes none
        # longer: X.520 bounds a CN at 64 characters)
        self.leaf("a" * 56 + ".bot@x-y", "ca", "client_ext", name="cn-64")
        self.leaf("no-cn", "ca", "client_ext", name="no-cn", subject="/O=ops")
        self.expired("ops", "ca", name="expired")

    def path(self, name):
        return os.path.join(self.dir, name + ".pem")

    def key(self, name):
        return os.path.join(self.dir, name + ".key")

    def _run(self, *args):
        r = subprocess.run([_openssl()] + list(args), cwd=self.dir,
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            raise SetupError("openssl %s failed:\n%s"
                             % (" ".join(args[:2]),
                                r.stderr.decode("utf-8", "replace")))

    def _newkey(self, name, cn, subject=None):
        return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", self.key(name), "-subj",
                subject or "/CN=" + cn, "-config", self.cnf]

    def ca(self, name, subject):
        self._run("req", "-x509", *self._newkey(name, subject),
                  "-extensions", "ca_ext", "-days", "30",
                  "-out", self.path(name))

    def _csr(self, name, cn, subject=None):
        csr = os.path.join(self.dir, name + ".csr")
        self._run("req", "-new", *self._newkey(name, cn, subject), "-out", csr)
        return csr

    def leaf(self, cn, ca, ext, name=None, subject=None):
        """A certificate of subject "/CN=<cn>" (or `subject`) from `ca`."""
        name = name or cn
        csr = self._csr(name, cn, subject)
        self._run("x509", "-req", "-in", csr, "-CA", self.path(ca),
                  "-CAkey", self.key(ca), "-CAcreateserial", "-days", "30",
                  "-extfile", self.cnf, "-extensions", ext,
                  "-out", self.path(name))

    def expired(self, subject, ca, name):
        """A client certificate valid only in January 2020."""
        csr = self._csr(name, subject)
        self._run("ca", "-config", self.cnf, "-batch", "-notext",
                  "-in", csr, "-cert", self.path(ca), "-keyfile",
                  self.key(ca), "-extensions", "client_ext",
                  "-startdate", "20200101000000Z",
                  "-enddate", "20200201000000Z", "-out", self.path(name))


_PKI = None


def pki():
    global _PKI
    if _PKI is None:
        _PKI = Pki()
    return _PKI


def client_context(ca=None, cert=None, version=None):
    """A client context trusting `ca` (a PEM path), presenting client
    certificate `cert` (a Pki name) when given, pinned to `version`."""
    p = pki()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca or p.path("ca"))
    if cert:
        ctx.load_cert_chain(p.path(cert), p.key(cert))
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def subject_cn(sock):
    """The CN of the certificate the server showed on an ssl socket."""
    for rdn in sock.getpeercert()["subject"]:
        for k, v in rdn:
            if k == "commonName":
                return v
    return None


def new_connection_cn(port, ctx=None):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with (ctx or client_context()).wrap_socket(
                raw, server_hostname="127.0.0.1") as s:
            return subject_cn(s)


def s_client(port, version_flag):
    """openssl s_client offering exactly one protocol version, at security
    level 0 so that OpenSSL itself does not hold TLS 1.0/1.1 back. Returns
    (negotiated version or None, output)."""
    r = subprocess.run([_openssl(), "s_client", "-connect",
                        "127.0.0.1:%d" % port, version_flag,
                        "-cipher", "DEFAULT@SECLEVEL=0", "-brief",
                        "-CAfile", pki().path("ca")],
                       input=b"", capture_output=True, timeout=30)
    out = (r.stdout + r.stderr).decode("utf-8", "replace")
    m = re.search(r"Protocol version: (\S+)", out)
    return (m.group(1) if m and "CONNECTION ESTABLISHED" in out else None), out


def curl(args, timeout=30):
    """The curl CLI; returns (exit code, stdout bytes, stderr text)."""
    exe = shutil.which("curl")
    if not exe:
        raise SetupError("the curl CLI is not installed")
    r = subprocess.run([exe, "-sS"] + list(args), capture_output=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")


class TlsNginx(storage.Nginx):
    """The suite's nginx WebDAV store, serving https only with the store
    certificate; with `client_ca`, it asks for a client certificate and
    answers 400 without one that verifies (ssl_verify_client on)."""

    def __init__(self, client_ca=None):
        super().__init__()
        self.client_ca = client_ca

    def config_text(self, module):
        p = pki()
        q = json.dumps
        plain = "    listen 127.0.0.1:%d;" % self.port
        tls = ["    listen 127.0.0.1:%d ssl;" % self.port,
               "    ssl_certificate %s;" % q(p.path("store")),
               "    ssl_certificate_key %s;" % q(p.key("store")),
               "    ssl_protocols TLSv1.2 TLSv1.3;",
               "    keepalive_timeout 60s;"]
        if self.client_ca:
            tls += ["    ssl_verify_client on;",
                    "    ssl_client_certificate %s;" % q(self.client_ca)]
        text = super().config_text(module)
        assert plain in text
        return text.replace(plain, "\n".join(tls))

    def answers(self):
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            c = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=1.0,
                                            context=client_context())
            try:
                c.request("OPTIONS", "/", headers={"X-Test-Id": "probe"})
                c.getresponse().read()
            finally:
                c.close()
            return True
        except OSError:
            return False


class TlsTestCase(harness.TestCase):
    """Each test starts its own redis-server, store and gateway."""

    uses_shared_env = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        pki()

    # -- processes ----------------------------------------------------------

    def start_redis(self):
        r = harness.new_redis()
        r.start()
        self.addCleanup(r.stop)
        return r

    def start_nginx(self, store=None):
        store = store or storage.Nginx()
        self.log_paths.append(store.error_log)
        store.start()
        self.addCleanup(store.stop)
        return store

    @staticmethod
    def key_file():
        """A sequencer key file: a gateway knows its key from the start,
        so its first lock call does not wait for it to be agreed on."""
        return storage.new_key_file()[1]

    def tls_files(self, cert="gateway-one"):
        """Copies of a server certificate and key the test may overwrite:
        (cert path, key path)."""
        d = tempfile.mkdtemp(prefix="tls-", dir=harness.tmp_root())
        c, k = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        shutil.copy(pki().path(cert), c)
        shutil.copy(pki().key(cert), k)
        return c, k

    def start_tls_gateway(self, redis, upstream_port, flags=()):
        """A gateway serving HTTPS with a copy of gateway-one's certificate
        and key (g.tls_cert, g.tls_key), which the test may overwrite."""
        cert, key = self.tls_files()
        f = ["--tls-cert", cert, "--tls-key", key,
             "--key-file", self.key_file()] + list(flags)
        g = harness.Gateway(redis.port, upstream_port, f)
        g.ssl_context = client_context()
        g.tls_cert, g.tls_key = cert, key
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        return g

    def wait_log(self, g, pattern, timeout=None, after=0):
        """Waits for a line of the gateway's log matching `pattern` (a
        regex) past byte offset `after`; returns the match."""
        def look():
            with open(g.logpath, "rb") as f:
                f.seek(after)
                return re.search(pattern.encode(), f.read())
        return self.wait_for(look, timeout or slack(5.0),
                             "gateway log line /%s/" % pattern)

    @staticmethod
    def log_size(g):
        return os.path.getsize(g.logpath)

    @staticmethod
    def log_since(g, offset):
        with open(g.logpath, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def sighup(self, g):
        at = self.log_size(g)
        g.proc.send_signal(signal.SIGHUP)
        return at

    # -- requests -------------------------------------------------------------

    def https(self, g, method, path, body=None, headers=None, ctx=None):
        """One request on a fresh HTTPS connection; a Response."""
        hdrs = dict(headers or {})
        conn = http.client.HTTPSConnection("127.0.0.1", g.port, timeout=30,
                                           context=ctx or client_context())
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            return harness.Response(r.status, r.reason, r.getheaders(), data, 0)
        finally:
            conn.close()

    def grant(self, g, name):
        r = g.request("POST", LOCKS + name, body={"ttl_ms": 30000})
        self.assertEqual(r.status, 200, "acquire %s: %r" % (name, r))
        return r.json

    def obj(self, store, tag="obj"):
        self._counter += 1
        d = "/tls-%s/%d" % (self._testMethodName[:80], self._counter)
        store.mkdir(d + "/")
        return "%s/%s.bin" % (d, tag)


# ---------------------------------------------------------------------------
# the listener


class ListenerTest(TlsTestCase):

    def test_lock_api_and_proxied_reads_and_writes_over_https(self):
        redis, store = self.start_redis(), self.start_nginx()
        g = self.start_tls_gateway(redis, store.port)
        self.assertTrue(g.wait_healthy(slack(5.0)), "health over HTTPS")
        path = self.obj(store)
        name = path.lstrip("/")
        seq = self.grant(g, name)["sequencer"]
        data = os.urandom(1000)
        r = self.https(g, "PUT", path, body=data,
                       headers={"Fencing-Token": seq, "X-Test-Id": "tls-put"})
        self.assertIn(r.status, (201, 204), repr(r))
        self.assertEqual(store.read(path), data)
        entry = store.wait_log(slack(5.0), test_id="tls-put")
        self.assertTrue(entry, "nginx logged the PUT")
        self.assertEqual(entry[0].x_forwarded_proto, "https",
                         "the gateway tells the store the client used https")
        r = self.https(g, "GET", path)
        self.assertEqual((r.status, r.body), (200, data))
        # the store's redirect to the collection names the gateway as the
        # client reached it: https
        folder = path.rsplit("/", 1)[0]
        r = self.https(g, "GET", folder)
        self.assertEqual(r.status, 301, repr(r))
        self.assertEqual(r.header("Location"),
                         "https://127.0.0.1:%d%s/" % (g.port, folder))
        # the curl CLI, against the CA only: the lock API and a proxied GET
        rc, out, err = curl(["--cacert", pki().path("ca"),
                             "https://127.0.0.1:%d%s%s" % (g.port, LOCKS, name)])
        self.assertEqual(rc, 0, err)
        self.assertTrue(json.loads(out)["held"])
        rc, out, err = curl(["--cacert", pki().path("ca"),
                             "https://localhost:%d%s" % (g.port, path)])
        self.assertEqual((rc, out), (0, data), err)
        # a write without its token is still refused, over TLS too
        r = self.https(g, "PUT", path, body=b"x")
        self.assertEqual(r.status, 428, repr(r))
        self.assertEqual(store.read(path), data)

    def test_large_bodies_both_ways_and_a_blocked_acquire(self):
        """A body far larger than the gateway's buffers suspends and
        resumes the TLS connection many times each way; a blocked acquire
        is a suspended connection resumed by a release."""
        redis, store = self.start_redis(), self.start_nginx()
        g = self.start_tls_gateway(redis, store.port)
        path = self.obj(store)
        seq = self.grant(g, path.lstrip("/"))["sequencer"]
        data = os.urandom(8 << 20)
        r = self.https(g, "PUT", path, body=data, headers={"Fencing-Token": seq})
        self.assertIn(r.status, (201, 204), repr(r))
        self.assertEqual(store.sha256(path), hashlib.sha256(data).hexdigest())
        r = self.https(g, "GET", path)
        self.assertEqual(r.status, 200)
        self.assertEqual(hashlib.sha256(r.body).hexdigest(),
                         hashlib.sha256(data).hexdigest())

        name = "tls-blocked-%s" % os.urandom(4).hex()
        first = self.grant(g, name)
        ctx = client_context()
        waiter = harness.Call(g.port, "POST", LOCKS + name,
                              body={"wait_ms": int(slack(20000))},
                              timeout=slack(30.0))
        waiter.kw["ssl_context"] = ctx
        waiter.start()
        self.wait_for(lambda: g.request("GET", LOCKS + name).json["waiters"] == 1,
                      slack(5.0), "the acquire to wait")
        r = g.request("DELETE", LOCKS + name,
                      headers={"Fence-Lease": first["lease"]})
        self.assertEqual(r.status, 204)
        got = waiter.result(slack(10.0))
        self.assertEqual(got.status, 200, repr(got))
        self.assertGreater(got.json["token"], first["token"])

    def test_client_leaving_mid_body_aborts_the_upstream_write(self):
        redis, store = self.start_redis(), self.start_nginx()
        g = self.start_tls_gateway(redis, store.port)
        path = self.obj(store)
        seq = self.grant(g, path.lstrip("/"))["sequencer"]
        raw = socket.create_connection(("127.0.0.1", g.port), timeout=10)
        s = client_context().wrap_socket(raw, server_hostname="127.0.0.1")
        s.sendall(("PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nFencing-Token: %s\r\n"
                   "X-Test-Id: tls-half\r\nContent-Length: %d\r\n\r\n"
                   % (path, seq, 4 << 20)).encode())
        s.sendall(os.urandom(1 << 20))
        # the upload has begun upstream before the client leaves
        self.wait_for(lambda: store.body_temp_files(), slack(5.0),
                      "nginx to receive part of the body")
        s.close()
        entry = store.wait_log(slack(10.0), test_id="tls-half")
        self.assertTrue(entry, "nginx logged the cut-off PUT")
        self.assertFalse(entry[0].applied, repr(entry[0]))
        self.assertIsNone(store.read(path), "a truncated body was stored")
        self.assertTrue(g.wait_healthy(slack(5.0)))

    def test_plain_http_to_the_https_port_gets_no_answer(self):
        redis = self.start_redis()
        g = self.start_tls_gateway(redis, harness.free_port())
        out = harness.raw_exchange(
            g.port, b"GET /_fence/v1/health HTTP/1.1\r\nHost: x\r\n\r\n",
            timeout=slack(5.0))
        self.assertNotIn(b"HTTP/", out)
        self.assertNotIn(b"redis", out)
        out = harness.raw_exchange(
            g.port, b"POST /_fence/v1/locks/x HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 2\r\n\r\n{}", timeout=slack(5.0))
        self.assertNotIn(b"HTTP/", out)
        self.assertEqual(redis.lock_keys("x"), [], "a plain request took a lock")
        self.assertIn(g.request("GET", HEALTH).status, (200, 503))

    def test_tls_1_0_and_1_1_refused_1_2_and_1_3_accepted(self):
        redis = self.start_redis()
        g = self.start_tls_gateway(redis, harness.free_port())
        # control: the same client command gets 1.1 and 1.0 from a server
        # that offers them, so the refusals below are the gateway's
        for flag, version in (("-tls1_1", "TLSv1.1"), ("-tls1", "TLSv1")):
            port = harness.free_port()
            srv = spawn([_openssl(), "s_server", "-accept", "127.0.0.1:%d" % port,
                         flag, "-cipher", "DEFAULT@SECLEVEL=0", "-www",
                         "-cert", pki().path("gateway-one"),
                         "-key", pki().key("gateway-one")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                got = None
                deadline = time.monotonic() + slack(10.0)
                while got is None and time.monotonic() < deadline:
                    got, out = s_client(port, flag)
                    if got is None:
                        time.sleep(0.05)   # s_server not listening yet
                self.assertEqual(got, version, "control s_server:\n" + out)
            finally:
                harness.stop_process(srv)
            got, out = s_client(g.port, flag)
            self.assertIsNone(got, "the gateway accepted %s:\n%s" % (version, out))
        self.assertTrue(g.alive())
        for v, name in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"),
                        (ssl.TLSVersion.TLSv1_3, "TLSv1.3")):
            ctx = client_context(version=v)
            with socket.create_connection(("127.0.0.1", g.port), timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    self.assertEqual(s.version(), name)
            r = self.https(g, "GET", HEALTH, ctx=ctx)
            self.assertIn(r.status, (200, 503))
            self.assertIn("redis", r.json)
            got, out = s_client(g.port, "-tls1_2" if name == "TLSv1.2" else "-tls1_3")
            self.assertEqual(got, name, out)

    def test_sighup_takes_a_new_certificate_and_keeps_open_connections(self):
        redis = self.start_redis()
        g = self.start_tls_gateway(redis, harness.free_port())
        old = http.client.HTTPSConnection("127.0.0.1", g.port, timeout=10,
                                          context=client_context())
        self.addCleanup(old.close)
        old.request("GET", HEALTH)
        old.getresponse().read()
        sock = old.sock
        self.assertEqual(subject_cn(sock), "gateway-one")

        shutil.copy(pki().path("gateway-two"), g.tls_cert)
        shutil.copy(pki().key("gateway-two"), g.tls_key)
        at = self.sighup(g)
        self.wait_log(g, r"tls: reloaded", after=at)
        self.assertEqual(new_connection_cn(g.port), "gateway-two")
        for _ in range(3):   # the connection from before goes on
            old.request("GET", HEALTH)
            r = old.getresponse()
            r.read()
            self.assertIn(r.status, (200, 503))
            self.assertIs(old.sock, sock, "the old connection was replaced")
        self.assertEqual(subject_cn(sock), "gateway-one")

    def test_sighup_with_files_that_do_not_load_keeps_the_old_ones(self):
        redis = self.start_redis()
        g = self.start_tls_gateway(redis, harness.free_port())
        key_pem = open(g.tls_key).read()
        cases = [
            ("garbage certificate", b"not a certificate\n", None),
            ("key of another certificate", None, pki().key("gateway-two")),
        ]
        for what, cert_bytes, key_from in cases:
            with self.subTest(what):
                if cert_bytes is not None:
                    with open(g.tls_cert, "wb") as f:
                        f.write(cert_bytes)
                if key_from is not None:
                    shutil.copy(pki().path("gateway-one"), g.tls_cert)
                    shutil.copy(key_from, g.tls_key)
                at = self.sighup(g)
                self.wait_log(g, r"tls: .*stay", after=at)
                self.assertEqual(new_connection_cn(g.port), "gateway-one")
                r = g.request("GET", HEALTH)
                self.assertIn(r.status, (200, 503))
        # neither key's bytes were logged
        log = open(g.logpath).read()
        lines = [ln for text in (key_pem, open(pki().key("gateway-two")).read())
                 for ln in text.splitlines() if ln and "-----" not in ln]
        self.assertTrue(lines)
        for ln in lines:
            self.assertNotIn(ln, log, "key bytes in the log")
        # and a good pair again is taken
        shutil.copy(pki().path("gateway-two"), g.tls_cert)
        shutil.copy(pki().key("gateway-two"), g.tls_key)
        at = self.sighup(g)
        self.wait_log(g, r"tls: reloaded", after=at)
        self.assertEqual(new_connection_cn(g.port), "gateway-two")

    def test_start_with_a_certificate_or_key_that_does_not_load_is_exit_2(self):
        p = pki()
        d = tempfile.mkdtemp(prefix="badtls-", dir=harness.tmp_root())
        garbage = os.path.join(d, "garbage.pem")
        with open(garbage, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        missing = os.path.join(d, "missing.pem")
        cases = [
            ("missing certificate", [missing, p.key("gateway-one")], "tls-cert"),
            ("garbage certificate", [garbage, p.key("gateway-one")], "tls-cert"),
            ("garbage key", [p.path("gateway-one"), garbage], "tls-key"),
            ("key of another certificate",
             [p.path("gateway-one"), p.key("gateway-two")], "tls-key"),
            ("garbage client CA", [p.path("gateway-one"), p.key("gateway-one"),
                                   garbage], "tls-client-ca"),
        ]
        key_lines = [ln for ln in open(p.key("gateway-one")).read().splitlines()
                     + open(p.key("gateway-two")).read().splitlines()
                     if ln and "-----" not in ln]
        for what, files, word in cases:
            with self.subTest(what):
                argv = [harness.Gateway.executable(), "--listen",
                        "127.0.0.1:%d" % harness.free_port(), "--redis",
                        "127.0.0.1:%d" % harness.free_port(),
                        "--tls-cert", files[0], "--tls-key", files[1]]
                if len(files) > 2:
                    argv += ["--tls-client-ca", files[2]]
                r = subprocess.run(argv, capture_output=True, timeout=slack(20.0),
                                   stdin=subprocess.DEVNULL)
                err = r.stderr.decode("utf-8", "replace")
                self.assertEqual(r.returncode, 2, err)
                self.assertIn(word, err)
                self.assertIn("fencegate: ", err)
                for ln in key_lines:
                    self.assertNotIn(ln, err, "key bytes on stderr")


# ---------------------------------------------------------------------------
# client certificates


class ClientCertTest(TlsTestCase):

    """With an auth-file whose `cert` principals are the test certificates'
    CNs: a lock call needs a principal, so each one asks the connection's
    certificate (health, open, does not)."""

    def start_with_client_ca(self, ca_name="ca"):
        redis = self.start_redis()
        d = tempfile.mkdtemp(prefix="clientca-", dir=harness.tmp_root())
        ca = os.path.join(d, "client-ca.pem")
        shutil.copy(pki().path(ca_name), ca)
        auth = os.path.join(d, "auth")
        with open(auth, "w") as f:
            for cn in ("ops", "stranger", "a" * 56 + ".bot@x-y"):
                f.write("%s cert observe:*\n" % cn)
        g = self.start_tls_gateway(redis, harness.free_port(),
                                   ["--tls-client-ca", ca, "--auth-file", auth,
                                    "--log-level", "debug"])
        g.client_ca = ca
        return g

    def test_a_verified_certificate_names_its_cn_and_none_is_needed(self):
        g = self.start_with_client_ca()
        at = self.log_size(g)
        r = self.https(g, "GET", OBSERVE)   # no certificate: served, 401
        self.assertEqual(r.status, 401)
        self.assertNotIn("client certificate", self.log_since(g, at))

        at = self.log_size(g)
        r = self.https(g, "GET", OBSERVE, ctx=client_context(cert="ops"))
        self.assertEqual(r.status, 200)
        self.wait_log(g, r"debug tls: client certificate CN=ops verified", after=at)
        # curl presents one just as well
        at = self.log_size(g)
        rc, out, err = curl(["--cacert", pki().path("ca"),
                             "--cert", pki().path("ops"), "--key", pki().key("ops"),
                             "https://127.0.0.1:%d%s" % (g.port, OBSERVE)])
        self.assertEqual(rc, 0, err)
        self.wait_log(g, r"client certificate CN=ops verified", after=at)
        # the longest usable CN, with every kind of byte allowed in one
        at = self.log_size(g)
        self.https(g, "GET", OBSERVE, ctx=client_context(cert="cn-64"))
        self.wait_log(g, r"CN=a{56}\.bot@x-y verified", after=at)

    def test_certificates_that_do_not_name_a_principal(self):
        g = self.start_with_client_ca()
        cases = [
            ("stranger", r"client certificate not verified: .*"
                         r"(not trusted|issuer)"),
            ("expired", r"client certificate not verified: .*expired"),
            ("bad-cn", r"cannot name a principal"),
            ("two-cns", r"cannot name a principal"),
            ("no-cn", r"cannot name a principal"),
        ]
        for cert, pattern in cases:
            with self.subTest(cert):
                at = self.log_size(g)
                # asked for, never required: the connection is served
                r = self.https(g, "GET", OBSERVE, ctx=client_context(cert=cert))
                self.assertEqual(r.status, 401)
                self.wait_log(g, pattern, after=at)
                self.assertNotRegex(self.log_since(g, at), r"CN=\S* verified",
                                    "a CN was taken from %s" % cert)

    def test_the_answer_is_kept_per_connection_until_the_ca_is_reloaded(self):
        g = self.start_with_client_ca()
        at = self.log_size(g)
        conn = http.client.HTTPSConnection("127.0.0.1", g.port, timeout=10,
                                           context=client_context(cert="ops"))
        self.addCleanup(conn.close)
        for _ in range(3):
            conn.request("GET", OBSERVE)
            conn.getresponse().read()
        sock = conn.sock
        self.wait_log(g, r"CN=ops verified", after=at)
        self.assertEqual(self.log_since(g, at).count("CN=ops verified"), 1,
                         "three requests on one connection verified it once")

        # the client CA now names only the other CA: the connection's
        # next request is answered under it (not verified), and the other
        # CA's client is verified on a new connection
        shutil.copy(pki().path("other-ca"), g.client_ca)
        at = self.sighup(g)
        self.wait_log(g, r"tls: reloaded", after=at)
        conn.request("GET", OBSERVE)
        resp = conn.getresponse()
        resp.read()
        self.assertEqual(resp.status, 401)
        self.assertIs(conn.sock, sock)
        self.wait_log(g, r"client certificate not verified", after=at)
        self.assertNotIn("CN=ops verified", self.log_since(g, at))
        at = self.log_size(g)
        r = self.https(g, "GET", OBSERVE, ctx=client_context(cert="stranger"))
        self.assertEqual(r.status, 200)
        self.wait_log(g, r"CN=stranger verified", after=at)

    def test_a_client_ca_that_does_not_load_on_sighup_keeps_the_old_one(self):
        g = self.start_with_client_ca()
        with open(g.client_ca, "w") as f:
            f.write("garbage\n")
        at = self.sighup(g)
        self.wait_log(g, r"tls: tls-client-ca .*stay", after=at)
        at = self.log_size(g)
        self.https(g, "GET", OBSERVE, ctx=client_context(cert="ops"))
        self.wait_log(g, r"CN=ops verified", after=at)


class CertPrincipalTest(TlsTestCase):
    """The access step with client certificates (contract v1.2): a
    verified certificate names the principal of its CN, whatever its
    credential; a key and a certificate must name the same principal; with
    proxy-auth required the certificate names the proxied request's
    principal too."""

    def start(self, proxy_auth=False):
        redis = self.start_redis()
        d = tempfile.mkdtemp(prefix="certauth-", dir=harness.tmp_root())
        ca = os.path.join(d, "client-ca.pem")
        shutil.copy(pki().path("ca"), ca)
        self.ci_key = secrets.token_urlsafe(32)
        auth = os.path.join(d, "auth")
        with open(auth, "w") as f:
            f.write("ops cert admin:tls/ read:tls/\n")
            f.write("ci sha256:%s lock:tls/ci/\n"
                    % hashlib.sha256(self.ci_key.encode()).hexdigest())
        self.upstream = StandIn().start()
        self.addCleanup(self.upstream.stop)
        flags = ["--tls-client-ca", ca, "--auth-file", auth]
        if proxy_auth:
            flags += ["--proxy-auth", "required"]
        return self.start_tls_gateway(redis, self.upstream.port, flags)

    def test_a_certificate_names_its_principal_and_its_rights(self):
        g = self.start()
        ops = client_context(cert="ops")
        r = self.https(g, "POST", LOCKS + "tls/a", body=b"{}", ctx=ops)
        self.assertEqual(r.status, 200, r)
        r = self.https(g, "POST", LOCKS + "other/a", body=b"{}", ctx=ops)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.json["error"], "forbidden")
        # no certificate, no key: 401
        r = self.https(g, "POST", LOCKS + "tls/b", body=b"{}")
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.header("WWW-Authenticate"), 'Bearer realm="fencegate"')
        # a certificate that does not verify is 401 whatever key comes with it
        r = self.https(g, "POST", LOCKS + "tls/ci/x", body=b"{}",
                       headers={"Authorization": "Bearer " + self.ci_key},
                       ctx=client_context(cert="stranger"))
        self.assertEqual(r.status, 401, r)

    def test_a_key_and_a_certificate_must_name_the_same_principal(self):
        g = self.start()
        r = self.https(g, "POST", LOCKS + "tls/ci/y", body=b"{}",
                       headers={"Authorization": "Bearer " + self.ci_key},
                       ctx=client_context(cert="ops"))
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.json["error"], "unauthenticated")
        r = self.https(g, "POST", LOCKS + "tls/ci/y", body=b"{}",
                       headers={"Authorization": "Bearer " + self.ci_key})
        self.assertEqual(r.status, 200, r)
        # both naming ci: ci, with its rights, and its grant is ci's
        ci = client_context(cert="ci")
        r = self.https(g, "POST", LOCKS + "tls/ci/z", body=b"{}",
                       headers={"Authorization": "Bearer " + self.ci_key},
                       ctx=ci)
        self.assertEqual(r.status, 200, r)
        lease = r.json["lease"]
        r = self.https(g, "POST", LOCKS + "tls/elsewhere", body=b"{}",
                       headers={"Authorization": "Bearer " + self.ci_key},
                       ctx=ci)
        self.assertEqual(r.status, 403, r)
        # the certificate alone names ci as well: its grant is released
        r = self.https(g, "DELETE", LOCKS + "tls/ci/z",
                       headers={"Fence-Lease": lease}, ctx=ci)
        self.assertEqual(r.status, 204, r)
        # ops' certificate cannot release ci's grant
        r = self.https(g, "POST", LOCKS + "tls/ci/z", body=b"{}", ctx=ci)
        self.assertEqual(r.status, 200, r)
        r = self.https(g, "DELETE", LOCKS + "tls/ci/z",
                       headers={"Fence-Lease": r.json["lease"]},
                       ctx=client_context(cert="ops"))
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.json["error"], "forbidden")

    def test_proxy_auth_by_certificate(self):
        g = self.start(proxy_auth=True)
        r = self.https(g, "GET", "/tls/doc", ctx=client_context(cert="ops"))
        self.assertEqual(r.status, 200, r)
        r = self.https(g, "GET", "/tls/doc")
        self.assertEqual(r.status, 401, r)
        r = self.https(g, "GET", "/elsewhere/doc", ctx=client_context(cert="ops"))
        self.assertEqual(r.status, 403, r)


# ---------------------------------------------------------------------------
# the https upstream


class UpstreamTest(TlsTestCase):

    def start_behind(self, store, flags=(), ca=True):
        """A plain-HTTP gateway in front of the https store."""
        redis = self.start_redis()
        # a handshake is the connect's (libcurl): on a loaded machine, and
        # under ThreadSanitizer, it can take longer than the default 2 s,
        # and these tests are about how it ends, not how soon
        f = ["--upstream", "https://127.0.0.1:%d" % store.port,
             "--threads", "1", "--key-file", self.key_file(),
             "--upstream-connect-timeout-ms", str(int(slack(10000)))] + \
            list(flags)
        if ca:
            f += ["--upstream-ca", pki().path("ca")]
        g = harness.Gateway(redis.port, store.port, f)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        return g

    def put_get(self, g, store, tag):
        path = self.obj(store, tag)
        seq = self.grant(g, path.lstrip("/"))["sequencer"]
        data = os.urandom(3000)
        r = g.request("PUT", path, raw=data,
                      headers={"Fencing-Token": seq, "X-Test-Id": tag + "-put"})
        return path, data, r

    def test_verified_against_upstream_ca_with_reused_connections(self):
        store = self.start_nginx(TlsNginx())
        g = self.start_behind(store)
        path, data, r = self.put_get(g, store, "a")
        self.assertIn(r.status, (201, 204), repr(r))
        self.assertEqual(store.read(path), data)
        for i in range(3):
            r = g.request("GET", path, headers={"X-Test-Id": "get-%d" % i})
            self.assertEqual((r.status, r.body), (200, data))
        conns = set()
        for i in range(3):
            e = store.wait_log(slack(5.0), test_id="get-%d" % i)
            self.assertTrue(e)
            conns.add(e[0].connection)
        self.assertEqual(len(conns), 1, "one loop's GETs did not share an "
                         "upstream connection: nginx connections %r" % conns)

    def test_an_upstream_the_gateway_cannot_verify_is_502_and_logged(self):
        store = self.start_nginx(TlsNginx())
        g = self.start_behind(store, ca=False)
        path, data, r = self.put_get(g, store, "b")
        self.assertEqual(r.status, 502, repr(r))
        self.assertEqual(r.json["error"], "upstream_unavailable")
        self.assertIsNone(store.read(path))
        self.assertEqual(store.log_for(test_id="b-put"), [])
        m = self.wait_log(g, r"warn upstream 127\.0\.0\.1:%d: TLS "
                          r"failed: SSL certificate problem: ([^\n]*)" % store.port)
        self.assertIn(b"issuer", m.group(1))
        r = g.request("GET", path)
        self.assertEqual(r.status, 502)
        # and a CA the store's certificate is not from
        g2 = self.start_behind(store, ["--upstream-ca", pki().path("other-ca")],
                               ca=False)
        r = g2.request("GET", path)
        self.assertEqual(r.status, 502, repr(r))
        self.wait_log(g2, r"TLS failed: SSL certificate problem")

    def test_a_client_certificate_is_presented_to_the_upstream(self):
        store = self.start_nginx(TlsNginx(client_ca=pki().path("ca")))
        g = self.start_behind(store)
        path, data, r = self.put_get(g, store, "c")
        # without one, nginx's own 400 is passed on
        self.assertEqual(r.status, 400, repr(r))
        self.assertIn(b"SSL certificate", r.body)
        self.assertIsNone(store.read(path))
        g2 = self.start_behind(store, ["--upstream-cert", pki().path("fencegate"),
                                       "--upstream-key", pki().key("fencegate")])
        path, data, r = self.put_get(g2, store, "d")
        self.assertIn(r.status, (201, 204), repr(r))
        self.assertEqual(store.read(path), data)
        r = g2.request("GET", path)
        self.assertEqual((r.status, r.body), (200, data))

    def test_a_replaced_upstream_ca_holds_for_the_next_connection(self):
        """upstream-ca is read for every new upstream connection (curl
        would otherwise keep the store it read for a day, where its build
        has no CA path): replaced and SIGHUP sent, as an operator does,
        the next connection is verified under the new one."""
        store = self.start_nginx(TlsNginx())
        d = tempfile.mkdtemp(prefix="upca-", dir=harness.tmp_root())
        ca = os.path.join(d, "upstream-ca.pem")
        shutil.copy(pki().path("other-ca"), ca)
        g = self.start_behind(store, ["--upstream-ca", ca], ca=False)
        path = self.obj(store)
        store.put_file(path, b"stored")
        r = g.request("GET", path)
        self.assertEqual(r.status, 502, repr(r))
        shutil.copy(pki().path("ca"), ca)
        g.proc.send_signal(signal.SIGHUP)
        # bounded: the signal is taken on another thread
        self.wait_for(lambda: g.request("GET", path).status == 200,
                      slack(5.0), "a GET verified under the new CA")
        r = g.request("GET", path)
        self.assertEqual((r.status, r.body), (200, b"stored"))

