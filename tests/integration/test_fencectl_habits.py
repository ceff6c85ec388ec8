"""test_fencectl_habits.py - what fencectl does as flock(1), etcdctl and
consul operators expect (contract v1.3): -w/--wait and -n/--no-wait, -E
(the status when not granted), -c (the command through the shell),
--verbose, several gateways tried in turn, each call bounded by --timeout,
`lock NAME` without a command holding the lock until a signal, and the
default owner user@host:pid.

Real fencectl, real gateways and Redis; the stand-in gateway of
test_fencectl only where the test must see what fencectl sends. Every wait
is bounded, scaled by harness.slack().
"""

import json
import os
import pwd
import re
import shlex
import signal
import socket
import subprocess
import time

import harness
from harness import slack
from origins import StandIn
from test_fencectl import (EXIT_NOT_OBTAINED, EXIT_UNAVAILABLE, EXIT_USAGE,
                           FencectlTestCase, ScriptedGatewayHandler, grant,
                           LEASE, UNAVAILABLE, wait_file)


def default_owner(pid):
    return "%s@%s:%d" % (pwd.getpwuid(os.geteuid()).pw_name,
                         socket.gethostname(), pid)


class BlackHole:
    """A loopback port whose connections never complete: a listener with
    a backlog of one, filled, so that the kernel drops further SYNs (as
    an unreachable host does) instead of refusing them."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fill = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            self.fill.append(c)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        for c in self.fill:
            c.close()
        self.sock.close()


class WaitAndExitCodeTests(FencectlTestCase):

    def test_no_wait_on_a_held_lock_exits_75_or_the_code_of_E(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        marker = self.path("ran")
        for args, want in ((("-n",), EXIT_NOT_OBTAINED),
                           (("--no-wait",), EXIT_NOT_OBTAINED),
                           (("-n", "-E", "3"), 3),
                           (("-nE3",), 3),
                           (("--no-wait", "--conflict-exit-code=0"), 0)):
            t0 = time.monotonic()
            rc, out, err = self.fc("lock", name, *args, "--", "touch",
                                   marker)
            self.assertEqual(rc, want, "%s: %s" % (args, err))
            self.assertLess(time.monotonic() - t0, slack(3.0))
            self.assertIn("lock '%s' is held" % name, err)
            self.assertFalse(os.path.exists(marker), args)
        rc, out, err = self.fc("acquire", name, "-n", "-E", "9")
        self.assertEqual((rc, out), (9, ""), err)
        self.assertEqual(self.state(name)["token"], g["token"])
        self.release_ok(name, g["lease"])

    def test_wait_that_runs_out_exits_75_or_the_code_of_E(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        marker = self.path("ran")
        for args, want, said in ((("-w", "400ms"), EXIT_NOT_OBTAINED,
                                  "400ms"),
                                 (("-w0.4", "-E", "4"), 4, "400ms"),
                                 (("--wait", "0.4"), EXIT_NOT_OBTAINED,
                                  "400ms")):
            t0 = time.monotonic()
            rc, out, err = self.fc("lock", name, *args, "--", "touch",
                                   marker)
            took = time.monotonic() - t0
            self.assertEqual(rc, want, "%s: %s" % (args, err))
            self.assertGreater(took, 0.35, args)
            self.assertLess(took, 0.4 + slack(3.0), args)
            self.assertIn("not granted within %s" % said, err)
        self.assertFalse(os.path.exists(marker))
        self.release_ok(name, g["lease"])

    def test_a_wait_gets_the_lock_released_meanwhile(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        bg = self.start("lock", name, "-w", "1m", "-E", "3", "-c",
                        "echo $FENCE_TOKEN > %s"
                        % shlex.quote(self.path("token")))
        self.wait_waiters(name, 1)
        self.release_ok(name, g["lease"])
        self.assertEqual(bg.wait(slack(5.0)), 0, bg.err())
        self.assertGreater(int(self.read("token")), g["token"])

    def test_bad_values_are_usage_errors(self):
        for args in (("lock", "x", "-E", "256", "--", "true"),
                     ("lock", "x", "-E", "-1", "--", "true"),
                     ("lock", "x", "-E", "", "--", "true"),
                     ("acquire", "x", "-E", "x"),
                     ("lock", "x", "-w", "soon", "--", "true"),
                     ("lock", "x", "-w"),
                     ("lock", "x", "-c", "true", "--", "true"),
                     ("lock", "x", "-c", "true", "-c", "false"),
                     ("lock", "x", "-nq", "--", "true"),
                     ("--gateway", "http://a,,http://b", "inspect", "x"),
                     ("--gateway", "http://a,", "inspect", "x"),
                     ("--gateway", "http://a,ftp://b", "inspect", "x")):
            rc, out, err = self.fc(*args)
            self.assertEqual(rc, EXIT_USAGE, "%r: %r" % (args, err))
            self.assertTrue(err.startswith("fencectl: "), (args, err))
        env = self.env_for(FENCEGATE_URL=self.url() + ",")
        rc, out, err = self.fc("inspect", "x", env=env)
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assertIn("FENCEGATE_URL", err)


class CommandThroughTheShellTests(FencectlTestCase):

    def test_c_runs_the_command_through_the_shell(self):
        name = self.lock_name()
        env = self.env_for()
        env.pop("SHELL", None)
        rc, out, err = self.fc("lock", name, "-c",
                               'echo "$FENCE_LOCK $FENCE_TOKEN" | '
                               'tr a-z A-Z; exit 3', env=env)
        self.assertEqual(rc, 3, err)
        lock, token = out.split()
        self.assertEqual(lock, name.upper())
        self.assertGreater(int(token), 0)
        self.assertFalse(self.held(name), "not released after -c")

    def test_c_uses_the_shell_of_SHELL_as_flock_does(self):
        name = self.lock_name()
        shell = self.path("myshell")
        with open(shell, "w") as f:
            f.write("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %s\n"
                    "exec /bin/sh \"$@\"\n"
                    % shlex.quote(self.path("args")))
        os.chmod(shell, 0o755)
        rc, out, err = self.fc("elect", name, "me", "-c", "exit 4",
                               env=self.env_for(SHELL=shell))
        self.assertEqual(rc, 4, err)
        self.assertEqual(self.read("args"), "-c\nexit 4\n")


class HoldWithoutCommandTests(FencectlTestCase):

    def held_lines(self, bg, n):
        self.wait_for(lambda: bg.out().count("\n") >= n, slack(5.0),
                      "fencectl to print the grant")
        return bg.out()

    def test_lock_without_a_command_prints_token_and_sequencer_and_holds(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--ttl", "30s")
        out = self.held_lines(bg, 3)
        vals = dict(line.split("=", 1) for line in out.splitlines())
        self.assertEqual(sorted(vals), ["FENCE_LOCK", "FENCE_SEQUENCER",
                                        "FENCE_TOKEN"])
        self.assertEqual(vals["FENCE_LOCK"], name)
        s = self.state(name)
        self.assertTrue(s["held"], s)
        self.assertEqual(int(vals["FENCE_TOKEN"]), s["token"])
        self.assertEqual(s["owner"], default_owner(bg.pid))
        c = self.check_ok(vals["FENCE_SEQUENCER"])
        self.assertEqual((c["valid"], c["token"]), (True, s["token"]))
        self.assertIsNone(bg.proc.poll(), "fencectl did not keep holding")
        os.kill(bg.pid, signal.SIGINT)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGINT, bg.err())
        # a 30 s lease: free at once means released, not run out
        self.assertFalse(self.held(name), "not released on SIGINT")
        self.assertEqual(bg.err(), "")

    def test_a_held_lock_is_renewed_and_released_on_sigterm(self):
        name = self.lock_name()
        # a lease a renewal stalled on a loaded machine does not lose
        bg = self.start("--json", "lock", name, "--ttl", "2s")
        out = self.held_lines(bg, 1)
        j = json.loads(out)
        self.assertEqual(sorted(j), ["mode", "name", "sequencer", "token",
                                     "ttl_ms"])
        # two lease lengths: held all along, by the same grant
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            s = self.state(name)
            self.assertEqual((s["held"], s["token"]), (True, j["token"]),
                             "the held lock was not renewed: " + bg.err())
            time.sleep(0.1)
        os.kill(bg.pid, signal.SIGTERM)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGTERM,
                         bg.err())
        s = self.state(name)
        self.assertFalse(s["held"], s)

    def test_a_held_lock_whose_lease_is_lost_exits_79(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--ttl", "1s")
        self.held_lines(bg, 3)
        self.drop_lock_keys(name)
        self.assertEqual(bg.wait(slack(10.0)), 79, bg.err())
        self.assertIn("lease on lock '%s' lost" % name, bg.err())

    def test_a_waiting_hold_takes_its_turn(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        bg = self.start("lock", name, "-w", "1m")
        self.wait_waiters(name, 1)
        self.assertEqual(bg.out(), "", "printed before it held the lock")
        self.release_ok(name, g["lease"])
        out = self.held_lines(bg, 3)
        self.assertIn("FENCE_TOKEN=%d\n" % self.state(name)["token"], out)
        os.kill(bg.pid, signal.SIGHUP)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGHUP, bg.err())
        self.assertFalse(self.held(name))


class DefaultOwnerTests(FencectlTestCase):

    def test_the_default_owner_is_user_at_host_colon_pid(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--", "sh", "-c",
                        "touch %s; %s" % (shlex.quote(self.path("ready")),
                                          wait_file(self.path("go"))))
        self.wait_for_file("ready")
        self.assertEqual(self.state(name)["owner"], default_owner(bg.pid))
        self.touch("go")
        self.assertEqual(bg.wait(slack(5.0)), 0, bg.err())
        g = self.fc_json("acquire", name)
        owner = self.state(name)["owner"]
        self.assertRegex(owner, r"^%s:\d+$"
                         % re.escape(default_owner(0)[:-2]))
        self.release_ok(name, g["lease"])
        g = self.fc_json("acquire", name, "--owner", "ops on call")
        self.assertEqual(self.state(name)["owner"], "ops on call")
        # re-entry leaves the grant's owner as it is
        self.fc_json("acquire", name, "--lease", g["lease"])
        self.assertEqual(self.state(name)["owner"], "ops on call")
        self.release_ok(name, g["lease"])
        self.release_ok(name, g["lease"])


class GatewayListTests(FencectlTestCase):
    """Several gateways, tried in turn; an unreachable one is an error
    within --timeout."""

    def setUp(self):
        super().setUp()
        self.down = "http://127.0.0.1:%d" % harness.free_port()

    def test_two_gateways_the_first_down(self):
        name = self.lock_name()
        script = "echo $FENCEGATE_URL $FENCE_TOKEN"
        env = self.env_for()
        del env["FENCEGATE_URL"]
        for how in (("--gateway", "%s,%s" % (self.down, self.url())),
                    ("--gateway", self.down, "--gateway=" + self.url())):
            rc, out, err = self.fc(*how, "lock", name, "-n", "-c", script,
                                   env=env)
            self.assertEqual(rc, 0, "%s: %s" % (how, err))
            url, token = out.split()
            self.assertEqual(url, self.url())
            self.assertEqual(err, "")
            self.assertFalse(self.held(name))
        env["FENCEGATE_URL"] = "%s,%s" % (self.down, self.url())
        rc, out, err = self.fc("--verbose", "lock", name, "-n", "-c",
                               script, env=env)
        self.assertEqual(rc, 0, err)
        self.assertIn("gateway %s did not answer; trying the next"
                      % self.down, err)
        self.assertRegex(err, r"POST %s/_fence/v1/locks/\S+: HTTP 200"
                         % re.escape(self.url()))
        self.assertFalse(self.held(name))
        # every gateway down: the error says so, status 69
        env["FENCEGATE_URL"] = "%s,%s" % (self.down, self.down)
        rc, out, err = self.fc("inspect", name, env=env)
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertIn("all 2 gateways failed", err)

    def test_an_unreachable_gateway_is_an_error_within_timeout(self):
        hole = BlackHole()
        self.addCleanup(hole.close)
        for args in (("inspect", "x"), ("acquire", "x"),
                     ("lock", "x", "-n", "--", "true"),
                     ("release", "x", "--lease", LEASE)):
            t0 = time.monotonic()
            rc, out, err = self.fc("--gateway", hole.url, "--timeout", "1s",
                                   *args)
            took = time.monotonic() - t0
            self.assertEqual(rc, EXIT_UNAVAILABLE, "%s: %s" % (args, err))
            self.assertLess(took, 1.0 + slack(1.5), args)
            self.assertIn("timed out", err)
        # a lock that waits says so within the bound, and asks again
        bg = self.start("--gateway", hole.url, "--timeout", "1s", "lock",
                        "x", "--", "true")
        t0 = time.monotonic()
        self.wait_for(lambda: "still trying" in bg.err(), 1.0 + slack(1.5),
                      "fencectl to report the unreachable gateway")
        self.assertLess(time.monotonic() - t0, 1.0 + slack(1.5))
        self.assertIsNone(bg.proc.poll())
        os.kill(bg.pid, signal.SIGTERM)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGTERM)
        # an unreachable first gateway costs one --timeout, then the next
        name = self.lock_name()
        t0 = time.monotonic()
        rc, out, err = self.fc("--gateway", hole.url, "--gateway",
                               self.url(), "--timeout", "1s", "lock", name,
                               "-n", "-c", "echo ran")
        self.assertEqual((rc, out), (0, "ran\n"), err)
        self.assertLess(time.monotonic() - t0, 1.0 + slack(3.0))


class MuteGatewayTests(FencectlTestCase):
    """A gateway whose process is stopped or wedged: the kernel takes the
    connection, nobody answers. A call that asks the gateway to wait must
    not spend its wait there."""

    def mute(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        self.addCleanup(s.close)
        return "http://127.0.0.1:%d" % s.getsockname()[1]

    def test_a_waiting_call_passes_a_mute_gateway_within_timeout(self):
        mute = self.mute()
        name = self.lock_name()
        t0 = time.monotonic()
        rc, out, err = self.fc("--gateway", "%s,%s" % (mute, self.url()),
                               "--timeout", "1s", "lock", name, "-w", "30s",
                               "-c", "echo ran")
        self.assertEqual((rc, out), (0, "ran\n"), err)
        self.assertLess(time.monotonic() - t0, 1.0 + slack(3.0))
        self.assertFalse(self.held(name))
        # only the mute one: said within the bound, and asked again
        bg = self.start("--gateway", mute, "--timeout", "1s", "lock",
                        name, "-w", "60s", "--", "true")
        t0 = time.monotonic()
        self.wait_for(lambda: "still trying" in bg.err(), 1.0 + slack(2.0),
                      "fencectl to report the mute gateway")
        self.assertLess(time.monotonic() - t0, 1.0 + slack(2.0))
        self.assertIsNone(bg.proc.poll())
        os.kill(bg.pid, signal.SIGTERM)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGTERM)


class GatewayFailoverTests(FencectlTestCase):
    """Two gateways of their own on the class's Redis: the lease outlives
    the one it was taken from."""

    def test_renewals_pass_to_the_next_gateway_when_one_dies(self):
        a = self.start_gateway(self.env.redis.port, self.env.upstream.port)
        b = self.start_gateway(self.env.redis.port, self.env.upstream.port)
        name = self.lock_name()
        urls = "%s,%s" % (self.url(a), self.url(b))
        bg = self.start("--gateway", urls, "lock", name, "--ttl", "2s",
                        "--", "sh", "-c",
                        "touch %s; %s" % (shlex.quote(self.path("ready")),
                                          wait_file(self.path("go"))))
        self.wait_for_file("ready")
        token = self.state(name, b)["token"]
        a.kill()
        # two lease lengths on b alone
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            s = self.state(name, b)
            self.assertEqual((s["held"], s["token"]), (True, token),
                             "the lease was not kept: " + bg.err())
            time.sleep(0.1)
        self.assertIsNone(bg.proc.poll(), bg.err())
        self.touch("go")
        self.assertEqual(bg.wait(slack(5.0)), 0, bg.err())
        self.assertFalse(self.held(name, b), "not released through b")


class VerboseTests(FencectlTestCase):
    """--verbose against the stand-in gateway: each call and its answer on
    stderr, never the lease or the key."""
    axes = ("build",)       # fencectl against a stand-in gateway
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.fake = StandIn(handler=ScriptedGatewayHandler).start()
        self.addCleanup(self.fake.stop)

    def url(self, gw=None):
        return "http://127.0.0.1:%d" % self.fake.port

    def test_verbose_says_what_it_does_and_never_a_lease_or_key(self):
        key = "k3y-" + "s" * 30
        keyfile = self.path("key")
        with open(keyfile, "w") as f:
            f.write(key + "\n")
        os.chmod(keyfile, 0o600)
        posts = []

        def answer(method, path, body):
            if method == "POST":
                posts.append(body)
                return UNAVAILABLE if len(posts) == 1 else \
                    (200, grant("n", ttl_ms=600), 0)
            if method == "PATCH":
                return 200, {"name": "n", "token": 5, "ttl_ms": 600}, 0
            return 204, None, 0
        self.fake.server.script = answer
        env = self.env_for(FENCEGATE_KEY_FILE=keyfile)
        for verbose in (False, True):
            posts.clear()
            args = ["lock", "n", "-w", "10s", "--", "sleep", "0.5"]
            rc, out, err = self.fc(*(["--verbose"] + args if verbose
                                     else args), env=env)
            self.assertEqual(rc, 0, err)
            self.assertNotIn(LEASE, err)
            self.assertNotIn(key, err)
            self.assertEqual(posts[1]["owner"], default_owner(0)[:-1]
                             + posts[1]["owner"].rsplit(":", 1)[1])
            if not verbose:
                self.assertNotIn("POST", err)
                continue
            self.assertRegex(err, r"POST %s/_fence/v1/locks/n: HTTP 503"
                             % re.escape(self.url()))
            self.assertRegex(err, r"POST \S+/_fence/v1/locks/n: HTTP 200")
            self.assertIn("lock 'n' granted: token 5", err)
            self.assertRegex(err, r"PATCH \S+/_fence/v1/locks/n: HTTP 200")
            self.assertIn("renewed the lease on lock 'n'", err)
            self.assertRegex(err, r"DELETE \S+/_fence/v1/locks/n: HTTP 204")
            self.assertIn("released lock 'n'", err)
