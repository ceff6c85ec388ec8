"""test_s3_clients.py - the four real, unmodified S3 clients (aws cli,
boto3, s3cmd, rclone's s3 backend; tests/integration/s3clients.py) through
fencegate in S3 mode in front of a real radosgw, each run as a user runs
it: under `fencectl lock NAME --s3 -- CLIENT ...`, which takes the lock
from the gateway's lock API and hands the client the sequencer as
AWS_SESSION_TOKEN.

Every client here gets its keys from the environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY) and its session token from AWS_SESSION_TOKEN, the
variable fencectl sets, with nothing of either in its config file: aws cli
and boto3 read the three by default, s3cmd when its config's access_key is
empty, rclone with `env_auth = true` and no keys in its config
(docs/clients.md, "S3 clients through fencegate", shows each config).

Each scenario (put, copy, multipart, delete, delete-many, sync of 300
files) is checked against what the store holds afterwards, read straight
from radosgw with the gateway's own store key, never through the client
under test, and against what the store was sent (radosgw's access log)
and what the gateway decided (its access log).

Locks:
- S3ClientsBucketLockTests: `route /{bucket}/ {bucket}`; every scenario of
  a client runs under `fencectl lock BUCKET --s3`, the one lock that
  guards every key of the bucket (and the bucket itself).
- S3ClientsKeyLockTests: no route; a key's lock is `BUCKET/KEY`, and a put
  runs under `fencectl lock BUCKET/KEY --s3`.

Refusals: a client run with a stale session token (its lock taken again
by another holder since fencectl gave it out) is refused with 409
FenceStaleToken, one run with none with 428 FenceTokenRequired; either
exits non-zero, the store is sent no write and holds what it held.

What the clients send, as the tests pin it down:
- aws cli's `s3 sync --delete` deletes with one DeleteObject per key, never
  a DeleteObjects; `s3api delete-objects` sends one DeleteObjects.
- s3cmd's `cp` reads the source's ACL (GET ?acl) and, after the
  CopyObject, sets it on the copy (PUT ?acl): an object-metadata write of
  the copy's key, fenced by the same lock.
- rclone has no batch delete (a DeleteObject per key, sync included), and
  by default (no `no_check_bucket`) sends a CreateBucket (PUT /BUCKET)
  before its first upload: a whole-bucket write, which needs a route lock
  guarding the bucket, so under a per-key lock it is refused.
"""

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import xml.etree.ElementTree as ET

import harness
import matrix
import s3clients
import s3env
from harness import slack, wait_until
from test_fencectl import fencectl_exe

BIG_BYTES = 12 << 20            # three parts of s3clients.PART_BYTES
TREE_FILES = 300
CLIENTS = ("awscli", "boto3", "s3cmd", "rclone")
WRITES = ("PUT", "POST", "DELETE")

# how each client deletes what a sync removes: (method, first query name)
SYNC_DELETES = {
    "awscli": ("DELETE", ""),       # `aws s3 sync --delete`: never a batch
    "boto3": ("POST", "delete"),    # the runner's own delete_objects
    "s3cmd": ("POST", "delete"),    # sync --delete-removed batches
    "rclone": ("DELETE", ""),       # no batch delete in rclone's s3 backend
}

# the writes the store is sent for a copy within the bucket, after the
# client's reads: (method, first query name)
COPY_WRITES = {
    "awscli": [("PUT", "")],
    "boto3": [("PUT", "")],
    # s3cmd cp copies, then sets the copy's ACL to the source's (it reads
    # that first: a GET ?acl)
    "s3cmd": [("PUT", ""), ("PUT", "acl")],
    "rclone": [("PUT", "")],
}

# the runner's boto3 session, given keys and token; here the default
# credential chain (the environment) gives them
BOTO3_ENV_SCRIPT_FROM = ('aws_access_key_id=a["key"], '
                         'aws_secret_access_key=a["secret"],\n'
                         '    aws_session_token=a["token"], '
                         'region_name=a["region"]')


