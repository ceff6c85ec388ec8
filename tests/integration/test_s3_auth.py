"""test_s3_auth.py - who an S3 client is in contract v1.4's S3 mode, through
the gateway in front of a real radosgw: a verified key's principal and its
v1.2 rights under an auth-file (read: for reads, lock: for writes, a copy's
source read), a key whose principal the auth-file does not name,
s3-credentials read again on SIGHUP, bucket writes guarded by
`route /{bucket}/ {bucket}`; and, without a store, the command line:
`--new-s3-key`, an s3-credentials file others may read, `--route-test`
with an S3 config."""

import hashlib
import os
import re
import secrets
import signal
import subprocess
import tempfile
import urllib.parse

import harness
import s3env
from harness import LOCKS, Gateway, TestCase, slack
import json

from test_s3_mode import DOMAIN, S3Base, hashed_lock, key_path, md5_b64

ALICE_BEARER = secrets.token_urlsafe(32)
GHOST_KEY = "FGTESTGHOSTKEY000001"
GHOST_SECRET = "ghostsecret0123456789abcdefghijklmnopqrs"
OLD_KEY = "FGTESTOLDKEY00000001"
OLD_SECRET = "oldsecret0123456789abcdefghijklmnopqrstu"
NEW_KEY = "FGTESTNEWKEY00000001"
NEW_SECRET = "newsecret0123456789abcdefghijklmnopqrstu"
BOB_KEY = "FGTESTBOBKEY00000001"
BOB_SECRET = "bobsecret0123456789abcdefghijklmnopqrstu"
BOB_STORE_KEY = "FGTESTBOBSTORE000001"
BOB_STORE_SECRET = "bobstoresecret0123456789abcdefghijklmnop"


def creds_text(*extra):
    lines = ["# key id, secret, principal",
             "%s %s alice" % (s3env.CLIENT_KEY, s3env.CLIENT_SECRET),
             "%s %s ghost" % (GHOST_KEY, GHOST_SECRET)] + list(extra)
    return "\n".join(lines) + "\n"


