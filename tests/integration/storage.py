"""storage.py - a real nginx WebDAV store for the fencing-proxy tests.

Nginx is started the way harness.py starts redis-server: on a free loopback
port, in a private directory of the run's temp dir (prefix, temp paths,
data root, logs), stopped by PID (SIGTERM, then SIGKILL). It runs with
`master_process off`, a single process: a SIGKILL by PID (the watchdog's)
leaves no orphaned worker holding the port, and since one event loop
serves every connection, the access log lists requests in the order nginx
finished them. The access log is written per request (no buffer=), with
the fields the tests judge by: method, uri, status, request_length, the
Fencing-Token the gateway forwarded, and an X-Test-Id each test request
carries so that a refused request can be proven absent; also the
Destination and Host nginx was given, and the headers a client must never
get through unchanged (Destination-Fencing-Token, Fence-Lease, Forwarded,
X-Forwarded-Host).

A missing nginx or dav_ext module is a failure of the setup, never a skip.

Also here: StoreEnv (harness.Env with a store for its origin), the
base class of the proxy tests, and a small HTTP client that can send what
http.client's request() cannot (duplicate headers, Expect: 100-continue,
half bodies).

Invariant: every process started here is registered with harness.spawn,
so harness.stop_all() stops it whatever happens to a test.
"""

import base64
import hashlib
import hmac
import http.client
import itertools
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
import urllib.parse
import uuid

import harness
import matrix
from harness import (LOCKS, SetupError, file_tail, free_port,
                     slack, spawn, stop_process, kill_process, wait_until)

DAV_EXT_MODULE = "ngx_http_dav_ext_module.so"
DEBIAN_MODULES_DIR = "/usr/lib/nginx/modules"   # Debian's --modules-path

# One access-log line: tab-separated; nginx escapes tabs inside values
# (as \x09), and logs "-" for an empty variable.
LOG_FIELDS = ("msec", "method", "uri", "status", "request_length",
              "fencing_token", "test_id", "x_forwarded_for",
              "x_forwarded_proto", "via", "content_length",
              "transfer_encoding", "completion", "connection",
              "body_bytes_sent", "destination", "destination_fencing_token",
              "fence_lease", "forwarded", "x_forwarded_host", "http_host",
              "request_time")
LOG_FORMAT = "\\t".join((
    "$msec", "$request_method", "$request_uri", "$status",
    "$request_length", "$http_fencing_token", "$http_x_test_id",
    "$http_x_forwarded_for", "$http_x_forwarded_proto", "$http_via",
    "$http_content_length", "$http_transfer_encoding",
    "$request_completion", "$connection", "$body_bytes_sent",
    "$http_destination", "$http_destination_fencing_token",
    "$http_fence_lease", "$http_forwarded", "$http_x_forwarded_host",
    "$http_host", "$request_time"))

# ---------------------------------------------------------------------------
# nginx


def _nginx_executable():
    exe = os.environ.get("FG_NGINX")
    if not exe:
        path = os.environ.get("PATH", "") + os.pathsep + \
            os.pathsep.join(("/usr/sbin", "/usr/local/sbin", "/sbin"))
        exe = shutil.which("nginx", path=path)
    if not exe or not os.access(exe, os.X_OK):
        raise SetupError("nginx not found (install nginx and "
                         "libnginx-mod-http-dav-ext, or set FG_NGINX): the "
                         "proxy tests cannot run")
    return exe


def _dav_ext_module(exe):
    """The dav_ext module file: FG_NGINX_DAV_EXT, else in nginx's
    --modules-path, else Debian's modules directory."""
    explicit = os.environ.get("FG_NGINX_DAV_EXT")
    candidates = [explicit] if explicit else []
    try:
        out = subprocess.run([exe, "-V"], capture_output=True, timeout=10)
        m = re.search(rb"--modules-path=(\S+)", out.stderr + out.stdout)
        if m:
            candidates.append(os.path.join(m.group(1).decode(),
                                           DAV_EXT_MODULE))
    except (OSError, subprocess.SubprocessError):
        pass
    candidates.append(os.path.join(DEBIAN_MODULES_DIR, DAV_EXT_MODULE))
    for c in candidates:
        if c and os.path.isfile(c):
            return c
    raise SetupError("nginx's WebDAV extension module %s not found (install "
                     "libnginx-mod-http-dav-ext, or set FG_NGINX_DAV_EXT): "
                     "the proxy tests cannot run" % DAV_EXT_MODULE)