# ---------------------------------------------------------------------------
# the clients, configured to take keys and session token from the
# environment, their commands run under fencectl

class Fenced:
    """Mixed into a runner: with `lock` set (a name, or a tuple of names
    for nested locks, outermost first), every command runs as
    `fencectl lock NAME --s3 -- CMD`; the access key and secret are in the
    environment, and the session token is fencectl's AWS_SESSION_TOKEN, or
    `token` when one is given (the runner's own, for a token kept from an
    earlier run)."""

    lock = None
    gateway_url = None

    def run(self, what, argv, env_extra=None, timeout=None):
        locks = (self.lock,) if isinstance(self.lock, str) else \
            tuple(self.lock or ())
        pre = []
        for name in locks:
            pre += [fencectl_exe(), "lock", name, "--s3", "--ttl", "60s",
                    "--"]
        return super().run(what, pre + list(argv), env_extra, timeout)

    def env(self):
        env = super().env()
        env.update(AWS_ACCESS_KEY_ID=self.access_key,
                   AWS_SECRET_ACCESS_KEY=self.secret,
                   FENCEGATE_URL=self.gateway_url)
        env.pop("AWS_SESSION_TOKEN", None)
        if self.token:
            env["AWS_SESSION_TOKEN"] = self.token
        return env


class AwsCli(Fenced, s3clients.AwsCli):
    # reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
    pass


class Boto3(Fenced, s3clients.Boto3):
    """boto3.session.Session(region_name=...): the default credential
    chain, whose first link is the environment (the session token
    included)."""

    def write_config(self):
        script = s3clients.BOTO3_SCRIPT.replace(BOTO3_ENV_SCRIPT_FROM,
                                                'region_name=a["region"]')
        assert script != s3clients.BOTO3_SCRIPT, "the boto3 script changed"
        # py() runs this file when it is there
        with open(os.path.join(self.dir, "boto3_op.py"), "w") as f:
            f.write(script)


class S3cmd(Fenced, s3clients.S3cmd):
    """access_key, secret_key and access_token empty in the config: s3cmd
    then reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
    AWS_SESSION_TOKEN."""

    def write_config(self):
        super().write_config()
        with open(self.config) as f:
            lines = f.read().split("\n")
        out = [l.split(" = ")[0] + " = " if l.split(" = ")[0] in (
            "access_key", "secret_key", "access_token") else l for l in lines]
        with open(self.config, "w") as f:
            f.write("\n".join(out))


class Rclone(Fenced, s3clients.Rclone):
    """env_auth = true and no keys in the config: rclone's AWS SDK reads
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN."""

    def write_config(self):
        super().write_config()
        with open(self.config) as f:
            lines = f.read().split("\n")
        out = []
        for l in lines:
            k = l.split(" = ")[0]
            if k in ("access_key_id", "secret_access_key", "session_token"):
                continue
            out.append("env_auth = true" if k == "env_auth" else l)
        with open(self.config, "w") as f:
            f.write("\n".join(out))


RUNNERS = {"awscli": AwsCli, "boto3": Boto3, "s3cmd": S3cmd,
           "rclone": Rclone}


# ---------------------------------------------------------------------------
# the shared part of both classes

