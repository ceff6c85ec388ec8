"""rgw.py - a real S3 store for the S3-mode tests: Ceph's radosgw.

Ceph 16.2 (Debian's) has no single-process backend for radosgw, so this
starts the smallest real cluster there is: one ceph-mon, one ceph-osd on
MemStore (its objects in memory, capped at `memstore_bytes`), and radosgw
on the beast frontend, all on loopback ports from harness.free_port(), in
a private directory of the run's temp dir, with `auth none`. Each daemon
runs in the foreground (`-f`) as a child registered with harness.spawn, so
it is stopped by PID (SIGKILL: nothing of a MemStore cluster outlives it)
whatever happens to a test,
and harness.stop_all() or the watchdog's kill_all_now() can always reach
it.

Two settings are what make `auth none` work at all: clients must speak
the v2 protocol in crc mode (`--ms-mon-client-mode crc --ms-client-mode
crc`; without them the mon answers -13 and radosgw waits out its mount
timeout), and `mon host` must be the v2 address. `client mount timeout`
is low so that a cluster that is not there fails at once, with the log.

Startup takes its time in three waits: the mon forming its quorum of one,
the OSD booting and its placement groups going active, and radosgw
creating its pools on first start. Every pool gets one placement group
and autoscaling is off, so no PG split or merge runs while a test does.

A missing ceph binary is a failure of the setup, never a skip.

    r = Rgw().start()
    r.add_user("tester", "AKIAEXAMPLE", "secret")
    r.endpoint      # "http://127.0.0.1:PORT"
    r.stop()

Invariant: every daemon this module starts is registered with
harness.spawn until reaped; stop() stops each one by PID and is safe to
call twice or after a failed start().
"""

import http.client
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid

import harness
from harness import SetupError, file_tail, free_port, slack, spawn, \
    kill_process, wait_until

# what every client of the cluster (radosgw, radosgw-admin, ceph) needs
# with `auth none` against a v2-only mon
CRC = ("--ms-mon-client-mode", "crc", "--ms-client-mode", "crc")

RGW_NAME = "client.rgw.x"

# radosgw's access line (debug rgw 1): beast: 0x..: ADDR - USER [TIME]
# "METHOD TARGET HTTP/1.1" STATUS BYTES ...
BEAST_LINE = re.compile(
    r'beast: \S+: \S+ - (?P<user>\S+) \[[^\]]*\] '
    r'"(?P<method>\S+) (?P<target>\S+) [^"]*" (?P<status>\d+) ')
# the path of requests_after()'s own requests
LOG_MARK = "/fg-log-mark-"
# one variable of a request's environment (debug rgw 20)
ENV_LINE = re.compile(r"^\S+ (\S+) 20 ([A-Z][A-Z0-9_]*)=(.*)$")

BINARIES = ("monmaptool", "ceph-mon", "ceph-osd", "ceph", "radosgw",
            "radosgw-admin")


def ceph_tool(name):
    exe = shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep
                       + "/usr/bin:/usr/sbin")
    if not exe:
        raise SetupError("%s not found (scripts/install-deps.sh installs "
                         "ceph-mon ceph-osd radosgw ceph-common)" % name)
    return exe


CONF = """\
[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon_port}
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
auth supported = none
ms bind ipv4 = true
ms bind ipv6 = false
public addr = 127.0.0.1
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = {memstore_bytes}
osd data = {dir}/osd.$id
mon data = {dir}/mon.$id
run dir = {dir}/run
admin socket = {dir}/run/$name.asok
log file = {dir}/log/$name.log
log to stderr = false
err to stderr = true
keyring = /dev/null
client mount timeout = {mount_timeout}
rados mon op timeout = {mount_timeout}
rados osd op timeout = {mount_timeout}
# a loopback test cluster: no sync to wait for, small threads
osd op num shards = 1
osd op num threads per shard = 2
ms async op threads = 2
mon osd report timeout = 900
osd heartbeat grace = 60
mgr initial modules =
# each map change is a paxos proposal, by default at most one a second:
# radosgw's first start makes a dozen (its pools)
paxos propose interval = 0.01
paxos min wait = 0.001
mon tick interval = 1
[osd]
osd max object name len = 460
osd max object namespace len = 64
[{rgw_name}]
# without tcp_nodelay an answer with a body waits 40 ms on the client's
# delayed ACK (beast writes the head and the body apart)
rgw frontends = beast endpoint=127.0.0.1:{rgw_port} tcp_nodelay=1
rgw data = {dir}/rgw
rgw dns name = localhost
rgw thread pool size = 64
rgw enable usage log = false
rgw enable ops log = false
rgw gc processor period = 3600
rgw lc debug interval = -1
rgw init timeout = {init_timeout}
rgw max chunk size = 4194304
"""