# The X-Test-Id of every request whose answer a test has heard, with the
# ordinal of its latest answer. A store with several workers (Apache) may
# log an answered request after a later one, so a position in its log does
# not by itself separate what came before a mark from what came after it.
# An id sent again after a mark counts as after it.
ANSWERED = {}
_ANSWER_NO = itertools.count()


def answer_mark():
    """An ordinal above every answer heard so far, below every later one."""
    return next(_ANSWER_NO)


class LogEntry:
    """One parsed access-log line. Fields absent in the request are None;
    status, request_length and fencing_token (when numeric) are ints."""

    def __init__(self, fields):
        for k, v in zip(LOG_FIELDS, fields):
            setattr(self, k, None if v == "-" else v)
        self.status = int(self.status)
        self.request_length = int(self.request_length or 0)
        self.token = None
        if self.fencing_token and self.fencing_token.isdigit():
            self.token = int(self.fencing_token)
        self.path = urllib.parse.urlsplit(self.uri or "").path
        # when the store began reading the request (msec is its end)
        self.start = float(self.msec) - float(self.request_time or 0)

    @property
    def applied(self):
        """A write nginx carried out (2xx)."""
        return 200 <= self.status < 300

    def __repr__(self):
        return "<%s %s %d token=%s id=%s>" % (self.method, self.uri,
                                              self.status, self.fencing_token,
                                              self.test_id)