class ClientsCase(s3env.S3Case):
    # one test runs a real client through a scenario (a sync of 300 files,
    # a 12 MiB multipart upload): a minute or more on a loaded machine
    test_timeout = 300.0

    access_log = None
    work = None

    @classmethod
    def s3_config_lines(cls):
        cls.access_log = s3env.owner_only_file("", "access-")
        return super().s3_config_lines() + [
            "access-log " + cls.access_log, "access-log-format json"]

    def setUp(self):
        super().setUp()
        self.log_paths.append(self.access_log)
        cls = type(self)
        if cls.work is None or not os.path.isdir(cls.work):
            cls.work = os.path.join(self.store.rgw.dir, "work")
            os.makedirs(cls.work, exist_ok=True)

    def bucket(self, tag=""):
        """A bucket of this test's own: S3Case.bucket()'s counter starts
        again with each test, and the class's store is shared, so the
        test's name goes in too."""
        self._counter += 1
        name = self._testMethodName[len("test_"):].replace("_", "-")
        return ("t%s-%s%s" % (harness._RUN_TAG, name[:28],
                              self._counter)).lower()[:40]

    # -- the clients ---------------------------------------------------

    def client(self, name, lock=None, token=None, **kw):
        url = "http://127.0.0.1:%d" % self.gw.port
        c = RUNNERS[name](url, s3env.CLIENT_KEY, s3env.CLIENT_SECRET,
                          token=token, workdir=self.work, **kw)
        c.gateway_url = url
        c.lock = lock
        return c

    def files(self):
        small = os.path.join(self.work, "small.txt")
        big = os.path.join(self.work, "big.bin")
        if not os.path.exists(big):
            with open(small, "wb") as f:
                f.write(b"hello, object store\n")
            with open(big + ".tmp", "wb") as f:
                f.write(os.urandom(BIG_BYTES))
            os.rename(big + ".tmp", big)
        return small, big

    def tree(self, name):
        root = os.path.join(self.work, "tree-" + name)
        shutil.rmtree(root, ignore_errors=True)
        for i in range(TREE_FILES):
            d = os.path.join(root, "d%d" % (i % 10))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%d.txt" % i), "w") as f:
                f.write("file %d\n" % i)
        return root

    # -- the store, read straight ----------------------------------------

    def stored_keys(self, bucket, prefix=""):
        keys, token = [], None
        while True:
            q = "list-type=2&prefix=" + urllib.parse.quote(prefix, safe="")
            if token:
                q += "&continuation-token=" + urllib.parse.quote(token, safe="")
            r = self.store_s3("GET", "/%s?%s" % (bucket, q))
            self.assertEqual(r.status, 200, r)
            x = ET.fromstring(r.body)
            keys += [e.text for e in x.iter(s3env.S3_NS + "Key")]
            token = x.findtext(s3env.S3_NS + "NextContinuationToken")
            if x.findtext(s3env.S3_NS + "IsTruncated") != "true":
                return sorted(keys)

    def snapshot(self, bucket):
        """Every key the store holds in bucket, with its body's SHA-256."""
        out = {}
        for k in self.stored_keys(bucket):
            st, body = self.store_get(bucket, k)
            self.assertEqual(st, 200, (k, body[:300]))
            out[k] = hashlib.sha256(body).hexdigest()
        return out

    def store_put(self, bucket, key, body):
        r = self.store_s3("PUT", "/%s/%s" % (bucket, urllib.parse.quote(key)),
                          body=body)
        self.assertEqual(r.status, 200, r)

    def stored(self, bucket, key):
        st, body = self.store_get(bucket, key)
        self.assertEqual(st, 200, "GET %s/%s: %r" % (bucket, key, body[:300]))
        return body

    # -- what the store was sent, what the gateway decided ----------------

    def mark(self):
        """Where the store's and the gateway's logs are now (radosgw logs
        a request after its answer: requests_after() waits for the lines
        of every request answered so far)."""
        self.store.rgw.requests_after(0)
        return (len(self.store.rgw.requests()),
                os.path.getsize(self.access_log))

    def store_writes(self, since):
        """The writes radosgw answered since mark(): (method, path, first
        query name, status)."""
        out = []
        for m, target, status, _ in self.store.rgw.requests_after(since[0]):
            if m not in WRITES:
                continue
            u = urllib.parse.urlsplit(target)
            q = u.query.split("&")[0].split("=")[0] if u.query else ""
            out.append((m, urllib.parse.unquote(u.path), q, status))
        return out

    def gateway_lines(self, since, pred=None, what="a line"):
        """The gateway's access-log lines since mark(); with pred, waits
        (bounded) until one line satisfies it: a request's line is written
        once it completes, which may be just after its answer went out."""
        def read():
            with open(self.access_log, "rb") as f:
                f.seek(since[1])
                data = f.read().decode("utf-8", "replace")
            return [json.loads(l) for l in data.splitlines() if l.strip()]
        if pred is None:
            return read()
        got = wait_until(lambda: (lambda ls: ls if any(pred(l) for l in ls)
                                  else None)(read()), slack(10))
        self.assertTrue(got, "the gateway's access log has no %s: %r"
                        % (what, read()))
        return got

    def assert_admitted(self, since, lock, n_writes):
        """Every write the gateway saw since mark() went upstream under
        `lock`, and there were n_writes of them (None: any, at least one)."""
        lines = self.gateway_lines(
            since, lambda l: l.get("endpoint") == "proxy_write",
            "proxied write")
        writes = [l for l in lines if l.get("endpoint") == "proxy_write"]
        for l in writes:
            self.assertEqual((l.get("decision"), l.get("lock")),
                             ("admitted", lock), l)
        if n_writes is not None:
            self.assertEqual(len(writes), n_writes, writes)
        return writes

    def assert_refused(self, res, since, status, error, code, before,
                       bucket):
        """The client's run failed, the gateway refused its write(s) with
        status/error (the S3 code `code`), the store was sent no write at
        all and holds what it held."""
        self.assertNotEqual(res.rc, 0, res)
        lines = self.gateway_lines(
            since, lambda l: l.get("endpoint") == "proxy_write",
            "refused write")
        writes = [l for l in lines if l.get("endpoint") == "proxy_write"]
        for l in writes:
            self.assertEqual((l.get("status"), l.get("error"),
                              l.get("upstream_status")),
                             (status, error, None), l)
        self.assertIn(code, res.stdout + res.stderr, res)
        said = [l.strip() for l in (res.stdout + res.stderr).splitlines()
                if code in l]
        print("\n%s %s: exit %s; %s" % (res.client, res.what, res.rc,
                                         said[0][:200]))
        self.assertEqual(self.store_writes(since), [])
        self.assertEqual(self.snapshot(bucket), before)
        return writes

    def fencectl_token(self, lock):
        """The session token `fencectl lock LOCK --s3` gives its command
        (the lock is released when the command ends)."""
        env = {"PATH": "/usr/bin:/bin",
               "FENCEGATE_URL": "http://127.0.0.1:%d" % self.gw.port}
        p = subprocess.run([fencectl_exe(), "lock", lock, "--s3", "--",
                            "sh", "-c", 'printf %s "$AWS_SESSION_TOKEN"'],
                           capture_output=True, env=env, timeout=slack(30),
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p)
        tok = p.stdout.decode()
        self.assertTrue(tok.startswith("fg1."), p)
        return tok


