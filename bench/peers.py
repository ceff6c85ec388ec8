"""peers.py - the servers of the benchmark that the integration harness does
not have: the storage nginx as the benchmark runs it, nginx as a plain (or
HTTPS) reverse proxy in front of it, and etcd with its v3 lock API.

Each is a harness.Process started through harness.spawn, so that
harness.stop_all() stops it by PID on every way out of bench/run.py:

  BenchStore  storage.Nginx with the benchmark's configuration: its root
              and request bodies under a directory of the caller's (tmpfs),
              STORE_WORKERS workers, no access log (a log line per request
              would be a cost of the storage that hides the proxy's).
  ProxyNginx  nginx with proxy_pass to the storage (upstream keepalive 64,
              request buffering off, reuseport), as many workers as
              fencegate has event loops; optionally over TLS.
  Etcd        one etcd member on free loopback ports; api is the JSON
              gateway's prefix (/v3, /v3beta or /v3alpha).

Every start waits for the server to answer (or for its worker processes to
be there), never for a fixed time.
"""

import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import harness
import storage
from harness import SetupError, file_tail, free_port, spawn, wait_until


def children(pid):
    """The pids whose parent is pid (nginx's workers)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(d))
    return sorted(out)


def nginx_conf(d, workers, server, http_extra=""):
    """A self-contained nginx.conf whose pid, lock and temp dirs live in d."""
    lines = []
    if os.getuid() == 0:
        lines.append("user root;")
    lines += [
        "worker_processes %d;" % workers,
        "daemon off;",
        "pid %s/nginx.pid;" % d,
        "lock_file %s/nginx.lock;" % d,
        "error_log %s/error.log error;" % d,
        "events { worker_connections 4096; }",
        "http {",
        "\taccess_log off;",
        "\tlog_not_found off;",
        "\tdefault_type application/octet-stream;",
        "\tclient_max_body_size 0;",
        "\tkeepalive_requests 1000000;",
        "\tkeepalive_timeout 120s;",
    ]
    for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        lines.append("\t%s_temp_path %s/%s;" % (t, d, t))
    if http_extra:
        lines.append(http_extra)
    lines += ["\tserver {", server, "\t}", "}"]
    return "\n".join(lines) + "\n"


def nginx_version():
    exe = storage._nginx_executable()
    p = subprocess.run([exe, "-v"], capture_output=True, text=True)
    return (p.stderr or p.stdout).strip().replace("nginx version: ", "")


def http_code(url, ssl_context=None, timeout=2.0):
    """The status of a GET of url, or None when nothing answers."""
    u = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else \
        http.client.HTTPConnection
    kw = {"context": ssl_context} if u.scheme == "https" else {}
    c = cls(u.hostname, u.port, timeout=timeout, **kw)
    try:
        c.request("GET", u.path or "/")
        r = c.getresponse()
        r.read()
        return r.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        c.close()


class _NginxProcess(harness.Process):
    """An nginx master with its workers, its config written by the caller."""

    name = "nginx"
    scheme = "http"
    ssl_context = None

    def _spawn(self, conf_text):
        exe = storage._nginx_executable()
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf_text)
        self.logpath = os.path.join(self.dir, "error.log")
        with open(os.path.join(self.dir, "stderr.log"), "ab") as out:
            self.proc = spawn([exe, "-p", self.dir + os.sep, "-c", self.conf,
                               "-e", self.logpath], stdout=out,
                              stderr=subprocess.STDOUT, cwd=self.dir)

    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def _wait(self, timeout, workers):
        def up():
            if not self.alive():
                return True
            if http_code(self.url() + "/fgb-probe", self.ssl_context) is None:
                return False
            return len(children(self.proc.pid)) >= workers
        wait_until(up, timeout, 0.05)
        if not self.alive() or \
                http_code(self.url() + "/fgb-probe", self.ssl_context) is None:
            rc = self.proc.poll()
            self.stop()
            raise SetupError("%s on port %d did not start (exit %s):\n%s\n%s"
                             % (self.name, self.port, rc,
                                file_tail(os.path.join(self.dir,
                                                       "stderr.log")),
                                file_tail(self.logpath)))
        self.workers = len(children(self.proc.pid))


class BenchStore(storage.Nginx, _NginxProcess):
    """The WebDAV storage: storage.Nginx, its data root and request bodies
    under `root` (a directory on tmpfs, normally), `workers` workers, no
    access log."""

    name = "nginx-store"

    def __init__(self, root, workers, port=None):
        storage.Nginx.__init__(self, port)
        self.root = root
        self.data = os.path.join(root, "dav")
        self.body = os.path.join(root, "body")
        os.makedirs(self.data, exist_ok=True)
        os.makedirs(self.body, exist_ok=True)
        self.n_workers = workers

    def config_text(self, module=None):
        return nginx_conf(self.dir, self.n_workers, "\n".join((
            "\t\tlisten 127.0.0.1:%d;" % self.port,
            "\t\troot %s;" % self.data,
            "\t\tclient_body_temp_path %s;" % self.body,
            "\t\tsendfile on;",
            "\t\tdav_methods PUT DELETE MKCOL COPY MOVE;",
            "\t\tcreate_full_put_path on;",
            "\t\tdav_access user:rw group:r all:r;")))

    def start(self, timeout=10.0):
        self._spawn(self.config_text())
        self._wait(timeout, self.n_workers)
        return self


class ProxyNginx(_NginxProcess):
    """nginx as a reverse proxy to the storage at store_port: proxy_pass,
    HTTP/1.1 with upstream keepalive 64, request buffering off, reuseport
    (one listening socket per worker). With tls=(cert, key) over HTTPS,
    without a session cache or tickets (every handshake a full one)."""

    def __init__(self, name, workers, store_port, tls=None, port=None):
        self.name = name
        self.port = port or free_port()
        self.n_workers = workers
        self.store_port = store_port
        self.tls = tls
        self.dir = tempfile.mkdtemp(prefix=name + "-", dir=harness.tmp_root())
        self.proc = None
        if tls:
            self.scheme = "https"
            self.ssl_context = ssl.create_default_context(cafile=tls[0])

    LOCATION = "\n".join((
        "\t\tlocation / {",
        "\t\t\tproxy_pass http://fgb_store;",
        "\t\t\tproxy_http_version 1.1;",
        "\t\t\tproxy_set_header Connection \"\";",
        "\t\t\tproxy_request_buffering off;",
        "\t\t}"))

    def config_text(self):
        upstream = "\n".join((
            "\tupstream fgb_store {",
            "\t\tserver 127.0.0.1:%d;" % self.store_port,
            "\t\tkeepalive 64;",
            "\t\tkeepalive_requests 1000000;",
            "\t}"))
        if self.tls:
            server = [
                "\t\tlisten 127.0.0.1:%d ssl reuseport;" % self.port,
                "\t\tssl_certificate %s;" % self.tls[0],
                "\t\tssl_certificate_key %s;" % self.tls[1],
                "\t\tssl_protocols TLSv1.2 TLSv1.3;",
                "\t\tssl_session_cache off;",
                "\t\tssl_session_tickets off;"]
        else:
            server = ["\t\tlisten 127.0.0.1:%d reuseport;" % self.port]
        return nginx_conf(self.dir, self.n_workers,
                          "\n".join(server + [self.LOCATION]), upstream)

    def start(self, timeout=10.0):
        self._spawn(self.config_text())
        self._wait(timeout, self.n_workers)
        return self


class Etcd(harness.Process):
    """One etcd member on free loopback ports, its data under the run's
    temp dir; `api` is the prefix its JSON gateway answers under."""

    def __init__(self):
        self.port = free_port()
        self.peer_port = free_port()
        self.dir = tempfile.mkdtemp(prefix="etcd-", dir=harness.tmp_root())
        self.logpath = os.path.join(self.dir, "etcd.log")
        self.proc = None
        self.api = None

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @staticmethod
    def version():
        p = subprocess.run(["etcd", "--version"], capture_output=True,
                           text=True)
        first = (p.stdout or "").splitlines()[:1]
        return first[0].split()[-1] if first else "?"

    def post(self, path, body, timeout=5.0):
        """POST JSON to the gateway; (status, parsed answer or None)."""
        req = urllib.request.Request(self.url() + path,
                                     data=json.dumps(body).encode(),
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, None
        except (OSError, ValueError):
            return None, None

    def healthy(self):
        try:
            with urllib.request.urlopen(self.url() + "/health",
                                        timeout=1.0) as r:
                return b"true" in r.read()
        except OSError:
            return False

    def start(self, timeout=30.0):
        exe = shutil.which("etcd")
        if not exe:
            raise SetupError("etcd not found (scripts/install-deps.sh --bench)")
        peer = "http://127.0.0.1:%d" % self.peer_port
        with open(self.logpath, "ab") as log:
            self.proc = spawn([
                exe, "--name", "fgbench",
                "--data-dir", os.path.join(self.dir, "data"),
                "--listen-client-urls", self.url(),
                "--advertise-client-urls", self.url(),
                "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "fgbench=" + peer,
                "--initial-cluster-state", "new"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        wait_until(lambda: not self.alive() or self.healthy(), timeout, 0.1)
        if not self.alive() or not self.healthy():
            rc = self.proc.poll()
            self.stop()
            raise SetupError("etcd did not answer /health (exit %s):\n%s"
                             % (rc, file_tail(self.logpath)))
        for p in ("/v3", "/v3beta", "/v3alpha"):
            if self.post(p + "/lease/grant", {"TTL": 5})[0] == 200:
                self.api = p
                return self
        self.stop()
        raise SetupError("etcd's JSON gateway answers neither /v3 nor /v3beta")

    def grant(self, ttl):
        """A lease id (a string), or None."""
        code, d = self.post(self.api + "/lease/grant", {"TTL": ttl})
        if code == 200 and d and str(d.get("ID", "")).isdigit():
            return str(d["ID"])
        return None

