"""apache.py - a real Apache httpd with mod_dav and mod_dav_fs as a second
WebDAV origin beside nginx (storage.py), the most common WebDAV server and
the strictest about what it is sent (RFC 4918: an absolute URI in
Destination).

Started like nginx: its own config file in a private directory of the
run's temp dir, `-X` (one process, no children: a SIGKILL by PID leaves
nothing holding the port), on a free loopback port, stopped by PID. When
the suite runs as root, Apache serves as www-data and its data and lock
directories are given to that user (and the run's temp directories the
search bit, so that it can reach them). The access log has the fields of
nginx's (storage.LOG_FIELDS), so that a test reads either origin's the
same way. A missing apache2 or module is a failure of the setup, never a
skip.
"""

import http.client
import os
import pwd
import shutil
import subprocess
import tempfile

import harness
from harness import SetupError, file_tail, free_port, slack, spawn, wait_until
from storage import LOG_FIELDS, DataDirStore, write_config

MODULES = "/usr/lib/apache2/modules"
# storage.LOG_FIELDS as mod_log_config writes them: the request's end in ms
# since the epoch in place of nginx's seconds, the request line in place of
# the raw target, "%X" (X: aborted) in place of nginx's $request_completion,
# the client's port in place of its connection number, the time taken in
# µs in place of nginx's $request_time in s
LOG_FORMAT = "\\t".join((
    "%{end:msec}t", "%m", "%r", "%>s", "%I", "%{Fencing-Token}i",
    "%{X-Test-Id}i", "%{X-Forwarded-For}i", "%{X-Forwarded-Proto}i",
    "%{Via}i", "%{Content-Length}i", "%{Transfer-Encoding}i", "%X",
    "%{remote}p", "%B", "%{Destination}i", "%{Destination-Fencing-Token}i",
    "%{Fence-Lease}i", "%{Forwarded}i", "%{X-Forwarded-Host}i", "%{Host}i",
    "%D"))
assert LOG_FORMAT.count("\\t") == len(LOG_FIELDS) - 1


def _apache_executable():
    for exe in (shutil.which("apache2"), "/usr/sbin/apache2"):
        if exe and os.access(exe, os.X_OK):
            return exe
    raise SetupError("apache2 not found (Debian package apache2; "
                     "scripts/install-deps.sh installs it)")