# ---------------------------------------------------------------------------
# one lock per bucket

@matrix.pin("the S3 clients' requests do not change with the Redis kind",
            redis="single")
class S3ClientsBucketLockTests(ClientsCase):
    """`route /{bucket}/ {bucket}`: lock BUCKET guards every key of the
    bucket and the bucket itself; every scenario runs its client under
    `fencectl lock BUCKET --s3`."""

    routes = ("/{bucket}/ {bucket}",)

    def do_put(self, name):
        # lock: the bucket's
        b = self.make_bucket()
        small, _ = self.files()
        c = self.client(name, lock=b)
        m = self.mark()
        c.put(b, "a/one.txt", small).check()
        self.assertEqual(self.stored(b, "a/one.txt"), open(small, "rb").read())
        self.assertEqual(self.stored_keys(b), ["a/one.txt"])
        self.assertEqual(self.store_writes(m),
                         [("PUT", "/%s/a/one.txt" % b, "", 200)])
        self.assert_admitted(m, b, 1)

    def do_copy(self, name):
        # lock: the bucket's (the source is read, the copy written)
        b = self.make_bucket()
        self.store_put(b, "src.txt", b"copy me\n")
        c = self.client(name, lock=b)
        m = self.mark()
        c.copy(b, "src.txt", "dst.txt").check()
        self.assertEqual(self.stored(b, "dst.txt"), b"copy me\n")
        self.assertEqual(self.stored(b, "src.txt"), b"copy me\n")
        self.assertEqual(self.stored_keys(b), ["dst.txt", "src.txt"])
        writes = self.store_writes(m)
        self.assertEqual([(w[0], w[2]) for w in writes], COPY_WRITES[name],
                         writes)
        self.assertEqual(set(w[1] for w in writes), {"/%s/dst.txt" % b},
                         writes)
        self.assert_admitted(m, b, len(COPY_WRITES[name]))

    def do_multipart(self, name):
        # lock: the bucket's, held from CreateMultipartUpload to Complete
        b = self.make_bucket()
        _, big = self.files()
        with open(big, "rb") as f:
            big_sha = hashlib.sha256(f.read()).hexdigest()
        c = self.client(name, lock=b)
        m = self.mark()
        c.multipart(b, "big.bin", big).check()
        self.assertEqual(hashlib.sha256(self.stored(b, "big.bin")).hexdigest(),
                         big_sha)
        self.assertEqual(self.stored_keys(b), ["big.bin"])
        writes = self.store_writes(m)
        # a part's query is partNumber&uploadId or uploadId&partNumber
        mp = [(w[0], "part" if w[0] == "PUT" else w[2]) for w in writes]
        self.assertEqual(
            mp, [("POST", "uploads")] + [("PUT", "part")] * 3
            + [("POST", "uploadId")],
            "%s: %d bytes in three %d-byte parts: %r"
            % (name, BIG_BYTES, s3clients.PART_BYTES, writes))
        self.assert_admitted(m, b, 5)

    def do_delete(self, name):
        # lock: the bucket's
        b = self.make_bucket()
        self.store_put(b, "gone.txt", b"x")
        self.store_put(b, "kept.txt", b"y")
        c = self.client(name, lock=b)
        m = self.mark()
        c.delete(b, "gone.txt").check()
        self.assertEqual(self.stored_keys(b), ["kept.txt"])
        self.assertEqual(self.store_writes(m),
                         [("DELETE", "/%s/gone.txt" % b, "", 204)])
        self.assert_admitted(m, b, 1)

    def do_delete_many(self, name):
        # lock: the bucket's; one DeleteObjects where the client sends one
        b = self.make_bucket()
        many = ["many/k%d" % i for i in range(4)]
        for k in many + ["kept.txt"]:
            self.store_put(b, k, b"z")
        c = self.client(name, lock=b)
        m = self.mark()
        c.delete_many(b, many).check()
        self.assertEqual(self.stored_keys(b), ["kept.txt"])
        writes = [(w[0], w[2]) for w in self.store_writes(m)]
        if s3clients.MULTI_DELETE[name]:
            self.assertEqual(writes, [("POST", "delete")])
        else:
            self.assertEqual(writes, [("DELETE", "")] * len(many))
        self.assert_admitted(m, b, len(writes))

    def do_sync(self, name):
        # lock: the bucket's, held for the whole sync
        b = self.make_bucket()
        src = self.tree(name)
        c = self.client(name, lock=b)
        m = self.mark()
        t0 = time.monotonic()
        c.sync(b, "t/", src).check()
        secs = time.monotonic() - t0
        want = sorted("t/" + k for k in s3clients.tree_files(src))
        self.assertEqual(len(want), TREE_FILES)
        self.assertEqual(self.stored_keys(b), want)
        self.assert_admitted(m, b, None)
        # a second sync deletes what went and adds what came
        for i in range(5):
            os.remove(os.path.join(src, "d%d" % i, "f%d.txt" % i))
        with open(os.path.join(src, "d1", "new.txt"), "w") as f:
            f.write("new\n")
        m = self.mark()
        c.sync(b, "t/", src).check()
        want = sorted("t/" + k for k in s3clients.tree_files(src))
        self.assertEqual(self.stored_keys(b), want)
        self.assertEqual(self.stored(b, "t/d1/new.txt"), b"new\n")
        writes = self.store_writes(m)
        deletes = [(w[0], w[2]) for w in writes if w[0] in ("POST", "DELETE")]
        self.assertEqual(sorted(set(deletes)), [SYNC_DELETES[name]], writes)
        if SYNC_DELETES[name] == ("DELETE", ""):
            self.assertEqual(len(deletes), 5, writes)
        self.assert_admitted(m, b, None)
        print("\n%s: sync of %d files through the gateway %.1f s"
              % (name, TREE_FILES, secs))
        shutil.rmtree(src)

    def do_stale_sequencer(self, name):
        """A session token fencectl gave out for lock BUCKET, the lock
        since taken by another holder: refused, nothing reaches the
        store."""
        b = self.make_bucket()
        self.store_put(b, "k.txt", b"old\n")
        for k in ("many/k0", "many/k1"):
            self.store_put(b, k, b"z")
        old = self.fencectl_token(b)
        other = self.acquire_ok(b, ttl_ms=60000)
        try:
            before = self.snapshot(b)
            new = os.path.join(self.work, "new-%s.txt" % name)
            with open(new, "w") as f:
                f.write("new\n")
            c = self.client(name, token=old)
            m = self.mark()
            res = c.put(b, "k.txt", new)
            lines = self.assert_refused(res, m, 409, "stale_token",
                                        "FenceStaleToken", before, b)
            for l in lines:
                self.assertEqual((l["lock"], l["current"]),
                                 (b, other["token"]), l)
                self.assertLess(l["token"], l["current"], l)
            m = self.mark()
            res = c.delete_many(b, ["many/k0", "many/k1"])
            self.assert_refused(res, m, 409, "stale_token",
                                "FenceStaleToken", before, b)
        finally:
            self.release_ok(b, other["lease"])

    def do_no_sequencer(self, name):
        """No session token at all: 428, nothing reaches the store."""
        b = self.make_bucket()
        self.store_put(b, "k.txt", b"old\n")
        small, _ = self.files()
        before = self.snapshot(b)
        c = self.client(name)
        m = self.mark()
        res = c.put(b, "k.txt", small)
        self.assert_refused(res, m, 428, "token_required",
                            "FenceTokenRequired", before, b)
        m = self.mark()
        res = c.put(b, "new.txt", small)
        self.assert_refused(res, m, 428, "token_required",
                            "FenceTokenRequired", before, b)

    def test_rclone_create_bucket_by_default_is_fenced_by_the_bucket_lock(self):
        """rclone without no_check_bucket: a CreateBucket (PUT /BUCKET)
        before the upload, a whole-bucket write admitted under the route's
        bucket lock."""
        b = self.make_bucket()
        small, _ = self.files()
        c = self.client("rclone", lock=b, check_bucket=True)
        m = self.mark()
        c.put(b, "k.txt", small).check()
        self.assertEqual(self.stored_keys(b), ["k.txt"])
        writes = [(w[0], w[1], w[2]) for w in self.store_writes(m)]
        self.assertEqual(writes, [("PUT", "/" + b, ""),
                                  ("PUT", "/%s/k.txt" % b, "")])
        self.assert_admitted(m, b, 2)


