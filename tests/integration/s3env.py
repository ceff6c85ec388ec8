"""s3env.py - fencegate in S3 mode in front of a real radosgw, for the S3
tests: the store (rgw.Rgw, one per class), a Redis, and gateways started
with `upstream-api s3`, the credentials files they need, and a request
signer of the tests' own (SigV4 written here from the AWS rules, so that
a test can send exactly the request it means, right or wrong, without a
client library's opinions).

    class T(s3env.S3Case):
        routes = ("/{bucket}/ {bucket}",)
        def test_x(self):
            seq = self.sequencer("bkt")
            r = self.s3("PUT", "/bkt/k", body=b"x", token=seq)

The class's store and gateway are shared by its tests (started on the
first one); each test uses buckets of its own (self.bucket()).

Invariant: every process started here is registered with harness.spawn
(through rgw.Rgw and harness.Gateway/RedisServer) and stopped by PID.
"""

import datetime
import hashlib
import hmac
import os
import tempfile
import urllib.parse

import harness
import matrix
import rgw
from harness import TestCase, slack

REGION = "us-east-1"
# the keys the gateway issues to the tests' clients (s3-credentials) and
# the gateway's own at the store
CLIENT_KEY = "FGTESTCLIENTKEY00001"
CLIENT_SECRET = "fgtestclientsecret/0123456789+abcdefghijk"
STORE_KEY = "FGTESTSTOREKEY000001"
STORE_SECRET = "fgteststoresecret0123456789abcdefghijklmn"
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def owner_only_file(text, prefix):
    fd, path = tempfile.mkstemp(prefix=prefix, dir=harness.tmp_root())
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


class Store:
    """radosgw as an Env's origin: what harness.Env asks of one."""

    def __init__(self):
        self.rgw = rgw.Rgw()
        self.port = None

    def start(self):
        self.rgw.start()
        self.rgw.add_user("fencegate", STORE_KEY, STORE_SECRET)
        self.port = self.rgw.port
        return self

    def stop(self):
        self.rgw.stop()

    def alive(self):
        return self.rgw.alive()

    def log_paths(self):
        return self.rgw.log_paths()


# ---------------------------------------------------------------------------
# SigV4, the tests' own

def _uri_encode(s, keep_slash):
    safe = "-._~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def canonical_query(query):
    pairs = []
    for part in query.split("&") if query else []:
        if not part:
            continue
        k, _, v = part.partition("=")
        pairs.append((_uri_encode(urllib.parse.unquote(k), False),
                      _uri_encode(urllib.parse.unquote(v), False)))
    pairs.sort()
    return "&".join("%s=%s" % kv for kv in pairs)


