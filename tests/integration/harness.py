"""harness.py - spawns the real processes the integration suite runs against.

Every test talks to a real fencegate over loopback HTTP, backed by a real
redis-server, in front of an origin: the Python stand-in of origins.py, or
a real store (storage.py, apache.py). Env starts and stops the three
together, whichever origin it has. All of them listen on free loopback ports (bind to port 0), run in a
private temporary directory, and are stopped by PID (SIGTERM, then SIGKILL
after 5 s) whatever happens to the test. A missing tool (no redis-server,
no fencegate binary) is a failure of the setup, never a skip.

Invariant: every process this module starts is in _PROCS until it has been
reaped, so stop_all() can always clean up.
"""

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import apispec
import matrix
import origins

# ---------------------------------------------------------------------------
# configuration (filled in by run.py)


class Config:
    bin = None            # path of the fencegate binary under test
    tmp_root = None       # private temp dir of this run
    log_level = None      # passed as --log-level when set
    redis_server = None   # resolved path of redis-server
    slow = 1.0            # multiplier for timing slack (sanitizer builds)
    redis_mode = "single"  # "single": one redis-server; "cluster": a Redis
                           # Cluster (topology.RedisCluster) in its place
    origin = "nginx"      # the store of the classes with the origin axis
    port_base = None      # this worker's port block (FG_PORT_BASE), or None:
    port_span = 0         # any free port the kernel hands out


def tmp_root():
    if Config.tmp_root is None:
        Config.tmp_root = tempfile.mkdtemp(prefix="fencegate-it-")
    return Config.tmp_root


def slack(seconds):
    """Timing slack for an assertion, scaled for slow (sanitizer) builds."""
    return seconds * Config.slow


class SetupError(Exception):
    """The environment could not be set up: counts as a test failure."""


def cluster_mode():
    return Config.redis_mode == "cluster"


def single_redis(reason):
    """Marks a test (or a class) that needs one redis-server process of its
    own: run.py leaves it out in cluster mode, says so with `reason`, and
    does not count it as passed."""
    def mark(obj):
        obj.single_redis_reason = reason
        return obj
    return mark


def own_topology(reason):
    """Marks a test class that starts its own Redis topology (a Sentinel
    set, a cluster) whatever the mode: it runs in the default pass, and
    run.py lists it as run there when the mode is cluster."""
    def mark(obj):
        obj.own_topology_reason = reason
        return obj
    return mark


# Failures found outside any single test (e.g. a sanitizer report printed
# when a shared gateway exits). run.py counts each as one failure.
LATE_FAILURES = []

SANITIZER_MARKERS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer",
                     b"runtime error:", b"ThreadSanitizer",
                     b"UndefinedBehaviorSanitizer")


# A ThreadSanitizer run (FENCEGATE_SANITIZED=thread: scripts/tsan.sh) sends
# every instrumented process's reports to a file of its own (TSAN_OPTIONS
# log_path, one file per pid), so a report from any fencegate or fencectl
# the suite starts is found, whatever became of its stderr (a pipe a test
# reads, a gateway nobody stops). run.py sweeps the files after every test
# and fails the test that was running; what appears between tests or after
# the last one counts as a failure outside a test.
_SANITIZER_SEEN = {}   # report file -> bytes already swept


def thread_sanitized():
    """A run with a ThreadSanitizer build in it (run.py --build thread=...,
    which hands its workers the builds in FG_BUILDS)."""
    return os.environ.get("FENCEGATE_SANITIZED") == "thread" or \
        "thread" in json.loads(os.environ.get("FG_BUILDS") or "{}")


def sanitizer_log_dir():
    return os.path.join(tmp_root(), "sanitizer")


def route_sanitizer_reports():
    """In a ThreadSanitizer run, points every child's reports at files under
    the run's temporary directory (children inherit the environment)."""
    if not thread_sanitized():
        return
    d = sanitizer_log_dir()
    os.makedirs(d, exist_ok=True)
    opts = os.environ.get("TSAN_OPTIONS", "")
    os.environ["TSAN_OPTIONS"] = (opts + ":" if opts else "") + \
        "log_path=" + os.path.join(d, "tsan")


def new_sanitizer_reports():
    """Reports written to the sanitizer files since the last call, as a list
    of texts (each headed by its file, which names the pid). The closing
    "reported N warnings" line of a process whose reports were swept
    already is not a new report."""
    d = sanitizer_log_dir()
    if not thread_sanitized() or not os.path.isdir(d):
        return []
    out = []
    for fn in sorted(os.listdir(d)):
        path = os.path.join(d, fn)
        try:
            with open(path, "rb") as fh:
                fh.seek(_SANITIZER_SEEN.get(path, 0))
                data = fh.read()
        except OSError:
            continue
        _SANITIZER_SEEN[path] = _SANITIZER_SEEN.get(path, 0) + len(data)
        text = data.decode("utf-8", "replace")
        if not re.sub(r"ThreadSanitizer: reported \d+ warnings?\s*", "",
                      text).strip():
            continue
        if len(text) > 6000:
            text = text[:6000] + "\n(... %d more bytes in %s)" \
                % (len(text) - 6000, path)
        out.append("--- %s ---\n%s" % (fn, text.rstrip()))
    return out