class Rgw:
    """radosgw on a one-mon, one-OSD MemStore cluster. start() returns
    self once radosgw answers HTTP; endpoint is its URL; add_user()
    creates an S3 user with the given keys; stop() stops the three
    daemons by PID (radosgw, then the OSD, then the mon)."""

    def __init__(self, tmpdir=None, memstore_bytes=1536 << 20,
                 log_requests=True):
        self.dir = tempfile.mkdtemp(prefix="rgw-",
                                    dir=tmpdir or harness.tmp_root())
        self.memstore_bytes = memstore_bytes
        # radosgw's access lines (requests()) cost it a few log lines per
        # request: a benchmark goes without
        self.log_requests = log_requests
        self.mon_port = None
        self.port = None
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.procs = {}          # name -> Popen, in start order
        self.startup_seconds = None
        self.timings = {}        # step -> seconds, for the report

    # -- paths and names ----------------------------------------------

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def log_paths(self):
        d = os.path.join(self.dir, "log")
        out = [os.path.join(d, n) for n in ("mon.a.log", "osd.0.log",
                                            RGW_NAME + ".log")]
        out += [os.path.join(self.dir, n + ".stderr")
                for n in ("mon", "osd", "rgw")]
        return out

    def log_tail(self, lines=30):
        out = []
        for p in self.log_paths():
            if os.path.exists(p) and os.path.getsize(p):
                out.append("--- tail of %s ---\n%s" % (p, file_tail(p, lines)))
        return "\n".join(out)

    # -- running ------------------------------------------------------

    def _run(self, argv, timeout, what):
        """A one-shot ceph tool; its failure names itself with its output
        and the daemons' logs."""
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, capture_output=True, timeout=timeout,
                               stdin=subprocess.DEVNULL, cwd=self.dir)
        except subprocess.TimeoutExpired as e:
            raise SetupError("%s: no answer within %.0f s: %s\n%s\n%s"
                             % (what, timeout, " ".join(argv),
                                (e.stderr or b"").decode("utf-8", "replace")[-2000:],
                                self.log_tail()))
        self.timings[what] = self.timings.get(what, 0) + time.monotonic() - t0
        if p.returncode != 0:
            raise SetupError("%s failed (exit %d): %s\n%s%s\n%s"
                             % (what, p.returncode, " ".join(argv),
                                p.stdout.decode("utf-8", "replace")[-2000:],
                                p.stderr.decode("utf-8", "replace")[-2000:],
                                self.log_tail()))
        return p.stdout.decode("utf-8", "replace")

    def _daemon(self, name, argv):
        err = open(os.path.join(self.dir, name + ".stderr"), "wb")
        try:
            self.procs[name] = spawn(argv, stdout=err, stderr=err,
                                     cwd=self.dir)
        finally:
            err.close()

    def _check_alive(self):
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise SetupError("%s exited (%s) during startup\n%s"
                                 % (name, p.returncode, self.log_tail()))

    def _wait(self, what, fn, timeout):
        t0 = time.monotonic()

        def ok():
            self._check_alive()
            return fn()
        if not wait_until(ok, timeout, 0.05):
            raise SetupError("%s: not within %.0f s\n%s"
                             % (what, timeout, self.log_tail()))
        self.timings[what] = time.monotonic() - t0

    def _ceph(self, *args, timeout=None):
        return self._run([ceph_tool("ceph"), "-c", self.conf] + list(CRC)
                         + list(args), timeout or slack(60.0),
                         "ceph " + args[0])

    def start(self, timeout=None):
        """Starts the cluster and radosgw; returns self once radosgw answers
        an anonymous GET / (its bucket list, 200). `timeout` (default 120 s,
        scaled by --slow) bounds the whole of it; a failure is a SetupError
        with the tail of every daemon's log, and leaves nothing running."""
        timeout = timeout or slack(120.0)
        t0 = time.monotonic()
        try:
            self._start(t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _left(self, deadline):
        return max(1.0, deadline - time.monotonic())

    def _start(self, deadline):
        for n in ("log", "run", "rgw", "mon.a", "osd.0"):
            os.makedirs(os.path.join(self.dir, n), exist_ok=True)
        self.mon_port = free_port()
        self.port = free_port()
        fsid = str(uuid.uuid4())
        osd_uuid = str(uuid.uuid4())
        with open(self.conf, "w") as f:
            f.write(CONF.format(fsid=fsid, mon_port=self.mon_port,
                                rgw_port=self.port, dir=self.dir,
                                memstore_bytes=self.memstore_bytes,
                                mount_timeout=int(slack(30)),
                                init_timeout=int(slack(90)),
                                rgw_name=RGW_NAME))
            if not self.log_requests:
                f.write("debug rgw = 0/0\ndebug ms = 0/0\n")
        monmap = os.path.join(self.dir, "monmap")
        self._run([ceph_tool("monmaptool"), "--create", "--clobber",
                   "--add", "a", "v2:127.0.0.1:%d" % self.mon_port,
                   "--fsid", fsid, monmap], slack(30.0), "monmaptool")
        self._run([ceph_tool("ceph-mon"), "-c", self.conf, "--mkfs", "-i",
                   "a", "--monmap", monmap], slack(30.0), "ceph-mon --mkfs")
        self._daemon("mon", [ceph_tool("ceph-mon"), "-c", self.conf, "-f",
                             "-i", "a"])
        # the OSD's store is made while the mon starts and `osd new` runs:
        # mkfs needs only the fsid of the conf
        mkfs_argv = [ceph_tool("ceph-osd"), "-c", self.conf, "-i", "0",
                     "--mkfs", "--osd-uuid", osd_uuid]
        mkfs_log = os.path.join(self.dir, "osd-mkfs.stderr")
        with open(mkfs_log, "wb") as out:
            mkfs = spawn(mkfs_argv, stdout=out, stderr=out, cwd=self.dir)
        try:
            # `osd new` waits for the mon's quorum itself
            self._ceph("osd", "new", osd_uuid, "0",
                       timeout=self._left(deadline))
            rc = mkfs.wait(self._left(deadline))
        except subprocess.TimeoutExpired:
            rc = "no exit in time"
        finally:
            kill_process(mkfs)
        if rc != 0:
            raise SetupError("ceph-osd --mkfs failed (%s): %s\n%s\n%s"
                             % (rc, " ".join(mkfs_argv), file_tail(mkfs_log),
                                self.log_tail()))
        self._daemon("osd", [ceph_tool("ceph-osd"), "-c", self.conf, "-f",
                             "-i", "0"])
        self._daemon("rgw", [ceph_tool("radosgw"), "-c", self.conf, "-f",
                             "-n", RGW_NAME] + list(CRC))
        self._wait("radosgw answers", self._answers, self._left(deadline))

    def _answers(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                c.request("GET", "/")
                r = c.getresponse()
                r.read()
                return r.status == 200
            finally:
                c.close()
        except OSError:
            return False

    def admin(self, *args, timeout=None):
        """radosgw-admin with the cluster's conf; returns its stdout."""
        # radosgw's name (its zone settings), not its admin socket
        return self._run([ceph_tool("radosgw-admin"), "-c", self.conf,
                          "-n", RGW_NAME, "--admin-socket", ""]
                         + list(CRC) + list(args),
                         timeout or slack(60.0), "radosgw-admin " + args[0])

    def add_user(self, uid, access_key, secret, display_name=None):
        """An S3 user `uid` whose one key pair is (access_key, secret)."""
        self.admin("user", "create", "--uid", uid,
                   "--display-name", display_name or uid,
                   "--access-key", access_key, "--secret", secret)

    def requests(self):
        """Every request radosgw has finished, oldest first, from its log:
        (method, target, status, user) with target the path and query as
        sent; a request the log shows no user for has user 'anonymous'."""
        out = []
        try:
            with open(os.path.join(self.dir, "log", RGW_NAME + ".log"),
                      "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return out
        for m in BEAST_LINE.finditer(data):
            out.append((m.group("method"), m.group("target"),
                        int(m.group("status")), m.group("user")))
        return out

    def _all_logged(self, nlines):
        """Has every request radosgw began logged its line (nlines of
        them in hand)?"""
        try:
            with open(os.path.join(self.dir, "log", RGW_NAME + ".log"),
                      "rb") as f:
                begun = f.read().count(b"====== starting new request")
        except FileNotFoundError:
            return False
        return nlines >= begun

    def requests_after(self, n0):
        """The requests finished since requests()[n0], once every request
        answered before this call is in the log: radosgw writes a request's
        line after its answer, so this sends one more (an anonymous GET of
        a marker path) and waits for its line."""
        self._marks = getattr(self, "_marks", 0) + 1
        mark = "%s%d" % (LOG_MARK, self._marks)
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port,
                                           timeout=slack(10))
            c.request("GET", mark)
            c.getresponse().read()
            c.close()
        except OSError as e:
            raise SetupError("radosgw does not answer: %s\n%s"
                             % (e, self.log_tail()))
        reqs = wait_until(lambda: (lambda r: r if any(
            x[1] == mark for x in r) else None)(self.requests()), slack(10))
        if not reqs:
            raise SetupError("radosgw did not log %s\n%s"
                             % (mark, self.log_tail()))
        # radosgw logs from each request's own thread, so the line of one
        # answered before the marker may still come after the marker's:
        # wait (bounded) until every request begun has its line; one that
        # never gets a line (a connection cut mid-body) ends the wait at
        # its bound, not the test
        settled = wait_until(lambda: (lambda r: r if self._all_logged(len(r))
                                      else None)(self.requests()), slack(1.0))
        if settled:
            reqs = settled
        return [r for r in reqs[n0:] if not r[1].startswith(LOG_MARK)]

    def log_offset(self):
        """Where radosgw's log ends now: request_envs(since=) starts there."""
        try:
            return os.path.getsize(os.path.join(self.dir, "log",
                                                RGW_NAME + ".log"))
        except FileNotFoundError:
            return 0

    def log_headers(self, on=True):
        """With on, radosgw logs every request's headers (debug rgw 20,
        set through its admin socket; request_envs() reads them); off, back
        to the access lines alone."""
        self._run([ceph_tool("ceph"), "--admin-daemon",
                   os.path.join(self.dir, "run", RGW_NAME + ".asok"),
                   "config", "set", "debug_rgw", "20/20" if on else "1/5"],
                  slack(30.0), "ceph --admin-daemon config set")

    def request_envs(self, since=0):
        """What radosgw was given of each request it began since log
        offset `since` while log_headers() was on, in log order: a dict of
        its CGI-style variables (REQUEST_METHOD, REQUEST_URI, QUERY_STRING,
        HTTP_AUTHORIZATION, HTTP_X_AMZ_SECURITY_TOKEN, ...). radosgw logs
        them in one burst per request, from one thread."""
        with open(os.path.join(self.dir, "log", RGW_NAME + ".log"),
                  "rb") as f:
            f.seek(since)
            data = f.read().decode("utf-8", "replace")
        out, open_by_thread = [], {}
        for line in data.splitlines():
            m = ENV_LINE.match(line)
            parts = line.split(" ", 3)
            thread = parts[1] if len(parts) > 1 else ""
            if m:
                env = open_by_thread.get(thread)
                if env is None:
                    env = open_by_thread[thread] = {}
                    out.append(env)
                env[m.group(2)] = m.group(3)
            else:
                open_by_thread.pop(thread, None)
        return out

    def alive(self):
        return bool(self.procs) and \
            all(p.poll() is None for p in self.procs.values())

    def stop(self):
        """Stops radosgw, the OSD and the mon by PID (SIGTERM, SIGKILL after
        a grace); safe to call more than once."""
        for name in ("rgw", "osd", "mon"):
            p = self.procs.pop(name, None)
            if p is not None:
                # nothing of a MemStore cluster outlives it, so nothing is
                # worth a clean shutdown (radosgw alone takes 2 s of it)
                kill_process(p)

    kill = stop
