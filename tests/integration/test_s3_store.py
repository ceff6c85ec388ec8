"""test_s3_store.py - the S3 test infrastructure, proven against a real
radosgw with no gateway in between: the store checks what a client signs
(a request signed for one Host and sent with another is refused), and
each of the four real clients of s3clients.py runs every scenario (put,
copy, multipart, delete, delete-many, sync of 100 files) with what the
store then holds read back by a request signed here, not by the client
under test; every request of the writes carries the session token,
signed, as radosgw's log of what it was given shows. The same scenarios
run through the gateway in S3 mode (client_args()).

One radosgw serves the whole class (rgw.Rgw, about a second and a half to
start); each client has a bucket of its own."""

import contextlib
import hashlib
import http.client
import os
import shutil
import time
import urllib.parse
import xml.etree.ElementTree as ET

import rgw
import s3clients
from harness import TestCase, slack

ACCESS_KEY = "AKIAS3STORETEST00001"
SECRET = "s3storetestsecret/0123456789abcdefghijklmn"
# radosgw takes the session token of a plain user's request without
# looking at it: the runners' token path is exercised all the same
TOKEN = "fg1.runner-token-not-checked-by-the-store"

S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
BIG_BYTES = 12 << 20            # three parts of s3clients.PART_BYTES
TREE_FILES = 100            # the gateway tests sync 300 (test_s3_clients.py)


