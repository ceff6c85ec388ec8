"""test_cli.py - the command line: --help/--version, exit code 2 for bad
flags, addresses and config files, the config file and flags overriding
it, start-up with dependencies down, and shutdown on SIGTERM."""

import os
import signal
import socket
import subprocess
import time

import harness
from harness import Gateway, TestCase, slack
from origins import StandIn

ALL_FLAGS = ("--listen", "--upstream", "--redis", "--config", "--key-file",
             "--threads", "--max-connections", "--max-waiters",
             "--idle-forget-ms", "--lock-delay-ms", "--redis-timeout-ms",
             "--waiter-liveness-ms", "--max-header-bytes",
             "--client-timeout-s", "--drain-delay-ms", "--drain-timeout-ms",
             "--readyz-requires", "--log-level", "--check-config", "--help",
             "--version")


class CliTests(TestCase):
    uses_shared_env = False

    # -- helpers ----------------------------------------------------------

    def run_bin(self, args, timeout=None):
        """Runs fencegate with exactly `args`; returns (rc, stdout, stderr).
        A process still running after `timeout` is killed and fails the
        test."""
        exe = Gateway.executable()
        d = os.path.join(harness.tmp_root(), "cli")
        os.makedirs(d, exist_ok=True)
        p = harness.spawn([exe] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=d)
        try:
            out, err = p.communicate(timeout=timeout or slack(5.0))
        except subprocess.TimeoutExpired:
            harness.kill_process(p)
            out, err = p.communicate()
            self.fail("fencegate %s did not exit (still running after "
                      "%.0f s); stderr: %r" % (" ".join(args),
                                              timeout or slack(5.0), err))
        harness.stop_process(p)   # reaped already; drops it from the registry
        return p.returncode, out.decode("utf-8", "replace"), \
            err.decode("utf-8", "replace")

    def assert_usage_error(self, args, code=2):
        rc, out, err = self.run_bin(args)
        self.assertEqual(rc, code, "fencegate %r exited %s; stderr %r"
                         % (args, rc, err))
        self.assertTrue(err.strip(), "no message on stderr for %r" % (args,))
        return err

    def base_args(self, redis_port=None, upstream_port=None, listen=None):
        return ["--listen", "127.0.0.1:%d" % (listen or harness.free_port()),
                "--redis", "127.0.0.1:%d" % (redis_port or harness.free_port()),
                "--upstream", "http://127.0.0.1:%d"
                % (upstream_port or harness.free_port())]

    def write(self, name, text):
        path = os.path.join(harness.tmp_root(), "%s-%s" % (self.id(), name))
        with open(path, "w" if isinstance(text, str) else "wb") as f:
            f.write(text)
        return path

    def health_on(self, port):
        return harness.http_request(port, "GET", "/_fence/v1/health",
                                    timeout=3.0)

    # -- --help / --version -----------------------------------------------

    def test_help_exits_0_and_documents_every_flag(self):
        rc, out, err = self.run_bin(["--help"])
        self.assertEqual(rc, 0, err)
        text = out + err
        for flag in ALL_FLAGS:
            self.assertIn(flag, text, "--help does not mention " + flag)

    def test_help_is_printed_on_stdout(self):
        rc, out, err = self.run_bin(["--help"])
        self.assertEqual(rc, 0)
        self.assertIn("--listen", out)

    def test_version_exits_0_and_prints_a_version_number(self):
        rc, out, err = self.run_bin(["--version"])
        self.assertEqual(rc, 0, err)
        self.assertRegex(out + err, r"\d+\.\d+")

    # -- exit code 2 ------------------------------------------------------

    def test_unknown_flag_exits_2_with_message_on_stderr(self):
        for args in (["--no-such-flag"], ["--no-such-flag", "1"],
                     ["-z"], ["--listenx", "127.0.0.1:1"], ["stray"]):
            with self.subTest(args=args):
                self.assert_usage_error(self.base_args() + args)

    def test_unknown_flag_message_names_the_flag(self):
        err = self.assert_usage_error(self.base_args() + ["--bogus-flag"])
        self.assertIn("bogus-flag", err)

    def test_listen_nonsense_exits_2(self):
        for bad in ("nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999",
                    "127.0.0.1:-1", "127.0.0.1:abc", "", ":", "999.0.0.1:80"):
            args = ["--listen", bad, "--redis", "127.0.0.1:%d"
                    % harness.free_port(), "--upstream",
                    "http://127.0.0.1:%d" % harness.free_port()]
            with self.subTest(listen=bad):
                self.assert_usage_error(args)

    def test_redis_nonsense_exits_2(self):
        for bad in ("nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999",
                    "127.0.0.1:abc", "", "127.0.0.1:0:1"):
            args = ["--listen", "127.0.0.1:%d" % harness.free_port(),
                    "--redis", bad, "--upstream",
                    "http://127.0.0.1:%d" % harness.free_port()]
            with self.subTest(redis=bad):
                self.assert_usage_error(args)

    def test_upstream_nonsense_exits_2(self):
        for bad in ("not a url", "http://", "http://127.0.0.1:99999",
                    "127.0.0.1:abc", ""):
            args = ["--listen", "127.0.0.1:%d" % harness.free_port(),
                    "--redis", "127.0.0.1:%d" % harness.free_port(),
                    "--upstream", bad]
            with self.subTest(upstream=bad):
                self.assert_usage_error(args)

    def test_missing_value_of_last_flag_exits_2(self):
        self.assert_usage_error(self.base_args()[:-1])
        self.assert_usage_error(self.base_args() + ["--threads"])

    def test_nonexistent_config_file_exits_2(self):
        self.assert_usage_error(self.base_args() + ["--config",
                                                    "/nonexistent/fg.conf"])
        self.assert_usage_error(["--config", "/nonexistent/fg.conf"])

    def test_config_path_that_is_a_directory_exits_2(self):
        self.assert_usage_error(self.base_args() + ["--config",
                                                    harness.tmp_root()])

    def test_config_file_with_unknown_name_exits_nonzero(self):
        path = self.write("bad.conf", "frobnicate 12\n")
        rc, out, err = self.run_bin(self.base_args() + ["--config", path])
        self.assertNotEqual(rc, 0)
        self.assertTrue(err.strip())

    def test_bad_numeric_or_enum_values_exit_nonzero(self):
        for args in (["--threads", "abc"], ["--threads", "-1"],
                     ["--max-connections", "x"], ["--max-waiters", "1.5"],
                     ["--redis-timeout-ms", "soon"],
                     ["--idle-forget-ms", "-5"], ["--lock-delay-ms", "x"],
                     ["--client-timeout-s", "x"],
                     ["--max-header-bytes", "big"],
                     ["--waiter-liveness-ms", "x"],
                     ["--log-level", "chatty"]):
            with self.subTest(args=args):
                rc, out, err = self.run_bin(self.base_args() + args)
                self.assertNotEqual(rc, 0, "accepted %r" % (args,))
                self.assertTrue(err.strip(), "no message for %r" % (args,))

    def test_key_file_that_is_missing_or_shorter_than_16_bytes_exits_nonzero(self):
        short = self.write("short.key", b"0123456789abcde")   # 15 bytes
        for path in ("/nonexistent/hmac.key", short):
            with self.subTest(key_file=path):
                rc, out, err = self.run_bin(self.base_args()
                                            + ["--key-file", path])
                self.assertNotEqual(rc, 0, "accepted key file %r" % path)
                self.assertIn("key file '%s'" % path, err)
        rc, out, err = self.run_bin(self.base_args()
                                    + ["--key-file", "/nonexistent/hmac.key"])
        self.assertIn("No such file or directory", err)

    def test_listen_port_already_in_use_exits_nonzero(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            port = s.getsockname()[1]
            rc, out, err = self.run_bin(self.base_args(listen=port))
            self.assertNotEqual(rc, 0)
            self.assertIn("cannot listen on 127.0.0.1:%d: Address already "
                          "in use" % port, err)
        finally:
            s.close()

    # -- config file ------------------------------------------------------

    def test_config_file_supplies_listen_redis_and_upstream(self):
        redis = harness.new_redis().start()
        self.addCleanup(redis.stop)
        up = StandIn().start()
        self.addCleanup(up.stop)
        port = harness.free_port()
        path = self.write("gw.conf",
                          "# fencegate test config\n"
                          "\n"
                          "listen 127.0.0.1:%d\n"
                          "   # indented comment\n"
                          "redis %s\n"
                          "upstream http://127.0.0.1:%d\n"
                          "lock-delay-ms 0\n"
                          % (port, redis.url(), up.port))
        g = Gateway(redis.port, up.port, ["--config", path], port=port,
                    add_defaults=False)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        g.wait_healthy(slack(5.0))
        r = self.health_on(port)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json, {"redis": "up", "upstream": "up"})

    def test_config_file_options_take_effect(self):
        redis = harness.new_redis().start()
        self.addCleanup(redis.stop)
        up = StandIn().start()
        self.addCleanup(up.stop)
        port = harness.free_port()
        path = self.write("gw.conf",
                          "listen 127.0.0.1:%d\nredis %s\n"
                          "upstream http://127.0.0.1:%d\n"
                          "max-waiters 1\n"
                          % (port, redis.url(), up.port))
        g = Gateway(redis.port, up.port, ["--config", path], port=port,
                    add_defaults=False)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        g.wait_healthy(slack(5.0))
        self.gw = g
        name = self.lock_name()
        self.acquire_ok(name)
        self.waiter(name, wait_ms=5000)
        self.wait_waiters(name, 1)
        self.assert_error(self.acquire(name, body={"wait_ms": 5000}), 429,
                          "too_many_waiters")

    def test_flags_override_the_config_file(self):
        redis = harness.new_redis().start()
        self.addCleanup(redis.stop)
        up = StandIn().start()
        self.addCleanup(up.stop)
        cfg_port, flag_port = harness.free_port(), harness.free_port()
        path = self.write("gw.conf",
                          "listen 127.0.0.1:%d\nredis 127.0.0.1:%d\n"
                          "upstream http://127.0.0.1:%d\n"
                          % (cfg_port, harness.free_port(), up.port))
        g = Gateway(redis.port, up.port,
                    ["--config", path, "--listen", "127.0.0.1:%d" % flag_port,
                     "--redis", redis.url()],
                    port=flag_port, add_defaults=False)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        g.wait_healthy(slack(5.0))
        r = self.health_on(flag_port)
        self.assertEqual(r.status, 200, "the --redis flag did not override "
                         "the config file: %r" % r)
        with self.assertRaises(OSError):
            self.health_on(cfg_port)

    def test_flags_before_config_also_override_it(self):
        redis = harness.new_redis().start()
        self.addCleanup(redis.stop)
        up = StandIn().start()
        self.addCleanup(up.stop)
        port = harness.free_port()
        path = self.write("gw.conf", "redis 127.0.0.1:%d\n"
                          % harness.free_port())
        g = Gateway(redis.port, up.port,
                    ["--redis", redis.url(),
                     "--listen", "127.0.0.1:%d" % port,
                     "--upstream", "http://127.0.0.1:%d" % up.port,
                     "--config", path], port=port, add_defaults=False)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        g.wait_healthy(slack(5.0))
        self.assertEqual(self.health_on(port).status, 200)

    # -- start-up and shutdown --------------------------------------------

    def test_starts_with_redis_and_upstream_unreachable_and_reports_503(self):
        g = Gateway(harness.free_port(), harness.free_port())
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        r = self.health_on(g.port)
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json, {"redis": "down", "upstream": "down"})
        # a window in which it keeps trying both: an exit would show; no
        # event marks that it did not
        time.sleep(0.5)
        self.assertTrue(g.alive())

    def test_sigterm_stops_promptly_even_with_blocked_waiters(self):
        env = self.start_env()
        self.gw = env.gw
        name = self.lock_name()
        self.acquire_ok(name)
        ws = [self.waiter(name, wait_ms=60000) for _ in range(3)]
        self.wait_waiters(name, 3)
        idle = socket.create_connection(("127.0.0.1", env.gw.port))
        try:
            t0 = time.monotonic()
            env.gw.proc.send_signal(signal.SIGTERM)
            try:
                rc = env.gw.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.fail("fencegate still running 5 s after SIGTERM")
            self.assertIn(rc, (0, -signal.SIGTERM, 128 + signal.SIGTERM),
                          "exit status after SIGTERM")
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            idle.close()
        for w in ws:
            w.join(slack(5.0))
            self.assertFalse(w.is_alive(), "a waiter's request hangs after "
                             "the gateway stopped")
        report = env.gw.sanitizer_report()
        self.assertIsNone(report, report)
