"""s3clients.py - the four real, unmodified S3 clients, driven as
subprocesses: Debian's aws cli (/usr/bin/aws), Debian's boto3 (run by
/usr/bin/python3), s3cmd, and rclone's s3 backend.

Each runner is pointed at one endpoint URL with an access key, a secret
and an optional session token, and addresses buckets path-style in region
us-east-1. Every run gets a private HOME and the client's own config file
in a temp directory of its own: nothing of the user's ~/.aws, ~/.s3cfg or
rclone.conf is read, and no environment variable of the caller's
(AWS_*, RCLONE_*) leaks in. Multipart starts at 5 MiB (radosgw's least
part size) with 5 MiB parts, so a file of 12 MiB goes up in three parts.

The scenarios, one method each on every runner (all return a Result):

    mb(bucket)                       create a bucket
    put(bucket, key, path)           upload one file
    get(bucket, key, path)           download one object
    copy(bucket, src, dst)           copy an object within the store
    multipart(bucket, key, path)     upload a file larger than a part
    delete(bucket, key)              delete one object
    delete_many(bucket, keys)        delete several keys (one
                                     DeleteObjects request where the
                                     client can send one; see MULTI_DELETE)
    sync(bucket, prefix, dir)        make bucket/prefix/ hold dir's tree
                                     (uploads, and deletes what dir lacks)
    ls(bucket, prefix="")            Result whose .keys lists the keys

A Result has the command, exit code, stdout and stderr; .check() raises
an AssertionError naming all four when the exit code is not 0.

Also here: sigv4_headers(), a SigV4 signer of one request (the standard
library only), so a test can send exactly the request it means.

Invariant: a runner never reads or writes outside its work directory,
except the files it is handed.
"""

import datetime
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import urllib.parse

import harness
from harness import SetupError, slack

REGION = "us-east-1"
PART_BYTES = 5 << 20            # radosgw's least part size (but the last)

AWS_CLI = "/usr/bin/aws"          # Debian's, not one earlier on PATH
DEBIAN_PYTHON = "/usr/bin/python3"  # the interpreter Debian's boto3 is for

# which of delete_many's runners send one DeleteObjects request for the
# keys, rather than a DeleteObject each
MULTI_DELETE = {"awscli": True, "boto3": True, "s3cmd": True,
                "rclone": False}


class Result:
    def __init__(self, client, what, argv, rc, stdout, stderr):
        self.client = client
        self.what = what
        self.argv = argv
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.keys = None        # ls(): the keys listed

    @property
    def ok(self):
        return self.rc == 0

    def check(self):
        if self.rc != 0:
            raise AssertionError(str(self))
        return self

    def __str__(self):
        return ("%s %s: exit %s\n  command: %s\n  stdout: %s\n  stderr: %s"
                % (self.client, self.what, self.rc,
                   " ".join(self.argv),
                   _tail(self.stdout), _tail(self.stderr)))

    __repr__ = __str__


def _tail(s, n=3000):
    s = s.strip()
    if len(s) > n:
        s = "..." + s[-n:]
    return s.replace("\n", "\n    ") or "(none)"


def tree_files(root):
    """The relative paths, '/'-separated, of every file under root."""
    out = set()
    for d, _, files in os.walk(root):
        for f in files:
            out.add(os.path.relpath(os.path.join(d, f), root)
                    .replace(os.sep, "/"))
    return out


class Runner:
    """What the four runners share: credentials, a work directory, and
    running one command there with a clean environment."""

    name = None

    def __init__(self, endpoint, access_key, secret, token=None,
                 workdir=None, timeout=120.0):
        self.endpoint = endpoint.rstrip("/")
        u = urllib.parse.urlsplit(self.endpoint)
        self.hostport = u.netloc
        self.access_key = access_key
        self.secret = secret
        self.token = token
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="s3-%s-" % self.name,
                                    dir=workdir or harness.tmp_root())
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home, exist_ok=True)
        self.write_config()

    def write_config(self):
        pass

    def env(self):
        keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env["HOME"] = self.home
        env["PATH"] = "/usr/bin:/bin:/usr/sbin:/sbin"
        return env

    def run(self, what, argv, env_extra=None, timeout=None):
        env = self.env()
        env.update(env_extra or {})
        try:
            p = subprocess.run(argv, capture_output=True, env=env,
                               cwd=self.dir, stdin=subprocess.DEVNULL,
                               timeout=slack(timeout or self.timeout))
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout after %.0f s" % e.timeout, \
                e.stdout or b"", e.stderr or b""
        except OSError as e:
            raise SetupError("%s: cannot run %s: %s" % (self.name, argv[0], e))
        return Result(self.name, what, argv, rc,
                      out.decode("utf-8", "replace"),
                      err.decode("utf-8", "replace"))

    def multipart(self, bucket, key, path):
        """The client's own upload of a file; it goes multipart when the
        file is larger than PART_BYTES."""
        return self.put(bucket, key, path)


