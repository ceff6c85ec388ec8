"""test_fencectl.py - fencectl, the command-line client, against a real
gateway and Redis: `lock` (the command's environment, its exit status,
the release, a lost lease killing the command, signals passed on, two
holders one after the other), `elect`, the one-call subcommands (acquire,
renew, release, inspect and inspect --watch, check), exit statuses, usage
errors and --help.

fencectl is found beside the gateway under test: <builddir>/fencectl/fencectl
for --bin <builddir>/gateway/fencegate.

The commands fencectl runs are small sh scripts that write what they see
(environment, signals, times) into files of the test's own directory; the
test reads them back. Every wait is bounded, scaled by harness.slack().
"""

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import termios
import threading
import time

import harness
from harness import LOCKS, TestCase, slack
from origins import Handler, StandIn, read_request_body

EXIT_INVALID = 1
EXIT_USAGE = 64
EXIT_REFUSED = 65
EXIT_UNAVAILABLE = 69
EXIT_NOT_OBTAINED = 75
EXIT_LEASE_LOST = 79

SUBCOMMANDS = ("lock", "elect", "acquire", "renew", "release", "inspect",
               "check", "break", "events")


def fencectl_exe():
    """<builddir>/fencectl/fencectl, for --bin <builddir>/gateway/fencegate."""
    b = harness.Config.bin
    if not b:
        raise harness.SetupError("no --bin given: cannot find fencectl")
    builddir = os.path.dirname(os.path.dirname(os.path.abspath(b)))
    exe = os.path.join(builddir, "fencectl", "fencectl")
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        raise harness.SetupError("fencectl not found at %s (built beside "
                                 "%s?)" % (exe, b))
    return exe


def publish(path):
    """sh: ` > path` made atomic (write a temporary, then rename), so that
    a test waiting for the file never reads it half written."""
    q = shlex.quote(path)
    tmp = shlex.quote(path + ".tmp")
    return "> %s && mv %s %s" % (tmp, tmp, q)


def wait_file(path):
    """sh: wait (at most 30 s) until `path` exists."""
    return ("i=0; while [ ! -e %s ] && [ $i -lt 1500 ]; do sleep 0.02; "
            "i=$((i+1)); done" % shlex.quote(path))


def comm(pid):
    """The command name of process `pid` (None once it is gone)."""
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