class S3AuthTests(S3Base):
    """An auth-file (alice: lock: on buckets rw-*, read: on ro-*; nothing
    on no-*), one route lock per bucket."""

    routes = ("/{bucket}/ {bucket}", "/rw-media/{user}/ rw-media/{user}")
    extra_config = ("s3-domain " + DOMAIN,)
    auth_file_text = (
        "alice sha256:%s lock:rw- read:ro-\n"
        % hashlib.sha256(ALICE_BEARER.encode()).hexdigest())

    @classmethod
    def s3_config_lines(cls):
        # bob's key signs upstream with the store's user bob (the fourth
        # field); the store user is made when the store has started
        bob_store = s3env.owner_only_file("%s\n%s\n" % (BOB_STORE_KEY,
                                                         BOB_STORE_SECRET),
                                          "bob-store-")
        cls.bob_line = "%s %s alice %s" % (BOB_KEY, BOB_SECRET, bob_store)
        cls.credentials_text = creds_text(
            "%s %s alice" % (OLD_KEY, OLD_SECRET), cls.bob_line)
        lines = super().s3_config_lines()
        cls.creds_path = [l.split(" ", 1)[1] for l in lines
                          if l.startswith("s3-credentials ")][0]
        return lines

    # the lock API under auth: alice's bearer key
    def acquire(self, name, body=None, gw=None, timeout=10.0, **fields):
        return self._g(gw).request(
            "POST", LOCKS + name, body=body if body is not None else fields,
            timeout=timeout,
            headers={"Authorization": "Bearer " + ALICE_BEARER})

    def release(self, name, lease, gw=None):
        return self._g(gw).request("DELETE", LOCKS + name, headers={
            "Fence-Lease": lease,
            "Authorization": "Bearer " + ALICE_BEARER})

    def check(self, sequencer, gw=None):
        return self._g(gw).request(
            "POST", "/_fence/v1/check", body={"sequencer": sequencer},
            headers={"Authorization": "Bearer " + ALICE_BEARER})

    def named(self, kind):
        """A bucket made at the store, of kind rw, ro or no."""
        return self.make_bucket("%s-%s" % (kind, self.bucket()))

    def assertDenied(self, r, right):
        root = self.assertFenceError(r, 403, "AccessDenied")
        self.assertIn(right, root.findtext("Message"), r)

    def test_rights_of_a_keys_principal(self):
        rw, ro, no = self.named("rw"), self.named("ro"), self.named("no")
        for b in (rw, ro, no):
            self.store_put(b, "k", ("in " + b).encode())
        seq = self.sequencer(rw)
        # read: suffices for reads; lock: gives read: too
        for b in (rw, ro):
            r = self.s3("GET", "/%s/k" % b)
            self.assertEqual((r.status, r.body), (200, ("in " + b).encode()), r)
            r = self.s3("GET", "/%s?list-type=2" % b)
            self.assertEqual(r.status, 200, r)
        # no right at all: reads and listings refused, naming read:
        self.assertDenied(self.s3("GET", "/%s/k" % no), "read:")
        self.assertDenied(self.s3("GET", "/%s?list-type=2" % no), "read:")
        # writes need lock:, with or without a sequencer
        for b in (ro, no):
            with self.subTest(bucket=b):
                r = self.s3("PUT", "/%s/k" % b, body=b"x")
                self.assertDenied(r, "lock:")
                r = self.s3("PUT", "/%s/k" % b, body=b"x", token=seq)
                self.assertDenied(r, "lock:")
                r = self.s3("DELETE", "/%s/k" % b, token=seq)
                self.assertDenied(r, "lock:")
                self.assertEqual(self.store_get(b, "k"),
                                 (200, ("in " + b).encode()))
        r = self.s3("PUT", "/%s/k" % rw, body=b"written", token=seq)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(rw, "k"), (200, b"written"))
        # a copy reads its source: read: on the source's lock
        r = self.s3("PUT", "/%s/from-no" % rw, token=seq,
                    headers={"x-amz-copy-source": "/%s/k" % no})
        self.assertDenied(r, "read:")
        self.assertFalse(self.store_has(rw, "from-no"))
        r = self.s3("PUT", "/%s/from-ro" % rw, token=seq,
                    headers={"x-amz-copy-source": "/%s/k" % ro})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(rw, "from-ro"),
                         (200, ("in " + ro).encode()))
        # UploadPartCopy reads its source too
        r = self.s3("POST", "/%s/mp?uploads" % rw, token=seq)
        self.assertEqual(r.status, 200, r)
        uid = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1)
        part = "/%s/mp?partNumber=1&uploadId=%s" % (
            rw, urllib.parse.quote(uid.decode(), safe=""))
        r = self.s3("PUT", part, token=seq,
                    headers={"x-amz-copy-source": "/%s/k" % no,
                             "Content-Length": "0"})
        self.assertDenied(r, "read:")
        r = self.s3("PUT", part, token=seq,
                    headers={"x-amz-copy-source": "/%s/k" % ro,
                             "Content-Length": "0"})
        self.assertEqual(r.status, 200, r)
        # copying into a bucket alice may only read
        r = self.s3("PUT", "/%s/from-rw" % ro, token=seq,
                    headers={"x-amz-copy-source": "/%s/k" % rw})
        self.assertDenied(r, "lock:")
        self.assertFalse(self.store_has(ro, "from-rw"))
        # a DeleteObjects in a bucket alice may not write
        body = b"<Delete><Object><Key>k</Key></Object></Delete>"
        r = self.s3("POST", "/%s?delete" % ro, body=body, token=seq,
                    headers={"Content-MD5": md5_b64(body)})
        self.assertDenied(r, "lock:")
        self.assertTrue(self.store_has(ro, "k"))

    def test_select_object_content_needs_only_read(self):
        ro = self.named("ro")
        self.store_put(ro, "c.csv", b"a,b\n1,2\n")
        req = (b'<?xml version="1.0" encoding="UTF-8"?>'
               b"<SelectObjectContentRequest><Expression>"
               b"select * from s3object;</Expression>"
               b"<ExpressionType>SQL</ExpressionType>"
               b"<InputSerialization><CSV></CSV></InputSerialization>"
               b"<OutputSerialization><CSV></CSV></OutputSerialization>"
               b"</SelectObjectContentRequest>")
        r = self.s3("POST", "/%s/c.csv?select&select-type=2" % ro, body=req)
        self.assertFalse((self.s3_error(r) or "").startswith("Fence"), r)
        self.assertNotEqual(self.s3_error(r), "AccessDenied", r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(ro, "c.csv"), (200, b"a,b\n1,2\n"))
        # the same request in a bucket alice may not read
        no = self.named("no")
        self.store_put(no, "c.csv", b"a,b\n1,2\n")
        r = self.s3("POST", "/%s/c.csv?select&select-type=2" % no, body=req)
        self.assertDenied(r, "read:")

    def test_a_key_whose_principal_is_not_in_the_auth_file(self):
        rw = self.named("rw")
        self.store_put(rw, "k", b"v")
        seq = self.sequencer(rw)
        r = self.s3("GET", "/%s/k" % rw, key=GHOST_KEY, secret=GHOST_SECRET)
        self.assertFenceError(r, 403, "AccessDenied")
        r = self.s3("PUT", "/%s/k" % rw, body=b"ghost", token=seq,
                    key=GHOST_KEY, secret=GHOST_SECRET)
        self.assertFenceError(r, 403, "AccessDenied")
        self.assertEqual(self.store_get(rw, "k"), (200, b"v"))

    def test_bucket_writes_under_a_bucket_route(self):
        new = "rw-" + self.bucket()
        other = self.sequencer("rw-" + self.bucket())
        r = self.s3("PUT", "/" + new)
        self.assertFenceError(r, 428, "FenceTokenRequired")
        r = self.s3("PUT", "/" + new, token=other)
        self.assertFenceError(r, 403, "FenceWrongLock")
        self.assertEqual(self.store_s3("HEAD", "/" + new).status, 404)
        stale, seq = self.stale_and_current(new)
        r = self.s3("PUT", "/" + new, token=stale)
        self.assertStale(r, stale, seq)
        self.assertEqual(self.store_s3("HEAD", "/" + new).status, 404)
        r = self.s3("PUT", "/" + new, token=seq)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_s3("HEAD", "/" + new).status, 200)
        versioning = (b"<VersioningConfiguration><Status>Enabled</Status>"
                      b"</VersioningConfiguration>")
        # (versioning on a bucket of its own: one that had it cannot be
        # deleted here without removing every version)
        vb = self.named("rw")
        r = self.s3("PUT", "/%s?versioning" % vb, body=versioning)
        self.assertFenceError(r, 428, "FenceTokenRequired")
        r = self.s3("PUT", "/%s?versioning" % vb, body=versioning, token=seq)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.store_s3("GET", "/%s?versioning" % vb)
        self.assertNotIn(b"<Status>Enabled</Status>", r.body)
        r = self.s3("PUT", "/%s?versioning" % vb, body=versioning,
                    token=self.sequencer(vb))
        self.assertEqual(r.status, 200, r)
        r = self.store_s3("GET", "/%s?versioning" % vb)
        self.assertIn(b"<Status>Enabled</Status>", r.body)
        lifecycle = (b"<LifecycleConfiguration><Rule><ID>x</ID><Filter>"
                     b"<Prefix>tmp/</Prefix></Filter><Status>Enabled</Status>"
                     b"<Expiration><Days>1</Days></Expiration></Rule>"
                     b"</LifecycleConfiguration>")
        r = self.s3("PUT", "/%s?lifecycle" % new, body=lifecycle, token=other,
                    headers={"Content-MD5": md5_b64(lifecycle)})
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("PUT", "/%s?lifecycle" % new, body=lifecycle, token=seq,
                    headers={"Content-MD5": md5_b64(lifecycle)})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_s3("GET", "/%s?lifecycle" % new).status,
                         200)
        # an object's lock is the bucket's; an odd key too (the rule covers it)
        r = self.s3("PUT", "/%s/a%%20b" % new, body=b"o", token=seq)
        self.assertEqual(r.status, 200, r)
        r = self.gw.request("GET", "/_fence/v1/route?path=" + urllib.parse.quote(
            "/%s/a%%20b" % new, safe=""), headers={
                "Authorization": "Bearer " + ALICE_BEARER})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["lock"], new, r.json)
        self.assertIn("/{bucket}/ {bucket}", r.json["rule"], r.json)
        # an unknown subresource needs the bucket's lock, which it has here
        r = self.s3("DELETE", "/%s?fgunknownsub" % new)
        self.assertFenceError(r, 428, "FenceTokenRequired")
        # DeleteBucket
        r = self.store_s3("DELETE", "/%s/a%%20b" % new)
        self.assertEqual(r.status, 204, r)
        r = self.s3("DELETE", "/" + new, token=other)
        self.assertFenceError(r, 403, "FenceWrongLock")
        self.assertEqual(self.store_s3("HEAD", "/" + new).status, 200)
        r = self.s3("DELETE", "/" + new, token=seq)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.store_s3("HEAD", "/" + new).status, 404)

    def test_route_rules_match_the_key_unresolved_and_by_virtual_host(self):
        b = "rw-media"
        self.make_bucket(b)
        u1 = self.sequencer("rw-media/u1")
        u2 = self.sequencer("rw-media/u2")
        # "u1/../u2/f" is a key under u1/: its lock is u1's, not u2's
        key = "u1/../u2/f"
        r = self.s3("PUT", key_path(b, key), body=b"dots", token=u2)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("PUT", key_path(b, key), body=b"dots", token=u1)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, key), (200, b"dots"))
        self.assertFalse(self.store_has(b, "u2/f"))
        # percent-decoded: u1%2Fg is u1/g
        r = self.s3("PUT", "/rw-media/u1%2Fg", body=b"g", token=u2)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("PUT", "/rw-media/u1%2Fg", body=b"g", token=u1)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "u1/g"), (200, b"g"))
        # by virtual host, the same rule
        vhost = "%s.%s:%d" % (b, DOMAIN, self.gw.port)
        r = self.s3("PUT", "/u2/v", body=b"v", headers={"Host": vhost},
                    token=u1)
        self.assertFenceError(r, 403, "FenceWrongLock")
        r = self.s3("PUT", "/u2/v", body=b"v", headers={"Host": vhost},
                    token=u2)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "u2/v"), (200, b"v"))
        # the bucket's own writes: a rule with another lock inside it
        # leaves the bucket unguarded as a whole
        r = self.s3("PUT", "/rw-media?versioning", token=self.sequencer(b),
                    body=b"<VersioningConfiguration><Status>Enabled</Status>"
                         b"</VersioningConfiguration>")
        self.assertFenceError(r, 403, "FenceSubtreeUnguarded")
        r = self.gw.request("GET", "/_fence/v1/route?path=" + urllib.parse.quote(
            key_path(b, key), safe=""), headers={
                "Authorization": "Bearer " + ALICE_BEARER})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["lock"], "rw-media/u1", r.json)

    def test_a_keys_own_store_credentials_sign_its_requests(self):
        self.store.rgw.add_user("bob", BOB_STORE_KEY, BOB_STORE_SECRET)
        b = "rw-" + self.bucket()
        seq = self.sequencer(b)
        r = self.s3("PUT", "/" + b, token=seq, key=BOB_KEY, secret=BOB_SECRET)
        self.assertEqual(r.status, 200, r)
        r = self.s3("PUT", "/%s/o" % b, body=b"bob's", token=seq,
                    key=BOB_KEY, secret=BOB_SECRET)
        self.assertEqual(r.status, 200, r)
        stats = json.loads(self.store.rgw.admin("bucket", "stats",
                                                "--bucket", b))
        self.assertEqual(stats.get("owner"), "bob", stats)
        # the gateway's own store user may not read bob's object
        st, _ = self.store_get(b, "o")
        self.assertEqual(st, 403)
        # through the gateway with alice's usual key: signed as the
        # gateway's user, so the store's rights apply
        r = self.s3("GET", "/%s/o" % b)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.s3_error(r), "AccessDenied", r)
        r = self.s3("GET", "/%s/o" % b, key=BOB_KEY, secret=BOB_SECRET)
        self.assertEqual((r.status, r.body), (200, b"bob's"), r)

    def reloads(self):
        with open(self.gw.logpath) as f:
            return len(re.findall(r"s3-credentials \S+ reloaded: ", f.read()))

    def test_sighup_reads_s3_credentials_again(self):
        rw = self.named("rw")
        self.store_put(rw, "k", b"v")
        r = self.s3("GET", "/%s/k" % rw, key=NEW_KEY, secret=NEW_SECRET)
        self.assertFenceError(r, 403, "InvalidAccessKeyId")
        r = self.s3("GET", "/%s/k" % rw, key=OLD_KEY, secret=OLD_SECRET)
        self.assertEqual(r.status, 200, r)
        n0 = self.reloads()
        with open(self.creds_path, "w") as f:
            f.write(creds_text("%s %s alice" % (NEW_KEY, NEW_SECRET),
                               self.bob_line))
        os.chmod(self.creds_path, 0o600)
        self.gw.proc.send_signal(signal.SIGHUP)
        self.wait_for(lambda: self.reloads() > n0, slack(10.0),
                      "s3-credentials reloaded")
        r = self.s3("GET", "/%s/k" % rw, key=NEW_KEY, secret=NEW_SECRET)
        self.assertEqual((r.status, r.body), (200, b"v"), r)
        seq = self.sequencer(rw)
        r = self.s3("PUT", "/%s/k" % rw, body=b"new key", token=seq,
                    key=NEW_KEY, secret=NEW_SECRET)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(rw, "k"), (200, b"new key"))
        r = self.s3("GET", "/%s/k" % rw, key=OLD_KEY, secret=OLD_SECRET)
        self.assertFenceError(r, 403, "InvalidAccessKeyId")
        r = self.s3("PUT", "/%s/k" % rw, body=b"old key", token=seq,
                    key=OLD_KEY, secret=OLD_SECRET)
        self.assertFenceError(r, 403, "InvalidAccessKeyId")
        self.assertEqual(self.store_get(rw, "k"), (200, b"new key"))
        # the secret is in no log line
        with open(self.gw.logpath) as f:
            log = f.read()
        for s in (NEW_SECRET, OLD_SECRET, s3env.CLIENT_SECRET, GHOST_SECRET):
            self.assertNotIn(s, log)


