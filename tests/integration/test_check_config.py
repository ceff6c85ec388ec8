"""test_check_config.py - `fencegate --check-config` (contract v1.3,
"Checking a config"): the real binary reads the settings and every file
they name, exits 0 with "configuration ok" or 2 naming every reason,
and starts nothing: the listen port may be held by another listener,
and no connection reaches Redis or the upstream. Secrets named by the
config never appear in what it prints. Also: a start on a port in use
says why (the errno text)."""

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile

import harness
from harness import Gateway, SetupError, TestCase, slack

PASSWORD = "redis-pw-" + "Q7x9VvR2kLm4"
KEY = b"hmac-key-" + b"Zp3Wq8Yt6Ns1Bb5Hc0Jd"      # 29 printable bytes
BEARER = "bearer-" + "Ku2Lp9Rz4Tx7Wm1Ev6Gy3Hd8"


def _openssl():
    exe = shutil.which("openssl")
    if not exe:
        raise SetupError("the openssl CLI is not installed: the "
                         "--check-config tests make certificates with it")
    return exe


class CheckConfigTests(TestCase):
    axes = ("build",)       # fencegate --check-config: no Redis
    uses_shared_env = False

    # -- helpers ----------------------------------------------------------

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="check-", dir=harness.tmp_root())

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        with open(self.path(name), "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return self.path(name)

    def cert(self, name):
        """A self-signed certificate and its key: (cert path, key path)."""
        c, k = self.path(name + ".pem"), self.path(name + ".key")
        r = subprocess.run([_openssl(), "req", "-x509", "-newkey", "ec",
                            "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-keyout", k, "-out", c, "-subj", "/CN=" + name,
                            "-days", "2"], capture_output=True, timeout=60)
        if r.returncode != 0:
            raise SetupError("openssl req failed: %r" % r.stderr)
        return c, k

    def check(self, args):
        """Runs `fencegate --check-config ARGS`: (rc, stdout, stderr)."""
        p = harness.spawn([Gateway.executable(), "--check-config"] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=self.dir)
        try:
            out, err = p.communicate(timeout=slack(10.0))
        except subprocess.TimeoutExpired:
            harness.kill_process(p)
            out, err = p.communicate()
            self.fail("--check-config still running after %.0f s: it must "
                      "start nothing; stderr %r" % (slack(10.0), err))
        harness.stop_process(p)
        return p.returncode, out.decode("utf-8", "replace"), \
            err.decode("utf-8", "replace")

    def listener(self):
        """A listening socket on a free loopback port: (socket, port)."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        self.addCleanup(s.close)
        return s, s.getsockname()[1]

    def assert_never_connected(self, s, what):
        """Nothing connected to listener s (the check has exited, so a
        connection it made would be in the accept queue already)."""
        s.setblocking(False)
        try:
            c, _ = s.accept()
        except BlockingIOError:
            return
        c.close()
        self.fail("--check-config connected to %s" % what)

    def assert_no_secret(self, text):
        for secret in (PASSWORD, KEY.decode(), BEARER):
            self.assertNotIn(secret, text)

    def good_files(self):
        """A config naming one file of every kind, all good, with the
        listen port held by another listener and Redis and the upstream
        on listeners that count connections. Returns (config lines,
        held listen socket, redis socket, upstream socket)."""
        held, port = self.listener()
        redis, redis_port = self.listener()
        up, up_port = self.listener()
        cert, key = self.cert("gateway")
        ca, _ = self.cert("client-ca")
        up_cert, up_key = self.cert("to-store")
        store_ca, _ = self.cert("store-ca")
        lines = [
            "listen 127.0.0.1:%d" % port,
            "redis 127.0.0.1:%d" % redis_port,
            "upstream https://127.0.0.1:%d/store" % up_port,
            "key-file %s" % self.write("hmac.key", KEY),
            "auth-file %s" % self.write(
                "auth", "ci  sha256:%s  lock:jobs/ observe:*\n"
                "ops cert  admin:*\n"
                % hashlib.sha256(BEARER.encode()).hexdigest()),
            "tls-cert %s" % cert,
            "tls-key %s" % key,
            "tls-client-ca %s" % ca,
            "upstream-ca %s" % store_ca,
            "upstream-cert %s" % up_cert,
            "upstream-key %s" % up_key,
            "redis-user gate",
            "redis-password-file %s" % self.write("redis.pw", PASSWORD + "\n"),
            "access-log %s" % self.path("logs-access.log"),
            "route /jobs/ jobs",
            "threads 2",
        ]
        return lines, held, redis, up

    def config(self, lines):
        return self.write("fencegate.conf", "\n".join(lines) + "\n")

    # -- a good config ----------------------------------------------------

    def test_good_config_is_ok_while_the_port_is_held_and_starts_nothing(self):
        lines, held, redis, up = self.good_files()
        rc, out, err = self.check(["--config", self.config(lines)])
        self.assertEqual(rc, 0, "stderr: %r" % err)
        self.assertIn("configuration ok", out)
        self.assertNotIn("cannot", err)
        self.assert_no_secret(out + err)
        self.assert_never_connected(held, "the listen port")
        self.assert_never_connected(redis, "Redis")
        self.assert_never_connected(up, "the upstream")
        # the access log it would open is not created by a check
        self.assertFalse(os.path.exists(self.path("logs-access.log")))

    def test_flags_alone_are_checked_as_a_start_reads_them(self):
        held, port = self.listener()
        rc, out, err = self.check(["--listen", "127.0.0.1:%d" % port,
                                   "--threads", "1"])
        self.assertEqual(rc, 0, err)
        self.assertIn("configuration ok", out)
        self.assert_never_connected(held, "the listen port")

    # -- each kind of bad input -------------------------------------------

    def bad(self, replace, want, extra=()):
        """The good config with `replace` (setting -> line, or None to drop
        it) applied: exit 2, and every text of `want` on stderr."""
        lines, held, redis, up = self.good_files()
        out_lines = []
        for l in lines:
            name = l.split()[0]
            if name in replace:
                if replace[name] is not None:
                    out_lines.append(replace[name])
            else:
                out_lines.append(l)
        out_lines += list(extra)
        rc, out, err = self.check(["--config", self.config(out_lines)])
        self.assertEqual(rc, 2, "stdout %r stderr %r" % (out, err))
        self.assertNotIn("configuration ok", out)
        for w in want:
            self.assertIn(w, err)
        self.assert_no_secret(out + err)
        self.assert_never_connected(redis, "Redis")
        self.assert_never_connected(up, "the upstream")
        return err

    def test_bad_setting_value(self):
        self.bad({"threads": "threads many"},
                 ["fencegate.conf:16: threads: 'many' is not a whole number"])

    def test_unknown_setting(self):
        self.bad({}, ["fencegate.conf:17: unknown setting 'max-waiter'"],
                 extra=["max-waiter 3"])

    def test_unreadable_key_file(self):
        missing = self.path("no-such.key")
        self.bad({"key-file": "key-file " + missing},
                 ["cannot read key file '%s': No such file or directory"
                  % missing])

    def test_key_file_of_the_wrong_size_is_named_but_not_printed(self):
        short = self.write("short.key", KEY[:12])
        self.bad({"key-file": "key-file " + short},
                 ["key file '%s' must hold 16 to 64 bytes" % short])

    def test_bad_auth_file_line(self):
        # a key pasted where its SHA-256 belongs: named by line, not shown
        auth = self.write("bad-auth", "ci  sha256:%s  lock:jobs/\n"
                          "ops  %s  admin:*\n"
                          % (hashlib.sha256(b"x").hexdigest(), BEARER))
        self.bad({"auth-file": "auth-file " + auth},
                 ["auth-file '%s': line 2" % auth])

    def test_bad_tls_certificate(self):
        junk = self.write("junk.pem", "not a certificate\n")
        self.bad({"tls-cert": "tls-cert " + junk}, ["tls-cert '%s'" % junk])

    def test_tls_key_of_another_certificate(self):
        _, other_key = self.cert("other")
        self.bad({"tls-key": "tls-key " + other_key},
                 ["tls-key '%s' is not the key of the first certificate"
                  % other_key])

    def test_bad_upstream_client_certificate(self):
        _, other_key = self.cert("other")
        self.bad({"upstream-key": "upstream-key " + other_key},
                 ["upstream-key '%s' is not the key of upstream-cert"
                  % other_key])

    def test_bad_route_rule(self):
        self.bad({"route": "route jobs/ jobs"},
                 ["route: expected `route /PREFIX LOCK`"])

    def test_unreadable_redis_password_file_is_named(self):
        missing = self.path("no-such.pw")
        self.bad({"redis-password-file": "redis-password-file " + missing},
                 ["redis-password-file: cannot read '%s'" % missing])

    def test_url_password_is_not_printed(self):
        err = self.bad({"upstream": "upstream ftp://ops:%s@store/" % PASSWORD},
                       ["upstream: 'ftp://***@store/' is not"])
        self.assertNotIn(PASSWORD, err)

    def test_access_log_in_a_missing_folder(self):
        where = self.path("no-such-dir/access.log")
        self.bad({"access-log": "access-log " + where},
                 ["access-log: cannot open %s: No such file or directory"
                  % where])

    def test_listen_address_not_of_this_machine(self):
        self.bad({"listen": "listen 192.0.2.1:8080"},
                 ["cannot listen on 192.0.2.1:8080: Cannot assign "
                  "requested address"])

    def test_every_reason_is_named_in_one_run(self):
        junk = self.write("junk.pem", "not a certificate\n")
        missing = self.path("no-such.key")
        auth = self.write("bad-auth", "ops  %s  admin:*\n" % BEARER)
        err = self.bad({"threads": "threads many",
                        "route": "route jobs/ jobs",
                        "key-file": "key-file " + missing,
                        "auth-file": "auth-file " + auth,
                        "tls-cert": "tls-cert " + junk},
                       ["threads: 'many'", "unknown setting 'frobnicate'",
                        "route: expected", "cannot read key file",
                        "auth-file '%s': line 1" % auth,
                        "tls-cert '%s'" % junk],
                       extra=["frobnicate 1"])
        # one reason a line, each one prefixed
        for line in err.strip().splitlines():
            self.assertTrue(line.startswith("fencegate: "), line)
        self.assertGreaterEqual(len(err.strip().splitlines()), 6)

    def test_bad_flags_are_named_with_the_file_reasons(self):
        lines, _, _, _ = self.good_files()
        rc, out, err = self.check(["--config", self.config(lines + ["bogus 1"]),
                                   "--lock-delay-ms", "soon", "--nope"])
        self.assertEqual(rc, 2, err)
        self.assertIn("unknown setting 'bogus'", err)
        self.assertIn("lock-delay-ms: 'soon'", err)
        self.assertIn("unknown setting 'nope'", err)

    # -- a start says why it cannot listen ---------------------------------

    def test_start_on_a_port_in_use_says_address_already_in_use(self):
        held, port = self.listener()
        p = subprocess.run([Gateway.executable(), "--listen",
                            "127.0.0.1:%d" % port, "--redis",
                            "127.0.0.1:%d" % harness.free_port(), "--threads",
                            "1"], capture_output=True, timeout=slack(10.0))
        err = p.stderr.decode("utf-8", "replace")
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("cannot listen on 127.0.0.1:%d: Address already in use"
                      % port, err)