# ---------------------------------------------------------------------------
# aws cli


class AwsCli(Runner):
    name = "awscli"

    def write_config(self):
        self.config = os.path.join(self.dir, "config")
        with open(self.config, "w") as f:
            f.write(textwrap.dedent("""\
                [default]
                region = %s
                s3 =
                  addressing_style = path
                  multipart_threshold = %d
                  multipart_chunksize = %d
                """ % (REGION, PART_BYTES, PART_BYTES)))

    def env(self):
        env = super().env()
        env.update(AWS_CONFIG_FILE=self.config,
                   AWS_SHARED_CREDENTIALS_FILE=os.path.join(self.dir, "none"),
                   AWS_ACCESS_KEY_ID=self.access_key,
                   AWS_SECRET_ACCESS_KEY=self.secret,
                   AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="",
                   AWS_MAX_ATTEMPTS="1")
        if self.token:
            env["AWS_SESSION_TOKEN"] = self.token
        return env

    def aws(self, what, *args):
        if not os.access(AWS_CLI, os.X_OK):
            raise SetupError("%s not found (scripts/install-deps.sh installs "
                             "awscli)" % AWS_CLI)
        return self.run(what, [AWS_CLI, "--endpoint-url", self.endpoint,
                               "--no-cli-pager"] + list(args))

    def mb(self, bucket):
        return self.aws("mb", "s3", "mb", "s3://" + bucket)

    def put(self, bucket, key, path):
        return self.aws("put", "s3", "cp", "--only-show-errors", path,
                        "s3://%s/%s" % (bucket, key))

    def get(self, bucket, key, path):
        return self.aws("get", "s3", "cp", "--only-show-errors",
                        "s3://%s/%s" % (bucket, key), path)

    def copy(self, bucket, src, dst):
        return self.aws("copy", "s3", "cp", "--only-show-errors",
                        "s3://%s/%s" % (bucket, src),
                        "s3://%s/%s" % (bucket, dst))

    def delete(self, bucket, key):
        return self.aws("delete", "s3", "rm", "--only-show-errors",
                        "s3://%s/%s" % (bucket, key))

    def delete_many(self, bucket, keys):
        body = json.dumps({"Objects": [{"Key": k} for k in keys],
                           "Quiet": True})
        return self.aws("delete_many", "s3api", "delete-objects",
                        "--bucket", bucket, "--delete", body)

    def sync(self, bucket, prefix, src):
        return self.aws("sync", "s3", "sync", "--only-show-errors",
                        "--delete", src, "s3://%s/%s" % (bucket, prefix))

    def ls(self, bucket, prefix=""):
        r = self.aws("ls", "s3api", "list-objects-v2", "--bucket", bucket,
                     "--prefix", prefix, "--output", "json")
        if r.ok:
            out = json.loads(r.stdout) if r.stdout.strip() else {}
            r.keys = sorted(o["Key"] for o in out.get("Contents", []))
        return r


# ---------------------------------------------------------------------------
# boto3 (Debian's, in /usr/bin/python3)