class S3StoreTests(TestCase):
    # one test runs a real client's whole scenario list: minutes on a
    # loaded machine, each client command a second of its own
    test_timeout = 300.0

    axes = ()                   # radosgw and the clients: no fencegate
    uses_shared_env = False
    store = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        t0 = time.monotonic()
        cls.store = rgw.Rgw().start()
        try:
            cls.store.add_user("tester", ACCESS_KEY, SECRET)
        except BaseException:
            # unittest skips tearDownClass when setUpClass fails
            cls.store.stop()
            raise
        cls.work = os.path.join(cls.store.dir, "work")
        os.makedirs(cls.work)
        print("\nradosgw: started in %.2f s (%s), user in %.2f s"
              % (cls.store.startup_seconds,
                 ", ".join("%s %.2f" % kv for kv in cls.store.timings.items()),
                 time.monotonic() - t0 - cls.store.startup_seconds))

    @classmethod
    def tearDownClass(cls):
        if cls.store is not None:
            cls.store.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.log_paths += self.store.log_paths()

    # -- the store, read by a request signed here ---------------------

    def signed(self, method, path, query=(), host=None, secret=SECRET,
               drop=(), body=b""):
        """(status, body) of a SigV4 request for 127.0.0.1:PORT, sent with
        Host `host` when given, without the signed headers in `drop`."""
        signed_host = "127.0.0.1:%d" % self.store.port
        h = s3clients.sigv4_headers(method, signed_host, path, ACCESS_KEY,
                                    secret, query=query, body=body)
        if body:
            h["content-length"] = str(len(body))
        if host is not None:
            h["host"] = host
        for d in drop:
            h.pop(d)
        target = path + ("?" + urllib.parse.urlencode(sorted(query),
                                                      quote_via=urllib.parse.quote)
                         if query else "")
        c = http.client.HTTPConnection("127.0.0.1", self.store.port,
                                       timeout=slack(20))
        try:
            c.putrequest(method, target, skip_host=True,
                         skip_accept_encoding=True)
            for k, v in h.items():
                c.putheader(k, v)
            c.endheaders(body or None)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def stored_keys(self, bucket, prefix=""):
        keys, token = [], None
        while True:
            q = [("list-type", "2"), ("prefix", prefix)]
            if token:
                q.append(("continuation-token", token))
            st, body = self.signed("GET", "/" + bucket, q)
            self.assertEqual(st, 200, body[:500])
            x = ET.fromstring(body)
            keys += [e.text for e in x.iter(S3_NS + "Key")]
            token = x.findtext(S3_NS + "NextContinuationToken")
            if x.findtext(S3_NS + "IsTruncated") != "true":
                return sorted(keys)

    def store_put(self, bucket, key, body):
        st, out = self.signed("PUT", "/%s/%s" % (bucket, urllib.parse.quote(key)),
                              body=body)
        self.assertEqual(st, 200, out[:300])

    def stored(self, bucket, key):
        st, body = self.signed("GET", "/%s/%s" % (bucket, urllib.parse.quote(key)))
        self.assertEqual(st, 200, "GET %s/%s: %r" % (bucket, key, body[:300]))
        return body

    # -- the store checks signatures ----------------------------------

    def test_the_store_refuses_a_request_signed_for_another_host(self):
        st, body = self.signed("GET", "/")
        self.assertEqual(st, 200, body[:300])
        for host in ("localhost:%d" % self.store.port, "127.0.0.1",
                     "gateway.example:8080"):
            st, body = self.signed("GET", "/", host=host)
            self.assertEqual(st, 403, "Host %s: %r" % (host, body[:300]))
            self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", body,
                          "Host %s" % host)
        # a signed header left out, or the wrong secret: the same refusal
        st, body = self.signed("GET", "/", drop=("x-amz-date",))
        self.assertEqual(st, 403, body[:300])
        st, body = self.signed("GET", "/", secret=SECRET[::-1])
        self.assertEqual((st, b"<Code>SignatureDoesNotMatch</Code>" in body),
                         (403, True), body[:300])

    # -- the four clients ---------------------------------------------

    def files(self):
        small = os.path.join(self.work, "small.txt")
        big = os.path.join(self.work, "big.bin")
        if not os.path.exists(big):
            with open(small, "wb") as f:
                f.write(b"hello, object store\n")
            with open(big, "wb") as f:
                f.write(os.urandom(BIG_BYTES))
        return small, big

    def tree(self, name):
        root = os.path.join(self.work, "tree-" + name)
        for i in range(TREE_FILES):
            d = os.path.join(root, "d%d" % (i % 10))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%d.txt" % i), "w") as f:
                f.write("file %d\n" % i)
        return root

    def sent(self, step):
        """Runs step(); returns its Result (checked) and the requests the
        store finished meanwhile, as (method, first query name, status)."""
        n0 = len(self.store.requests())
        res = step().check()
        reqs = []
        for m, target, status, _ in self.store.requests_after(n0):
            q = urllib.parse.urlsplit(target).query
            reqs.append((m, q.split("&")[0].split("=")[0] if q else "",
                         status))
        return res, reqs

    @contextlib.contextmanager
    def headers_logged(self):
        """Within: radosgw logs what it is given of each request; the list
        yielded is filled, when the block ends, with each request's
        variables (Rgw.request_envs)."""
        envs = []
        since = self.store.log_offset()
        self.store.log_headers(True)
        try:
            yield envs
        finally:
            self.store.log_headers(False)
        envs += [e for e in self.store.request_envs(since)
                 if "REQUEST_METHOD" in e and not e.get(
                     "REQUEST_URI", "").startswith(rgw.LOG_MARK)]

    def token_signed(self, client, envs, token, hashes):
        """Every request in envs carried the session token, signed (SigV4
        in the Authorization header, host and x-amz-security-token among
        its SignedHeaders); adds the x-amz-content-sha256 kinds to hashes."""
        self.assertTrue(envs)
        for e in envs:
            what = "%s: %s %s" % (client, e.get("REQUEST_METHOD"),
                                  e.get("REQUEST_URI"))
            self.assertEqual(e.get("HTTP_X_AMZ_SECURITY_TOKEN"), token, what)
            auth = e.get("HTTP_AUTHORIZATION", "")
            self.assertIn("AWS4-HMAC-SHA256 ", auth, what)
            signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
            self.assertIn("x-amz-security-token", signed, what)
            self.assertIn("host", signed, what)
            h = e.get("HTTP_X_AMZ_CONTENT_SHA256", "")
            hashes.add("hex" if len(h) == 64 else h)

    def client_args(self, bucket):
        """(endpoint, access key, secret, session token) the clients of
        scenarios() use for `bucket`: the store's own here; a class that
        runs the scenarios through a gateway says its own (its endpoint,
        the key it issued, a sequencer of the lock guarding the bucket's
        keys). What the store holds is read from the store either way."""
        return self.store.endpoint, ACCESS_KEY, SECRET, TOKEN

    def scenarios(self, cls):
        t0 = time.monotonic()
        b = "s3-" + cls.name
        endpoint, key, secret, token = self.client_args(b)
        c = cls(endpoint, key, secret, token=token, workdir=self.work)
        small, big = self.files()
        with open(small, "rb") as f:
            small_bytes = f.read()
        with open(big, "rb") as f:
            big_sha = hashlib.sha256(f.read()).hexdigest()

        c.mb(b).check()
        self.assertEqual(self.stored_keys(b), [])

        # what the store is given of the first writes (header logging
        # slows radosgw: not for the sync)
        hashes = set()
        with self.headers_logged() as envs:
            c.put(b, "a/one.txt", small).check()
            res, reqs = self.sent(lambda: c.copy(b, "a/one.txt", "a/two.txt"))
        self.token_signed(c.name, envs, token, hashes)
        self.assertEqual(self.stored(b, "a/one.txt"), small_bytes)
        self.assertEqual(self.stored(b, "a/two.txt"), small_bytes)
        self.assertIn("PUT", [m for m, _, _ in reqs], reqs)

        with self.headers_logged() as envs:
            res, reqs = self.sent(lambda: c.multipart(b, "big.bin", big))
        self.token_signed(c.name, envs, token, hashes)
        # a part's query is partNumber&uploadId or uploadId&partNumber
        mp = [(m, "part" if m == "PUT" else q) for m, q, _ in reqs
              if q in ("uploads", "uploadId", "partNumber")]
        self.assertEqual(
            mp, [("POST", "uploads")] + [("PUT", "part")] * 3
            + [("POST", "uploadId")],
            "%s: a %d-byte upload in three %d-byte parts: %r"
            % (c.name, BIG_BYTES, s3clients.PART_BYTES, reqs))
        self.assertEqual(hashlib.sha256(self.stored(b, "big.bin")).hexdigest(),
                         big_sha)
        back = os.path.join(c.dir, "big.back")
        c.get(b, "big.bin", back).check()
        with open(back, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), big_sha)

        c.delete(b, "a/one.txt").check()
        self.assertEqual(self.stored_keys(b), ["a/two.txt", "big.bin"])

        # the keys to delete are put here (the client's put is proven
        # above), a client run each costs a second of aws cli's start-up
        many = ["many/k%d" % i for i in range(4)]
        for k in many:
            self.store_put(b, k, small_bytes)
        with self.headers_logged() as envs:
            res, reqs = self.sent(lambda: c.delete_many(b, many))
        self.token_signed(c.name, envs, token, hashes)
        self.assertEqual(self.stored_keys(b, "many/"), [])
        deletes = [(m, q) for m, q, _ in reqs if m in ("POST", "DELETE")]
        if s3clients.MULTI_DELETE[c.name]:
            self.assertEqual(deletes, [("POST", "delete")], reqs)
        else:
            self.assertEqual(deletes, [("DELETE", "")] * len(many), reqs)

        src = self.tree(c.name)
        t1 = time.monotonic()
        c.sync(b, "t/", src).check()
        sync_secs = time.monotonic() - t1
        want = sorted("t/" + k for k in s3clients.tree_files(src))
        self.assertEqual(len(want), TREE_FILES)
        self.assertEqual(self.stored_keys(b, "t/"), want)
        # a second sync deletes what went and adds what came
        for i in range(5):
            os.remove(os.path.join(src, "d%d" % i, "f%d.txt" % i))
        with open(os.path.join(src, "d1", "new.txt"), "w") as f:
            f.write("new\n")
        res, reqs = self.sent(lambda: c.sync(b, "t/", src))
        want = sorted("t/" + k for k in s3clients.tree_files(src))
        self.assertEqual(self.stored_keys(b, "t/"), want)
        with_delete = sorted(set((m, q) for m, q, _ in reqs
                                 if m in ("POST", "DELETE")))

        listed = c.ls(b).check().keys
        self.assertEqual(listed, self.stored_keys(b))
        print("\n%s: all scenarios %.1f s, first sync of %d files %.1f s; "
              "re-sync deletes by %s; session token signed on every "
              "request; x-amz-content-sha256: %s"
              % (c.name, time.monotonic() - t0, TREE_FILES, sync_secs,
                 with_delete, ", ".join(sorted(hashes))))
        shutil.rmtree(src)

    def test_aws_cli(self):
        self.scenarios(s3clients.AwsCli)

    def test_boto3(self):
        self.scenarios(s3clients.Boto3)

    def test_s3cmd(self):
        self.scenarios(s3clients.S3cmd)

    def test_rclone(self):
        self.scenarios(s3clients.Rclone)

    def test_rclone_checks_its_bucket_with_a_create_bucket_unless_told_not_to(self):
        small, _ = self.files()
        for check, want in ((True, 1), (False, 0)):
            c = s3clients.Rclone(self.store.endpoint, ACCESS_KEY, SECRET,
                                 token=TOKEN, workdir=self.work,
                                 check_bucket=check)
            b = "s3-rclone-check"
            if check:
                c.mb(b).check()
            n0 = len(self.store.requests())
            c.put(b, "k", small).check()
            bucket_puts = [r for r in self.store.requests_after(n0)
                           if r[0] == "PUT" and r[1].split("?")[0] == "/" + b]
            self.assertEqual(len(bucket_puts), want, bucket_puts)