# ---------------------------------------------------------------------------
# a lock per key

@matrix.pin("the S3 clients' requests do not change with the Redis kind",
            redis="single")
class S3ClientsKeyLockTests(ClientsCase):
    """No route: the lock of key KEY of bucket BUCKET is `BUCKET/KEY`."""

    def do_put_per_key_lock(self, name):
        # lock: BUCKET/a.txt, for the put of a.txt; the same lock does not
        # cover another key
        b = self.make_bucket()
        small, _ = self.files()
        c = self.client(name, lock=b + "/a.txt")
        m = self.mark()
        c.put(b, "a.txt", small).check()
        self.assertEqual(self.stored(b, "a.txt"), open(small, "rb").read())
        self.assertEqual(self.stored_keys(b), ["a.txt"])
        self.assertEqual(self.store_writes(m), [("PUT", "/%s/a.txt" % b, "",
                                                 200)])
        self.assert_admitted(m, b + "/a.txt", 1)
        before = self.snapshot(b)
        m = self.mark()
        res = c.put(b, "b.txt", small)
        self.assert_refused(res, m, 403, "wrong_lock", "FenceWrongLock",
                            before, b)

    def test_awscli_delete_objects_under_nested_key_locks(self):
        """One DeleteObjects of two keys, each guarded by its own lock:
        `fencectl lock B/k1 --s3 -- fencectl lock B/k2 --s3 -- aws s3api
        delete-objects ...` (the session token carries both sequencers)."""
        b = self.make_bucket()
        for k in ("k1", "k2", "k3"):
            self.store_put(b, k, b"z")
        c = self.client("awscli", lock=(b + "/k1", b + "/k2"))
        m = self.mark()
        c.delete_many(b, ["k1", "k2"]).check()
        self.assertEqual(self.stored_keys(b), ["k3"])
        self.assertEqual([(w[0], w[2]) for w in self.store_writes(m)],
                         [("POST", "delete")])
        lines = self.assert_admitted(m, b + "/k1", 1)
        self.assertEqual(lines[0].get("lock2"), b + "/k2", lines)
        # one lock only: the other key's is missing
        before = self.snapshot(b)
        self.store_put(b, "k4", b"z")
        before = self.snapshot(b)
        c = self.client("awscli", lock=b + "/k3")
        m = self.mark()
        res = c.delete_many(b, ["k3", "k4"])
        self.assert_refused(res, m, 403, "wrong_lock", "FenceWrongLock",
                            before, b)

    def test_rclone_create_bucket_by_default_needs_a_bucket_lock(self):
        """rclone without no_check_bucket, under a per-key lock: its
        CreateBucket is a whole-bucket write no route guards, refused with
        403 FenceSubtreeUnguarded."""
        b = self.make_bucket()
        small, _ = self.files()
        c = self.client("rclone", lock=b + "/k.txt", check_bucket=True)
        m = self.mark()
        res = c.put(b, "k.txt", small)
        lines = self.gateway_lines(
            m, lambda l: l.get("endpoint") == "proxy_write", "write")
        create = [l for l in lines if l.get("path") == "/" + b]
        self.assertTrue(create, lines)
        self.assertEqual((create[0]["status"], create[0]["error"]),
                         (403, "subtree_unguarded"), create)
        # rclone gives up the upload: nothing was written
        self.assertNotEqual(res.rc, 0, res)
        self.assertIn("FenceSubtreeUnguarded", res.stdout + res.stderr, res)
        self.assertEqual(self.store_writes(m), [])
        self.assertEqual(self.stored_keys(b), [])