BOTO3_SCRIPT = r'''
import json, os, sys
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

a = json.loads(sys.argv[1])
s3 = boto3.session.Session(
    aws_access_key_id=a["key"], aws_secret_access_key=a["secret"],
    aws_session_token=a["token"], region_name=a["region"]).client(
    "s3", endpoint_url=a["endpoint"],
    config=Config(s3={"addressing_style": "path"},
                  retries={"max_attempts": 1}))
tc = TransferConfig(multipart_threshold=a["part"], multipart_chunksize=a["part"])
op, b = a["op"], a.get("bucket")
out = {}
if op == "mb":
    s3.create_bucket(Bucket=b)
elif op == "put":
    s3.upload_file(a["path"], b, a["key_"], Config=tc)
elif op == "get":
    s3.download_file(b, a["key_"], a["path"], Config=tc)
elif op == "copy":
    s3.copy({"Bucket": b, "Key": a["src"]}, b, a["dst"], Config=tc)
elif op == "delete":
    s3.delete_object(Bucket=b, Key=a["key_"])
elif op == "delete_many":
    r = s3.delete_objects(Bucket=b, Delete={
        "Objects": [{"Key": k} for k in a["keys"]], "Quiet": True})
    if r.get("Errors"):
        sys.exit("DeleteObjects errors: %r" % r["Errors"])
elif op in ("ls", "sync"):
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=b, Prefix=a["prefix"]):
        keys += [o["Key"] for o in page.get("Contents", [])]
    if op == "ls":
        out["keys"] = sorted(keys)
    else:
        # boto3 has no sync: upload every file, then delete in batches of
        # 1000 what the tree lacks
        want = set()
        for d, _, files in os.walk(a["dir"]):
            for f in sorted(files):
                p = os.path.join(d, f)
                k = a["prefix"] + os.path.relpath(p, a["dir"]).replace(os.sep, "/")
                want.add(k)
                s3.upload_file(p, b, k, Config=tc)
        gone = sorted(set(keys) - want)
        for i in range(0, len(gone), 1000):
            s3.delete_objects(Bucket=b, Delete={
                "Objects": [{"Key": k} for k in gone[i:i + 1000]],
                "Quiet": True})
else:
    sys.exit("unknown op " + op)
print(json.dumps(out))
'''


class Boto3(Runner):
    name = "boto3"

    def env(self):
        env = super().env()
        none = os.path.join(self.dir, "none")
        env.update(AWS_CONFIG_FILE=none, AWS_SHARED_CREDENTIALS_FILE=none,
                   AWS_EC2_METADATA_DISABLED="true")
        return env

    def py(self, op, **kw):
        if not os.access(DEBIAN_PYTHON, os.X_OK):
            raise SetupError("%s not found" % DEBIAN_PYTHON)
        a = dict(op=op, key=self.access_key, secret=self.secret,
                 token=self.token, region=REGION, endpoint=self.endpoint,
                 part=PART_BYTES, **kw)
        # the script is a file, so the command a failure prints is short
        script = os.path.join(self.dir, "boto3_op.py")
        if not os.path.exists(script):
            with open(script, "w") as f:
                f.write(BOTO3_SCRIPT)
        r = self.run(op, [DEBIAN_PYTHON, "-I", script, json.dumps(a)])
        r.argv = [DEBIAN_PYTHON, script, op] + \
            ["%s=%s" % (k, v) for k, v in sorted(kw.items()) if k != "keys"]
        return r

    def mb(self, bucket):
        return self.py("mb", bucket=bucket)

    def put(self, bucket, key, path):
        return self.py("put", bucket=bucket, key_=key, path=path)

    def get(self, bucket, key, path):
        return self.py("get", bucket=bucket, key_=key, path=path)

    def copy(self, bucket, src, dst):
        return self.py("copy", bucket=bucket, src=src, dst=dst)

    def delete(self, bucket, key):
        return self.py("delete", bucket=bucket, key_=key)

    def delete_many(self, bucket, keys):
        return self.py("delete_many", bucket=bucket, keys=list(keys))

    def sync(self, bucket, prefix, src):
        return self.py("sync", bucket=bucket, prefix=prefix, dir=src)

    def ls(self, bucket, prefix=""):
        r = self.py("ls", bucket=bucket, prefix=prefix)
        if r.ok:
            r.keys = json.loads(r.stdout.strip().splitlines()[-1])["keys"]
        return r


# ---------------------------------------------------------------------------
# s3cmd


