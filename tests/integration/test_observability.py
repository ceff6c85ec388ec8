"""test_observability.py - what an operator sees of a gateway's
dependencies and settings: a dependency going down and coming back is
logged at warn with its address and the reason, at most one line per
dependency per quiet time (base/flap.h); SIGHUP says what it read again
and names each changed setting that waits for a restart; the metrics
exposition (process_*, long-poll durations) passes promtool and moves."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import TestCase, slack, wait_until
from test_operations import parse_metrics, sample

QUIET_S = 10.0   # FG_FLAP_QUIET_MS


def log_lines(gw):
    """The gateway's log lines past the harness's argv line."""
    with open(gw.logpath, errors="replace") as f:
        return [l for l in f.read().splitlines() if not l.startswith("### ")]


def lines_matching(gw, pattern):
    rx = re.compile(pattern)
    return [l for l in log_lines(gw) if rx.search(l)]


class DependencyLogTests(TestCase):
    """Each test stops and starts a dependency of its own gateway."""
    uses_shared_env = False

    def wait_line(self, gw, pattern, timeout):
        found = wait_until(lambda: lines_matching(gw, pattern), timeout, 0.05)
        self.assertTrue(found, "no line matching %r within %.0f s; log:\n%s"
                        % (pattern, timeout, "\n".join(log_lines(gw)[-30:])))
        return found

    def test_upstream_down_and_back_is_logged_with_address_and_reason(self):
        env = self.start_env()
        addr = re.escape("upstream 127.0.0.1:%d" % env.upstream.port)
        env.upstream.stop()
        down = self.wait_line(env.gw, r" warn %s is down: Connection refused$" % addr,
                              slack(5.0))
        self.assertEqual(len(down), 1, down)
        env.upstream.start()
        # the quiet time since the down line bounds when the up line comes
        up = self.wait_line(env.gw, r" warn %s is up again after [0-9.]+ s down" % addr,
                            QUIET_S + slack(5.0))
        self.assertEqual(len(up), 1, up)
        self.assertEqual(lines_matching(env.gw, r" (info|warn|error) %s is down" % addr),
                         down)

    @harness.single_redis("stops the one redis-server")
    def test_redis_down_and_back_is_logged_with_address_and_reason(self):
        env = self.start_env()
        addr = re.escape("redis 127.0.0.1:%d" % env.redis.port)
        env.redis.stop()
        # the reason names the server and hiredis' error (errno's text)
        down = self.wait_line(
            env.gw, r" warn %s is down: 127\.0\.0\.1:%d: \S.*$"
            % (addr, env.redis.port), slack(5.0))
        self.assertEqual(len(down), 1, down)
        env.redis.start()
        up = self.wait_line(env.gw, r" warn %s is up again after [0-9.]+ s down" % addr,
                            QUIET_S + slack(5.0))
        self.assertEqual(len(up), 1, up)

    def test_a_flapping_upstream_cannot_flood_the_log(self):
        env = self.start_env()
        addr = re.escape("upstream 127.0.0.1:%d" % env.upstream.port)

        def seen(state):
            return wait_until(lambda: env.gw.request(
                "GET", "/_fence/v1/readyz").json.get("upstream") == state,
                slack(5.0), 0.05)
        t0 = time.monotonic()
        # down and up four times, each change seen by the gateway's probe
        for _ in range(4):
            env.upstream.stop()
            self.assertTrue(seen("down"))
            env.upstream.start()
            self.assertTrue(seen("up"))
        elapsed = time.monotonic() - t0
        lines = lines_matching(env.gw, r"%s is (down|up)" % addr)
        # the start's line, then one per quiet time at most
        self.assertLessEqual(len(lines), 2 + int(elapsed / QUIET_S), lines)
        # it settles up: the log ends saying so, and counts the changes
        # it did not log
        self.wait_line(env.gw, r"%s is up again" % addr, QUIET_S + slack(5.0))
        last = lambda: lines_matching(env.gw, r"%s is (down|up)" % addr)[-1]
        self.assertTrue(wait_until(lambda: "is up again" in last(),
                                   QUIET_S + slack(5.0), 0.1), last())
        hidden = sum(int(n) for l in lines_matching(env.gw, addr)
                     for n in re.findall(r"\((\d+) changes", l))
        said = len(lines_matching(env.gw, r"%s is (down|up again)" % addr))
        # 8 changes: each one said or counted
        self.assertEqual(hidden + said, 8,
                         lines_matching(env.gw, r"%s is (down|up)" % addr))


class ReloadTests(TestCase):
    """SIGHUP with a config file."""
    uses_shared_env = False

    def start_with_config(self, text):
        d = tempfile.mkdtemp(dir=harness.tmp_root())
        path = os.path.join(d, "fencegate.conf")
        with open(path, "w") as f:
            f.write(text)
        env = self.start_env(flags=["--config", path])
        return env, path

    def hup_and_wait(self, gw, pattern):
        before = len(lines_matching(gw, r"SIGHUP: (changed|the settings)"))
        gw.proc.send_signal(signal.SIGHUP)
        ok = wait_until(lambda: len(lines_matching(gw, r"SIGHUP: (changed|the settings)"))
                        > before, slack(5.0), 0.05)
        self.assertTrue(ok, "no SIGHUP line; log:\n%s" % "\n".join(log_lines(gw)[-20:]))
        last = lines_matching(gw, r"SIGHUP: (changed|the settings)")[-1]
        self.assertRegex(last, pattern)
        return last

    def test_sighup_names_changed_settings_that_need_a_restart(self):
        env, path = self.start_with_config("max-waiters 100\nlock-delay-ms 0\n")
        self.hup_and_wait(env.gw, r" info SIGHUP: the settings are those in force$")
        with open(path, "w") as f:
            f.write("max-waiters 200\nlock-delay-ms 5\n")
        line = self.hup_and_wait(
            env.gw, r" warn SIGHUP: changed settings not applied until a restart: "
                    r"max-waiters, lock-delay-ms$")
        self.assertNotIn("200", line)
        # the running settings stay: still alive and serving
        self.assert_alive(env.gw)

    def test_sighup_with_a_config_that_no_longer_reads_keeps_the_running_one(self):
        env, path = self.start_with_config("max-waiters 100\n")
        with open(path, "w") as f:
            f.write("max-waiters lots\n")
        self.hup_and_wait(env.gw, r" warn SIGHUP: the settings no longer read "
                                  r"\(.*max-waiters: 'lots'.*\); the running ones stay")
        self.assert_alive(env.gw)


class ProcessMetricsTests(TestCase):
    """The process collector's families and the long-poll histogram."""

    def scrape(self):
        r = self.gw.request("GET", "/_fence/v1/metrics")
        self.assertEqual(r.status, 200, r)
        return r.body.decode()

    def test_promtool_accepts_process_and_wait_families(self):
        promtool = shutil.which("promtool")
        if not promtool:
            raise harness.SetupError("promtool (Debian package prometheus) "
                                     "is not installed")
        text = self.scrape()
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30)
        self.assertEqual(p.returncode, 0, "promtool: %s" % p.stdout.decode())
        for family, kind in (("process_cpu_seconds_total", "counter"),
                             ("process_resident_memory_bytes", "gauge"),
                             ("process_virtual_memory_bytes", "gauge"),
                             ("process_open_fds", "gauge"),
                             ("process_max_fds", "gauge"),
                             ("process_start_time_seconds", "gauge"),
                             ("fencegate_lock_wait_duration_seconds", "histogram"),
                             ("fencegate_locks_held", "gauge"),
                             ("fencegate_lock_lease_expired_total", "counter")):
            self.assertIn("# TYPE %s %s\n" % (family, kind), text)

    def test_process_figures_are_this_process(self):
        m = parse_metrics(self.scrape())
        pid = self.gw.proc.pid
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        fields = st[st.rindex(")") + 2:].split()
        vsize = int(fields[20])
        with open("/proc/stat") as f:
            btime = int(next(l for l in f if l.startswith("btime ")).split()[1])
        start = btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
        self.assertAlmostEqual(sample(m, "process_start_time_seconds"), start, delta=0.05)
        self.assertGreater(sample(m, "process_resident_memory_bytes"), 1 << 20)
        self.assertGreater(sample(m, "process_virtual_memory_bytes"), 0)
        # the address space moves a little between two readings
        self.assertLess(abs(sample(m, "process_virtual_memory_bytes") - vsize),
                        vsize / 2)
        nfds = len(os.listdir("/proc/%d/fd" % pid))
        self.assertGreater(sample(m, "process_open_fds"), 3)
        self.assertLess(abs(sample(m, "process_open_fds") - nfds), 64)
        with open("/proc/%d/limits" % pid) as f:
            soft = next(l for l in f if l.startswith("Max open files")).split()[3]
        self.assertEqual(sample(m, "process_max_fds"), float(soft))
        self.assertGreaterEqual(sample(m, "process_cpu_seconds_total"), 0.0)

    def test_a_blocking_acquire_is_timed_in_the_wait_histogram(self):
        def count(m, kind):
            return sample(m, "fencegate_lock_wait_duration_seconds_count", kind=kind)

        def le(m, kind, bound):
            return sample(m, "fencegate_lock_wait_duration_seconds_bucket",
                          kind=kind, le=bound)
        before = parse_metrics(self.scrape())
        name = self.lock_name("waited")
        g = self.acquire_ok(name, ttl_ms=30000)
        w = self.waiter(name, wait_ms=600, ttl_ms=5000)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 409, r)   # it timed out waiting
        self.release_ok(name, g["lease"])
        after = wait_until(lambda: (lambda m: m if count(m, "acquire") >
                                    count(before, "acquire") else None)
                           (parse_metrics(self.scrape())), slack(5.0), 0.05)
        self.assertIsNotNone(after, "the wait was not counted")
        self.assertEqual(count(after, "acquire") - count(before, "acquire"), 1)
        # it lasted at least its 600 ms: above the 0.5 s bucket
        self.assertEqual(le(after, "acquire", "0.5") - le(before, "acquire", "0.5"), 0)
        self.assertEqual(le(after, "acquire", "300") - le(before, "acquire", "300"), 1)
        self.assertEqual(le(after, "acquire", "+Inf") - le(after, "acquire", "300"),
                         le(before, "acquire", "+Inf") - le(before, "acquire", "300"))