def _add_tests(cls, scenarios, clients=CLIENTS):
    for name in clients:
        for sc in scenarios:
            def t(self, name=name, sc=sc):
                getattr(self, "do_" + sc)(name)
            t.__name__ = "test_%s_%s" % (name, sc)
            t.__doc__ = getattr(cls, "do_" + sc).__doc__
            setattr(cls, t.__name__, t)


# The bucket-lock scenarios, one class per client: each class is one job
# of the runner, with a radosgw of its own, so the four clients' minutes
# run side by side instead of one after another.
BUCKET_SCENARIOS = ("put", "copy", "multipart", "delete", "delete_many",
                    "sync", "stale_sequencer", "no_sequencer")
for _name in CLIENTS:
    _cls = type("S3ClientsBucketLock%sTests" % _name.capitalize(),
                (S3ClientsBucketLockTests,),
                {"__doc__": "%s: %s" % (_name, S3ClientsBucketLockTests.__doc__),
                 "__module__": __name__})
    # the base class's own tests run in the base class only
    for _attr in list(vars(S3ClientsBucketLockTests)):
        if _attr.startswith("test_"):
            setattr(_cls, _attr, None)
    _add_tests(_cls, BUCKET_SCENARIOS, (_name,))
    globals()[_cls.__name__] = _cls
del _name, _cls
_add_tests(S3ClientsKeyLockTests, ("put_per_key_lock",))
