"""test_s3_mode.py - contract v1.4's S3 mode as an outside client sees it,
through the gateway in front of a real radosgw: SigV4 identity and S3's
own refusals, what the store is given (the upstream's Host, the signed
headers, never a credential or a sequencer), the write set of every S3
operation and the sequencers it needs (SelectObjectContent, a read, is in
test_s3_auth.py: radosgw's S3 Select parser breaks its admin socket's
JSON, which log_headers() needs), keys with odd bytes and their
locks, streaming-signed bodies, S3 XML refusals, the route endpoint and
virtual-host requests. Every outcome is read back from the store itself.
Rights under an auth-file, s3-credentials reload and the command-line
rows are in test_s3_auth.py."""

import base64
import datetime
import hashlib
import re
import socket
import urllib.parse
import xml.etree.ElementTree as ET

import harness
import s3env
from harness import slack
from s3env import S3_NS, S3Case

DOMAIN = "s3.fence.test"


def key_path(bucket, key):
    """The path S3 clients send for bucket/key: every byte but unreserved
    ones and '/' percent-encoded."""
    return "/%s/%s" % (bucket, urllib.parse.quote(key, safe="/-._~"))


def hashed_lock(bucket, key):
    """The lock of a key whose BUCKET/KEY is no valid lock name, computed
    here from the contract's words."""
    d = hashlib.sha256(("%s/%s" % (bucket, key)).encode()).digest()
    return "~s3/" + base64.urlsafe_b64encode(d).decode().rstrip("=")


def md5_b64(body):
    return base64.b64encode(hashlib.md5(body).digest()).decode()


def delete_body(keys):
    return ("<Delete>%s</Delete>" % "".join(
        "<Object><Key>%s</Key></Object>" % k for k in keys)).encode()


def now(delta_s=0):
    return (datetime.datetime.now(datetime.timezone.utc)
            + datetime.timedelta(seconds=delta_s))


class S3Base(S3Case):
    """Helpers shared by the S3-mode classes."""

    def bucket(self, tag=""):
        """A bucket name of this test's own: the class's store is shared,
        so the name says which test it is (a short hash of its id)."""
        self._counter += 1
        h = hashlib.sha256(self.id().encode()).hexdigest()[:10]
        return ("t%s%s%s-%d" % (harness._RUN_TAG, h, tag,
                                self._counter)).lower()[:60]

    def stored_keys(self, bucket):
        """Every key the store lists in bucket."""
        r = self.store_s3("GET", "/%s?list-type=2&max-keys=1000" % bucket)
        self.assertEqual(r.status, 200, r)
        root = ET.fromstring(r.body)
        return sorted(c.findtext(S3_NS + "Key")
                      for c in root.findall(S3_NS + "Contents"))

    def store_has(self, bucket, key):
        st, _ = self.store_get(bucket, key)
        self.assertIn(st, (200, 404), "store GET %s/%s" % (bucket, key))
        return st == 200

    def store_put(self, bucket, key, body=b"old"):
        r = self.store_s3("PUT", key_path(bucket, key), body=body)
        self.assertEqual(r.status, 200, r)

    def stale_and_current(self, lock):
        """A sequencer of lock made stale by the lock's being taken again,
        and the current one."""
        g = self.acquire_ok(lock, ttl_ms=30000)
        self.release_ok(lock, g["lease"])
        cur = self.sequencer(lock)
        return g["sequencer"], cur

    def assertFenceError(self, r, status, code):
        """An S3 XML error of the gateway's own, in full."""
        self.assertS3Error(r, status, code)
        root = ET.fromstring(r.body)
        for el in ("Code", "Message", "Resource", "RequestId"):
            self.assertIsNotNone(root.find(el), "no <%s>: %r" % (el, r))
        self.assertTrue(root.findtext("Message"), r)
        self.assertTrue(root.findtext("RequestId"), r)
        return root

    def assertStale(self, r, stale_seq, cur_seq):
        root = self.assertFenceError(r, 409, "FenceStaleToken")
        tok = self.check_ok(cur_seq)["token"]
        self.assertEqual(root.findtext("CurrentToken"), str(tok), r)
        self.assertIsNotNone(root.findtext("Token"), r)
        self.assertLess(int(root.findtext("Token")), tok, r)

    def streaming_put(self, path, data, chunk, token, bad_chunk=None,
                      gw=None):
        """A PUT with a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body."""
        g = gw or self.gw
        when = now()
        h = {"Host": self.host(g),
             "Content-Length": str(s3env.streaming_length(len(data), chunk)),
             "Content-Encoding": "aws-chunked",
             "x-amz-decoded-content-length": str(len(data)),
             "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
             "x-amz-security-token": token}
        seed = s3env.sign("PUT", path, "", h,
                          "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", when=when)
        body = s3env.aws_chunked(data, chunk, seed, when, bad_chunk=bad_chunk)
        # raw: the gateway may answer and close before it has read the
        # rest, and its answer must still be read
        head = "PUT %s HTTP/1.1\r\n%s\r\n" % (path, "".join(
            "%s: %s\r\n" % kv for kv in h.items()))
        raw = harness.raw_exchange(g.port, head.encode() + body,
                                   timeout=harness.slack(20.0))
        st, hdrs, rbody = harness.parse_raw(raw)
        self.assertIsNotNone(st, "no answer: %r\n%s" % (raw[:300], g.log_tail()))
        return harness.Response(st, "", list(hdrs.items()), rbody, 0.0)

    def envs_of(self, fn):
        """Runs fn() with radosgw logging what it is given; returns fn's
        result and the request variables of what the store received."""
        rg = self.store.rgw
        since = rg.log_offset()
        rg.log_headers(True)
        try:
            out = fn()
        finally:
            rg.log_headers(False)
        import rgw
        envs = [e for e in rg.request_envs(since)
                if "REQUEST_METHOD" in e and not e.get(
                    "REQUEST_URI", "").startswith(rgw.LOG_MARK)]
        return out, envs