# ---------------------------------------------------------------------------
# ports and processes

_PORTS_GIVEN = set()
_PORTS_LOCK = threading.Lock()


def free_port():
    """A loopback TCP port nothing listens on (and not handed out before).

    A worker of a parallel run (run.py -j) owns a block of ports below the
    kernel's ephemeral range (Config.port_base, port_span: run.py holds a
    lock on the block for the worker's life), and hands its ports out in
    turn: no other worker, and no other run on the machine, is given the
    same one, and no outgoing connection takes it between this call and
    the listen() of the process it is for. Without a block, the kernel's
    choice (bind to port 0) is unique within this process only."""
    if Config.port_base is not None:
        with _PORTS_LOCK:
            for _ in range(Config.port_span):
                # in turn, round the block: a port comes back only after
                # all the others, long after its process was stopped
                port = Config.port_base + _PORT_NEXT[0] % Config.port_span
                _PORT_NEXT[0] += 1
                if _port_is_free(port):
                    _PORTS_GIVEN.add(port)
                    return port
        raise SetupError("no free port left in the block %d-%d"
                         % (Config.port_base,
                            Config.port_base + Config.port_span - 1))
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with _PORTS_LOCK:
            if port not in _PORTS_GIVEN:
                _PORTS_GIVEN.add(port)
                return port
    raise SetupError("could not find a free loopback port")


_PORT_NEXT = [0]


def _port_is_free(port):
    """Nothing listens on the port, on loopback or the wildcard address,
    and nothing (a connection in TIME_WAIT) keeps it from being bound."""
    for addr in ("127.0.0.1", "0.0.0.0"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr, port))
            except OSError:
                return False
    return True


_PROCS = []
_PROCS_LOCK = threading.Lock()


def spawn(argv, **kw):
    """Popen that registers the child for stop_all(). The child gets a
    process group of its own (unless it sets up its own session through
    preexec_fn): when the shell that started the runner exits, the
    runner's group is orphaned, and the kernel sends SIGHUP and SIGCONT to
    a group so orphaned that holds a stopped process. A gateway a test
    has paused must stay paused, and none may die of that SIGHUP."""
    if "preexec_fn" not in kw and not kw.get("start_new_session"):
        if sys.version_info >= (3, 11):
            kw["process_group"] = 0
        else:
            kw["preexec_fn"] = os.setpgrp
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kw)
    with _PROCS_LOCK:
        _PROCS.append(p)
        SPAWNED.add(os.path.basename(str(argv[0])))
    return p


# The programs spawn() started since run.py last cleared it: a class that
# says it starts no Redis (matrix axes) and started one fails.
SPAWNED = set()


def stop_process(p, grace=5.0):
    """SIGTERM, wait up to `grace` s, then SIGKILL. Returns the exit code
    and whether SIGKILL was needed."""
    killed = False
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGCONT)   # in case a test SIGSTOPped it
            p.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            killed = True
            try:
                p.kill()
            except ProcessLookupError:
                pass
            p.wait()
    with _PROCS_LOCK:
        if p in _PROCS:
            _PROCS.remove(p)
    return p.returncode, killed


def kill_process(p):
    """SIGKILL at once (a crash, as far as the others can tell)."""
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGCONT)
            p.kill()
        except ProcessLookupError:
            pass
    p.wait()
    with _PROCS_LOCK:
        if p in _PROCS:
            _PROCS.remove(p)
    return p.returncode


def stop_all():
    with _PROCS_LOCK:
        procs = list(_PROCS)
    for p in reversed(procs):
        stop_process(p)


def kill_all_now():
    """Watchdog: SIGKILL every live child so a hung test fails quickly."""
    with _PROCS_LOCK:
        procs = list(_PROCS)
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass


def wait_until(fn, timeout, interval=0.02):
    """Calls fn until it returns something truthy or timeout (s) passes.
    Returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def complete_lines(path):
    """The lines of a log file that were written whole. A line is one
    write(2), but a reader may see a write in progress: what follows the
    last newline is left for the next read."""
    with open(path, "rb") as f:
        data = f.read()
    return [l for l in data[:data.rfind(b"\n") + 1].split(b"\n") if l.strip()]


def tcp_local_ports(pid, remote_ports):
    """Local ports of a process's TCP connections to any of `remote_ports`
    (its socket inodes, matched in /proc/net/tcp and tcp6)."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = set()
    for f in _tcp_rows():
        if f[9] in inodes and \
                int(f[2].rsplit(":", 1)[1], 16) in remote_ports:
            out.add(int(f[1].rsplit(":", 1)[1], 16))
    return out