class ApacheDav(DataDirStore):
    """A private Apache httpd WebDAV store on a free loopback port."""

    def __init__(self, port=None):
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="apache-", dir=harness.tmp_root())
        self.data = os.path.join(self.dir, "data")
        self.lock = os.path.join(self.dir, "lock")
        self.access_log = os.path.join(self.dir, "access.log")
        self.error_log = os.path.join(self.dir, "error.log")
        self.conf = os.path.join(self.dir, "httpd.conf")
        self.proc = None
        for d in (self.data, self.lock):
            os.makedirs(d, exist_ok=True)

    def config_text(self):
        q = lambda s: '"%s"' % s  # noqa: E731 (paths of our own temp dir)
        lines = ["ServerRoot %s" % q(self.dir),
                 "ServerName 127.0.0.1",
                 "Listen 127.0.0.1:%d" % self.port,
                 "PidFile %s" % q(os.path.join(self.dir, "httpd.pid"))]
        for mod, so in (("mpm_event", "mod_mpm_event.so"),
                        ("authz_core", "mod_authz_core.so"),
                        ("dav", "mod_dav.so"), ("dav_fs", "mod_dav_fs.so")):
            path = os.path.join(MODULES, so)
            if not os.path.exists(path):
                raise SetupError("apache2 module missing: %s" % path)
            lines.append("LoadModule %s_module %s" % (mod, q(path)))
        if os.getuid() == 0:
            lines += ["User www-data", "Group www-data"]
        lines += [
            "ErrorLog %s" % q(self.error_log),
            "LogFormat \"%s\" fence" % LOG_FORMAT,
            "CustomLog %s fence" % q(self.access_log),
            "DavLockDB %s" % q(os.path.join(self.lock, "davlock")),
            "LimitRequestBody 0",
            # the gateway passes on up to 256 fields of a client's, and
            # adds its own
            "LimitRequestFields 1000",
            "DocumentRoot %s" % q(self.data),
            "<Directory %s>" % q(self.data),
            "  Dav On",
            "  AllowOverride None",
            "  Require all granted",
            "</Directory>",
        ]
        return "\n".join(lines) + "\n"

    def start(self, timeout=10.0):
        exe = _apache_executable()
        with open(self.conf, "w") as f:
            f.write(self.config_text())
        if os.getuid() == 0:
            # www-data must reach its directories through the run's temp
            # dirs (mode 0700): they get the search bit, not the read one
            for d in (harness.tmp_root(), self.dir):
                os.chmod(d, 0o711)
            u = pwd.getpwnam("www-data")
            for d in (self.data, self.lock):
                os.chown(d, u.pw_uid, u.pw_gid)
        stderr_path = os.path.join(self.dir, "stderr.log")
        with open(stderr_path, "ab") as out:
            self.proc = spawn([exe, "-f", self.conf, "-X"], stdout=out,
                              stderr=subprocess.STDOUT, cwd=self.dir)
        if not wait_until(self.answers, slack(timeout), 0.02):
            rc = self.proc.poll()
            self.stop()
            raise SetupError("apache2 on port %d did not answer (exit %s):\n"
                             "%s\n%s" % (self.port, rc, file_tail(stderr_path),
                                         file_tail(self.error_log)))
        self.warm_up()
        return self

    def warm_up(self):
        """One PUT and DELETE straight to the store, logged as a probe:
        mod_dav makes its lock database on its first write, which can take
        longer than a fenced write's margin on a loaded machine."""
        for method, body in (("PUT", b"warm\n"), ("DELETE", None)):
            c = http.client.HTTPConnection("127.0.0.1", self.port,
                                           timeout=slack(10.0))
            try:
                c.request(method, "/.warm-up", body=body,
                          headers={"X-Test-Id": "probe"})
                c.getresponse().read()
            finally:
                c.close()

    # -- what it stored ---------------------------------------------------

    def mkdir(self, path):
        """Makes a collection (and its parents) directly in the data dir:
        Apache makes no parent by itself (test fixture)."""
        d = self.file_of(path)
        os.makedirs(d, exist_ok=True)
        if os.getuid() == 0:
            u = pwd.getpwnam("www-data")
            while d.startswith(self.data) and d != self.data:
                os.chown(d, u.pw_uid, u.pw_gid)
                d = os.path.dirname(d)

    def put_file(self, path, data):
        fn = self.file_of(path)
        os.makedirs(os.path.dirname(fn), exist_ok=True)
        with open(fn, "wb") as f:
            f.write(data)
        if os.getuid() == 0:
            u = pwd.getpwnam("www-data")
            d = os.path.dirname(fn)
            while d.startswith(self.data):
                os.chown(d, u.pw_uid, u.pw_gid)
                d = os.path.dirname(d)
            os.chown(fn, u.pw_uid, u.pw_gid)

    def body_temp_files(self):
        """Request bodies Apache is still writing: mod_dav_fs streams a PUT
        into a temporary file beside its target."""
        out = []
        for root, _, files in os.walk(self.data):
            out += [os.path.join(root, f) for f in files
                    if f.startswith(".davfs.tmp")]
        return out

    # -- what it was sent -------------------------------------------------

    def log_fields(self, parts):
        parts = list(parts)
        parts[0] = "%.3f" % (int(parts[0]) / 1000.0)   # nginx's $msec: s
        line = parts[2].split(" ")
        parts[2] = line[1] if len(line) == 3 else "-"
        parts[12] = "-" if parts[12] == "X" else "OK"
        parts[21] = "%.6f" % (int(parts[21]) / 1e6)   # µs -> nginx's s
        return parts


def apache_behind_gateway(case, config):
    """For test `case`: a Redis, an Apache store and a fencegate in front of
    it with the config file text `config`, all stopped at the test's
    cleanup. Returns (apache, gateway)."""
    env = case.start_env(upstream=False)
    apache = ApacheDav().start()
    case.addCleanup(apache.stop)
    case.log_paths.append(apache.error_log)
    gw = case.start_gateway(env.redis.port, apache.port,
                            ("--config", write_config(config)))
    return apache, gw