class DataDirStore(harness.Process):
    """What every WebDAV store the suite starts has in common (nginx here,
    Apache in apache.py): a probe that it answers, and its data dir seen
    as URL paths."""

    # the origin interface of origins.py (harness.Env's origin)

    def log_paths(self):
        return [self.error_log]

    def answers(self):
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port,
                                           timeout=1.0)
            try:
                c.request("OPTIONS", "/", headers={"X-Test-Id": "probe"})
                c.getresponse().read()
            finally:
                c.close()
            return True
        except OSError:
            return False

    def file_of(self, path):
        """The data-dir file behind a URL path (percent-decoded)."""
        rel = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        return os.path.join(self.data, rel.lstrip("/"))

    def read(self, path):
        """The stored bytes of `path`, or None when there is no such file."""
        try:
            with open(self.file_of(path), "rb") as f:
                return f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def exists(self, path):
        return os.path.lexists(self.file_of(path))

    def mkdir(self, path):
        """Makes a collection (and its parents) directly in the data dir
        (test fixture)."""
        os.makedirs(self.file_of(path), exist_ok=True)

    def put_file(self, path, data):
        """Stores an object directly in the data dir (test fixture)."""
        fn = self.file_of(path)
        os.makedirs(os.path.dirname(fn), exist_ok=True)
        with open(fn, "wb") as f:
            f.write(data)

    def sha256(self, path):
        h = hashlib.sha256()
        with open(self.file_of(path), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    # -- the access log: one line of LOG_FIELDS per request ---------------

    def log_fields(self, parts):
        """The LOG_FIELDS of one access-log line (a store whose server
        cannot log one of them as nginx does converts it here)."""
        return parts

    def log(self):
        """Every access-log entry so far, in the order the store logged
        them (probe requests of this module left out)."""
        try:
            with open(self.access_log, "r", encoding="utf-8",
                      errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in text.split("\n")[:-1]:   # the last one may be partial
            parts = line.split("\t")
            if len(parts) != len(LOG_FIELDS):
                continue   # a line being written right now
            e = LogEntry(self.log_fields(parts))
            if e.test_id != "probe":
                out.append(e)
        return out

    def log_for(self, test_id=None, path=None, method=None):
        return [e for e in self.log()
                if (test_id is None or e.test_id == test_id)
                and (path is None or e.path == path)
                and (method is None or e.method == method)]

    def wait_log(self, timeout, test_id=None, path=None, method=None):
        """Waits until an entry matching appears; returns the matches
        (possibly empty after the timeout)."""
        return wait_until(lambda: self.log_for(test_id, path, method),
                          timeout) or []


class Nginx(DataDirStore):
    """A private nginx WebDAV store on a free loopback port."""

    def bodies_being_read(self):
        """How many request bodies nginx is writing to its temp files
        now (its DAV module takes every PUT body into one, from the first
        byte to the request's end)."""
        try:
            return len(os.listdir(os.path.join(self.tmp, "body")))
        except FileNotFoundError:
            return 0

    def __init__(self, port=None):
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=harness.tmp_root())
        self.data = os.path.join(self.dir, "data")
        self.tmp = os.path.join(self.dir, "tmp")
        self.access_log = os.path.join(self.dir, "access.log")
        self.error_log = os.path.join(self.dir, "error.log")
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.proc = None
        for d in (self.data, self.tmp):
            os.makedirs(d, exist_ok=True)

    def config_text(self, module):
        q = json.dumps   # a double-quoted nginx string
        lines = [
            "load_module %s;" % q(module),
            "daemon off;",
            "master_process off;",
            "worker_processes 1;",
        ]
        if os.getuid() == 0:
            lines.append("user root;")
        lines += [
            "pid %s;" % q(os.path.join(self.dir, "nginx.pid")),
            "error_log %s info;" % q(self.error_log),
            "events { worker_connections 1024; }",
            "http {",
            "  client_body_temp_path %s;" % q(os.path.join(self.tmp, "body")),
            "  proxy_temp_path %s;" % q(os.path.join(self.tmp, "proxy")),
            "  fastcgi_temp_path %s;" % q(os.path.join(self.tmp, "fastcgi")),
            "  uwsgi_temp_path %s;" % q(os.path.join(self.tmp, "uwsgi")),
            "  scgi_temp_path %s;" % q(os.path.join(self.tmp, "scgi")),
            "  types { text/plain txt; application/json json; "
            "text/html html; }",
            "  default_type application/octet-stream;",
            "  log_format fence '%s';" % LOG_FORMAT,
            "  access_log %s fence;" % q(self.access_log),
            "  server {",
            "    listen 127.0.0.1:%d;" % self.port,
            "    root %s;" % q(self.data),
            "    client_max_body_size 0;",
            "    location / {",
            "      dav_methods PUT DELETE MKCOL COPY MOVE;",
            "      dav_ext_methods PROPFIND OPTIONS;",
            "      create_full_put_path on;",
            "      dav_access user:rw group:r all:r;",
            "    }",
            "  }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def start(self, timeout=10.0):
        exe = _nginx_executable()
        module = _dav_ext_module(exe)
        with open(self.conf, "w") as f:
            f.write(self.config_text(module))
        stderr_path = os.path.join(self.dir, "stderr.log")
        with open(stderr_path, "ab") as out:
            self.proc = spawn([exe, "-p", self.dir + os.sep, "-c", self.conf,
                               "-e", self.error_log],
                              stdout=out, stderr=subprocess.STDOUT,
                              cwd=self.dir)
        if not wait_until(self.answers, slack(timeout), 0.02):
            rc = self.proc.poll()
            self.stop()
            raise SetupError("nginx on port %d did not answer (exit %s):\n"
                             "%s\n%s" % (self.port, rc,
                                         file_tail(stderr_path),
                                         file_tail(self.error_log)))
        return self

    # -- what it is holding -----------------------------------------------

    def body_temp_files(self):
        """Request bodies nginx is still holding in its temp dir."""
        d = os.path.join(self.tmp, "body")
        out = []
        for root, _, files in os.walk(d):
            out += [os.path.join(root, f) for f in files]
        return out


# ---------------------------------------------------------------------------
# sequencers (see include/fencegate/sequencer.h for the format)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_sequencer(key, name, mode, token):
    """The sequencer fencegate would sign under `key` for (name, mode,
    token): fg1.<b64url(name)>.<x|s>.<token>.<b64url(HMAC-SHA256)>."""
    m = "x" if mode == "exclusive" else "s"
    msg = b"fg1\0" + name.encode() + b"\0" + m.encode() + b"\0" + \
        str(token).encode()
    mac = hmac.new(key, msg, hashlib.sha256).digest()
    return "fg1.%s.%s.%d.%s" % (b64url(name.encode()), m, token, b64url(mac))


new_key_file = harness.new_key_file   # where the proxy tests find it


def write_config(text):
    """Writes a fencegate config file into the run's temp dir; its path."""
    fd, path = tempfile.mkstemp(prefix="fencegate-", suffix=".conf",
                                dir=harness.tmp_root())
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


# ---------------------------------------------------------------------------
# redis + nginx + gateways


def new_store(origin):
    """A store of the kind named: "nginx" (its WebDAV module), or "apache"
    (httpd with mod_dav, apache.py)."""
    if origin == "apache":
        from apache import ApacheDav   # apache.py builds on this module
        return ApacheDav()
    assert origin == "nginx", origin
    return Nginx()


class StoreEnv(harness.Env):
    """harness.Env with a WebDAV store (nginx unless `origin` says
    "apache") for its origin, a key file for its gateways unless told
    not, and the arguments the proxy tests have always given it.
    start_nginx=False leaves the store for the test to start."""

    def __init__(self, flags=(), gateways=1, gateway_flags=None,
                 start_nginx=True, key_file=True, origin="nginx",
                 gateway_env=None):
        super().__init__(flags, gateways, gateway_flags=gateway_flags,
                         upstream=start_nginx, origin=origin,
                         key_file=key_file, gateway_env=gateway_env,
                         wait_healthy=False)


# ---------------------------------------------------------------------------
# HTTP client for the proxy side


# The proxy tests read responses exactly like the lock API tests do.
Reply = harness.Response


def send(port, method, path, body=None, headers=(), timeout=30.0,
         chunked=False):
    """One request on a fresh connection. `headers` is a list of
    (name, value) pairs (repeats allowed) or a dict. `body`: bytes, or an
    iterable of bytes with chunked=True. Content-Length is added for a
    bytes body unless given."""
    if isinstance(headers, dict):
        headers = list(headers.items())
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        names = {k.lower() for k, _ in headers}
        for k, v in headers:
            conn.putheader(k, v)
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        elif body is not None and "content-length" not in names:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if chunked:
            for piece in body:
                if piece:
                    conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            conn.send(b"0\r\n\r\n")
        elif body:
            view = memoryview(body)
            for i in range(0, len(view), 1 << 20):
                conn.send(view[i:i + (1 << 20)])
        r = conn.getresponse()
        data = r.read()
        return Reply(r.status, r.reason, r.getheaders(), data,
                     time.monotonic() - t0)
    finally:
        conn.close()


class RawRequest:
    """A request written by hand on a socket, for uploads the test paces
    (slow chunks, a half body, Expect: 100-continue)."""

    def __init__(self, port, method, path, headers, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=timeout)
        head = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % port]
        head += ["%s: %s" % (k, v) for k, v in headers]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def send_chunk(self, data):
        self.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self):
        self.sock.sendall(b"0\r\n\r\n")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def abort(self):
        """Closes at once with a reset, like a client that crashed."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        self.close()

    def readable(self, timeout):
        """Has the server sent something (or closed) within timeout?"""
        import select
        if self.buf:
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def read_head(self, timeout):
        """Reads one response head (interim or final). Returns (status,
        {lower-case name: value}) or None when the server closed first."""
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, ConnectionError):
                return None
            if not chunk:
                return None
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3})", lines[0])
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(b":")
            hdrs[k.strip().lower().decode("latin-1")] = \
                v.strip().decode("latin-1")
        return (int(m.group(1)) if m else None), hdrs

    def read_response(self, timeout):
        """Reads a final response (skipping 1xx). Returns a Reply, or None
        when the server closed without one."""
        t0 = time.monotonic()
        while True:
            got = self.read_head(timeout)
            if got is None:
                return None
            status, hdrs = got
            if status is None or status >= 200:
                break
        n = int(hdrs.get("content-length", "0"))
        self.sock.settimeout(timeout)
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, ConnectionError):
                break
            if not chunk:
                break
            self.buf += chunk
        body, self.buf = self.buf[:n], self.buf[n:]
        return Reply(status, "", list(hdrs.items()), body,
                     time.monotonic() - t0)


# ---------------------------------------------------------------------------
# client processes


class ClientProcess:
    """A python3 child running `code` (with argv `args`), registered with
    harness.spawn. It reports by printing JSON lines; next_event() reads
    them with a timeout. pause()/resume() are SIGSTOP/SIGCONT."""

    def __init__(self, code, args):
        import queue
        import sys
        self.events = queue.Queue()
        self.lines = []
        argv = [sys.executable, "-c", code] + [str(a) for a in args]
        self.proc = spawn(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            text = line.decode("utf-8", "replace").strip()
            self.lines.append(text)
            try:
                self.events.put(json.loads(text))
            except ValueError:
                self.events.put({"event": "garbage", "line": text})
        self.events.put({"event": "exit"})

    def next_event(self, timeout):
        import queue
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("client process %d said nothing within "
                                 "%.1f s (lines so far: %r)"
                                 % (self.proc.pid, timeout, self.lines))

    def expect(self, name, timeout):
        e = self.next_event(timeout)
        if e.get("event") != name:
            err = b""
            if e.get("event") == "exit":
                self.proc.wait(5)
                err = self.proc.stderr.read()
            raise AssertionError("client process: expected %r, got %r %s"
                                 % (name, e, err.decode("utf-8", "replace")))
        return e

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stopped(self):
        """Is the process in the stopped state (SIGSTOP took effect)?"""
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        except OSError:
            return False

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("client process %d did not exit within "
                                 "%.1f s" % (self.proc.pid, timeout))

    def stop(self):
        stop_process(self.proc, grace=2.0)


# ---------------------------------------------------------------------------
# base class of the proxy tests


def on_both_origins(cls):
    """Class decorator for a class of forwarding tests whose outcome
    depends on the real store: it runs against every origin of the matrix
    (matrix.on_origins: nginx WebDAV and Apache httpd mod_dav), the
    worker's cell naming which (harness.Config.origin)."""
    return matrix.on_origins(cls)


