"""test_redis_acl.py - gateways that log in to Redis as an ACL user
(redis-user, redis-password-file; contract v1.2 "Redis credentials").

Every Redis here has its `default` user off; the gateway's user has exactly
the rights docs/deployment.md ("Redis ACL user") gives it, read from that
page, so these tests also prove that list sufficient: Redis' ACL LOG must
stay empty. The harness itself logs in as an admin user of its own
(harness.RedisAcl). Covered: locks, a blocking acquire woken by a release
(the subscriber connection), a fenced write; a wrong password (down, 503,
alive, not spinning, and the password shown nowhere); a user created while
the gateway runs; a password file ending in CRLF; Sentinels with ACL users
of their own; a Cluster with the user on every node."""

import os
import re
import subprocess
import time

import harness
from harness import RedisAcl, RedisServer, slack
from topology import RedisCluster, SentinelSet, TopologyCase

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOYMENT_MD = os.path.join(HERE, "..", "..", "docs", "deployment.md")
USER = "fencegate"


def documented(prefix):
    """The rules of the first indented line of docs/deployment.md that
    starts with `prefix`, as a list of words (">PASSWORD" among them)."""
    with open(DEPLOYMENT_MD, encoding="utf-8") as f:
        for line in f:
            if line.startswith("    " + prefix + " "):
                return line[4 + len(prefix):].split()
    raise harness.SetupError("docs/deployment.md has no line '%s ...'"
                             % prefix)


def rules(prefix, password):
    words = documented(prefix)
    if ">PASSWORD" not in words:
        raise harness.SetupError("the documented line '%s' names no "
                                 ">PASSWORD" % prefix)
    return [">" + password if w == ">PASSWORD" else w for w in words]


def server_rules(password):
    """The documented rules of the user on every Redis node."""
    return rules("ACL SETUSER " + USER, password)


def server_acl(password):
    return RedisAcl(["user %s %s" % (USER, " ".join(server_rules(password)))])


def sentinel_acl(password):
    return RedisAcl(["user %s %s" % (USER, " ".join(
        rules("user " + USER, password)))])


def new_password():
    # distinctive, so that finding it anywhere cannot be a coincidence
    return "pw-" + os.urandom(12).hex()