class Background:
    """A fencectl running in the background, its stdout and stderr in
    files."""

    def __init__(self, proc, outpath, errpath):
        self.proc = proc
        self.outpath = outpath
        self.errpath = errpath

    @property
    def pid(self):
        return self.proc.pid

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            harness.kill_process(self.proc)
            raise AssertionError("fencectl did not exit within %.1f s; "
                                 "stderr: %r" % (timeout, self.err()))
        finally:
            if self.proc.poll() is not None:
                harness.stop_process(self.proc)

    def out(self):
        with open(self.outpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def err(self):
        with open(self.errpath, "rb") as f:
            return f.read().decode("utf-8", "replace")


class FencectlTestCase(TestCase):
    """Runs fencectl against the class's gateway (or a private one)."""

    def setUp(self):
        super().setUp()
        self.exe = fencectl_exe()
        self.dir = tempfile.mkdtemp(prefix="fencectl-", dir=harness.tmp_root())
        self._bg = 0

    # -- running fencectl -------------------------------------------------

    def url(self, gw=None):
        return "http://127.0.0.1:%d" % (gw or self.gw).port

    def env_for(self, gw=None, **extra):
        env = dict(os.environ)
        for k in ("FENCE_LEASE", "FENCE_SEQUENCER", "FENCE_LOCK",
                  "FENCE_TOKEN", "FENCEGATE_URL"):
            env.pop(k, None)
        env["FENCEGATE_URL"] = self.url(gw)
        env.update(extra)
        return env

    def path(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        try:
            with open(self.path(name)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def touch(self, name):
        with open(self.path(name), "w"):
            pass

    def assert_clean_stderr(self, err):
        for m in harness.SANITIZER_MARKERS:
            self.assertNotIn(m.decode(), err, "sanitizer report from "
                             "fencectl:\n" + err[:4000])

    def fc(self, *args, timeout=None, env=None, gw=None):
        """Runs fencectl to its end: (exit status, stdout, stderr)."""
        timeout = timeout or slack(10.0)
        p = harness.spawn([self.exe] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=self.dir,
                          env=env or self.env_for(gw))
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            harness.kill_process(p)
            out, err = p.communicate()
            self.fail("fencectl %s did not exit within %.1f s; stderr: %r"
                      % (" ".join(args), timeout, err))
        harness.stop_process(p)
        err = err.decode("utf-8", "replace")
        self.assert_clean_stderr(err)
        return p.returncode, out.decode("utf-8", "replace"), err

    def fc_json(self, *args, **kw):
        rc, out, err = self.fc("--json", *args, **kw)
        self.assertEqual(rc, 0, "fencectl --json %s: %s" % (args, err))
        return json.loads(out)

    def start(self, *args, env=None, gw=None, **popen):
        """Starts fencectl in the background."""
        self._bg += 1
        outpath = self.path("bg%d.out" % self._bg)
        errpath = self.path("bg%d.err" % self._bg)
        with open(outpath, "wb") as out, open(errpath, "wb") as err:
            p = harness.spawn([self.exe] + list(args), stdout=out,
                              stderr=err, cwd=self.dir,
                              env=env or self.env_for(gw), **popen)
        bg = Background(p, outpath, errpath)
        self.addCleanup(self._reap, bg)
        return bg

    def _reap(self, bg):
        if bg.proc.poll() is None:
            harness.kill_process(bg.proc)
        else:
            harness.stop_process(bg.proc)
        self.assert_clean_stderr(bg.err())

    def wait_for_file(self, name, timeout=None, what=None):
        timeout = timeout or slack(10.0)
        self.wait_for(lambda: os.path.exists(self.path(name)), timeout,
                      what or "file " + name)

    def drop_lock_keys(self, name, redis=None):
        """Deletes every Redis key of lock `name`: its lease is gone, as
        far as the gateway can tell."""
        redis = redis or self.redis
        keys = redis.lock_keys(name)
        self.assertTrue(keys, "no Redis keys for lock %r" % name)
        redis.command("DEL", *keys)

    def held(self, name, gw=None):
        return self.state(name, gw)["held"]

    def wait_free(self, name, gw=None, timeout=None):
        self.wait_for(lambda: not self.held(name, gw),
                      timeout or slack(3.0), "lock %s to be free" % name)

    def observers_parked(self, gw=None):
        """The gateway's gauge of parked observe long-polls."""
        r = (gw or self.gw).request("GET", "/_fence/v1/metrics")
        self.assertEqual(r.status, 200, r)
        m = re.search(r'^fencegate_waiters\{kind="observe"\} (\d+)$',
                      r.body.decode(), re.M)
        self.assertIsNotNone(m, "no fencegate_waiters{kind=\"observe\"}")
        return int(m.group(1))

    def signal_child_script(self, rec, int_exits=True):
        """sh that records each of TERM, INT, HUP, USR1, USR2, WINCH into
        file `rec` (TERM, and INT when int_exits, then exit 5), says it is
        ready, and runs for at most 30 s."""
        r = shlex.quote(self.path(rec))
        traps = " ".join(
            "trap 'echo %s >> %s' %s;" % (s, r, s)
            for s in ("HUP", "USR1", "USR2", "WINCH"))
        on_int = "; exit 5" if int_exits else ""
        return ("%s trap 'echo TERM >> %s; exit 5' TERM; "
                "trap 'echo INT >> %s%s' INT; "
                "echo $$ > %s; i=0; while [ $i -lt 1500 ]; do sleep 0.02; "
                "i=$((i+1)); done" % (traps, r, r, on_int,
                                      shlex.quote(self.path("ready"))))


class LockTests(FencectlTestCase):

    def test_lock_gives_the_command_lock_token_sequencer_and_gateway_url(self):
        name = self.lock_name()
        script = ("ls -l /proc/$$/fd/ > %s 2>&1; "
                  "env | grep -E '^(FENCE_|FENCEGATE_URL=)' %s; %s"
                  % (shlex.quote(self.path("fds")),
                     publish(self.path("env")),
                     wait_file(self.path("go"))))
        bg = self.start("lock", name, "--ttl", "5s", "--", "sh", "-c",
                        script)
        self.wait_for_file("env")
        env = dict(line.split("=", 1) for line in
                   self.read("env").splitlines() if "=" in line)
        self.assertEqual(env.get("FENCE_LOCK"), name)
        self.assertEqual(env.get("FENCEGATE_URL"), self.url())
        self.assertNotIn("FENCE_LEASE", env, "the lease leaked to the "
                         "command")
        s = self.state(name)
        self.assertTrue(s["held"], s)
        self.assertEqual(int(env["FENCE_TOKEN"]), s["token"])
        c = self.check_ok(env["FENCE_SEQUENCER"])
        self.assertEqual(c, {"valid": True, "name": name,
                             "token": s["token"], "mode": "exclusive"})
        self.assertNotIn("socket:", self.read("fds"),
                         "the command inherited a socket of fencectl's")
        self.touch("go")
        self.assertEqual(bg.wait(slack(10.0)), 0, bg.err())
        self.assertFalse(self.held(name), "not released after the command")
        self.assertEqual(bg.err(), "")

    def test_lock_exit_status_is_the_commands_and_the_lock_is_released(self):
        name = self.lock_name()
        for script, want in (("exit 7", 7), ("true", 0),
                             ("kill -TERM $$", 128 + signal.SIGTERM),
                             ("kill -KILL $$", 128 + signal.SIGKILL)):
            rc, out, err = self.fc("lock", name, "--", "sh", "-c", script)
            self.assertEqual(rc, want, "sh -c %r: %s" % (script, err))
            self.assertEqual(err, "")
            self.assertFalse(self.held(name), "held after sh -c %r"
                             % script)

    def test_command_that_cannot_run_exits_127_or_126_and_releases(self):
        name = self.lock_name()
        rc, out, err = self.fc("lock", name, "--",
                               self.path("no-such-command"))
        self.assertEqual(rc, 127, err)
        self.assertIn("cannot run", err)
        self.assertFalse(self.held(name))
        plain = self.path("not-executable")
        with open(plain, "w") as f:
            f.write("echo hi\n")
        rc, out, err = self.fc("lock", name, "--", plain)
        self.assertEqual(rc, 126, err)
        self.assertFalse(self.held(name))

    def test_lost_lease_sends_sigterm_and_exits_79(self):
        name = self.lock_name()
        rec = shlex.quote(self.path("term"))
        script = ("trap 'date +%%s%%N > %s; exit 3' TERM; touch %s; %s"
                  % (rec, shlex.quote(self.path("ready")),
                     wait_file(self.path("never"))))
        bg = self.start("lock", name, "--ttl", "1s", "--", "sh", "-c",
                        script)
        self.wait_for_file("ready")
        t0 = time.time()
        self.drop_lock_keys(name)
        rc = bg.wait(slack(10.0))
        self.assertEqual(rc, EXIT_LEASE_LOST, bg.err())
        term = self.read("term")
        self.assertIsNotNone(term, "the command never got SIGTERM")
        # a renewal is due every third of the 1 s lease: the loss is
        # seen at the next one
        self.assertLess(int(term) / 1e9 - t0, 1.0 + slack(1.0))
        err = bg.err()
        self.assertRegex(err, r"lease on lock '%s' lost \(renew answered "
                         r"410 lease_expired\); sending SIGTERM to pid "
                         r"\d+" % re.escape(name))
        self.assertIn("exited with status 3", err)

    def test_command_ignoring_sigterm_gets_sigkill_after_kill_after(self):
        name = self.lock_name()
        # the trap stamps the signal with a builtin (the file's mtime): a
        # forked date could take longer than the margin on a loaded box
        script = ("trap ': > %s' TERM; touch %s; "
                  "while :; do sleep 0.05; done"
                  % (shlex.quote(self.path("term")),
                     shlex.quote(self.path("ready"))))
        bg = self.start("lock", name, "--ttl", "1s", "--kill-after",
                        "800ms", "--", "sh", "-c", script)
        self.wait_for_file("ready")
        self.drop_lock_keys(name)
        rc = bg.wait(slack(10.0))
        t_end = time.time()
        self.assertEqual(rc, EXIT_LEASE_LOST, bg.err())
        self.assertIsNotNone(self.read("term"),
                             "the command never got SIGTERM")
        gap = t_end - os.stat(self.path("term")).st_mtime_ns / 1e9
        self.assertGreater(gap, 0.6, "SIGKILL came too soon after SIGTERM")
        self.assertLess(gap, 0.8 + slack(1.0))
        err = bg.err()
        self.assertIn("sending SIGKILL", err)
        self.assertIn("was killed by SIGKILL", err)

    def test_processes_the_command_left_behind_are_stopped_too(self):
        # the command's shell dies of the SIGTERM; the loop it started in
        # the background ignores SIGTERM, comes to fencectl (its
        # subreaper), and gets SIGKILL after --kill-after
        name = self.lock_name()
        script = ("sh -c 'trap \"\" TERM; while :; do sleep 0.05; done' & "
                  "echo $! %s; wait" % publish(self.path("left")))
        bg = self.start("lock", name, "--ttl", "1s", "--kill-after",
                        "500ms", "--", "sh", "-c", script)
        self.wait_for_file("left")
        left = int(self.read("left"))
        self.drop_lock_keys(name)
        self.assertEqual(bg.wait(slack(10.0)), EXIT_LEASE_LOST, bg.err())
        err = bg.err()
        self.assertIn("sending SIGTERM to pid %d, which the command left "
                      "behind" % left, err)
        self.assertIn("sending SIGKILL to pid %d, which the command left "
                      "behind" % left, err)
        self.assertFalse(os.path.exists("/proc/%d" % left),
                         "a process the command left behind outlived "
                         "fencectl")

    def test_process_group_option_stops_the_commands_children_too(self):
        name = self.lock_name()
        script = ("sleep 30 & echo $! %s; wait"
                  % publish(self.path("grandchild")))
        bg = self.start("lock", name, "--ttl", "1s", "--process-group",
                        "--", "sh", "-c", script)
        self.wait_for_file("grandchild")
        pid = int(self.read("grandchild"))
        self.drop_lock_keys(name)
        self.assertEqual(bg.wait(slack(10.0)), EXIT_LEASE_LOST, bg.err())
        self.assertIn("sending SIGTERM to process group", bg.err())

        def gone():
            try:
                with open("/proc/%d/stat" % pid) as f:
                    return f.read().split(") ")[1].startswith("Z")
            except (FileNotFoundError, ProcessLookupError):
                return True
        self.wait_for(gone, slack(3.0), "the command's child to end")

    def test_signals_sent_to_fencectl_reach_the_command(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--", "sh", "-c",
                        self.signal_child_script("signals"))
        self.wait_for_file("ready")
        seen = []
        for sig, word in ((signal.SIGUSR1, "USR1"), (signal.SIGUSR2, "USR2"),
                          (signal.SIGHUP, "HUP"),
                          (signal.SIGWINCH, "WINCH")):
            os.kill(bg.pid, sig)
            seen.append(word)
            self.wait_for(lambda: (self.read("signals") or "").split()
                          == seen, slack(3.0), "the command to see " + word)
        self.assertTrue(self.held(name))
        os.kill(bg.pid, signal.SIGTERM)
        self.assertEqual(bg.wait(slack(5.0)), 5, bg.err())
        self.assertEqual(self.read("signals").split(), seen + ["TERM"])
        self.assertFalse(self.held(name))

    def test_sigint_to_fencectl_ends_a_command_without_a_handler_130(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--", "sh", "-c",
                        "echo $$ %s; exec sleep 30"
                        % publish(self.path("ready")))
        self.wait_for_file("ready")
        # the command must be sleep(1), which has no handler, by then
        pid = int(self.read("ready"))
        self.wait_for(lambda: comm(pid) == "sleep", slack(5.0),
                      "sh to exec sleep")
        os.kill(bg.pid, signal.SIGINT)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGINT, bg.err())
        self.assertFalse(self.held(name))

    def test_ctrl_c_on_the_terminal_reaches_the_command_once(self):
        # fencectl and the command share the terminal's foreground process
        # group: the terminal signals both, and fencectl must not pass the
        # signal on a second time. The command takes its signals with
        # sigtimedwait, so each one sent is seen, with who sent it.
        name = self.lock_name()
        child = (
            "import signal, sys, time\n"
            "sigs = {signal.SIGINT, signal.SIGTERM}\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, sigs)\n"
            "open(sys.argv[2], 'w').close()\n"
            "end = time.monotonic() + 30\n"
            "while time.monotonic() < end:\n"
            "    i = signal.sigtimedwait(sigs, 0.1)\n"
            "    if i is None:\n"
            "        continue\n"
            "    with open(sys.argv[1], 'a') as f:\n"
            "        f.write('%d %d %d\\n' % (i.si_signo, i.si_code,"
            " i.si_pid))\n"
            "    if i.si_signo == signal.SIGTERM:\n"
            "        sys.exit(5)\n")
        master, slave = os.openpty()

        def own_terminal():
            # a session of its own, whose controlling terminal is the pty
            # on its stdout (stdin is /dev/null)
            os.setsid()
            fcntl.ioctl(1, termios.TIOCSCTTY, 0)
        try:
            p = harness.spawn([self.exe, "lock", name, "--", "python3", "-c",
                               child, self.path("signals"),
                               self.path("ready")],
                              stdout=slave, stderr=slave, cwd=self.dir,
                              env=self.env_for(), preexec_fn=own_terminal)
        finally:
            os.close(slave)

        def seen():
            return [tuple(int(x) for x in line.split()) for line in
                    (self.read("signals") or "").splitlines()]
        try:
            self.wait_for_file("ready")
            os.write(master, b"\x03")       # Ctrl-C
            self.wait_for(seen, slack(3.0), "the command to see SIGINT")
            # a window for a second SIGINT to show: no event marks its
            # absence
            time.sleep(0.3)
            si_kernel = 0x80
            self.assertEqual(seen(), [(signal.SIGINT, si_kernel, 0)],
                             "the command did not see SIGINT once, from "
                             "the terminal")
            self.assertIsNone(p.poll(), "fencectl ended on Ctrl-C before "
                              "the command did")
            os.kill(p.pid, signal.SIGTERM)
            p.wait(slack(5.0))
            self.assertEqual(p.returncode, 5)
            # passed on by fencectl (si_code SI_USER, sent by its pid)
            self.assertEqual(seen()[1], (signal.SIGTERM, 0, p.pid))
        finally:
            harness.stop_process(p)
            os.close(master)
        self.assertFalse(self.held(name))

    def test_two_locks_on_one_name_take_turns_with_increasing_tokens(self):
        name = self.lock_name()
        log = shlex.quote(self.path("log"))
        script = ("echo start $FENCE_TOKEN $(date +%%s%%N) >> %s; "
                  "sleep 0.4; echo end $FENCE_TOKEN $(date +%%s%%N) >> %s"
                  % (log, log))
        a = self.start("lock", name, "--", "sh", "-c", script)
        self.wait_for(lambda: self.read("log"), slack(5.0), "the first "
                      "holder to start")
        b = self.start("lock", name, "--", "sh", "-c", script)
        self.assertEqual(a.wait(slack(10.0)), 0, a.err())
        self.assertEqual(b.wait(slack(10.0)), 0, b.err())
        rows = [line.split() for line in self.read("log").splitlines()]
        self.assertEqual([r[0] for r in rows], ["start", "end", "start",
                                                "end"], rows)
        self.assertEqual(rows[0][1], rows[1][1])
        self.assertEqual(rows[2][1], rows[3][1])
        self.assertGreater(int(rows[2][1]), int(rows[0][1]),
                           "the second grant's token is not greater")
        self.assertGreaterEqual(int(rows[2][2]), int(rows[1][2]),
                                "the holders overlapped")
        self.assertFalse(self.held(name))

    def test_shared_locks_run_side_by_side(self):
        name = self.lock_name()
        a = self.start("lock", name, "--shared", "--", "sh", "-c",
                       "touch %s; %s" % (shlex.quote(self.path("a")),
                                         wait_file(self.path("go"))))
        self.wait_for_file("a")
        rc, out, err = self.fc("lock", name, "--shared", "--wait", "0",
                               "--", "sh", "-c", "echo $FENCE_TOKEN")
        self.assertEqual(rc, 0, err)
        self.assertEqual(int(out), self.state(name)["token"])
        self.touch("go")
        self.assertEqual(a.wait(slack(5.0)), 0, a.err())

    def test_wait_0_on_a_held_lock_exits_75_without_running_the_command(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        marker = self.path("ran")
        rc, out, err = self.fc("lock", name, "--wait", "0", "--", "touch",
                               marker)
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)
        self.assertIn("lock '%s' is held" % name, err)
        t0 = time.monotonic()
        rc, out, err = self.fc("lock", name, "--wait", "300ms", "--",
                               "touch", marker)
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)
        self.assertGreater(time.monotonic() - t0, 0.25)
        self.assertIn("not granted within 300ms", err)
        self.assertFalse(os.path.exists(marker))
        self.release_ok(name, g["lease"])

    def test_a_waiting_lock_takes_the_lock_when_it_is_released(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        bg = self.start("lock", name, "--wait", "10s", "--", "sh", "-c",
                        "echo $FENCE_TOKEN > %s"
                        % shlex.quote(self.path("token")))
        self.wait_waiters(name, 1)
        self.release_ok(name, g["lease"])
        self.assertEqual(bg.wait(slack(5.0)), 0, bg.err())
        self.assertGreater(int(self.read("token")), g["token"])

    def test_a_signal_while_waiting_ends_the_wait_and_leaves_the_queue(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=30000)
        bg = self.start("lock", name, "--", "touch", self.path("ran"))
        self.wait_waiters(name, 1)
        os.kill(bg.pid, signal.SIGTERM)
        self.assertEqual(bg.wait(slack(5.0)), 128 + signal.SIGTERM)
        self.wait_waiters(name, 0)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.release_ok(name, g["lease"])


class GatewayDownTests(FencectlTestCase):
    """Each test has a gateway of its own, to stop or pause, on the
    class's Redis."""

    def setUp(self):
        super().setUp()
        self.gw = self.start_gateway(self.env.redis.port,
                                     self.env.upstream.port)
        self.assertTrue(self.gw.wait_healthy(slack(5.0)),
                        "the gateway did not become healthy: "
                        + self.gw.log_tail())

    def test_gateway_paused_until_the_lease_runs_out_loses_it(self):
        name = self.lock_name()
        ttl = 2.0
        bg = self.start("lock", name, "--ttl", "2s", "--", "sh", "-c",
                        "trap 'date +%%s%%N > %s; exit 3' TERM; touch %s; %s"
                        % (shlex.quote(self.path("term")),
                           shlex.quote(self.path("ready")),
                           wait_file(self.path("never"))))
        self.wait_for_file("ready")
        t_asked = time.time()     # the pause may take a while to hold
        self.gw.pause()
        t0 = time.time()
        try:
            rc = bg.wait(ttl + slack(5.0))
        finally:
            self.gw.resume()
        self.assertEqual(rc, EXIT_LEASE_LOST, bg.err())
        term = int(self.read("term")) / 1e9
        # the last renewal was sent at most a third of the lease before
        # the pause, and the lease ends a whole lease after that
        self.assertGreater(term - t_asked, ttl * 2 / 3 - 0.1)
        self.assertLess(term - t0, ttl + slack(1.0))
        self.assertRegex(bg.err(), r"lease on lock '%s' lost \(no renewal "
                         r"succeeded within its 2s lease"
                         % re.escape(name))

    def test_gateway_killed_until_the_lease_runs_out_loses_it(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--ttl", "1500ms", "--", "sh", "-c",
                        "touch %s; %s" % (shlex.quote(self.path("ready")),
                                          wait_file(self.path("never"))))
        self.wait_for_file("ready")
        self.gw.kill()
        self.assertEqual(bg.wait(slack(10.0)), EXIT_LEASE_LOST, bg.err())
        err = bg.err()
        self.assertIn("renewing the lease on lock '%s' failed" % name, err)
        self.assertIn("no renewal succeeded within its 1.5s lease", err)
        self.assertIn("was killed by SIGTERM", err)

    def test_a_short_outage_is_ridden_out(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--ttl", "3s", "--", "sh", "-c",
                        "touch %s; %s" % (shlex.quote(self.path("ready")),
                                          wait_file(self.path("go"))))
        self.wait_for_file("ready")
        self.gw.pause()
        time.sleep(1.0)   # the cause: the outage, a third of the lease
        self.gw.resume()
        # ridden out: a renewal succeeds after it (one counted from here)
        renewed = harness.metric_value(self.gw, "fencegate_lock_renewals_total")
        harness.wait_metric(self.gw, "fencegate_lock_renewals_total",
                            renewed + 1, slack(5.0))
        self.assertIsNone(bg.proc.poll(), "fencectl gave up: " + bg.err())
        self.touch("go")
        self.assertEqual(bg.wait(slack(5.0)), 0, bg.err())
        self.assertFalse(self.held(name))

    def test_a_failed_release_is_reported_and_the_status_is_the_commands(self):
        name = self.lock_name()
        bg = self.start("lock", name, "--timeout", "500ms", "--", "sh", "-c",
                        "touch %s; %s; exit 7"
                        % (shlex.quote(self.path("ready")),
                           wait_file(self.path("go"))))
        self.wait_for_file("ready")
        try:
            # the command ends, and the release starts, only once every
            # thread of the gateway has stopped: kill(2) returns before
            # the group stop, and on a busy core a thread not yet stopped
            # would serve the release. pause() waits for that, bounded.
            self.gw.pause()
            self.touch("go")
            rc = bg.wait(slack(10.0))
        finally:
            self.gw.resume()
        err = bg.err()
        self.assertEqual(rc, 7, err)
        self.assertIn("could not release lock '%s'" % name, err)
        self.assertIn("timed out", err)

    @harness.single_redis("restarts its redis-server empty")
    def test_redis_restarted_empty_loses_the_lease(self):
        env = self.start_env()     # its own Redis, to restart
        self.gw = env.gw
        name = self.lock_name()
        bg = self.start("lock", name, "--ttl", "1s", "--", "sh", "-c",
                        "trap 'touch %s; exit 3' TERM; touch %s; %s"
                        % (shlex.quote(self.path("term")),
                           shlex.quote(self.path("ready")),
                           wait_file(self.path("never"))))
        self.wait_for_file("ready")
        self.redis = env.redis = env.redis.restart_empty()
        self.assertEqual(bg.wait(slack(10.0)), EXIT_LEASE_LOST, bg.err())
        self.assertTrue(os.path.exists(self.path("term")))
        self.assertIn("lost", bg.err())

    def test_no_gateway_exits_69(self):
        self.gw.kill()
        for args in (("inspect", "x"), ("acquire", "x"),
                     ("lock", "x", "--wait", "0", "--", "true"),
                     ("check", "fg1.x")):
            rc, out, err = self.fc(*args)
            self.assertEqual(rc, EXIT_UNAVAILABLE, "%s: %s" % (args, err))
            self.assertIn("127.0.0.1", err)

    def test_a_wait_with_no_gateway_answering_ends_at_unreachable(self):
        self.gw.kill()
        name = self.lock_name()
        t0 = time.monotonic()
        rc, out, err = self.fc("lock", name, "--unreachable", "2s", "--",
                               "true", timeout=slack(15.0))
        took = time.monotonic() - t0
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertGreater(took, 1.9)
        self.assertLess(took, 2.0 + slack(3.0))
        # said at once, and once, then the end
        self.assertEqual(err.count("no gateway answers"), 1, err)
        self.assertIn("still trying, each in turn, for at most 2s", err)
        self.assertIn("no gateway answered for 2s (--unreachable)", err)
        # -w ends the wait first when it is the shorter bound
        t0 = time.monotonic()
        rc, out, err = self.fc("lock", name, "-w", "1s", "--", "true",
                               timeout=slack(15.0))
        took = time.monotonic() - t0
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertLess(took, 1.0 + slack(3.0))
        self.assertIn("for at most 30s", err)   # the default
        # -n: one try, as before
        rc, out, err = self.fc("lock", name, "-n", "--unreachable", "5s",
                               "--", "true")
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertNotIn("still trying", err)

    def test_a_gateway_that_comes_up_within_unreachable_is_used(self):
        port = self.gw.port
        self.gw.stop()
        name = self.lock_name()
        bg = self.start("lock", name, "--unreachable", "60s", "--", "sh",
                        "-c", "echo $FENCE_TOKEN %s"
                        % publish(self.path("token")))
        self.wait_for(lambda: "no gateway answers" in bg.err(),
                      slack(10.0), "fencectl to say no gateway answers")
        self.assertIsNone(bg.proc.poll(), bg.err())
        g = harness.Gateway(self.env.redis.port, self.env.upstream.port,
                            port=port)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start()
        self.assertEqual(bg.wait(slack(20.0)), 0, bg.err())
        self.assertRegex(self.read("token") or "", r"^\d+\n$")
        self.assertEqual(bg.err().count("still trying"), 1, bg.err())

    def test_a_gateway_that_never_answers_is_bounded_by_timeout(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            url = "http://127.0.0.1:%d" % s.getsockname()[1]
            t0 = time.monotonic()
            rc, out, err = self.fc("--gateway", url, "inspect", "x",
                                   "--timeout", "500ms")
            self.assertEqual(rc, EXIT_UNAVAILABLE, err)
            self.assertLess(time.monotonic() - t0, 0.5 + slack(1.0))
            self.assertIn("timed out", err)


class SubcommandTests(FencectlTestCase):

    def test_acquire_renew_release_with_json(self):
        name = self.lock_name()
        g = self.fc_json("acquire", name, "--ttl", "20s", "--owner", "me")
        self.assert_lease(g["lease"])
        self.assertEqual((g["name"], g["mode"], g["ttl_ms"], g["holds"]),
                         (name, "exclusive", 20000, 1))
        s = self.state(name)
        self.assertEqual((s["held"], s["token"], s["owner"]),
                         (True, g["token"], "me"))
        again = self.fc_json("acquire", name, "--lease", g["lease"])
        self.assertEqual((again["token"], again["holds"]), (g["token"], 2))
        r = self.fc_json("renew", name, "--lease", g["lease"], "--ttl",
                         "40s", "--value", "v1")
        self.assertEqual(r, {"name": name, "token": g["token"],
                             "ttl_ms": 40000})
        self.assertEqual(self.state(name).get("value"), "v1")
        env = self.env_for(FENCE_LEASE=g["lease"])
        rc, out, err = self.fc("release", name, env=env)
        self.assertEqual((rc, out, err), (0, "", ""))
        self.assertTrue(self.held(name), "one release undid both holds")
        rel = self.fc_json("release", name, env=env)
        self.assertEqual(rel, {"name": name, "released": True})
        self.assertFalse(self.held(name))
        rc, out, err = self.fc("release", name, env=env)
        self.assertEqual(rc, EXIT_LEASE_LOST, err)
        self.assertIn("does not hold it", err)
        self.assertNotIn(g["lease"], err, "the lease was printed")
        rc, out, err = self.fc("renew", name, "--lease", g["lease"])
        self.assertEqual(rc, EXIT_LEASE_LOST, err)
        self.assertNotIn(g["lease"], err, "the lease was printed")

    def test_acquire_prints_variables_that_renew_release_and_check_use(self):
        name = self.lock_name()
        q = shlex.quote
        script = ('eval "$(%s acquire %s --ttl 10s)" || exit 90; '
                  'echo "$FENCE_LOCK $FENCE_TOKEN"; '
                  '%s check >/dev/null || exit 91; '
                  '%s renew "$FENCE_LOCK" || exit 92; '
                  '%s release "$FENCE_LOCK" || exit 93; '
                  '%s check; echo "check=$?"'
                  % (q(self.exe), q(name), q(self.exe), q(self.exe),
                     q(self.exe), q(self.exe)))
        p = subprocess.run(["sh", "-c", script], capture_output=True,
                           timeout=slack(15.0), env=self.env_for(),
                           cwd=self.dir)
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = out.splitlines()
        lock, token = lines[0].split()
        self.assertEqual(lock, name)
        self.assertGreater(int(token), 0)
        self.assertIn("not valid: expired", out)
        self.assertEqual(lines[-1], "check=%d" % EXIT_INVALID)
        self.assertFalse(self.held(name))

    def test_acquire_wait_0_on_a_held_lock_exits_75(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        rc, out, err = self.fc("acquire", name)
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)
        self.assertEqual(out, "")
        rc, out, err = self.fc("acquire", name, "--wait", "200ms",
                               "--shared")
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)
        self.release_ok(name, g["lease"])

    def test_inspect_text_and_json(self):
        name = self.lock_name()
        g = self.acquire_ok(name, owner="worker 7", value="a\nb")
        j = self.fc_json("inspect", name)
        s = self.state(name)
        s.pop("ttl_ms")
        self.assertLessEqual(j.pop("ttl_ms"), 30000)
        self.assertEqual(j, s)
        rc, out, err = self.fc("inspect", name)
        self.assertEqual(rc, 0, err)
        self.assertIn("name: %s\n" % name, out)
        self.assertIn("held: true\n", out)
        self.assertIn("token: %d\n" % g["token"], out)
        self.assertIn('owner: "worker 7"\n', out)
        self.assertIn('value: "a\\nb"\n', out)
        self.release_ok(name, g["lease"])
        rc, out, err = self.fc("inspect", name)
        self.assertIn("held: false\n", out)

    def test_inspect_text_shows_delay_ms(self):
        delay = 60000
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=delay)
        rc, out, err = self.fc("inspect", name)
        self.assertEqual(rc, 0, err)
        self.assertIn("delay_ms: 0\n", out)          # held: no delay
        # a break starts the lock-delay; what remains is shown, below it
        r = self.req("DELETE", LOCKS + name,
                     headers={"Fence-Break": str(g["token"])})
        self.assertEqual(r.status, 204, r)
        rc, out, err = self.fc("inspect", name)
        self.assertEqual(rc, 0, err)
        self.assertIn("held: false\n", out)
        m = re.search(r"(?m)^delay_ms: ([0-9]+)$", out)
        self.assertIsNotNone(m, out)
        self.assertTrue(0 < int(m.group(1)) <= delay, out)
        self.assertLess(out.index("ttl_ms:"), out.index("delay_ms:"))
        rc, out, err = self.fc("inspect", name, "--json")
        self.assertGreater(json.loads(out)["delay_ms"], 0, out)

    def test_a_try_once_refused_for_lock_delay_says_so(self):
        name = self.lock_name()
        g = self.acquire_ok(name, ttl_ms=60000, lock_delay_ms=60000)
        r = self.req("DELETE", LOCKS + name,
                     headers={"Fence-Break": str(g["token"])})
        self.assertEqual(r.status, 204, r)
        for args in (("acquire", name), ("lock", name, "-n", "--", "true")):
            rc, out, err = self.fc(*args)
            self.assertEqual(rc, 75, err)
            self.assertIn("lock '%s' is in lock-delay: it can be granted in"
                          % name, err)
        # held, it is held
        other = self.lock_name("held")
        self.acquire_ok(other, ttl_ms=60000)
        rc, out, err = self.fc("acquire", other)
        self.assertEqual(rc, 75, err)
        self.assertIn("lock '%s' is held" % other, err)

    def test_inspect_watch_prints_a_line_per_change(self):
        name = self.lock_name()
        for json_mode in (False, True):
            args = ["inspect", name, "--watch"] + (["--json"] if json_mode
                                                    else [])
            p = harness.spawn([self.exe] + args, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=self.env_for(),
                              cwd=self.dir)
            lines = []

            def reader():
                for line in p.stdout:
                    lines.append(line.decode())
            t = threading.Thread(target=reader, daemon=True)
            t.start()
            try:
                self.wait_for(lambda: len(lines) >= 1, slack(5.0),
                              "the first line")
                # the long-poll after it must be parked before the change:
                # while the lock is free it waits for a change from the
                # state its call found, and a grant made before that is
                # seen only when the poll's 10 s run out
                self.wait_for(lambda: self.observers_parked() >= 1,
                              slack(5.0), "the watch's long-poll to park")
                g = self.acquire_ok(name, value="v")
                self.wait_for(lambda: len(lines) >= 2, slack(5.0),
                              "a line for the grant")
                self.release_ok(name, g["lease"])
                self.wait_for(lambda: len(lines) >= 3, slack(5.0),
                              "a line for the release")
                # a window for a line too many to show: no event marks
                # its absence
                time.sleep(0.3)
                self.assertEqual(len(lines), 3, lines)
            finally:
                harness.kill_process(p)
                t.join(slack(2.0))
            # the killed watch's long-poll is let go before the next
            # watch's is waited for: the gauge must count the new one
            self.wait_for(lambda: self.observers_parked() == 0, slack(5.0),
                          "the killed watch's long-poll to end")
            if json_mode:
                states = [json.loads(x) for x in lines]
                self.assertEqual([s["held"] for s in states],
                                 [False, True, False])
                self.assertEqual(states[1]["token"], g["token"])
                self.assertEqual(states[1]["value"], "v")
            else:
                self.assertRegex(lines[0], r"^\S+Z free ")
                self.assertRegex(lines[1], r"^\S+Z held exclusive token=%d "
                                 % g["token"])
                self.assertIn('value="v"', lines[1])
                self.assertRegex(lines[2], r"^\S+Z free token=%d "
                                 % g["token"])

    def test_check_valid_and_each_reason(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        rc, out, err = self.fc("check", g["sequencer"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "valid: lock '%s', token %d, exclusive\n"
                         % (name, g["token"]))
        j = self.fc_json("check", g["sequencer"])
        self.assertEqual(j["valid"], True)
        env = self.env_for(FENCE_SEQUENCER=harness.tamper(g["sequencer"]))
        rc, out, err = self.fc("check", env=env)
        self.assertEqual(rc, EXIT_INVALID, err)
        self.assertTrue(out.startswith("not valid: forged"), out)
        rc, out, err = self.fc("check", "not-a-sequencer")
        self.assertEqual(rc, EXIT_INVALID)
        self.assertTrue(out.startswith("not valid: malformed"), out)
        self.release_ok(name, g["lease"])
        rc, out, err = self.fc("--json", "check", g["sequencer"])
        self.assertEqual(rc, EXIT_INVALID)
        self.assertEqual(json.loads(out), {"valid": False,
                                           "reason": "expired"})
        g2 = self.acquire_ok(name)
        rc, out, err = self.fc("check", g["sequencer"])
        self.assertEqual(rc, EXIT_INVALID)
        self.assertTrue(out.startswith("not valid: stale"), out)
        self.release_ok(name, g2["lease"])

    def test_elect_runs_the_leader_and_a_second_candidate_waits(self):
        name = self.lock_name()
        script = ("echo $FENCE_TOKEN %s; " + wait_file(self.path("%s")))
        a = self.start("elect", name, "node-a", "--ttl", "2s", "--", "sh",
                       "-c", script % (publish(self.path("a")),
                                       "go-a"))
        self.wait_for_file("a")
        b = self.start("elect", name, "node-b", "--ttl", "2s", "--", "sh",
                       "-c", script % (publish(self.path("b")),
                                       "go-b"))
        self.wait_waiters(name, 1)
        s = self.state(name)
        self.assertEqual((s["held"], s.get("value")), (True, "node-a"))
        self.assertEqual(s["token"], int(self.read("a")))
        # a renewal period passes (a renews) and a keeps leading
        renewed = harness.metric_value(self.gw, "fencegate_lock_renewals_total")
        harness.wait_metric(self.gw, "fencegate_lock_renewals_total",
                            renewed + 1, slack(5.0))
        self.assertIsNone(self.read("b"), "two leaders at once")
        self.touch("go-a")
        self.assertEqual(a.wait(slack(5.0)), 0, a.err())
        self.wait_for_file("b")
        s = self.state(name)
        self.assertEqual((s["held"], s.get("value")), (True, "node-b"))
        self.assertGreater(int(self.read("b")), int(self.read("a")))
        self.touch("go-b")
        self.assertEqual(b.wait(slack(5.0)), 0, b.err())
        self.assertFalse(self.held(name))

    def test_bad_lock_names_are_refused_by_the_gateway_65(self):
        # escaped in the path, so the gateway sees (and refuses) the very
        # name given: 'a?b' is not lock 'a' with a query
        for name in ("a b", "a?b", "a#b", "x/../y", "a//b", "caf\u00e9"):
            rc, out, err = self.fc("acquire", name)
            self.assertEqual(rc, EXIT_REFUSED, "%r: %s" % (name, err))
            self.assertIn("bad_lock_name", err)
        self.assertEqual(self.state("a")["token"], None)

    def test_gateway_option_overrides_the_environment(self):
        name = self.lock_name()
        env = self.env_for()
        env["FENCEGATE_URL"] = "http://127.0.0.1:%d" % harness.free_port()
        rc, out, err = self.fc("inspect", name, env=env)
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        rc, out, err = self.fc("--gateway", self.url() + "/", "inspect",
                               name, env=env)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.fc("inspect", name, "--gateway=" + self.url(),
                               env=env)
        self.assertEqual(rc, 0, err)


class UsageTests(FencectlTestCase):
    axes = ("build",)       # fencectl alone
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.port = harness.free_port()   # nothing listens there

    def url(self, gw=None):
        return "http://127.0.0.1:%d" % self.port

    def test_bad_usage_exits_64_with_a_message(self):
        cases = [
            (), ("frobnicate",), ("--nope", "inspect", "x"),
            ("inspect",), ("inspect", "x", "y"), ("inspect", "x", "--ttl",
                                                  "1s"),
            ("lock",), ("lock", "x", "-c"),
            ("lock", "x", "--ttl", "soon", "--", "true"),
            ("lock", "x", "--ttl", "50ms", "--", "true"),
            ("lock", "x", "--ttl", "2h", "--", "true"),
            ("lock", "x", "--wait", "-1", "--", "true"),
            ("lock", "x", "--wait", "1.5ms", "--", "true"),
            ("lock", "x", "--kill-after", "x", "--", "true"),
            ("lock", "x", "--ttl"), ("elect", "x"),
            ("acquire", ""), ("acquire", "x", "--json=yes"),
            ("acquire", "x", "--lease", "a b"),
            ("renew", "x"), ("release", "x"), ("check",),
            ("--gateway", "ftp://h", "inspect", "x"),
            ("--timeout", "0", "inspect", "x"), ("help", "nope"),
            ("acquire", "x", "--owner", b"\xff"),
            ("elect", "x", b"\xfe", "--", "true"), ("check", b"\xfe"),
        ]
        for args in cases:
            rc, out, err = self.fc(*args)
            self.assertEqual(rc, EXIT_USAGE, "fencectl %r exited %d: %r"
                             % (args, rc, err))
            self.assertTrue(err.startswith("fencectl: "), (args, err))
            self.assertIn("--help", err, args)
            self.assertEqual(out, "", args)

    def test_help_on_every_subcommand_exits_0(self):
        for args in (("--help",), ("-h",), ("help",)):
            rc, out, err = self.fc(*args)
            self.assertEqual((rc, err), (0, ""), args)
            self.assertIn("Usage: fencectl", out)
            for cmd in SUBCOMMANDS:
                self.assertIn("  " + cmd + " ", out)
            self.assertIn("79", out)
        for cmd in SUBCOMMANDS:
            for args in ((cmd, "--help"), (cmd, "-h"), ("help", cmd),
                         (cmd, "x", "--help")):
                rc, out, err = self.fc(*args)
                self.assertEqual((rc, err), (0, ""), args)
                self.assertTrue(out.startswith("Usage: fencectl " + cmd),
                                (args, out[:80]))
        rc, out, err = self.fc("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^fencectl \d+\.\d+\.\d+\n$")


class ScriptedGatewayHandler(Handler):
    """A stand-in for the gateway: records every request and answers what
    the test's script(method, path, body) returns: (status, JSON or None,
    delay in seconds)."""

    def _answer(self):
        raw = read_request_body(self)
        body = json.loads(raw) if raw else None
        self.server.records.append({
            "method": self.command, "path": self.path, "body": body,
            "lease": self.headers.get("Fence-Lease")})
        status, payload, delay = self.server.script(self.command, self.path,
                                                    body)
        if delay:
            time.sleep(delay)
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer


LEASE = "L" * 22


def grant(name, token=5, ttl_ms=30000):
    return {"name": name, "lease": LEASE, "token": token,
            "mode": "exclusive", "ttl_ms": ttl_ms,
            "sequencer": "fg1.stand-in.%d" % token, "holds": 1}


HELD = (409, {"error": "lock_held", "message": "the lock is held"}, 0)
UNAVAILABLE = (503, {"error": "lock_store_unavailable",
                     "message": "the lock store (Redis) cannot be reached"}, 0)


class ScriptedGatewayTests(FencectlTestCase):
    """What fencectl sends, seen by a stand-in gateway that answers as each
    test scripts it."""
    axes = ("build",)       # fencectl against a stand-in gateway
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.fake = StandIn(handler=ScriptedGatewayHandler).start()
        self.addCleanup(self.fake.stop)

    def url(self, gw=None):
        return "http://127.0.0.1:%d" % self.fake.port

    def script(self, fn):
        self.fake.server.script = fn

    def sent(self, method):
        return [r for r in self.fake.records if r["method"] == method]

    def test_a_wait_is_asked_for_in_calls_of_at_most_300000_ms(self):
        name = "n"
        posts = []

        def answer(method, path, body):
            if method == "POST":
                posts.append(body)
                return HELD if len(posts) < 3 else (200, grant(name), 0)
            if method == "PATCH":
                return 200, {"name": name, "token": 5, "ttl_ms": 30000}, 0
            return 204, None, 0
        self.script(answer)
        rc, out, err = self.fc("lock", name, "--wait", "10m", "--", "sh",
                               "-c", "echo $FENCE_TOKEN $FENCE_SEQUENCER")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "5 fg1.stand-in.5\n")
        self.assertEqual([b["wait_ms"] for b in posts], [300000] * 3)
        deletes = self.sent("DELETE")
        self.assertEqual(len(deletes), 1)
        self.assertEqual(deletes[0]["lease"], LEASE)
        self.assertEqual(deletes[0]["path"], "/_fence/v1/locks/n")

    def test_each_call_of_a_wait_asks_for_what_remains(self):
        self.script(lambda method, path, body: HELD)
        rc, out, err = self.fc("acquire", "n", "--wait", "1500ms")
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)
        waits = [r["body"]["wait_ms"] for r in self.sent("POST")]
        self.assertEqual(waits[0], 1500)
        self.assertGreaterEqual(len(waits), 2, waits)
        self.assertEqual(waits, sorted(waits, reverse=True))
        self.assertLess(waits[-1], 1500)
        self.fake.server.records.clear()
        rc, out, err = self.fc("acquire", "n", "--wait", "0")
        self.assertEqual(rc, EXIT_NOT_OBTAINED, err)
        self.assertEqual([r["body"]["wait_ms"] for r in self.sent("POST")],
                         [0])

    def test_an_unavailable_gateway_is_asked_again_while_the_wait_lasts(self):
        name = "n"
        posts = []

        def answer(method, path, body):
            if method == "POST":
                posts.append(body)
                return UNAVAILABLE if len(posts) < 3 else \
                    (200, grant(name), 0)
            return 204, None, 0
        self.script(answer)
        rc, out, err = self.fc("lock", name, "--wait", "10s", "--", "true")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(posts), 3)
        self.assertEqual(err.count("still trying"), 1, err)
        self.script(lambda method, path, body: UNAVAILABLE)
        rc, out, err = self.fc("lock", name, "--wait", "0", "--", "true")
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertIn("503 lock_store_unavailable", err)

    def test_a_failed_renewal_is_tried_again_before_the_lease_ends(self):
        name = "n"
        patches = []

        def answer(method, path, body):
            if method == "POST":
                return 200, grant(name, ttl_ms=900), 0
            if method == "PATCH":
                patches.append(time.monotonic())
                if len(patches) == 1:
                    return UNAVAILABLE
                return 200, {"name": name, "token": 5, "ttl_ms": 900}, 0
            return 204, None, 0
        self.script(answer)
        rc, out, err = self.fc("lock", name, "--", "sleep", "1")
        self.assertEqual(rc, 0, err)
        self.assertIn("renewing the lease on lock 'n' failed (503 "
                      "lock_store_unavailable", err)
        self.assertIn("renewed the lease on lock 'n' again, after 1 "
                      "failed attempt", err)
        # the retry came after the 250 ms back-off, before the next
        # regular renewal (a third of the lease, 300 ms) would have
        self.assertGreater(patches[1] - patches[0], 0.2)
        self.assertLess(patches[1] - patches[0], 0.3 + slack(0.2))
        for p in self.sent("PATCH"):
            self.assertEqual(p["body"], {"lease": LEASE, "ttl_ms": 900})
        self.assertNotIn(LEASE, err)

    def test_lock_names_are_escaped_per_segment_in_the_path(self):
        state = {"name": "x", "held": False, "mode": None, "token": None,
                 "holders": 0, "waiters": 0, "ttl_ms": 0}
        self.script(lambda method, path, body: (200, state, 0))
        for name, path in (("a b/c?d#e%f", "a%20b/c%3Fd%23e%25f"),
                           ("orders/42", "orders/42"),
                           ("x/../y", "x/../y")):
            rc, out, err = self.fc("inspect", name)
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.fake.records[-1]["path"],
                             "/_fence/v1/locks/" + path)
        rc, out, err = self.fc("--gateway", self.url() + "/prefix/",
                               "inspect", "x")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.fake.records[-1]["path"],
                         "/prefix/_fence/v1/locks/x")

    def test_answers_that_are_not_the_gateways_exit_76(self):
        self.script(lambda method, path, body: (200, {"hello": 1}, 0))
        rc, out, err = self.fc("acquire", "n")
        self.assertEqual(rc, 76, err)
        rc, out, err = self.fc("inspect", "n")
        self.assertEqual(rc, 76, err)
        self.script(lambda method, path, body: (404, {"x": 1}, 0))
        rc, out, err = self.fc("check", "fg1.x")
        self.assertEqual(rc, 76, err)
        self.assertIn("HTTP 404", err)