def signing_key(secret, day, region=REGION, service="s3"):
    k = hmac.new(("AWS4" + secret).encode(), day.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def sign(method, path, query, headers, payload_hash, key=CLIENT_KEY,
         secret=CLIENT_SECRET, when=None, region=REGION):
    """Adds x-amz-date and Authorization to headers (a dict, names as sent)
    for a request whose raw path and query are given; returns the
    signature. Every header in `headers` is signed."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    amz = when.strftime("%Y%m%dT%H%M%SZ")
    headers["x-amz-date"] = amz
    names = sorted(h.lower() for h in headers)
    canon_headers = "".join("%s:%s\n" % (n, " ".join(str(
        [v for k, v in headers.items() if k.lower() == n][0]).split()))
        for n in names)
    signed = ";".join(names)
    creq = "\n".join([method, _uri_encode(urllib.parse.unquote(path), True),
                      canonical_query(query), canon_headers, signed,
                      payload_hash])
    scope = "%s/%s/s3/aws4_request" % (amz[:8], region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(signing_key(secret, amz[:8], region), sts.encode(),
                   hashlib.sha256).hexdigest()
    headers["Authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (key, scope, signed, sig))
    return sig


def presign(method, path, host, expires=300, token=None, key=CLIENT_KEY,
            secret=CLIENT_SECRET, when=None, extra_query=""):
    """A presigned target (path?query) for host."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    amz = when.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/%s/s3/aws4_request" % (amz[:8], REGION)
    q = {"X-Amz-Algorithm": "AWS4-HMAC-SHA256",
         "X-Amz-Credential": "%s/%s" % (key, scope),
         "X-Amz-Date": amz, "X-Amz-Expires": str(expires),
         "X-Amz-SignedHeaders": "host"}
    if token:
        q["X-Amz-Security-Token"] = token
    query = "&".join("%s=%s" % (k, _uri_encode(v, False)) for k, v in q.items())
    if extra_query:
        query = extra_query + "&" + query
    creq = "\n".join([method, _uri_encode(urllib.parse.unquote(path), True),
                      canonical_query(query), "host:%s\n" % host, "host",
                      "UNSIGNED-PAYLOAD"])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(signing_key(secret, amz[:8]), sts.encode(),
                   hashlib.sha256).hexdigest()
    return "%s?%s&X-Amz-Signature=%s" % (path, query, sig)


def aws_chunked(data, chunk, seed, when, secret=CLIENT_SECRET, bad_chunk=None):
    """data framed as a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body whose chain
    starts at seed (the request's signature); chunk number bad_chunk (0
    based; the final empty one is len(chunks)) gets a wrong signature."""
    amz = when.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/%s/s3/aws4_request" % (amz[:8], REGION)
    k = signing_key(secret, amz[:8])
    parts = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    out, prev = [], seed
    for i, p in enumerate(parts):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev,
                         EMPTY_SHA256, hashlib.sha256(p).hexdigest()])
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        if i == bad_chunk:
            sig = ("0" if sig[0] != "0" else "1") + sig[1:]
        out.append(b"%x;chunk-signature=%s\r\n%s\r\n" % (len(p), sig.encode(), p))
        prev = sig
    return b"".join(out)


def streaming_length(n, chunk):
    """The Content-Length of aws_chunked(n bytes, chunk)."""
    total, left = 0, n
    while True:
        c = min(chunk, left)
        total += len(b"%x" % c) + len(";chunk-signature=") + 64 + 4 + c
        if c == 0:
            return total
        left -= c


