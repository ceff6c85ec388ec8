"""fakegw.py - small local stand-ins for fault shapes the real environment
cannot make: a relay in front of a real gateway that can go silent (it
keeps accepting and reading, and answers nothing, on old connections and
new), and a scripted HTTP gateway whose answers a test chooses.

Invariant: everything here listens on 127.0.0.1 on a port the kernel
picked, and close() ends every socket and thread it started.
"""

import json
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SilentRelay:
    """Forwards TCP to `target` (a base URL) until silence() is called;
    from then on it reads what clients send and answers nothing."""

    def __init__(self, target):
        u = urllib.parse.urlsplit(target)
        self._target = (u.hostname, u.port)
        self._silent = threading.Event()
        self._socks = []
        self._mu = threading.Lock()
        self._ls = socket.socket()
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(16)
        self.url = "http://127.0.0.1:%d" % self._ls.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self):
        self._silent.set()

    def _keep(self, s):
        with self._mu:
            self._socks.append(s)

    def _accept(self):
        while True:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            self._keep(c)
            up = None
            if not self._silent.is_set():
                try:
                    up = socket.create_connection(self._target, timeout=10)
                    up.settimeout(None)
                    self._keep(up)
                except OSError:
                    up = None
            threading.Thread(target=self._pump, args=(c, up),
                             daemon=True).start()
            if up is not None:
                threading.Thread(target=self._pump, args=(up, c),
                                 daemon=True).start()

    def _pump(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            if dst is None or self._silent.is_set():
                continue   # read, never answered
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self._ls.close()
        with self._mu:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class Scripted:
    """An HTTP gateway answering with `answer(method, path, headers,
    body_json)` -> (status, json_or_None[, delay_seconds]). Every request
    is recorded in `seen` as (method, path, headers, body_json)."""

    def __init__(self, answer):
        self.seen = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                outer.seen.append((self.command, self.path, hdrs, body))
                r = answer(self.command, self.path, hdrs, body)
                status, j = r[0], r[1]
                if len(r) > 2 and r[2]:
                    time.sleep(r[2])
                data = b"" if j is None else json.dumps(j).encode()
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass   # the client gave up first (its timeout)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _any

        class Srv(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass   # a client that went away is the test's doing

        self._srv = Srv(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self._srv.server_address[1]
        self._t = threading.Thread(target=self._srv.serve_forever,
                                   daemon=True)
        self._t.start()

    def requests(self, method):
        return [r for r in list(self.seen) if r[0] == method]

    def close(self):
        self._srv.shutdown()
        self._srv.server_close()
        self._t.join(10)


def grant(lease, token=1, ttl_ms=1000, sequencer=None):
    """A 200 grant body as the gateway answers it."""
    return {"lease": lease, "token": token, "ttl_ms": ttl_ms,
            "mode": "exclusive",
            "sequencer": sequencer or ("seq-" + lease)}