def _tcp_rows():
    """Every row of /proc/net/tcp and tcp6, split into its fields."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            yield row.split()


def file_tail(path, lines=40):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return "(cannot read %s: %s)" % (path, e)
    text = [ln for ln in data.decode("utf-8", "replace").splitlines()
            if not re.match(r"^(=>|  )0x[0-9a-f]+: ", ln)]   # ASan shadow map
    return "\n".join(text[-lines:])


def sanitizer_report(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    for m in SANITIZER_MARKERS:
        i = data.find(m)
        if i >= 0:
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"Shadow bytes around", i)
            if end < 0 or end - start > 4000:
                end = start + 4000
            return data[start:end].decode("utf-8", "replace")
    return None

# ---------------------------------------------------------------------------
# Redis


class RespError(Exception):
    pass


# How the harness itself logs in to a Redis or a Sentinel whose default
# user is off (RedisAcl): port -> (user, password).
_ADMIN_LOGINS = {}


class RedisAcl:
    """The users of a Redis or a Sentinel with `default` off: the harness's
    own admin (every right; its password is the same on every server of a
    run, so replicas and Sentinels log in to each other with it) and the
    ACL file lines `users` ("user NAME RULES...") under test."""

    ADMIN = "fg-test-admin"
    ADMIN_PASSWORD = os.urandom(12).hex()

    def __init__(self, users=()):
        self.users = list(users)

    def lines(self):
        return ["user default off",
                "user %s on >%s ~* &* +@all" % (self.ADMIN,
                                                 self.ADMIN_PASSWORD)] \
            + self.users

    def register(self, port):
        """The harness's clients log in to `port` as the admin."""
        _ADMIN_LOGINS[port] = (self.ADMIN, self.ADMIN_PASSWORD)


class RespClient:
    """Minimal RESP2 client, enough to look inside Redis. It logs in first
    as the harness's admin where a RedisAcl registered the port."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=timeout)
        self.f = self.sock.makefile("rb")
        login = _ADMIN_LOGINS.get(port)
        if login:
            try:
                self.command("AUTH", *login)
            except BaseException:
                self.close()
                raise

    def close(self):
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def command(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _read(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise RespError("unexpected reply %r" % line)


def glob_escape(s):
    return re.sub(r"([*?\[\]\\])", r"\\\1", s)


class Process:
    """What every server this harness starts shares: one child process,
    self.proc, stopped by PID (stop_process, kill_process)."""

    proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)

    def kill(self):
        if self.proc is not None:
            kill_process(self.proc)

    def pause(self):
        """SIGSTOP, returning once every thread of the process has stopped:
        the kernel stops the threads one after the other, so on a loaded
        machine one may still serve a request just after kill() returned."""
        self.proc.send_signal(signal.SIGSTOP)
        pid = self.proc.pid

        def stopped():
            try:
                for t in os.listdir("/proc/%d/task" % pid):
                    with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                        st = f.read()
                    if st[st.rindex(")") + 2] not in "tT":
                        return False
            except (FileNotFoundError, ProcessLookupError):
                pass  # gone, or a thread that ended meanwhile
            return True
        if not wait_until(stopped, slack(5.0), 0.005):
            raise SetupError("pid %d did not stop within %.0f s of SIGSTOP"
                             % (pid, slack(5.0)))

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)


class RedisServer(Process):
    """A private redis-server on a free loopback port, no persistence. With
    `acl` (a RedisAcl) its users come from an ACL file, `default` off, and
    it replicates (when told to) as the harness's admin."""

    def __init__(self, port=None, extra_args=(), acl=None):
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.acl = acl
        self.dir = tempfile.mkdtemp(prefix="redis-", dir=tmp_root())
        self.logpath = os.path.join(self.dir, "redis.log")
        self.proc = None
        if acl is not None:
            acl.register(self.port)

    def _acl_args(self):
        if self.acl is None:
            return []
        path = os.path.join(self.dir, "users.acl")
        with open(path, "w") as f:
            f.write("\n".join(self.acl.lines()) + "\n")
        return ["--aclfile", path, "--masteruser", RedisAcl.ADMIN,
                "--masterauth", RedisAcl.ADMIN_PASSWORD]

    def url(self):
        """What a gateway's --redis names this server by."""
        return "127.0.0.1:%d" % self.port

    @staticmethod
    def executable():
        exe = Config.redis_server or os.environ.get("FG_REDIS_SERVER") \
            or shutil.which("redis-server")
        if not exe or not os.access(exe, os.X_OK):
            raise SetupError("redis-server not found (install it, or set "
                             "FG_REDIS_SERVER): the suite cannot run")
        return exe

    def start(self, timeout=10.0):
        exe = self.executable()
        with open(self.logpath, "ab") as log:
            self.proc = spawn([exe, "--port", str(self.port),
                               "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--daemonize", "no",
                               "--dir", self.dir] + self._acl_args()
                              + self.extra_args,
                              stdout=log, stderr=subprocess.STDOUT,
                              cwd=self.dir)
        if not wait_until(self.ping, timeout, 0.02):
            rc = self.proc.poll()
            raise SetupError("redis-server on port %d did not answer PING "
                             "(exit %s):\n%s" % (self.port, rc,
                                                 file_tail(self.logpath)))
        return self

    def ping(self):
        if self.proc is not None and self.proc.poll() is not None:
            return False
        try:
            with RespClient(self.port, timeout=1.0) as c:
                return c.command("PING") == "PONG"
        except (OSError, RespError):
            return False

    def command(self, *args):
        with RespClient(self.port) as c:
            return c.command(*args)

    def keys(self, pattern):
        return sorted(k.decode("utf-8", "replace")
                      for k in self.command("KEYS", pattern))

    def lock_keys(self, name):
        """Every key of lock `name` (they all carry the hash tag {name})."""
        return self.keys("*{" + glob_escape(name) + "}*")

    def restart_empty(self):
        """Kills this server and starts a new, empty one on the same port;
        returns the new one."""
        self.kill()
        return RedisServer(self.port, self.extra_args, self.acl).start()