_RUN_TAG = uuid.uuid4().hex[:6]


class StoreTestCase(harness.TestCase):
    """Tests against fencegate in front of a real nginx store. A class's
    shared StoreEnv (flags in `store_flags`) starts lazily on its first
    test and stops in tearDownClass; a test that needs its own processes
    calls self.start_store() (stopped at cleanup)."""

    uses_shared_env = False
    origin = "nginx"        # the store's kind, unless the class has the
                            # origin axis (on_both_origins): then the cell's
    store_flags = ("--forward-token", "yes")
    store_config = None     # text of a --config file for the shared env
    store_gateways = 1      # gateways of the shared env (one Redis)
    _store_envs = {}
    _store_errors = {}

    @classmethod
    def store_origin(cls):
        """The store this class runs against: the cell's origin for a class
        with the origin axis, else its own."""
        if "origin" in cls.axes:
            return harness.Config.origin
        return cls.origin

    @classmethod
    def shared_store(cls):
        env = StoreTestCase._store_envs.get(cls)
        if env is not None and env.healthy():
            return env
        if env is not None:
            env.stop()
            del StoreTestCase._store_envs[cls]
        err = StoreTestCase._store_errors.get(cls)
        if err:
            raise SetupError("shared store environment failed earlier: " + err)
        flags = list(cls.store_flags)
        if cls.store_config is not None:
            flags += ["--config", write_config(cls.store_config)]
        try:
            env = StoreEnv(flags, cls.store_gateways,
                           origin=cls.store_origin()).start()
        except Exception as e:
            StoreTestCase._store_errors[cls] = str(e)
            raise
        StoreTestCase._store_envs[cls] = env
        return env

    @classmethod
    def tearDownClass(cls):
        env = StoreTestCase._store_envs.pop(cls, None)
        if env is not None:
            for r in env.stop():
                harness.LATE_FAILURES.append(
                    "%s: sanitizer report from its shared fencegate:\n%s"
                    % (cls.__name__, r))
        super().tearDownClass()

    def use(self, env):
        self.env = env
        self.key = env.key
        self.gw = env.gw
        self.redis = env.redis
        self.store = env.store
        for p in env.log_paths():
            if p not in self.log_paths:
                self.log_paths.append(p)

    def use_shared(self):
        self.use(self.shared_store())
        self._uses_shared_store = True
        return self.env

    def start_store(self, flags=(), gateways=1, gateway_flags=None,
                    start_nginx=True, key_file=True, gateway_env=None):
        env = StoreEnv(flags, gateways, gateway_flags, start_nginx, key_file,
                       origin=self.store_origin(), gateway_env=gateway_env)
        self.log_paths += env.log_paths()
        env.start()
        self.addCleanup(self._stop_env, env)
        self.use(env)
        return env

    def setUp(self):
        super().setUp()
        self._uses_shared_store = False

    def tearDown(self):
        super().tearDown()
        env = getattr(self, "env", None)
        if env is not None:
            dead = [g for g in env.gateways if not g.alive()]
            if dead:
                g = dead[0]
                r = g.sanitizer_report()
                self.fail("fencegate died during this test (exit %s)%s"
                          % (g.proc.returncode,
                             "; sanitizer report:\n" + r if r else ""))

    # -- names ------------------------------------------------------------

    def obj(self, tag="obj", ext=".txt"):
        """A URL path no other test uses; its default lock is the path
        without the leading '/'. Its parent collection exists (a fixture:
        nginx makes one for a PUT, Apache answers 409 without it, as RFC
        4918 says)."""
        self._counter += 1
        path = "/s%s/%s/%d/%s%s" % (_RUN_TAG, self._testMethodName[:100],
                                    self._counter, tag, ext)
        store = getattr(self, "store", None)
        if store is not None:
            store.mkdir(path.rstrip("/").rsplit("/", 1)[0] + "/")
        return path

    def folder(self, tag="dir"):
        """A path no other test uses, made a collection in the store (no
        trailing '/'): the parent of what a test writes there."""
        path = self.obj(tag, ext="")
        self.store.mkdir(path + "/")
        return path

    @staticmethod
    def lock_of(path):
        return path.strip("/")

    # -- requests ---------------------------------------------------------

    def grant(self, path_or_lock, gw=None, **fields):
        """Acquires the lock guarding `path` (or the lock named so);
        returns the grant's JSON."""
        name = self.lock_of(path_or_lock)
        fields.setdefault("ttl_ms", 30000)
        r = (gw or self.gw).request("POST", LOCKS + name, body=fields,
                                    timeout=fields.get("wait_ms", 0) / 1000.0
                                    + slack(10.0))
        self.assertEqual(r.status, 200, "acquire %s %r: %r"
                         % (name, fields, r))
        return r.json

    def send(self, method, path, body=None, headers=(), gw=None,
             port=None, timeout=30.0, token=None, test_id=None,
             chunked=False):
        """A request through the gateway (or to `port`). Adds X-Test-Id
        (returned as reply.test_id) and, when given, Fencing-Token."""
        if isinstance(headers, dict):
            headers = list(headers.items())
        headers = list(headers)
        tid = test_id or uuid.uuid4().hex
        headers.append(("X-Test-Id", tid))
        if token is not None:
            headers.append(("Fencing-Token", token))
        r = send(port or (gw or self.gw).port, method, path, body, headers,
                 timeout, chunked)
        r.test_id = tid
        ANSWERED[tid] = next(_ANSWER_NO)
        return r

    def put(self, path, data, seq, gw=None, **kw):
        return self.send("PUT", path, data, token=seq, gw=gw, **kw)

    def put_ok(self, path, data, seq, gw=None, **kw):
        r = self.put(path, data, seq, gw=gw, **kw)
        self.assertIn(r.status, (201, 204), "PUT %s: %r" % (path, r))
        return r

    # -- assertions -------------------------------------------------------

    def assert_error(self, r, status, code, msg=None):
        ctx = (msg + ": " if msg else "") + repr(r)
        self.assertEqual(r.status, status, ctx)
        body = r.json
        self.assertIsInstance(body, dict, ctx)
        self.assertEqual(body.get("error"), code, ctx)
        self.assertIsInstance(body.get("message"), str, ctx)
        self.assertTrue(body["message"], "empty message: " + ctx)

    def assert_never_reached_nginx(self, r, what=""):
        """The request of reply `r` left no line in nginx's access log.
        (nginx logs a request when it ends; a short wait lets a request
        that did go upstream show up.)"""
        hits = self.store.wait_log(slack(0.3), test_id=r.test_id)
        self.assertEqual(hits, [], "%s reached nginx: %r" % (what or "request",
                                                             hits))

    def assert_stored(self, path, data, what=""):
        got = self.store.read(path)
        self.assertIsNotNone(got, "%s: %s is not in nginx's data dir"
                             % (what, path))
        self.assertEqual(len(got), len(data), "%s: %s holds %d bytes, "
                         "expected %d" % (what, path, len(got), len(data)))
        self.assertEqual(got, data, "%s: %s holds other bytes" % (what, path))

    def assert_absent(self, path, what=""):
        self.assertFalse(self.store.exists(path),
                         "%s: %s exists in nginx's data dir" % (what, path))