class HeldMetricsTests(TestCase):
    """fencegate_locks_held and fencegate_lock_lease_expired_total: the
    grants made through this gateway, and their leases seen to run out
    at their end, without the client coming back."""

    def m(self):
        return parse_metrics(self.gw.request("GET", "/_fence/v1/metrics").body.decode())

    def held(self):
        return sample(self.m(), "fencegate_locks_held")

    def expired(self):
        return sample(self.m(), "fencegate_lock_lease_expired_total")

    def test_an_expiry_is_counted_without_the_client_coming_back(self):
        held0, expired0 = self.held(), self.expired()
        came_back0 = sample(self.m(), "fencegate_lock_expiries_total")
        name = self.lock_name("expires")
        t0 = time.monotonic()
        self.acquire_ok(name, ttl_ms=1000)
        self.assertEqual(self.held(), held0 + 1)
        # the lease's end, the grace, one maintenance period, and slack
        self.assertTrue(wait_until(lambda: self.expired() == expired0 + 1,
                                   1.0 + 0.1 + 1.0 + slack(5.0), 0.05),
                        "the expiry was not counted")
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)
        self.assertEqual(self.held(), held0)
        # nobody came back to find it gone
        self.assertEqual(sample(self.m(), "fencegate_lock_expiries_total"), came_back0)

    def test_release_and_break_end_a_hold_without_an_expiry(self):
        held0, expired0 = self.held(), self.expired()
        a, b = self.lock_name("released"), self.lock_name("broken")
        # the leases outlast the calls below on a loaded machine
        ga = self.acquire_ok(a, ttl_ms=3000)
        gb = self.acquire_ok(b, ttl_ms=3000)
        self.assertEqual(self.held(), held0 + 2)
        # a re-entry is the same holder
        self.acquire_ok(a, ttl_ms=3000, lease=ga["lease"])
        self.assertEqual(self.held(), held0 + 2)
        self.release_ok(a, ga["lease"])
        self.assertEqual(self.held(), held0 + 2)   # one hold of two undone
        self.release_ok(a, ga["lease"])
        self.assertEqual(self.held(), held0 + 1)
        r = self.req("DELETE", harness.LOCKS + b,
                     headers={"Fence-Break": str(gb["token"])})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.held(), held0)
        # past both leases' ends and a check: nothing was counted expired
        t_end = time.monotonic() + 3.0 + 0.1 + 1.0 + 0.5
        while time.monotonic() < t_end:
            self.assertEqual(self.expired(), expired0)
            time.sleep(0.1)

    def test_shared_holders_count_each_and_a_renewal_keeps_them(self):
        held0, expired0 = self.held(), self.expired()
        name = self.lock_name("shared")
        g1 = self.acquire_ok(name, ttl_ms=1500, mode="shared")
        g2 = self.acquire_ok(name, ttl_ms=1500, mode="shared")
        self.assertEqual(g1["token"], g2["token"])
        self.assertEqual(self.held(), held0 + 2)
        self.release_ok(name, g1["lease"])
        self.assertEqual(self.held(), held0 + 1)
        # renewed past the first lease's end: still held, nothing expired
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:
            self.assertEqual(self.renew(name, g2["lease"], ttl_ms=1500).status, 200)
            self.assertEqual(self.held(), held0 + 1)
            time.sleep(0.3)
        self.assertEqual(self.expired(), expired0)
        self.release_ok(name, g2["lease"])
        self.assertEqual(self.held(), held0)