# What a gateway given a Redis port by a test is pointed at: the URL of the
# "redis" object that owns the port (a cluster registers its port here).
_REDIS_URLS = {}


def register_redis_url(port, url):
    _REDIS_URLS[port] = url


def redis_url(port):
    """The --redis value for a Redis the tests know by its port. In cluster
    mode a port no cluster registered is named as a cluster seed all the
    same, so that every gateway runs in cluster mode. A string is a URL
    already."""
    if isinstance(port, str):
        return port
    url = _REDIS_URLS.get(port)
    if url is not None:
        return url
    if cluster_mode():
        return "redis-cluster://127.0.0.1:%d" % port
    return "127.0.0.1:%d" % port


def new_redis():
    """The Redis a test environment uses: one redis-server, or in cluster
    mode a RedisCluster (not started)."""
    if cluster_mode():
        import topology
        return topology.RedisCluster()
    return RedisServer()


# ---------------------------------------------------------------------------
# the upstream stand-in (origins.py); the names it had here stay for the
# callers outside the suite (bench/)

UpstreamHandler = origins.Handler
read_request_body = origins.read_request_body
Upstream = origins.StandIn   # Upstream(port, handler) as before

# ---------------------------------------------------------------------------
# HTTP client


class Response:
    """A response: status, reason, headers (list of (name, value), repeats
    kept, looked up case-insensitively), body, elapsed seconds."""

    def __init__(self, status, reason, headers, body, elapsed):
        self.status = status
        self.reason = reason
        self.header_list = list(headers)
        self.body = body
        self.elapsed = elapsed
        self._json = None
        self._parsed = False

    def header(self, name):
        for k, v in self.header_list:
            if k.lower() == name.lower():
                return v
        return None

    def headers_named(self, name):
        return [v for k, v in self.header_list if k.lower() == name.lower()]

    @property
    def json(self):
        if not self._parsed:
            try:
                self._json = json.loads(self.body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise AssertionError("response %d is not JSON (%s): %r"
                                     % (self.status, e, self.body[:300]))
            self._parsed = True
        return self._json

    def __repr__(self):
        return "<HTTP %d %r>" % (self.status, self.body[:300])


def http_request(port, method, path, body=None, raw=None, headers=None,
                 timeout=10.0, ssl_context=None):
    """One request on a fresh connection. `body` is JSON-encoded; `raw`
    (bytes or str) is sent as is; with `ssl_context`, over HTTPS. Returns
    a Response. An answer to a target under /_fence/v1/ that
    docs/openapi.json does not describe raises AssertionError
    (apispec.py)."""
    hdrs = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    elif raw is not None:
        data = raw.encode() if isinstance(raw, str) else raw
        hdrs["Content-Type"] = "application/json"
    if headers:
        hdrs.update(headers)
    t0 = time.monotonic()
    if ssl_context is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                           context=ssl_context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        payload = r.read()
        resp = Response(r.status, r.reason, r.getheaders(), payload,
                        time.monotonic() - t0)
    finally:
        conn.close()
    # every answer of the lock API is held to docs/openapi.json: the test
    # that got one the document does not describe fails here
    apispec.check(method, path, resp.status, resp.header_list, resp.body)
    return resp


def raw_exchange(port, data, timeout=5.0, shut_write=False):
    """Sends bytes on a fresh socket and reads until the server closes or
    `timeout` passes. Returns the bytes read (b"" if closed at once).
    Send errors (the server may close early) are swallowed."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        try:
            s.sendall(data)
            if shut_write:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if _complete_response(out):
                break
    finally:
        s.close()
    return out


def _complete_response(buf):
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    m = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    if m:
        return len(rest) >= int(m.group(1))
    status = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    if status and status.group(1) in (b"204", b"304"):
        return True
    return False


def status_of(raw):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    return int(m.group(1)) if m else None


class Call(threading.Thread):
    """One HTTP request run in the background (a blocked acquire, a
    long-poll). After join(): .resp or .exc, and .t_start/.t_end."""

    def __init__(self, port, method, path, body=None, timeout=30.0,
                 headers=None):
        super().__init__(daemon=True)
        self.args = (port, method, path)
        self.kw = dict(body=body, timeout=timeout, headers=headers)
        self.resp = None
        self.exc = None
        self.t_start = None
        self.t_end = None

    def run(self):
        self.t_start = time.monotonic()
        try:
            self.resp = http_request(*self.args, **self.kw)
        except Exception as e:  # reported by the test
            self.exc = e
        self.t_end = time.monotonic()

    @property
    def done(self):
        return self.t_end is not None

    def result(self, timeout):
        """Joins and returns the Response (raises AssertionError if the
        call did not finish or failed at the transport level)."""
        self.join(timeout)
        if self.is_alive():
            raise AssertionError("%s %s did not answer within %.1f s"
                                 % (self.args[1], self.args[2], timeout))
        if self.exc is not None:
            raise AssertionError("%s %s failed: %r"
                                 % (self.args[1], self.args[2], self.exc))
        return self.resp

# ---------------------------------------------------------------------------
# fencegate


class Gateway(Process):
    """One fencegate process on a free loopback port."""

    _seq = 0

    def __init__(self, redis_port, upstream_port, flags=(), port=None,
                 add_defaults=True, env=None):
        Gateway._seq += 1
        self.env = env   # variables added to the runner's environment
        self.port = port or free_port()
        self.redis_port = redis_port
        self.upstream_port = upstream_port
        self.flags = list(flags)
        self.add_defaults = add_defaults
        self.dir = tempfile.mkdtemp(prefix="fencegate-%d-" % Gateway._seq,
                                    dir=tmp_root())
        self.logpath = os.path.join(self.dir, "stderr.log")
        self.proc = None
        self.stopped_rc = None
        self.ssl_context = None   # set for a gateway given tls-cert: its
                                  # own requests then go over HTTPS

    @staticmethod
    def executable():
        b = Config.bin
        if not b or not os.path.isfile(b) or not os.access(b, os.X_OK):
            raise SetupError("fencegate binary not found or not executable: %r"
                             % (b,))
        return b

    def argv(self):
        a = [self.executable()]
        if self.add_defaults:
            a += ["--listen", "127.0.0.1:%d" % self.port,
                  "--redis", redis_url(self.redis_port),
                  "--upstream", "http://127.0.0.1:%d" % self.upstream_port]
            if Config.log_level:
                a += ["--log-level", Config.log_level]
        return a + self.flags

    def start(self, wait=True, timeout=None):
        argv = self.argv()
        with open(self.logpath, "ab") as log:
            log.write(("### " + " ".join(argv[1:]) + "\n").encode())
            log.flush()
            kw = {}
            if self.env:
                kw["env"] = dict(os.environ, **self.env)
            self.proc = spawn(argv, stdout=log, stderr=log, cwd=self.dir,
                              **kw)
        if wait:
            self.wait_ready(timeout or slack(20.0))
        return self

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SetupError("fencegate exited with %s before answering "
                                 "health; its stderr:\n%s"
                                 % (self.proc.returncode,
                                    file_tail(self.logpath)))
            try:
                http_request(self.port, "GET", "/_fence/v1/health",
                             timeout=2.0, ssl_context=self.ssl_context)
                return
            except OSError:
                time.sleep(0.03)
        raise SetupError("fencegate did not answer GET /_fence/v1/health "
                         "within %.0f s; its stderr:\n%s"
                         % (timeout, file_tail(self.logpath)))

    def wait_healthy(self, timeout):
        """Waits (bounded) until health answers 200; True if it did."""
        def ok():
            try:
                return http_request(self.port, "GET", "/_fence/v1/health",
                                    timeout=2.0,
                                    ssl_context=self.ssl_context).status == 200
            except OSError:
                return False
        return wait_until(ok, timeout, 0.02)

    def stop(self):
        if self.proc is not None and self.stopped_rc is None:
            self.stopped_rc, _ = stop_process(self.proc)
        return self.stopped_rc

    def kill(self):
        if self.proc is not None:
            self.stopped_rc = kill_process(self.proc)

    def request(self, method, path, **kw):
        kw.setdefault("ssl_context", self.ssl_context)
        return http_request(self.port, method, path, **kw)

    def log_tail(self, lines=40):
        return file_tail(self.logpath, lines)

    def sanitizer_report(self):
        return sanitizer_report(self.logpath)


def new_key_file():
    """A fresh 32-byte HMAC key in the run's temp dir: (key, path)."""
    key = os.urandom(32)
    fd, path = tempfile.mkstemp(prefix="key-", dir=tmp_root())
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key, path


def new_origin(origin):
    """The origin an Env puts behind its gateways: one given as an object
    (origins.py says what it must offer), or one named: None or
    "stand-in" (an origins.StandIn answering like a store), "nginx"
    (storage.Nginx) or "apache" (apache.ApacheDav)."""
    if origin is None or origin == "stand-in":
        return origins.StandIn()
    if isinstance(origin, str):
        import storage   # storage.py and apache.py build on this module
        return storage.new_store(origin)
    return origin


class Env:
    """A Redis, an origin, and N gateways in front of them, started and
    stopped together.

    `origin` is what the gateways forward to (new_origin): the Python
    stand-in unless it names a real store. `redis` and `upstream` say
    whether start() starts the Redis and the origin (a test that brings
    its own starts neither). With `key_file` the gateways get a fresh
    HMAC key (--key-file; the key is in self.key). `wait_healthy`: start()
    waits until every gateway answers health 200 when it started both
    the Redis and the origin (a gateway may answer 503 before it has
    reached Redis)."""

    def __init__(self, flags=(), gateways=1, redis=True, upstream=True,
                 gateway_flags=None, origin=None,
                 key_file=False, gateway_env=None, wait_healthy=True):
        self.key = None
        if key_file:
            self.key, path = new_key_file()
            kf = ["--key-file", path]
            if gateway_flags:
                gateway_flags = [list(f) + kf for f in gateway_flags]
            else:
                flags = list(flags) + kf
        self.redis = new_redis()
        self.origin = new_origin(origin)
        self.start_redis = redis
        self.start_origin = upstream
        self.wait_for_health = wait_healthy
        per = gateway_flags or [list(flags)] * gateways
        self.gateways = [Gateway(self.redis.port, self.origin.port, f,
                                 env=gateway_env)
                         for f in per]

    # the origin by the names the tests know it by: the upstream (a
    # stand-in), the store (nginx, Apache)
    @property
    def upstream(self):
        return self.origin

    @upstream.setter
    def upstream(self, origin):
        self.origin = origin

    store = upstream

    @property
    def gw(self):
        return self.gateways[0]

    def start(self):
        try:
            if self.start_redis:
                self.redis.start()
            if self.start_origin:
                self.origin.start()
            for g in self.gateways:
                g.start()
            if self.wait_for_health and self.start_redis and \
                    self.start_origin:
                # a gateway that never gets ready is left to the tests to
                # report
                for g in self.gateways:
                    g.wait_healthy(slack(5.0))
        except BaseException:
            self.stop()
            raise
        return self

    def healthy(self):
        return all(g.alive() for g in self.gateways) and \
            (not self.start_redis or self.redis.alive()) and \
            (not self.start_origin or self.origin.alive())

    def log_paths(self):
        return [g.logpath for g in self.gateways] + self.origin.log_paths()

    def stop(self):
        """Stops everything; returns sanitizer reports found, if any."""
        reports = []
        for g in self.gateways:
            g.stop()
            r = g.sanitizer_report()
            if r:
                reports.append(r)
        self.origin.stop()
        self.redis.stop()
        return reports

# ---------------------------------------------------------------------------
# test base class

LEASE_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")
NAME_OK_RE = re.compile(r"^[A-Za-z0-9._~/-]{1,255}$")
LOCKS = "/_fence/v1/locks/"
_RUN_TAG = os.urandom(3).hex()


def valid_lock_name(n):
    return bool(NAME_OK_RE.match(n)) and \
        all(seg not in ("", ".", "..") for seg in n.split("/"))


class TestCase(unittest.TestCase):
    """Base class. The class's shared Env (flags in `gateway_flags`,
    `gateway_count` gateways) starts lazily on the first test, restarts if
    a test left it dead, and stops in tearDownClass. Tests that need their
    own processes call self.start_env() (stopped at cleanup)."""

    gateway_flags = ()
    gateway_count = 1
    # the matrix axes (matrix.py) this class's outcome depends on: a
    # fencegate build, against a Redis; a class that starts no Redis, or
    # no fencegate, says less
    axes = matrix.GATEWAY_AND_REDIS
    _envs = {}          # class -> Env
    _env_errors = {}    # class -> SetupError text

    # -- lifecycle --------------------------------------------------------

    @classmethod
    def shared_env(cls):
        env = TestCase._envs.get(cls)
        if env is not None and env.healthy():
            return env
        if env is not None:
            env.stop()
            del TestCase._envs[cls]
        err = TestCase._env_errors.get(cls)
        if err:
            raise SetupError("shared environment failed earlier: " + err)
        try:
            env = Env(cls.gateway_flags, cls.gateway_count).start()
        except Exception as e:
            TestCase._env_errors[cls] = str(e)
            raise
        TestCase._envs[cls] = env
        return env

    @classmethod
    def tearDownClass(cls):
        env = TestCase._envs.pop(cls, None)
        if env is not None:
            for r in env.stop():
                LATE_FAILURES.append("%s: sanitizer report from its shared "
                                     "fencegate:\n%s" % (cls.__name__, r))

    uses_shared_env = True

    def setUp(self):
        self.log_paths = []
        self._counter = 0
        if self.uses_shared_env:
            self.env = self.shared_env()
            self.log_paths += self.env.log_paths()
            self.gw = self.env.gw
            self.redis = self.env.redis

    def tearDown(self):
        if self.uses_shared_env:
            dead = [g for g in self.env.gateways if not g.alive()]
            if dead:
                g = dead[0]
                self.fail("fencegate died during this test (exit %s)%s"
                          % (g.proc.returncode,
                             "; sanitizer report:\n" + g.sanitizer_report()
                             if g.sanitizer_report() else ""))

    def start_env(self, flags=(), gateways=1, redis=True, upstream=True,
                  gateway_flags=None):
        """A private Env for this test, stopped at cleanup."""
        env = Env(flags, gateways, redis, upstream, gateway_flags)
        self.log_paths += env.log_paths()
        env.start()
        self.addCleanup(self._stop_env, env)
        return env

    def start_gateway(self, redis_port, upstream_port, flags=(), wait=True,
                      env=None):
        g = Gateway(redis_port, upstream_port, flags, env=env)
        self.log_paths.append(g.logpath)
        self.addCleanup(self._stop_gateway, g)
        g.start(wait=wait)
        return g

    def _stop_env(self, env):
        reports = env.stop()
        if reports:
            raise AssertionError("sanitizer report from fencegate:\n"
                                 + reports[0])

    def _stop_gateway(self, g):
        g.stop()
        r = g.sanitizer_report()
        if r:
            raise AssertionError("sanitizer report from fencegate:\n" + r)

    def failure_logs(self):
        out = []
        for p in self.log_paths:
            out.append("--- tail of %s ---\n%s"
                       % (os.path.relpath(p, tmp_root()), file_tail(p)))
        return "\n".join(out)

    # -- names ------------------------------------------------------------

    def lock_name(self, tag=""):
        """A lock name no other test uses."""
        self._counter += 1
        n = "it-%s/%s/%d%s" % (_RUN_TAG, self._testMethodName[:150],
                               self._counter, tag)
        return n[:255]

    # -- API calls --------------------------------------------------------

    def _g(self, gw):
        return gw or self.gw

    def req(self, method, path, gw=None, **kw):
        return self._g(gw).request(method, path, **kw)

    def acquire(self, name, body=None, gw=None, timeout=10.0, **fields):
        if body is None and fields:
            body = fields
        return self._g(gw).request("POST", LOCKS + name, body=body,
                                   timeout=timeout)

    def acquire_ok(self, name, gw=None, **fields):
        r = self.acquire(name, body=fields, gw=gw)
        self.assertEqual(r.status, 200, "acquire %s %r: %r" % (name, fields, r))
        return r.json

    def renew(self, name, lease, gw=None, **fields):
        body = dict(fields)
        if lease is not None:
            body["lease"] = lease
        return self._g(gw).request("PATCH", LOCKS + name, body=body)

    def release(self, name, lease, gw=None):
        return self._g(gw).request("DELETE", LOCKS + name,
                                   headers={"Fence-Lease": lease})

    def release_ok(self, name, lease, gw=None):
        r = self.release(name, lease, gw)
        self.assertEqual(r.status, 204, "release %s: %r" % (name, r))

    def inspect(self, name, gw=None, query="", timeout=10.0):
        return self._g(gw).request("GET", LOCKS + name + query,
                                   timeout=timeout)

    def state(self, name, gw=None):
        r = self.inspect(name, gw)
        self.assertEqual(r.status, 200, "inspect %s: %r" % (name, r))
        return r.json

    def check(self, sequencer, gw=None):
        return self._g(gw).request("POST", "/_fence/v1/check",
                                   body={"sequencer": sequencer})

    def check_ok(self, sequencer, gw=None):
        r = self.check(sequencer, gw)
        self.assertEqual(r.status, 200, "check: %r" % r)
        return r.json

    def health(self, gw=None):
        return self._g(gw).request("GET", "/_fence/v1/health")

    def call(self, method, name_or_path, body=None, gw=None, timeout=30.0,
             headers=None):
        """Starts a background request; name_or_path without a leading
        '/' is a lock name."""
        path = name_or_path if name_or_path.startswith("/") \
            else LOCKS + name_or_path
        c = Call(self._g(gw).port, method, path, body=body, timeout=timeout,
                 headers=headers)
        c.start()
        return c

    def waiter(self, name, gw=None, **fields):
        """Starts a blocked acquire in the background."""
        wait_ms = fields.get("wait_ms", 0)
        return self.call("POST", name, body=fields, gw=gw,
                         timeout=wait_ms / 1000.0 + slack(15.0))

    # -- assertions -------------------------------------------------------

    def assert_error(self, r, status, code, msg=None):
        ctx = (msg + ": " if msg else "") + repr(r)
        self.assertEqual(r.status, status, ctx)
        body = r.json
        self.assertIsInstance(body, dict, ctx)
        self.assertEqual(body.get("error"), code, ctx)
        self.assertIsInstance(body.get("message"), str, ctx)
        self.assertTrue(body["message"], "empty message: " + ctx)

    def assert_bad_request(self, r, msg=None):
        self.assert_error(r, 400, "bad_request", msg)

    def assert_alive(self, gw=None):
        g = self._g(gw)
        self.assertTrue(g.alive(), "fencegate exited (%s)"
                        % (g.proc.returncode,))
        r = self.health(gw)
        self.assertIn(r.status, (200, 503))

    def assert_no_keys(self, name, redis=None):
        keys = (redis or self.redis).lock_keys(name)
        self.assertEqual(keys, [], "Redis keys written for lock %r" % name)

    def assert_all_key_tags_valid(self, redis=None):
        """No key in Redis names a lock with an invalid name (the
        listing's index, fg:{!index}:*, and the event streams,
        fg:{!ev}:s and fg:{!evT}:s, name none)."""
        for k in (redis or self.redis).keys("*{*"):
            m = re.search(r"\{([^}]*)\}", k)
            if m and k not in ("fg:{!index}:n", "fg:{!index}:v") and \
                    not re.fullmatch(r"fg:\{!ev[0-9]*\}:s", k):
                self.assertTrue(valid_lock_name(m.group(1)),
                                "Redis holds a key for an invalid lock "
                                "name: %r" % k)

    def assert_lease(self, lease):
        self.assertIsInstance(lease, str)
        self.assertRegex(lease, LEASE_RE)

    def assert_token(self, token):
        self.assertIsInstance(token, int)
        self.assertNotIsInstance(token, bool)
        self.assertGreater(token, 0)
        self.assertLess(token, 2 ** 53)

    def wait_for(self, fn, timeout, what, interval=0.02):
        v = wait_until(fn, timeout, interval)
        if not v:
            self.fail("timed out after %.2f s waiting for %s" % (timeout,
                                                                 what))
        return v

    def wait_waiters(self, name, n, timeout=None, gw=None):
        """Waits until inspect reports `n` waiters on lock `name`."""
        last = {}

        def ok():
            last["s"] = self.state(name, gw)
            return last["s"]["waiters"] == n
        if not wait_until(ok, timeout or slack(3.0)):
            self.fail("lock %s: expected %d waiters, inspect says %r"
                      % (name, n, last.get("s")))


def random_lease():
    """A well-formed lease that was never issued."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def tamper(sequencer):
    """A sequencer with a changed MAC character (same shape)."""
    parts = sequencer.split(".")
    last = parts[-1]
    i = len(last) // 2
    c = last[i]
    repl = "A" if c != "A" else "B"
    parts[-1] = last[:i] + repl + last[i + 1:]
    return ".".join(parts)


def parse_raw(raw):
    """(status, {lower-case header: value}, body) of a raw HTTP/1.x
    response; status None when `raw` is not one."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = status_of(raw)
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        hdrs[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            try:
                n = int(size_line.split(b";")[0], 16)
            except ValueError:
                break
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        body = out
    return status, hdrs, body


# ---------------------------------------------------------------------------
# waiting on the gateway's own signals (its /metrics, inspect, its sockets)
# instead of a fixed sleep

def metric_value(gw, family, headers=None, **labels):
    """The sum of the samples of the counter or gauge `family` in `gw`'s
    /_fence/v1/metrics that carry the given label values (0 when none)."""
    r = gw.request("GET", "/_fence/v1/metrics", headers=headers)
    if r.status != 200:
        raise AssertionError("GET /_fence/v1/metrics: %r" % (r,))
    pat = re.compile(r"^%s(\{[^}]*\})?\s+(\S+)$" % re.escape(family))
    total = 0.0
    for line in r.body.decode("utf-8", "replace").splitlines():
        m = pat.match(line)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if any(got.get(k) != v for k, v in labels.items()):
            continue
        total += float(m.group(2))
    return total


def wait_metric(gw, family, at_least, timeout, headers=None, **labels):
    """Waits (bounded) until metric_value(gw, family, **labels) is at least
    `at_least`; raises AssertionError, with the last value, if it is not
    within `timeout` s. Returns the value."""
    last = [None]

    def grown():
        last[0] = metric_value(gw, family, headers=headers, **labels)
        return last[0] >= at_least
    if not wait_until(grown, timeout, 0.02):
        raise AssertionError("%s%s stayed at %r, below %r, for %.1f s"
                             % (family, labels or "", last[0], at_least,
                                timeout))
    return last[0]


def wait_state(tc, name, pred, what, timeout=None, gw=None):
    """Waits (bounded: `timeout` s, slack(3) when None; 0 asks once) until
    inspect's state of lock `name` satisfies `pred`; fails test case `tc`
    if it does not. Returns that state."""
    last = {}

    def ok():
        last["s"] = tc.state(name, gw)
        return last["s"] if pred(last["s"]) else None
    s = wait_until(ok, slack(3.0) if timeout is None else timeout)
    if not s:
        tc.fail("lock %s: timed out waiting for %s; inspect says %r"
                % (name, what, last.get("s")))
    return s


def wait_lock_free(tc, name, timeout=None, gw=None):
    """Waits until inspect reports lock `name` not held: its lease ran out
    (or it was released elsewhere). Returns that state."""
    return wait_state(tc, name, lambda s: s["held"] is False,
                      "its lease to end", timeout, gw)


def tcp_server_side(port, peer_ports):
    """{peer port: (state, bytes unread)} of the sockets on local `port`
    (a listener's accepted, or not yet accepted, connections) whose peer is
    one of `peer_ports`, from /proc/net/tcp and tcp6. A connection the
    server has closed (LAST_ACK, CLOSE) or one in TIME_WAIT is not
    listed."""
    out = {}
    for f in _tcp_rows():
        if int(f[1].rsplit(":", 1)[1], 16) != port:
            continue
        peer = int(f[2].rsplit(":", 1)[1], 16)
        state = int(f[3], 16)
        if peer in peer_ports and state not in (0x06, 0x07, 0x09):
            out[peer] = (state, int(f[4].split(":")[1], 16))
    return out


def wait_read_by_server(port, socks, timeout, peer_ports=None):
    """Waits (bounded) until the server on `port` has read every byte sent
    on each client connection: accepted it and left nothing in its receive
    queue, or closed it. `socks` are the open client sockets (each must
    still be open on the server's side), `peer_ports` the local ports of
    ones the client closed already (each read whole or closed). Raises
    AssertionError if it does not happen."""
    open_peers = {s.getsockname()[1] for s in socks}
    peers = open_peers | set(peer_ports or ())
    last = {}

    def read():
        last["t"] = t = tcp_server_side(port, peers)
        return open_peers <= set(t) and \
            all(unread == 0 for _, unread in t.values())
    if not wait_until(read, timeout, 0.01):
        raise AssertionError("the server on port %d left bytes unread: %r"
                             % (port, last.get("t")))