class S3CommandLineTests(TestCase):
    """The S3 rows of the command line; no store is started."""

    axes = ("build",)
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(dir=harness.tmp_root())

    def run_gw(self, *argv, timeout=30):
        r = subprocess.run([Gateway.executable()] + list(argv),
                           capture_output=True, timeout=slack(timeout))
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def config(self, routes=(), creds_mode=0o600, name="c"):
        creds = os.path.join(self.dir, name + "-s3creds")
        with open(creds, "w") as f:
            f.write("%s %s alice\n" % (s3env.CLIENT_KEY, s3env.CLIENT_SECRET))
        os.chmod(creds, creds_mode)
        store = os.path.join(self.dir, name + "-store")
        with open(store, "w") as f:
            f.write("%s\n%s\n" % (s3env.STORE_KEY, s3env.STORE_SECRET))
        os.chmod(store, 0o600)
        conf = os.path.join(self.dir, name + ".conf")
        with open(conf, "w") as f:
            f.write("listen 127.0.0.1:%d\nredis 127.0.0.1:1\n"
                    "upstream http://127.0.0.1:1\nupstream-api s3\n"
                    "s3-credentials %s\nupstream-s3-credentials %s\n%s"
                    % (harness.free_port(), creds, store,
                       "".join("route %s\n" % r for r in routes)))
        return conf

    def test_new_s3_key_prints_a_fresh_line(self):
        lines = set()
        for _ in range(2):
            rc, out, err = self.run_gw("--new-s3-key", "alice.ops-1@x_y")
            self.assertEqual(rc, 0, err)
            self.assertRegex(out, r"\A[A-Z0-9]{20} [A-Za-z0-9/+]{40} "
                                  r"alice\.ops-1@x_y\n\Z")
            lines.add(out)
        self.assertEqual(len(lines), 2)
        for bad in ("bad name", "", "a/b", "x" * 300, "caf\u00e9", "#c"):
            with self.subTest(name=bad):
                rc, out, err = self.run_gw("--new-s3-key", bad)
                self.assertEqual(rc, 2, out + err)
                self.assertEqual(out, "")
        rc, out, err = self.run_gw("--new-s3-key")
        self.assertEqual(rc, 2, out + err)
        rc, out, err = self.run_gw("--new-s3-key", "a", "b")
        self.assertEqual(rc, 2, out + err)

    def test_an_s3_credentials_file_others_may_read_is_exit_2(self):
        rc, out, err = self.run_gw("--check-config", "--config",
                                   self.config())
        self.assertEqual(rc, 0, out + err)
        for mode in (0o640, 0o604, 0o644):
            with self.subTest(mode=oct(mode)):
                conf = self.config(creds_mode=mode, name="m%o" % mode)
                rc, out, err = self.run_gw("--check-config", "--config", conf)
                self.assertEqual(rc, 2, out + err)
                self.assertIn("s3-credentials", err)
                self.assertNotIn(s3env.CLIENT_SECRET, out + err)
                rc, out, err = self.run_gw("--config", conf)
                self.assertEqual(rc, 2, out + err)
                self.assertIn("s3-credentials", err)
                self.assertNotIn(s3env.CLIENT_SECRET, out + err)

    def test_route_test_with_an_s3_config(self):
        b = "bkt"
        rc, out, err = self.run_gw(
            "--check-config", "--config", self.config(),
            "--route-test", "/bkt/dir/k", "--route-test", "/bkt/a%20b",
            "--route-test", "/bkt/x/../y")
        self.assertEqual(rc, 0, out + err)
        lines = out.splitlines()
        self.assertIn("/bkt/dir/k -> lock bkt/dir/k (default)", lines)
        self.assertIn("/bkt/a%%20b -> lock %s (default)" % hashed_lock(b, "a b"),
                      lines)
        self.assertIn("/bkt/x/../y -> lock %s (default)"
                      % hashed_lock(b, "x/../y"), lines)
        rc, out, err = self.run_gw(
            "--check-config", "--config", self.config(
                routes=("/{bucket}/ {bucket}",
                        "/media/{user}/ media/{user}"), name="r"),
            "--route-test", "/bkt/a%20b", "--route-test", "/media/u1/p.png")
        self.assertEqual(rc, 0, out + err)
        lines = out.splitlines()
        self.assertIn("/bkt/a%20b -> lock bkt (rule /{bucket}/ {bucket})",
                      lines)
        self.assertIn("/media/u1/p.png -> lock media/u1 (rule /media/{user}/ "
                      "media/{user})", lines)
        # a capture that makes no valid lock name
        rc, out, err = self.run_gw(
            "--check-config", "--config", self.config(
                routes=("/media/{user}/ media/{user}",), name="bad"),
            "--route-test", "/media/a%20b/p.png")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("bad_lock_name", out + err)