class S3cmd(Runner):
    name = "s3cmd"

    def write_config(self):
        self.config = os.path.join(self.dir, "s3cfg")
        lines = [
            "[default]",
            "access_key = " + self.access_key,
            "secret_key = " + self.secret,
            "access_token = " + (self.token or ""),
            "host_base = " + self.hostport,
            # no %(bucket)s: path-style
            "host_bucket = " + self.hostport,
            "bucket_location = " + REGION,
            "use_https = False",
            "signature_v2 = False",
            "multipart_chunk_size_mb = %d" % (PART_BYTES >> 20),
            "enable_multipart = True",
            "guess_mime_type = False",
            "progress_meter = False",
            "check_ssl_certificate = False",
            "max_retries = 1",
            "",
        ]
        with open(self.config, "w") as f:
            f.write("\n".join(lines))
        os.chmod(self.config, 0o600)

    def s3cmd(self, what, *args):
        exe = shutil.which("s3cmd", path="/usr/bin:/bin")
        if not exe:
            raise SetupError("s3cmd not found (scripts/install-deps.sh "
                             "installs it)")
        return self.run(what, [exe, "-c", self.config, "--no-progress"]
                        + list(args))

    def mb(self, bucket):
        return self.s3cmd("mb", "mb", "s3://" + bucket)

    def put(self, bucket, key, path):
        return self.s3cmd("put", "put", path, "s3://%s/%s" % (bucket, key))

    def get(self, bucket, key, path):
        return self.s3cmd("get", "get", "--force",
                          "s3://%s/%s" % (bucket, key), path)

    def copy(self, bucket, src, dst):
        return self.s3cmd("copy", "cp", "s3://%s/%s" % (bucket, src),
                          "s3://%s/%s" % (bucket, dst))

    def delete(self, bucket, key):
        return self.s3cmd("delete", "del", "s3://%s/%s" % (bucket, key))

    def delete_many(self, bucket, keys):
        """s3cmd sends one DeleteObjects only for a recursive delete (and
        sync --delete-removed): the keys must be all there is under one
        prefix, which this checks."""
        keys = sorted(keys)
        prefix = os.path.commonprefix(keys)
        prefix = prefix[:prefix.rfind("/") + 1]
        if not prefix:
            raise ValueError("s3cmd deletes many keys by prefix: %r share "
                             "no directory" % keys)
        return self.s3cmd("delete_many", "del", "--recursive", "--force",
                          "s3://%s/%s" % (bucket, prefix))

    def sync(self, bucket, prefix, src):
        return self.s3cmd("sync", "sync", "--delete-removed",
                          src.rstrip("/") + "/",
                          "s3://%s/%s" % (bucket, prefix))

    def ls(self, bucket, prefix=""):
        r = self.s3cmd("ls", "ls", "--recursive",
                       "s3://%s/%s" % (bucket, prefix))
        if r.ok:
            keys = []
            base = "s3://%s/" % bucket
            for line in r.stdout.splitlines():
                i = line.find(base)
                if i >= 0 and not line.rstrip().endswith("/"):
                    keys.append(line[i + len(base):])
            r.keys = sorted(keys)
        return r


# ---------------------------------------------------------------------------
# rclone