class S3ModeTests(S3Base):
    """Open mode (no auth-file), no route rules: every object's lock is
    its default; `s3-domain` set for virtual-host requests."""

    extra_config = ("s3-domain " + DOMAIN, "redis-timeout-ms 500")

    # -- identity --------------------------------------------------------

    def test_identity_refusals_speak_s3(self):
        b = self.make_bucket()
        path = "/%s/k" % b
        # no signature at all
        r = s3env.send(self.gw.port, "GET", path, {"Host": self.host()})
        self.assertFenceError(r, 403, "AccessDenied")
        # a key the gateway never issued
        r = self.s3("GET", path, key="FGUNKNOWNKEY00000000")
        self.assertFenceError(r, 403, "InvalidAccessKeyId")
        # the right key, the wrong secret
        r = self.s3("GET", path, secret=s3env.CLIENT_SECRET[::-1])
        self.assertFenceError(r, 403, "SignatureDoesNotMatch")
        # a header changed after signing
        h = {"Host": self.host(), "x-amz-content-sha256": s3env.EMPTY_SHA256,
             "x-amz-meta-a": "1"}
        s3env.sign("GET", path, "", h, s3env.EMPTY_SHA256)
        h["x-amz-meta-a"] = "2"
        self.assertS3Error(s3env.send(self.gw.port, "GET", path, h), 403,
                           "SignatureDoesNotMatch")
        r = s3env.send(self.gw.port, "GET", path, {
            "Host": self.host(), "x-amz-date": now().strftime("%Y%m%dT%H%M%SZ"),
            "x-amz-content-sha256": s3env.EMPTY_SHA256,
            "Authorization": "AWS4-HMAC-SHA256 Credential=nonsense"})
        self.assertFenceError(r, 400, "AuthorizationHeaderMalformed")
        # clock skew: 16 minutes either way refused, 14 accepted
        for d in (-16 * 60, 16 * 60):
            r = self.s3("GET", path, when=now(d))
            self.assertFenceError(r, 403, "RequestTimeTooSkewed")
        for d in (-14 * 60, 14 * 60):
            r = self.s3("GET", path, when=now(d))
            self.assertEqual(r.status, 404, "skew %d s: %r" % (d, r))
            self.assertEqual(self.s3_error(r), "NoSuchKey", r)

    def test_sigv2_is_refused_in_both_forms(self):
        b = self.make_bucket()
        self.store_put(b, "k", b"v")
        path = "/%s/k" % b
        r = s3env.send(self.gw.port, "GET", path, {
            "Host": self.host(), "Date": "Wed, 02 Dec 2026 00:00:00 GMT",
            "Authorization": "AWS %s:c2lnbmF0dXJlAAAAAAAAAAAAAAA=" % s3env.CLIENT_KEY})
        self.assertFenceError(r, 400, "InvalidRequest")
        q = "?AWSAccessKeyId=%s&Expires=%d&Signature=abc%%3D" % (
            s3env.CLIENT_KEY, int(now(300).timestamp()))
        r = s3env.send(self.gw.port, "GET", path + q, {"Host": self.host()})
        self.assertFenceError(r, 400, "InvalidRequest")

    def test_presigned_urls(self):
        b = self.make_bucket()
        self.store_put(b, "p", b"presigned body")
        path = "/%s/p" % b
        t = s3env.presign("GET", path, self.host(), expires=600)
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertEqual((r.status, r.body), (200, b"presigned body"), r)
        # over 7 days
        t = s3env.presign("GET", path, self.host(), expires=7 * 86400 + 1)
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertFenceError(r, 400, "AuthorizationQueryParametersError")
        # exactly 7 days is allowed
        t = s3env.presign("GET", path, self.host(), expires=7 * 86400)
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertEqual(r.status, 200, r)
        # expired: signed 10 minutes ago for 60 s
        t = s3env.presign("GET", path, self.host(), expires=60,
                          when=now(-600))
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertFenceError(r, 403, "AccessDenied")
        # signed 20 minutes ago for an hour: still good (a presigned URL
        # is used after it is made); dated 20 minutes ahead: refused
        t = s3env.presign("GET", path, self.host(), expires=3600,
                          when=now(-1200))
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertEqual((r.status, r.body), (200, b"presigned body"), r)
        t = s3env.presign("GET", path, self.host(), expires=3600,
                          when=now(1200))
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertEqual(r.status, 403, r)
        self.assertIn(self.s3_error(r), ("RequestTimeTooSkewed",
                                         "AccessDenied"), r)
        # a wrong presigned signature
        t = s3env.presign("GET", path, self.host(),
                          secret=s3env.CLIENT_SECRET[::-1])
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertFenceError(r, 403, "SignatureDoesNotMatch")

    def test_presigned_put_carries_the_sequencer_in_the_security_token(self):
        b = self.make_bucket()
        lock = "%s/up" % b
        path = "/%s/up" % b
        body = b"put through a presigned URL"
        # without a token: the write needs one
        t = s3env.presign("PUT", path, self.host())
        r = s3env.send(self.gw.port, "PUT", t, {
            "Host": self.host(), "Content-Length": str(len(body))}, body)
        self.assertFenceError(r, 428, "FenceTokenRequired")
        self.assertFalse(self.store_has(b, "up"))
        seq = self.sequencer(lock)
        t = s3env.presign("PUT", path, self.host(), token=seq)
        r, envs = self.envs_of(lambda: s3env.send(self.gw.port, "PUT", t, {
            "Host": self.host(), "Content-Length": str(len(body))}, body))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "up"), (200, body))
        puts = [e for e in envs if e.get("REQUEST_METHOD") == "PUT"]
        self.assertEqual(len(puts), 1, envs)
        e = puts[0]
        self.assertNotIn("HTTP_X_AMZ_SECURITY_TOKEN", e)
        for p in ("X-Amz-Security-Token", "X-Amz-Signature",
                  "X-Amz-Credential"):
            self.assertNotIn(p, e.get("QUERY_STRING", ""), e)
            self.assertNotIn(p, e.get("REQUEST_URI", ""), e)
        self.assertIn(s3env.STORE_KEY, e.get("HTTP_AUTHORIZATION", ""), e)
        self.assertNotIn("fg1.", repr(e))
        # a presigned GET carrying the sequencer works too (a read)
        t = s3env.presign("GET", path, self.host(), token=seq)
        r = s3env.send(self.gw.port, "GET", t, {"Host": self.host()})
        self.assertEqual((r.status, r.body), (200, body), r)

    # -- what the store receives ------------------------------------------

    def test_the_store_gets_its_host_the_signed_headers_and_no_sequencer(self):
        b = self.make_bucket()
        lock = "%s/h" % b
        seq = self.sequencer(lock)
        body = b"header check"
        h = {"Host": self.host(), "Content-Length": str(len(body)),
             "Content-Type": "text/x-fence", "Content-MD5": md5_b64(body),
             "x-amz-meta-colour": "blue", "x-amz-security-token": seq,
             "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
        s3env.sign("PUT", "/%s/h" % b, "", h, h["x-amz-content-sha256"])
        h["Cache-Control"] = "max-age=77"       # not signed
        h["x-unsigned-probe"] = "yes"           # not signed
        r, envs = self.envs_of(lambda: s3env.send(
            self.gw.port, "PUT", "/%s/h" % b, h, body))
        self.assertEqual(r.status, 200, r)
        puts = [e for e in envs if e.get("REQUEST_METHOD") == "PUT"]
        self.assertEqual(len(puts), 1, envs)
        e = puts[0]
        self.assertEqual(e.get("HTTP_HOST"), "127.0.0.1:%d" % self.store.port, e)
        self.assertEqual(e.get("HTTP_X_AMZ_META_COLOUR"), "blue", e)
        self.assertEqual(e.get("CONTENT_TYPE"), "text/x-fence", e)
        self.assertEqual(e.get("HTTP_CONTENT_MD5"), md5_b64(body), e)
        self.assertNotIn("HTTP_CACHE_CONTROL", e)
        self.assertNotIn("HTTP_X_UNSIGNED_PROBE", e)
        self.assertNotIn("HTTP_X_AMZ_SECURITY_TOKEN", e)
        self.assertNotIn("HTTP_FENCING_TOKEN", e)
        self.assertNotIn("fg1.", repr(e))
        self.assertIn(s3env.STORE_KEY, e.get("HTTP_AUTHORIZATION", ""), e)
        self.assertEqual(e.get("HTTP_X_AMZ_CONTENT_SHA256"),
                         hashlib.sha256(body).hexdigest(), e)
        self.assertIn("HTTP_X_FORWARDED_FOR", e)
        # the store holds what was signed, and nothing that was not
        r = self.store_s3("HEAD", "/%s/h" % b)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("x-amz-meta-colour"), "blue")
        self.assertEqual(r.header("Content-Type"), "text/x-fence")
        self.assertIsNone(r.header("Cache-Control"), r.header_list)
        # a Fencing-Token header is not forwarded either, nor the v1
        # credentials, signed or not; the gateway's X-Forwarded-* replace
        # or extend the client's (v1.1), signed or not
        seq2 = self.sequencer("%s/h2" % b)
        r, envs = self.envs_of(lambda: self.s3(
            "PUT", "/%s/h2" % b, body=b"x", headers={
                "Fencing-Token": seq2, "Fence-Lease": "lease-secret",
                "Destination-Fencing-Token": seq2,
                "X-Forwarded-Host": "evil.example",
                "X-Forwarded-Proto": "https",
                "Forwarded": "for=6.6.6.6;host=evil.example",
                "X-Forwarded-For": "6.6.6.6"}))
        self.assertEqual(r.status, 200, r)
        puts = [e for e in envs if e.get("REQUEST_METHOD") == "PUT"]
        self.assertEqual(len(puts), 1, envs)
        e = puts[0]
        self.assertNotIn("HTTP_FENCING_TOKEN", e)
        self.assertNotIn("HTTP_FENCE_LEASE", e)
        self.assertNotIn("HTTP_DESTINATION_FENCING_TOKEN", e)
        self.assertNotIn("fg1.", repr(e))
        self.assertNotIn("lease-secret", repr(e))
        self.assertNotIn("evil.example", repr(e))
        self.assertNotEqual(e.get("HTTP_X_FORWARDED_PROTO"), "https", e)
        self.assertEqual(e.get("HTTP_X_FORWARDED_FOR", "").replace(" ", ""),
                         "6.6.6.6,127.0.0.1", e)
        self.assertEqual(self.store_get(b, "h2"), (200, b"x"))

    def test_the_store_checks_signatures_on_host(self):
        """What makes the gateway's signing again necessary: the store
        refuses a request whose Host is not the one signed."""
        b = self.make_bucket()
        h = {"Host": self.host(), "x-amz-content-sha256": s3env.EMPTY_SHA256}
        s3env.sign("GET", "/" + b, "", h, s3env.EMPTY_SHA256,
                   key=s3env.STORE_KEY, secret=s3env.STORE_SECRET)
        h["Host"] = "127.0.0.1:%d" % self.store.port
        r = s3env.send(self.store.port, "GET", "/" + b, h)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.s3_error(r), "SignatureDoesNotMatch", r)

    # -- odd keys ---------------------------------------------------------

    def test_odd_keys_are_stored_exactly_and_locked_by_their_names(self):
        b = self.make_bucket()
        keys = ["with space", "unicod\u00e9/\u00fc\u20ac", "a//b", "x/../y",
                "./dot", "lit%2Fpct", "plus+sign", "tilde~ok-1.2_3", "d/e/f",
                "long/" + "L" * 300, "q?x#y", "100%", "dir/", "-"]
        for i, k in enumerate(keys):
            with self.subTest(key=k):
                default = "%s/%s" % (b, k)
                lock = default if harness.valid_lock_name(default) and \
                    re.fullmatch(r"[A-Za-z0-9._~/-]+", default) \
                    else hashed_lock(b, k)
                if k in ("tilde~ok-1.2_3", "d/e/f", "-"):
                    self.assertEqual(lock, default)
                else:
                    self.assertTrue(lock.startswith("~s3/"), lock)
                # the route endpoint names the same lock
                r = self.gw.request("GET", "/_fence/v1/route?path=" +
                                    urllib.parse.quote(key_path(b, k), safe=""))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json["lock"], lock, r.json)
                # another lock's sequencer is refused
                other = self.sequencer("%s/other-%d" % (b, i))
                r = self.s3("PUT", key_path(b, k), body=b"no", token=other)
                self.assertFenceError(r, 403, "FenceWrongLock")
                seq = self.sequencer(lock)
                body = ("value of %r" % k).encode()
                r = self.s3("PUT", key_path(b, k), body=body, token=seq)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.store_get(b, k), (200, body))
        self.assertEqual(self.stored_keys(b), sorted(keys))

    def test_an_encoded_slash_is_the_same_key_and_lock(self):
        b = self.make_bucket()
        seq = self.sequencer("%s/a/b" % b)
        r = self.s3("PUT", "/%s/a%%2Fb" % b, body=b"slash", token=seq)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored_keys(b), ["a/b"])
        self.assertEqual(self.store_get(b, "a/b"), (200, b"slash"))

    # -- write sets -------------------------------------------------------

    def write_ops(self, b, k, src):
        """(name, method, target, body, headers) of every object write on
        b/k; src is a key to copy from."""
        tagging = (b"<Tagging><TagSet><Tag><Key>t</Key><Value>v</Value>"
                   b"</Tag></TagSet></Tagging>")
        p = key_path(b, k)
        return [
            ("PutObject", "PUT", p, b"new", {}),
            ("CopyObject", "PUT", p, b"",
             {"x-amz-copy-source": "/%s/%s" % (b, src)}),
            ("PutObjectTagging", "PUT", p + "?tagging", tagging,
             {"Content-MD5": md5_b64(tagging)}),
            ("DeleteObjectTagging", "DELETE", p + "?tagging", b"", {}),
            ("CreateMultipartUpload", "POST", p + "?uploads", b"", {}),
            ("UploadPart", "PUT", p + "?partNumber=1&uploadId=nope", b"p",
             {}),
            ("CompleteMultipartUpload", "POST", p + "?uploadId=nope",
             b"<CompleteMultipartUpload></CompleteMultipartUpload>", {}),
            ("AbortMultipartUpload", "DELETE", p + "?uploadId=nope", b"", {}),
            ("PutObjectAcl", "PUT", p + "?acl", b"", {"x-amz-acl": "private"}),
            ("PutObjectRetention", "PUT", p + "?retention",
             b"<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>"
             b"2030-01-01T00:00:00Z</RetainUntilDate></Retention>", {}),
            ("PutObjectLegalHold", "PUT", p + "?legal-hold",
             b"<LegalHold><Status>ON</Status></LegalHold>", {}),
            ("RestoreObject", "POST", p + "?restore",
             b"<RestoreRequest><Days>1</Days></RestoreRequest>", {}),
            ("DeleteObject", "DELETE", p, b"", {}),
            ("DeleteObject versionId", "DELETE", p + "?versionId=null", b"",
             {}),
        ]

    def test_every_object_write_needs_the_keys_current_sequencer(self):
        b = self.make_bucket()
        self.store_put(b, "src", b"source")
        self.store_put(b, "k", b"old")
        g = self.acquire_ok("%s/k" % b, mode="shared", ttl_ms=30000)
        r = self.s3("PUT", "/%s/k" % b, body=b"shared", token=g["sequencer"])
        self.assertFenceError(r, 403, "FenceWrongMode")
        r = self.s3("GET", "/%s/k" % b, headers={"Fencing-Token":
                                                 g["sequencer"]})
        self.assertEqual((r.status, r.body), (200, b"old"), r)
        self.release_ok("%s/k" % b, g["lease"])
        stale, cur = self.stale_and_current("%s/k" % b)
        other = self.sequencer("%s/elsewhere" % b)
        for name, m, t, body, h in self.write_ops(b, "k", "src"):
            with self.subTest(op=name):
                r = self.s3(m, t, body=body, headers=h)
                self.assertFenceError(r, 428, "FenceTokenRequired")
                r = self.s3(m, t, body=body, headers=h, token=other)
                self.assertFenceError(r, 403, "FenceWrongLock")
                r = self.s3(m, t, body=body, headers=h, token=stale)
                self.assertStale(r, stale, cur)
                # the Fencing-Token header is a sequencer too
                r = self.s3(m, t, body=body, headers=dict(h, **{
                    "Fencing-Token": stale}))
                self.assertStale(r, stale, cur)
                self.assertEqual(self.store_get(b, "k"), (200, b"old"))
        # with the current sequencer, each reaches the store
        r = self.s3("PUT", "/%s/k" % b, body=b"new", token=cur)
        self.assertEqual(r.status, 200, r)
        r = self.s3("PUT", "/%s/k" % b, headers={
            "x-amz-copy-source": "/%s/src" % b}, token=cur)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "k"), (200, b"source"))
        tagging = self.write_ops(b, "k", "src")[2]
        r = self.s3("PUT", tagging[2], body=tagging[3], headers=tagging[4],
                    token=cur)
        self.assertEqual(r.status, 200, r)
        r = self.store_s3("GET", "/%s/k?tagging" % b)
        self.assertIn(b"<Key>t</Key>", r.body)
        r = self.s3("DELETE", "/%s/k?tagging" % b, token=cur)
        self.assertEqual(r.status, 204, r)
        r = self.store_s3("GET", "/%s/k?tagging" % b)
        self.assertNotIn(b"<Key>t</Key>", r.body)
        r = self.s3("DELETE", "/%s/k" % b, token=cur)
        self.assertEqual(r.status, 204, r)
        self.assertFalse(self.store_has(b, "k"))

    def test_copy_source_is_only_read(self):
        b = self.make_bucket()
        self.store_put(b, "from", b"copied")
        seq = self.sequencer("%s/to" % b)
        r = self.s3("PUT", "/%s/to" % b, token=seq,
                    headers={"x-amz-copy-source": "/%s/from" % b})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "to"), (200, b"copied"))
        # the source's sequencer alone does not make the copy a fenced write
        seq_from = self.sequencer("%s/from" % b)
        r = self.s3("PUT", "/%s/to2" % b, token=seq_from,
                    headers={"x-amz-copy-source": "/%s/from" % b})
        self.assertFenceError(r, 403, "FenceWrongLock")
        self.assertFalse(self.store_has(b, "to2"))

    def multipart_start(self, b, k, seq, part=b"P" * 5):
        p = key_path(b, k)
        r = self.s3("POST", p + "?uploads", token=seq)
        self.assertEqual(r.status, 200, r)
        uid = ET.fromstring(r.body).findtext(S3_NS + "UploadId")
        self.assertTrue(uid, r)
        q = "partNumber=1&uploadId=" + urllib.parse.quote(uid, safe="")
        r = self.s3("PUT", p + "?" + q, body=part, token=seq)
        self.assertEqual(r.status, 200, r)
        etag = r.header("ETag")
        done = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
                "<ETag>%s</ETag></Part></CompleteMultipartUpload>"
                % etag).encode()
        return "uploadId=" + urllib.parse.quote(uid, safe=""), done

    def test_multipart_upload_holds_the_lock_from_create_to_complete(self):
        b = self.make_bucket()
        lock = "%s/mp" % b
        g = self.acquire_ok(lock, ttl_ms=30000)
        q, done = self.multipart_start(b, "mp", g["sequencer"],
                                       part=b"first part")
        # the complete without a sequencer, with another lock's
        r = self.s3("POST", "/%s/mp?%s" % (b, q), body=done)
        self.assertFenceError(r, 428, "FenceTokenRequired")
        r = self.s3("POST", "/%s/mp?%s" % (b, q), body=done,
                    token=self.sequencer("%s/not-mp" % b))
        self.assertFenceError(r, 403, "FenceWrongLock")
        # the lock is lost and taken by someone else: the old holder's
        # complete is refused and the object never appears
        self.release_ok(lock, g["lease"])
        cur = self.sequencer(lock)
        r = self.s3("POST", "/%s/mp?%s" % (b, q), body=done,
                    token=g["sequencer"])
        self.assertStale(r, g["sequencer"], cur)
        self.assertFalse(self.store_has(b, "mp"))
        self.assertEqual(self.stored_keys(b), [])
        # abort needs the sequencer too; the current holder's works
        r = self.s3("DELETE", "/%s/mp?%s" % (b, q), token=g["sequencer"])
        self.assertStale(r, g["sequencer"], cur)
        r = self.s3("DELETE", "/%s/mp?%s" % (b, q), token=cur)
        self.assertEqual(r.status, 204, r)
        r = self.store_s3("GET", "/%s?uploads" % b)
        self.assertNotIn(b"<UploadId>", r.body)
        # a whole upload under the current sequencer appears
        q, done = self.multipart_start(b, "mp", cur, part=b"second")
        r = self.s3("POST", "/%s/mp?%s" % (b, q), body=done, token=cur)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "mp"), (200, b"second"))

    def test_delete_objects_needs_every_keys_sequencer(self):
        b = self.make_bucket()
        for k in ("one", "two"):
            self.store_put(b, k)
        s1 = self.sequencer("%s/one" % b)
        s2 = self.sequencer("%s/two" % b)
        body = delete_body(["one", "two"])
        h = {"Content-MD5": md5_b64(body)}
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h)
        self.assertFenceError(r, 428, "FenceTokenRequired")
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h, token=s1)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h, token=s2)
        self.assertFenceError(r, 403, "FenceWrongLock")
        self.assertEqual(self.stored_keys(b), ["one", "two"])
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h,
                    token="%s,%s" % (s1, s2))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored_keys(b), [])
        # keys as XML spells them (an entity, S3's namespace, as boto3
        # sends): the key the store reads is the key whose lock is checked
        self.store_put(b, "a&b")
        self.store_put(b, "plain")
        body = ('<?xml version="1.0" encoding="UTF-8"?><Delete xmlns='
                '"http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>a&amp;b'
                '</Key></Object><Object><Key>pl&#97;in</Key></Object>'
                '<Quiet>true</Quiet></Delete>').encode()
        h = {"Content-MD5": md5_b64(body)}
        amp = self.sequencer(hashed_lock(b, "a&b"))
        plain = self.sequencer("%s/plain" % b)
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h,
                    token=amp)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h,
                    token=plain)
        self.assertFenceError(r, 403, "FenceWrongLock")
        self.assertEqual(self.stored_keys(b), ["a&b", "plain"])
        r = self.s3("POST", "/%s?delete" % b, body=body, headers=h,
                    token=plain + "," + amp)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored_keys(b), [])

    def test_delete_objects_bodies_that_do_not_parse_or_are_too_many(self):
        b = self.make_bucket()
        self.store_put(b, "stay")
        seq = self.sequencer("%s/stay" % b)
        for bad in (b"<Delete><Object><Key>stay</Key></Object>",
                    b"not xml at all",
                    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY e "stay">]>'
                    b"<Delete><Object><Key>&e;</Key></Object></Delete>"):
            with self.subTest(body=bad[:30]):
                r = self.s3("POST", "/%s?delete" % b, body=bad, token=seq,
                            headers={"Content-MD5": md5_b64(bad)})
                self.assertFenceError(r, 400, "MalformedXML")
        many = delete_body(["stay"] * 1001)
        r = self.s3("POST", "/%s?delete" % b, body=many, token=seq,
                    headers={"Content-MD5": md5_b64(many)})
        self.assertFenceError(r, 400, "MalformedXML")
        self.assertEqual(self.stored_keys(b), ["stay"])
        # 1000 keys of one lock is allowed
        full = delete_body(["stay"] * 1000)
        r = self.s3("POST", "/%s?delete" % b, body=full, token=seq,
                    headers={"Content-MD5": md5_b64(full)})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored_keys(b), [])

    def test_the_store_checks_the_kept_payload_hash(self):
        b = self.make_bucket()
        seq = self.sequencer("%s/ph" % b)
        # a signed hash that is not the body's: the store refuses it
        r = self.s3("PUT", "/%s/ph" % b, body=b"the body", token=seq,
                    payload_hash=hashlib.sha256(b"another").hexdigest())
        self.assertEqual(r.status, 400, r)
        self.assertEqual(self.s3_error(r), "XAmzContentSHA256Mismatch", r)
        self.assertFalse(self.store_has(b, "ph"))
        # UNSIGNED-PAYLOAD passes as it came
        r = self.s3("PUT", "/%s/ph" % b, body=b"unsigned body", token=seq,
                    payload_hash="UNSIGNED-PAYLOAD")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "ph"), (200, b"unsigned body"))

    def test_delete_objects_limits(self):
        b = self.make_bucket()
        keys = ["k%02d" % i for i in range(17)]
        for k in keys:
            self.store_put(b, k)
        seqs = [self.sequencer("%s/%s" % (b, k)) for k in keys]
        # more than 2 MiB: refused on its head, before its body is sent
        # (the client waits with Expect: 100-continue, as SDKs do)
        big = (b"<Delete>" + b"<!--" + b"x" * (2 << 20) + b"-->"
               b"<Object><Key>k00</Key></Object></Delete>")
        h = {"Host": self.host(), "Content-Length": str(len(big)),
             "Content-MD5": md5_b64(big), "x-amz-security-token": seqs[0],
             "x-amz-content-sha256": hashlib.sha256(big).hexdigest()}
        s3env.sign("POST", "/%s" % b, "delete", h, h["x-amz-content-sha256"])
        h["Expect"] = "100-continue"
        head = "POST /%s?delete HTTP/1.1\r\n%s\r\n" % (b, "".join(
            "%s: %s\r\n" % kv for kv in h.items()))
        raw = harness.raw_exchange(self.gw.port, head.encode(),
                                   timeout=slack(10.0))
        st, hdrs, rbody = harness.parse_raw(raw)
        self.assertFenceError(harness.Response(st, "", list(hdrs.items()),
                                               rbody, 0.0),
                              400, "MalformedXML")
        # seventeen locks in one request
        body = delete_body(keys)
        r = self.s3("POST", "/%s?delete" % b, body=body,
                    token=",".join(seqs[:16]),
                    headers={"Content-MD5": md5_b64(body)})
        self.assertFenceError(r, 400, "FenceBadRequest")
        self.assertEqual(self.stored_keys(b), keys)
        # sixteen, each named once by its sequencer
        body = delete_body(keys[:16])
        r = self.s3("POST", "/%s?delete" % b, body=body,
                    token=",".join(seqs[:16]),
                    headers={"Content-MD5": md5_b64(body)})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored_keys(b), keys[16:])

    def test_a_write_when_redis_does_not_answer_is_503_in_s3_xml(self):
        b = self.make_bucket()
        seq = self.sequencer("%s/r" % b)
        self.redis.pause()
        try:
            r = self.s3("PUT", "/%s/r" % b, body=b"x", token=seq,
                        timeout=slack(10.0))
        finally:
            self.redis.resume()
        self.assertFenceError(r, 503, "FenceStoreUnavailable")
        self.assertIsNotNone(r.header("Retry-After"), r.header_list)
        self.assertFalse(self.store_has(b, "r"))

    def test_bucket_writes_without_a_guarding_route_are_refused(self):
        b = self.make_bucket()
        self.store_put(b, "k")
        new = self.bucket("n")
        seq = self.sequencer(new)
        r = self.s3("PUT", "/" + new, token=seq)
        self.assertFenceError(r, 403, "FenceSubtreeUnguarded")
        self.assertEqual(self.store_s3("HEAD", "/" + new).status, 404)
        versioning = (b'<VersioningConfiguration><Status>Enabled</Status>'
                      b'</VersioningConfiguration>')
        lifecycle = (b"<LifecycleConfiguration><Rule><ID>x</ID><Filter>"
                     b"<Prefix></Prefix></Filter><Status>Enabled</Status>"
                     b"<Expiration><Days>1</Days></Expiration></Rule>"
                     b"</LifecycleConfiguration>")
        kseq = self.sequencer("%s/k" % b)
        for m, t, body in (("DELETE", "/" + b, b""),
                           ("PUT", "/%s?versioning" % b, versioning),
                           ("PUT", "/%s?lifecycle" % b, lifecycle),
                           ("DELETE", "/%s?lifecycle" % b, b""),
                           ("PUT", "/%s?policy" % b, b'{"Version":"2012-10-17"}'),
                           ("DELETE", "/%s?policy" % b, b""),
                           ("PUT", "/%s?cors" % b, b"<CORSConfiguration/>"),
                           ("PUT", "/%s?tagging" % b, b"<Tagging/>"),
                           ("POST", "/%s?fgunknownsub" % b, b"x"),
                           ("PUT", "/%s/k?fgunknownsub" % b, b"x"),
                           ("DELETE", "/%s/k?fgunknownsub=1" % b, b"")):
            with self.subTest(m=m, t=t):
                r = self.s3(m, t, body=body, token=kseq,
                            headers={"Content-MD5": md5_b64(body)}
                            if body else {})
                self.assertFenceError(r, 403, "FenceSubtreeUnguarded")
        # a browser POST upload changes the whole bucket
        form = (b"--XX\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n"
                b"k\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; "
                b"filename=\"f\"\r\n\r\nposted\r\n--XX--\r\n")
        r = self.s3("POST", "/" + b, body=form, token=kseq, headers={
            "Content-Type": "multipart/form-data; boundary=XX"})
        self.assertFenceError(r, 403, "FenceSubtreeUnguarded")
        self.assertEqual(self.store_s3("HEAD", "/" + b).status, 200)
        self.assertEqual(self.store_get(b, "k"), (200, b"old"))
        r = self.store_s3("GET", "/%s?versioning" % b)
        self.assertNotIn(b"Enabled", r.body)
        r = self.store_s3("GET", "/%s?lifecycle" % b)
        self.assertEqual(r.status, 404, r)
        # a harmless parameter of newer SDKs is no subresource
        r = self.s3("PUT", "/%s/k?x-id=PutObject" % b, body=b"xid", token=kseq)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "k"), (200, b"xid"))

    # -- reads --------------------------------------------------------------

    def test_reads_are_fenced_only_by_a_fencing_token_header(self):
        b = self.make_bucket()
        self.store_put(b, "r", b"read me")
        stale, cur = self.stale_and_current("%s/r" % b)
        # a stale sequencer in the session token does not fence a read
        r = self.s3("GET", "/%s/r" % b, token=stale)
        self.assertEqual((r.status, r.body), (200, b"read me"), r)
        r = self.s3("GET", "/%s/r" % b)
        self.assertEqual((r.status, r.body), (200, b"read me"), r)
        r = self.s3("GET", "/%s/r" % b, token="not-a-sequencer")
        self.assertEqual((r.status, r.body), (200, b"read me"), r)
        r = self.s3("HEAD", "/%s/r" % b, token=stale)
        self.assertEqual(r.status, 200, r)
        r = self.s3("GET", "/%s?versioning" % b, token=stale)
        self.assertEqual(r.status, 200, r)
        # a Fencing-Token header does
        r = self.s3("GET", "/%s/r" % b, headers={"Fencing-Token": stale})
        self.assertStale(r, stale, cur)
        r = self.s3("GET", "/%s/r" % b, headers={"Fencing-Token": cur})
        self.assertEqual((r.status, r.body), (200, b"read me"), r)
        # listings are reads
        r = self.s3("GET", "/", token=stale)
        self.assertEqual(r.status, 200, r)
        self.assertIn(("<Name>%s</Name>" % b).encode(), r.body)
        r = self.s3("GET", "/%s?list-type=2" % b)
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"<Key>r</Key>", r.body)

    # -- streaming-signed uploads ------------------------------------------

    def test_streaming_signed_upload_stores_the_exact_bytes(self):
        b = self.make_bucket()
        data = bytes(range(256)) * 800      # 204800 bytes: 4 chunks
        seq = self.sequencer("%s/s" % b)
        r = self.streaming_put("/%s/s" % b, data, 65536, seq)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "s"), (200, data))

    def test_streaming_signed_upload_with_a_bad_chunk_leaves_nothing(self):
        b = self.make_bucket()
        data = b"z" * (65536 * 3 + 100)     # chunks 0..3, final is 4
        seq = self.sequencer("%s/bad" % b)
        for bad in (1, 3, 4):
            with self.subTest(bad_chunk=bad):
                r = self.streaming_put("/%s/bad" % b, data, 65536, seq,
                                       bad_chunk=bad)
                self.assertFenceError(r, 403, "SignatureDoesNotMatch")
                # the store never completes the object
                self.assertFalse(self.store_has(b, "bad"))
        self.assertEqual(self.stored_keys(b), [])
        self.assert_alive()

    def test_streaming_signed_upload_without_its_final_chunk_never_completes(self):
        """Every declared byte but no final chunk, then the client leaves:
        the last data chunk was never forwarded, so the store, which may
        complete an object once it has every declared byte, has nothing."""
        b = self.make_bucket()
        data = b"q" * (65536 * 2 + 10)
        seq = self.sequencer("%s/nf" % b)
        when = now()
        path = "/%s/nf" % b
        h = {"Host": self.host(),
             "Content-Length": str(s3env.streaming_length(len(data), 65536)),
             "Content-Encoding": "aws-chunked",
             "x-amz-decoded-content-length": str(len(data)),
             "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
             "x-amz-security-token": seq}
        seed = s3env.sign("PUT", path, "", h,
                          "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", when=when)
        body = s3env.aws_chunked(data, 65536, seed, when)
        final = body.rindex(b"0;chunk-signature=")
        head = "PUT %s HTTP/1.1\r\n%s\r\n" % (path, "".join(
            "%s: %s\r\n" % kv for kv in h.items()))
        n0 = len(self.store.rgw.requests())
        sock = socket.create_connection(("127.0.0.1", self.gw.port),
                                        timeout=slack(10.0))
        try:
            sock.sendall(head.encode() + body[:final])
        finally:
            sock.close()
        # the client left; once the store has ended its PUT, no object
        puts = []

        def ended():
            puts[:] = [r for r in self.store.rgw.requests_after(n0)
                       if r[0] == "PUT" and r[1] == path]
            return bool(puts)
        self.wait_for(ended, slack(30.0), "the store ended the PUT")
        self.assertNotEqual(puts[0][2], 200, puts)
        self.assertFalse(self.store_has(b, "nf"))
        self.assertEqual(self.stored_keys(b), [])
        self.assert_alive()

    # -- refusals, the route endpoint --------------------------------------

    def test_refusals_are_s3_xml_and_the_lock_api_stays_json(self):
        b = self.make_bucket()
        r = self.s3("PUT", "/%s/x" % b, body=b"x")
        root = self.assertFenceError(r, 428, "FenceTokenRequired")
        self.assertIn("/%s/x" % b, root.findtext("Resource"))
        r = self.s3("PUT", "/%s/x" % b, body=b"x", token="fg1.garbage")
        self.assertFenceError(r, 400, "FenceMalformedToken")
        forged = harness.tamper(self.sequencer("%s/x" % b))
        r = self.s3("PUT", "/%s/x" % b, body=b"x", token=forged)
        self.assertFenceError(r, 403, "FenceForgedToken")
        # a sequencer list with an empty member: refused, in S3 XML
        r = self.s3("PUT", "/%s/x" % b, body=b"x", token="fg1.garbage,")
        self.assertEqual(r.header("Content-Type"), "application/xml", r)
        self.assertTrue((self.s3_error(r) or "").startswith("Fence"), r)
        self.assertFalse(self.store_has(b, "x"))
        # the lock API answers JSON, with its own errors
        r = self.gw.request("GET", harness.LOCKS + "%s/x" % b)
        self.assertEqual(r.status, 200, r)
        self.assertIn("application/json", r.header("Content-Type"))
        r = self.gw.request("POST", harness.LOCKS + "bad//name", body={})
        self.assertEqual(r.status, 400, r)
        self.assertIn("application/json", r.header("Content-Type"))
        self.assertIn("error", r.json)

    def test_no_secret_or_sequencer_is_logged(self):
        b = self.make_bucket()
        seq = self.sequencer("%s/l" % b)
        stale, _ = self.stale_and_current("%s/l2" % b)
        self.assertEqual(self.s3("PUT", "/%s/l" % b, body=b"x",
                                 token=seq).status, 200)
        self.s3("PUT", "/%s/l2" % b, body=b"x", token=stale)
        self.s3("PUT", "/%s/l2" % b, body=b"x", headers={
            "Fencing-Token": stale})
        self.s3("GET", "/%s/l" % b, secret="wrong" + s3env.CLIENT_SECRET[5:])
        with open(self.gw.logpath) as f:
            log = f.read()
        for s in (seq, stale, "fg1.", s3env.CLIENT_SECRET, s3env.STORE_SECRET):
            self.assertNotIn(s, log)

    def test_route_endpoint_answers_the_s3_keys_lock(self):
        b = self.bucket()
        r = self.gw.request("GET", "/_fence/v1/route?path=" +
                            urllib.parse.quote("/%s/dir/k.txt" % b, safe=""))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json, {"path": "/%s/dir/k.txt" % b,
                                  "lock": "%s/dir/k.txt" % b, "rule": None})
        r = self.gw.request("GET", "/_fence/v1/route?path=" +
                            urllib.parse.quote("/%s/a//b" % b, safe=""))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["lock"], hashed_lock(b, "a//b"), r.json)

    # -- virtual-host requests ---------------------------------------------

    def test_virtual_host_names_the_bucket(self):
        b = self.make_bucket()
        vhost = "%s.%s:%d" % (b, DOMAIN, self.gw.port)
        r = self.s3("PUT", "/vk", body=b"v", headers={"Host": vhost})
        self.assertFenceError(r, 428, "FenceTokenRequired")
        nb = self.bucket("v")
        r = self.s3("PUT", "/", headers={"Host": "%s.%s:%d" % (
            nb, DOMAIN, self.gw.port)}, token=self.sequencer(nb))
        self.assertFenceError(r, 403, "FenceSubtreeUnguarded")
        self.assertEqual(self.store_s3("HEAD", "/" + nb).status, 404)
        r = self.s3("PUT", "/vk", body=b"v", headers={"Host": vhost},
                    token=self.sequencer("%s/other" % b))
        self.assertFenceError(r, 403, "FenceWrongLock")
        seq = self.sequencer("%s/vk" % b)
        r, envs = self.envs_of(lambda: self.s3(
            "PUT", "/vk", body=b"virtual", headers={"Host": vhost},
            token=seq))
        self.assertEqual(r.status, 200, r)
        # the store is asked path-style, under its own Host
        puts = [e for e in envs if e.get("REQUEST_METHOD") == "PUT"]
        self.assertEqual(len(puts), 1, envs)
        self.assertEqual(puts[0].get("REQUEST_URI"), "/%s/vk" % b, puts[0])
        self.assertEqual(puts[0].get("HTTP_HOST"),
                         "127.0.0.1:%d" % self.store.port, puts[0])
        self.assertEqual(self.store_get(b, "vk"), (200, b"virtual"))
        r = self.s3("GET", "/vk", headers={"Host": vhost})
        self.assertEqual((r.status, r.body), (200, b"virtual"), r)
        # an odd key by virtual host: the same hashed lock as path-style
        r = self.s3("PUT", "/v%20k", body=b"sp", headers={"Host": vhost},
                    token=seq)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("PUT", "/v%20k", body=b"sp", headers={"Host": vhost},
                    token=self.sequencer(hashed_lock(b, "v k")))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "v k"), (200, b"sp"))
