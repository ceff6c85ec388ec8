"""test_clients.py - the recipes of docs/clients.md, run for real against
Apache httpd with mod_dav behind fencegate: curl (an upload with
`Expect: 100-continue`, and a stale write refused before its body is
sent), rclone syncing a tree under `fencectl lock` with one sequencer on
every request, and Python's standard library."""

import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time

import harness
from apache import apache_behind_gateway
from harness import LOCKS, SetupError, TestCase, slack
from test_fencectl import fencectl_exe


def tool(name):
    exe = shutil.which(name)
    if not exe:
        raise SetupError("%s not found (scripts/install-deps.sh installs it)"
                         % name)
    return exe


class ClientRecipeTests(TestCase):
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.apache, self.gw = apache_behind_gateway(self, "route /sync/ sync\n")
        self.url = "http://127.0.0.1:%d" % self.gw.port
        self.work = tempfile.mkdtemp(prefix="clients-", dir=harness.tmp_root())
        for d in ("/docs/", "/sync/"):
            self.apache.mkdir(d)

    def grant(self, lock):
        r = self.gw.request("POST", LOCKS + lock, body={"ttl_ms": 30000})
        self.assertEqual(r.status, 200, r)
        return r.json

    def curl(self, *args):
        p = subprocess.run([tool("curl"), "-s", "-o", os.devnull, "-w",
                            "%{http_code} %{size_upload}"] + list(args),
                           capture_output=True, timeout=slack(30.0))
        code, up = p.stdout.decode().split()
        return int(code), int(up)

    def test_curl_uploads_with_expect_100_continue_and_a_stale_write_sends_no_body(self):
        body = os.path.join(self.work, "a.txt")
        with open(body, "wb") as f:
            f.write(b"x" * 200000)
        old = self.grant("docs/a.txt")
        code, up = self.curl("-T", body, "-H", "Fencing-Token: " + old["sequencer"],
                             "-H", "Expect: 100-continue", self.url + "/docs/a.txt")
        self.assertEqual((code, up), (201, 200000))
        self.assertEqual(len(self.apache.read("/docs/a.txt")), 200000)
        r = self.gw.request("DELETE", LOCKS + "docs/a.txt",
                            headers={"Fence-Lease": old["lease"]})
        self.assertEqual(r.status, 204, r)
        new = self.grant("docs/a.txt")
        with open(body, "wb") as f:
            f.write(b"y" * 200000)
        code, up = self.curl("-T", body, "-H", "Fencing-Token: " + old["sequencer"],
                             "-H", "Expect: 100-continue", self.url + "/docs/a.txt")
        # refused before 100 Continue: curl uploaded nothing
        self.assertEqual((code, up), (409, 0))
        self.assertEqual(self.apache.read("/docs/a.txt"), b"x" * 200000)
        code, up = self.curl("-T", body, "-H", "Fencing-Token: " + new["sequencer"],
                             self.url + "/docs/a.txt")
        self.assertIn(code, (201, 204))
        self.assertEqual(self.apache.read("/docs/a.txt"), b"y" * 200000)

    def rclone(self, src, header=True, timeout=120.0):
        env = dict(os.environ, RCLONE_CONFIG_FG_TYPE="webdav",
                   RCLONE_CONFIG_FG_URL=self.url + "/sync",
                   RCLONE_CONFIG_FG_VENDOR="other",
                   RCLONE_CONFIG=os.path.join(self.work, "rclone.conf"),
                   FENCEGATE_URL=self.url)
        sync = "%s sync %s fg: --retries 1 --low-level-retries 1" % (tool("rclone"), src)
        if header:
            sync += ' --header "Fencing-Token: $FENCE_SEQUENCER"'
        argv = [fencectl_exe(), "lock", "sync", "--ttl", "30s", "--",
                "sh", "-c", sync]
        t0 = time.monotonic()
        p = subprocess.run(argv, env=env, capture_output=True,
                           timeout=slack(timeout))
        return p.returncode, time.monotonic() - t0, p.stderr.decode()[-2000:]

    def tree(self, n):
        src = os.path.join(self.work, "tree")
        for i in range(n):
            d = os.path.join(src, "d%d" % (i % 10))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%d.txt" % i), "w") as f:
                f.write("file %d\n" % i)
        return src

    def stored(self):
        root = self.apache.file_of("/sync/")
        out = set()
        for d, _, files in os.walk(root):
            for f in files:
                out.add(os.path.relpath(os.path.join(d, f), root))
        return out

    def test_rclone_syncs_a_tree_under_fencectl_lock_with_one_sequencer(self):
        src = self.tree(300)
        want = {os.path.join("d%d" % (i % 10), "f%d.txt" % i) for i in range(300)}
        # without the header every write is refused: nothing changes
        rc, _, err = self.rclone(src, header=False)
        self.assertNotEqual(rc, 0, err)
        self.assertEqual(self.stored(), set())
        rc, secs, err = self.rclone(src)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.stored(), want)
        print("\nrclone sync of 300 files through fencegate: %.2f s" % secs)
        # a second sync deletes and adds, under a new grant
        os.remove(os.path.join(src, "d0", "f0.txt"))
        with open(os.path.join(src, "d1", "new.txt"), "w") as f:
            f.write("new\n")
        rc, _, err = self.rclone(src)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.stored(),
                         (want - {os.path.join("d0", "f0.txt")})
                         | {os.path.join("d1", "new.txt")})

    def test_python_standard_library_recipe(self):
        c = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10)
        try:
            c.request("POST", LOCKS + "docs/b.txt",
                      body=json.dumps({"ttl_ms": 30000}))
            grant = json.loads(c.getresponse().read())
            c.request("PUT", "/docs/b.txt", body=b"hello\n",
                      headers={"Fencing-Token": grant["sequencer"]})
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 201)
            c.request("DELETE", LOCKS + "docs/b.txt",
                      headers={"Fence-Lease": grant["lease"]})
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 204)
            self.grant("docs/b.txt")  # someone else takes it
            c.request("PUT", "/docs/b.txt", body=b"late\n",
                      headers={"Fencing-Token": grant["sequencer"]})
            r = c.getresponse()
            body = json.loads(r.read())
            self.assertEqual((r.status, body["error"]), (409, "stale_token"))
            self.assertEqual(body["token"], grant["token"])
            self.assertGreater(body["current"], grant["token"])
        finally:
            c.close()
        self.assertEqual(self.apache.read("/docs/b.txt"), b"hello\n")