class Rclone(Runner):
    """rclone's s3 backend. With check_bucket (rclone's own default, off
    here) every upload is preceded by a PUT /BUCKET, a CreateBucket."""

    name = "rclone"

    def __init__(self, *args, check_bucket=False, **kw):
        self.check_bucket = check_bucket
        super().__init__(*args, **kw)

    def write_config(self):
        self.config = os.path.join(self.dir, "rclone.conf")
        lines = [
            "[s3]",
            "type = s3",
            "provider = Ceph",
            "env_auth = false",
            "access_key_id = " + self.access_key,
            "secret_access_key = " + self.secret,
            "endpoint = " + self.endpoint,
            "region = " + REGION,
            "force_path_style = true",
            "chunk_size = %dKi" % (PART_BYTES >> 10),
            "upload_cutoff = %dKi" % (PART_BYTES >> 10),
            "copy_cutoff = %dKi" % (PART_BYTES >> 10),
            # rclone's default sends a CreateBucket (PUT /BUCKET) before its
            # first upload to a bucket: a bucket write
            "no_check_bucket = %s" % ("false" if self.check_bucket else "true"),
            "",
        ]
        if self.token:
            lines.insert(5, "session_token = " + self.token)
        with open(self.config, "w") as f:
            f.write("\n".join(lines))
        os.chmod(self.config, 0o600)

    def rclone(self, what, *args):
        exe = shutil.which("rclone", path="/usr/bin:/bin")
        if not exe:
            raise SetupError("rclone not found (scripts/install-deps.sh "
                             "installs it)")
        return self.run(what, [exe, "--config", self.config,
                               "--cache-dir", os.path.join(self.dir, "cache"),
                               "--retries", "1", "--low-level-retries", "1",
                               "--stats", "0"] + list(args))

    def mb(self, bucket):
        # with no_check_bucket, mkdir creates nothing
        return self.rclone("mb", "mkdir", "--s3-no-check-bucket=false",
                           "s3:" + bucket)

    def put(self, bucket, key, path):
        return self.rclone("put", "copyto", path, "s3:%s/%s" % (bucket, key))

    def get(self, bucket, key, path):
        return self.rclone("get", "copyto", "s3:%s/%s" % (bucket, key), path)

    def copy(self, bucket, src, dst):
        return self.rclone("copy", "copyto", "s3:%s/%s" % (bucket, src),
                           "s3:%s/%s" % (bucket, dst))

    def delete(self, bucket, key):
        return self.rclone("delete", "deletefile", "s3:%s/%s" % (bucket, key))

    def delete_many(self, bucket, keys):
        """rclone's s3 backend has no batch delete: --files-from names the
        keys, and each goes in a DeleteObject of its own."""
        listing = os.path.join(self.dir, "delete-list")
        with open(listing, "w") as f:
            f.write("".join(k + "\n" for k in keys))
        return self.rclone("delete_many", "delete", "--files-from", listing,
                           "s3:" + bucket)

    def sync(self, bucket, prefix, src):
        return self.rclone("sync", "sync", src,
                           "s3:%s/%s" % (bucket, prefix.rstrip("/")))

    def ls(self, bucket, prefix=""):
        r = self.rclone("ls", "lsf", "-R", "--files-only",
                        "s3:%s/%s" % (bucket, prefix.rstrip("/")))
        if r.ok:
            base = prefix.rstrip("/")
            r.keys = sorted((base + "/" if base else "") + line
                            for line in r.stdout.splitlines() if line)
        return r


RUNNERS = (AwsCli, Boto3, S3cmd, Rclone)


# ---------------------------------------------------------------------------
# a SigV4 request by hand


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_headers(method, host, path, access_key, secret, query=(),
                  body=b"", token=None, headers=None, region=REGION,
                  now=None, payload_hash=None):
    """The headers (a dict: Host, X-Amz-Date, X-Amz-Content-Sha256,
    Authorization, X-Amz-Security-Token with a token, and `headers`, all
    signed) of a SigV4 request for `host` (host[:port]). `path` is sent as
    given and must be URI-encoded already; `query` is a list of
    (name, value)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amzdate = now.strftime("%Y%m%dT%H%M%SZ")
    day = amzdate[:8]
    h = {"host": host, "x-amz-date": amzdate,
         "x-amz-content-sha256": payload_hash or hashlib.sha256(body).hexdigest()}
    if token:
        h["x-amz-security-token"] = token
    for k, v in (headers or {}).items():
        h[k.lower()] = v
    names = sorted(h)
    canon_query = "&".join(
        "%s=%s" % (urllib.parse.quote(k, safe="-_.~"),
                   urllib.parse.quote(v, safe="-_.~"))
        for k, v in sorted(query))
    canon = "\n".join([method, path, canon_query]
                      + ["%s:%s" % (n, " ".join(str(h[n]).split()))
                         for n in names]
                      + ["", ";".join(names), h["x-amz-content-sha256"]])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    k = _hmac(("AWS4" + secret).encode(), day)
    k = _hmac(_hmac(_hmac(k, region), "s3"), "aws4_request")
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    out = {n: str(h[n]) for n in names}
    out["authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (access_key, scope, ";".join(names), sig))
    return out