def acl_log(port):
    """Redis' ACL LOG of the node at `port`, each entry a dict."""
    with harness.RespClient(port) as c:
        entries = c.command("ACL", "LOG")
    return [{k.decode() if isinstance(k, bytes) else k: v
             for k, v in zip(e[::2], e[1::2])} for e in entries]


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@harness.own_topology("starts its own Redis servers with ACL users")
class RedisAclTests(TopologyCase):

    # -- helpers -------------------------------------------------------------

    def password_file(self, password, ending="\n"):
        d = os.path.join(harness.tmp_root(), "secrets-%d" % time.monotonic_ns())
        os.makedirs(d)
        path = os.path.join(d, "redis-password")
        with open(path, "w", newline="") as f:
            f.write(password + ending)
        os.chmod(path, 0o600)
        return path

    def acl_gateway(self, url, upstream, password_path, wait_healthy=True,
                    flags=()):
        g = self.start_gateway(url, upstream.port,
                               ["--redis-user", USER, "--redis-password-file",
                                password_path, "--forward-token", "yes"]
                               + list(flags))
        if wait_healthy and not g.wait_healthy(slack(10.0)):
            self.fail("the gateway never became healthy:\n" + g.log_tail())
        return g

    def redis(self, acl):
        r = RedisServer(acl=acl)
        self.topo_logs.append(r)
        self.addCleanup(r.stop)
        return r.start()

    def assert_no_acl_denials(self, port, what):
        """Redis' ACL LOG of the node at `port` is empty: no command, key or
        channel of the gateway's was refused, and no login failed."""
        entries = acl_log(port)
        self.assertEqual(entries, [], "%s refused something to the "
                         "documented user: %r" % (what, entries))

    def lock_cycle(self, gw, name):
        """Acquire, renew, release through gw."""
        g = self.acquire_ok(name, gw=gw, ttl_ms=10000)
        r = self.renew(name, g["lease"], gw=gw, ttl_ms=20000)
        self.assertEqual(r.status, 200, "renew: %r" % r)
        self.release_ok(name, g["lease"], gw=gw)
        return g

    def woken_by_release(self, holder_gw, waiter_gw, name):
        """A blocking acquire on waiter_gw is granted when the holder on
        holder_gw releases: the grant reaches waiter_gw through its
        subscriber connection."""
        g = self.acquire_ok(name, gw=holder_gw, ttl_ms=30000)
        w = self.waiter(name, gw=waiter_gw, wait_ms=20000, ttl_ms=5000)
        self.wait_waiters(name, 1, gw=holder_gw)
        self.release_ok(name, g["lease"], gw=holder_gw)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, "the waiter: %r" % r)
        self.assertGreater(r.json["token"], g["token"])
        self.release_ok(name, r.json["lease"], gw=waiter_gw)

    def assert_down(self, gw):
        h = self.health(gw)
        self.assertEqual(h.status, 503, "health: %r" % h)
        self.assertEqual(h.json.get("redis"), "down", "health: %r" % h)

    def wait_log(self, gw, pattern, what):
        rx = re.compile(pattern)

        def found():
            with open(gw.logpath, encoding="utf-8", errors="replace") as f:
                return rx.search(f.read())
        self.wait_for(found, slack(5.0), what, 0.05)

    # -- one Redis -----------------------------------------------------------

    def test_documented_user_serves_locks_waiters_and_fenced_writes(self):
        pw = new_password()
        redis = self.redis(server_acl(pw))
        up = self.recording_upstream()
        # one trailing LF, and one trailing CRLF: neither is the password's
        lf = self.acl_gateway(redis.url(), up, self.password_file(pw, "\n"))
        crlf = self.acl_gateway(redis.url(), up,
                                self.password_file(pw, "\r\n"))
        for gw in (lf, crlf):
            h = self.health(gw)
            self.assertEqual(h.status, 200, "health: %r" % h)
            self.assertEqual(h.json["redis"], "up")
            self.lock_cycle(gw, self.lock_name())
        # waiters on either gateway, granted through their subscriptions
        self.woken_by_release(lf, crlf, self.lock_name())
        self.woken_by_release(crlf, lf, self.lock_name())
        # a fenced write through the proxy: admitted, and forwarded once
        g = self.acquire_ok("bucket/acl-%d.txt" % time.monotonic_ns(), gw=lf,
                            ttl_ms=10000)
        path = "/" + g["name"]
        r = lf.request("PUT", path, raw=b"fenced\n",
                       headers={"Fencing-Token": g["sequencer"]})
        self.assertEqual(r.status, 200, "fenced PUT: %r" % r)
        writes = [x for x in up.records if x["path"] == path]
        self.assertEqual([(w["method"], w["token"], w["body"]) for w in writes],
                         [("PUT", str(g["token"]), b"fenced\n")])
        # the listing (its index, kept by the scripts or the gateway)
        r = lf.request("GET", "/_fence/v1/locks?prefix=bucket/acl-")
        self.assertEqual(r.status, 200, "listing: %r" % r)
        self.assertIn(g["name"], [e["name"] for e in r.json["locks"]])
        self.release_ok(g["name"], g["lease"], gw=lf)
        self.assert_no_acl_denials(redis.port, "Redis")
        for gw in (lf, crlf):
            with open(gw.logpath, "rb") as f:
                self.assertNotIn(pw.encode(), f.read())

    def test_wrong_password_is_down_retried_quietly_and_shown_nowhere(self):
        pw, wrong = new_password(), new_password()
        redis = self.redis(server_acl(pw))
        up = self.recording_upstream()
        path = self.password_file(wrong)
        gw = self.acl_gateway(redis.url(), up, path, wait_healthy=False)
        self.wait_log(gw, r"Redis refused the credentials of user fencegate: "
                      r"WRONGPASS", "the refusal in the log")
        self.assert_down(gw)
        r = self.acquire(self.lock_name(), ttl_ms=5000, gw=gw)
        self.assert_error(r, 503, "lock_store_unavailable")
        self.assertIsNotNone(r.header("Retry-After"), repr(r))
        # it keeps trying at its pace, neither spinning nor stuck
        pid = gw.proc.pid
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(1.0)   # the cause: the window its CPU use is measured over
        used = cpu_seconds(pid) - c0
        wall = time.monotonic() - t0
        self.assertLess(used, 0.5 * wall, "the gateway used %.2f s of CPU "
                        "in %.2f s while its login was refused" % (used, wall))
        self.assert_down(gw)
        self.assertTrue(gw.alive())
        # the refusal is said once, not at every retry
        with open(gw.logpath, encoding="utf-8", errors="replace") as f:
            log = f.read()
        self.assertEqual(log.count("refused the credentials"), 1, log)
        # the password: not in the log, the command line, ps, or --help
        secret = wrong.encode()
        with open(gw.logpath, "rb") as f:
            self.assertNotIn(secret, f.read())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            self.assertNotIn(secret, f.read())
        ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True,
                            timeout=10)
        self.assertEqual(ps.returncode, 0, ps.stderr)
        self.assertIn(b"--redis-password-file", ps.stdout)  # ps saw it
        self.assertNotIn(secret, ps.stdout)
        helped = subprocess.run([harness.Gateway.executable(), "--redis-user",
                                 USER, "--redis-password-file", path,
                                 "--help"], capture_output=True, timeout=10)
        self.assertIn(b"redis-password-file", helped.stdout)
        self.assertNotIn(secret, helped.stdout + helped.stderr)
        # Redis saw failed logins, and never a command of the gateway's
        reasons = {e["reason"] for e in acl_log(redis.port)}
        self.assertEqual(reasons, {b"auth"})

    def test_user_created_while_the_gateway_runs_makes_it_ready(self):
        pw = new_password()
        redis = self.redis(RedisAcl())          # no fencegate user yet
        up = self.recording_upstream()
        gw = self.acl_gateway(redis.url(), up, self.password_file(pw),
                              wait_healthy=False)
        self.wait_log(gw, r"Redis refused the credentials of user fencegate: "
                      r"WRONGPASS", "the refusal in the log")
        self.assert_down(gw)
        self.assertEqual(redis.command("ACL", "SETUSER", USER,
                                       *server_rules(pw)), "OK")
        redis.command("ACL", "LOG", "RESET")
        if not gw.wait_healthy(slack(5.0)):
            self.fail("the gateway did not become healthy after the user "
                      "was made:\n" + gw.log_tail())
        self.lock_cycle(gw, self.lock_name())
        # its subscriber logged in again too
        self.woken_by_release(gw, gw, self.lock_name())
        self.assert_no_acl_denials(redis.port, "Redis")

    # -- Sentinel and Cluster --------------------------------------------------

    def test_sentinels_and_nodes_with_acl_users(self):
        pw = new_password()
        s = self.own(SentinelSet(acl=server_acl(pw),
                                 sentinel_acl=sentinel_acl(pw)))
        up = self.recording_upstream()
        # redis-replicas 1: WAIT is among the user's rights
        gws = [self.acl_gateway(s.url(), up, self.password_file(pw),
                                flags=["--redis-replicas", "1"])
               for _ in range(2)]
        for gw in gws:
            self.lock_cycle(gw, self.lock_name())
        self.woken_by_release(gws[0], gws[1], self.lock_name())
        for n in s.nodes:
            self.assert_no_acl_denials(n.port, "Redis %d" % n.port)
        for sn in s.sentinels:
            self.assert_no_acl_denials(sn.port, "Sentinel %d" % sn.port)

    def test_cluster_with_the_user_on_every_node(self):
        pw = new_password()
        c = self.own(RedisCluster(acl=server_acl(pw)))
        up = self.recording_upstream()
        gw = self.acl_gateway(c.url(), up, self.password_file(pw))
        # one lock on each master: names are picked by their slot's owner
        # (random names could all miss one master), then each is cycled
        names = {}
        for i in range(300):
            name = self.lock_name("-%d" % i)
            names.setdefault(c.owner_of(name).port, name)
            if len(names) == 3:
                break
        self.assertEqual(len(names), 3, "names on masters %r" % names)
        for name in names.values():
            self.lock_cycle(gw, name)
        self.woken_by_release(gw, gw, self.lock_name())
        for n in c.nodes:
            self.assert_no_acl_denials(n.port, "node %d" % n.port)