def send(port, method, target, headers, body=b"", timeout=30.0):
    """One request with exactly these headers (no Host, Accept-Encoding
    or Content-Type of http.client's own), on a fresh connection."""
    import http.client
    import time
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=slack(timeout))
    try:
        conn.putrequest(method, target, skip_host=True,
                        skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders(body if body else None)
        r = conn.getresponse()
        payload = r.read()
        return harness.Response(r.status, r.reason, r.getheaders(), payload,
                                time.monotonic() - t0)
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# the test base class

class S3Case(TestCase):
    """A class of S3-mode tests: one radosgw, one Redis and the class's
    gateway(s) (`gateway_count`), shared by its tests. `routes`: route
    lines of its gateway's config; `extra_config`: more lines;
    `auth_file_text`: an auth-file's text (None: open mode)."""

    axes = ("build", "redis")
    uses_shared_env = False
    routes = ()
    extra_config = ()
    auth_file_text = None
    credentials_text = None     # s3-credentials text; None: the tests' key
    _s3envs = {}

    @classmethod
    def s3_config_lines(cls):
        creds = owner_only_file(
            cls.credentials_text if cls.credentials_text is not None
            else "%s %s alice\n" % (CLIENT_KEY, CLIENT_SECRET), "s3creds-")
        store = owner_only_file("%s\n%s\n" % (STORE_KEY, STORE_SECRET),
                                "store-")
        lines = ["upstream-api s3", "s3-credentials " + creds,
                 "upstream-s3-credentials " + store,
                 "s3-region " + REGION]
        lines += ["route " + r for r in cls.routes]
        if cls.auth_file_text is not None:
            lines.append("auth-file " + owner_only_file(cls.auth_file_text,
                                                        "auth-"))
        lines += list(cls.extra_config)
        return lines

    @classmethod
    def config_flags(cls, lines):
        path = owner_only_file("".join(l + "\n" for l in lines), "gw-conf-")
        return ["--config", path]

    @classmethod
    def s3_env(cls):
        env = S3Case._s3envs.get(cls)
        if env is not None and env.healthy():
            return env
        if env is not None:
            env.stop()
        flags = cls.config_flags(cls.s3_config_lines())
        # the store first: the gateways are given its port
        store = Store().start()
        try:
            env = harness.Env(flags, cls.gateway_count, origin=store,
                              upstream=False).start()
        except BaseException:
            store.stop()
            raise
        env.start_origin = True  # healthy() and stop() include it
        S3Case._s3envs[cls] = env
        return env

    @classmethod
    def tearDownClass(cls):
        env = S3Case._s3envs.pop(cls, None)
        if env is not None:
            for r in env.stop():
                harness.LATE_FAILURES.append(
                    "%s: sanitizer report from its shared fencegate:\n%s"
                    % (cls.__name__, r))
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.env = self.s3_env()
        self.gw = self.env.gw
        self.redis = self.env.redis
        self.store = self.env.origin
        self.log_paths += self.env.log_paths()

    def tearDown(self):
        dead = [g for g in self.env.gateways if not g.alive()]
        if dead:
            self.fail("fencegate died during this test (exit %s)"
                      % dead[0].proc.returncode)
        super().tearDown()

    # -- names ---------------------------------------------------------

    _buckets = 0    # one count for the whole run: tests of a class
                    # share its store

    def bucket(self, tag=""):
        """A bucket name of this test's own (S3's rules: lower case)."""
        S3Case._buckets += 1
        return ("t%s%s%d" % (harness._RUN_TAG, tag, S3Case._buckets)).lower()[:40]

    def sequencer(self, lock, ttl_ms=30000, gw=None, **fields):
        g = self.acquire_ok(lock, gw=gw, ttl_ms=ttl_ms, **fields)
        return g["sequencer"]

    # -- requests --------------------------------------------------------

    def host(self, gw=None):
        return "127.0.0.1:%d" % (gw or self.gw).port

    def s3(self, method, target, body=b"", headers=None, token=None,
           gw=None, key=CLIENT_KEY, secret=CLIENT_SECRET, when=None,
           payload_hash=None, sign_it=True, timeout=30.0):
        """One signed request to the gateway (or to the store with
        gw=self.store): every header given is signed."""
        g = gw or self.gw
        h = {"Host": "127.0.0.1:%d" % g.port}
        if body and not any(k.lower() == "content-length" for k in (headers or {})):
            h["Content-Length"] = str(len(body))
        h.update(headers or {})
        if token is not None:
            h["x-amz-security-token"] = token
        ph = payload_hash or hashlib.sha256(body).hexdigest()
        h.setdefault("x-amz-content-sha256", ph)
        path, _, query = target.partition("?")
        if sign_it:
            sign(method, path, query, h, ph, key=key, secret=secret, when=when)
        return send(g.port, method, target, h, body, timeout)

    def store_s3(self, method, target, body=b"", headers=None):
        """The same, straight to the store, signed as the gateway is."""
        return self.s3(method, target, body, headers, gw=self.store,
                       key=STORE_KEY, secret=STORE_SECRET)

    def make_bucket(self, name=None):
        """A bucket made straight at the store (no lock needed)."""
        b = name or self.bucket()
        r = self.store_s3("PUT", "/" + b)
        self.assertEqual(r.status, 200, r)
        return b

    def store_get(self, bucket, key):
        """What the store holds at bucket/key: (status, body)."""
        r = self.store_s3("GET", "/%s/%s" % (bucket, urllib.parse.quote(key)))
        return r.status, r.body

    def s3_error(self, r):
        """The Code of an S3 XML error answer (None when it is not one)."""
        import xml.etree.ElementTree as ET
        try:
            root = ET.fromstring(r.body)
        except ET.ParseError:
            return None
        if root.tag != "Error":
            return None
        return root.findtext("Code")

    def assertS3Error(self, r, status, code):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.header("Content-Type"), "application/xml", r)
        self.assertEqual(self.s3_error(r), code, r)


