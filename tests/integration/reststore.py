"""reststore.py - a tiny JSON-over-HTTP store: what a REST store behind
the gateway looks like to the tests of route templates (per-entity paths
such as /orders/42/items/7).

Run as a program (`python3 reststore.py PORT`) it serves until SIGTERM;
RestStore starts it that way on a free port and stops it by its PID, so it
is an origin like the others (origins.py: port, start(), stop(), alive(),
log_paths()).

What it does, at any path (the path as sent, without its query):

    PUT     stores the JSON body: 201 when new, 200 when it replaced one
    POST    adds the JSON body under the path with the next number
            (/orders/ -> /orders/1): 201, Location
    PATCH   merges a JSON object into the stored one (RFC 7386, one level):
            200, or 404
    GET     the document (200), or for a path ending in '/' the sorted
            paths under it ({"items": [...]}), or 404
    DELETE  the document, or for a path ending in '/' everything under it:
            204, or 404

A body that is not JSON is 400 and changes nothing. GET /_store/writes
answers how many write requests (PUT POST PATCH DELETE) reached the store
at all, so that a test can tell that a refused write never arrived.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20


class _Store:
    def __init__(self):
        self.lock = threading.Lock()
        self.docs = {}       # path -> parsed JSON
        self.writes = 0
        self.next_id = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    @property
    def store(self):
        return self.server.store

    def _path(self):
        return self.path.split("?", 1)[0]

    def _answer(self, status, doc=None, headers=()):
        body = b"" if doc is None else (json.dumps(doc) + "\n").encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if doc is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _body(self):
        """The JSON body, or raises ValueError."""
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > MAX_BODY:
            raise ValueError("body too large")
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw.decode("utf-8"))

    def _write(self, act):
        with self.store.lock:
            self.store.writes += 1
        try:
            doc = self._body() if self.command != "DELETE" else None
        except (ValueError, UnicodeDecodeError) as e:
            return self._answer(400, {"error": "not JSON: %s" % e})
        with self.store.lock:
            return act(self._path(), doc)

    def do_GET(self):
        p = self._path()
        if p == "/_store/writes":
            with self.store.lock:
                return self._answer(200, {"writes": self.store.writes})
        with self.store.lock:
            if p.endswith("/"):
                items = sorted(k for k in self.store.docs if k.startswith(p))
                if items:
                    return self._answer(200, {"items": items})
            elif p in self.store.docs:
                return self._answer(200, self.store.docs[p])
        return self._answer(404, {"error": "not found"})

    do_HEAD = do_GET

    def do_PUT(self):
        def act(p, doc):
            new = p not in self.store.docs
            self.store.docs[p] = doc
            return self._answer(201 if new else 200, doc)
        self._write(act)

    def do_POST(self):
        def act(p, doc):
            self.store.next_id += 1
            child = p.rstrip("/") + "/%d" % self.store.next_id
            self.store.docs[child] = doc
            return self._answer(201, doc, [("Location", child)])
        self._write(act)

    def do_PATCH(self):
        def act(p, doc):
            cur = self.store.docs.get(p)
            if cur is None:
                return self._answer(404, {"error": "not found"})
            if not isinstance(cur, dict) or not isinstance(doc, dict):
                return self._answer(400, {"error": "a merge needs objects"})
            for k, v in doc.items():
                if v is None:
                    cur.pop(k, None)
                else:
                    cur[k] = v
            return self._answer(200, cur)
        self._write(act)

    def do_DELETE(self):
        def act(p, _):
            gone = [k for k in self.store.docs
                    if k == p or (p.endswith("/") and k.startswith(p))]
            for k in gone:
                del self.store.docs[k]
            return self._answer(204 if gone else 404,
                                None if gone else {"error": "not found"})
        self._write(act)


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(port):
    srv = _Server(("127.0.0.1", port), _Handler)
    srv.store = _Store()
    sys.stderr.write("reststore listening on 127.0.0.1:%d\n" % port)
    sys.stderr.flush()
    srv.serve_forever(poll_interval=0.05)


class RestStore:
    """The store as a child process on a free loopback port (an origin,
    origins.py), stopped by its PID."""

    def __init__(self, port=None):
        import harness
        self.port = port or harness.free_port()
        self.proc = None
        self.dir = harness.tmp_root()
        self.logpath = os.path.join(self.dir, "reststore-%d.log" % self.port)

    def log_paths(self):
        return [self.logpath]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout=10.0):
        import harness
        with open(self.logpath, "ab") as log:
            self.proc = harness.spawn([sys.executable, os.path.abspath(__file__),
                                       str(self.port)], stdout=log, stderr=log)
        deadline = time.monotonic() + harness.slack(timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise harness.SetupError("reststore exited (%s): see %s"
                                         % (self.proc.returncode, self.logpath))
            try:
                r = harness.http_request(self.port, "GET", "/_store/writes",
                                         timeout=1.0)
                if r.status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        raise harness.SetupError("reststore did not answer on port %d"
                                 % self.port)

    def stop(self):
        import harness
        if self.proc is not None:
            harness.stop_process(self.proc)
            self.proc = None

    # -- what the tests read straight from the store -------------------------

    def get(self, path):
        """(status, parsed JSON or None) of a GET that bypasses the gateway."""
        import harness
        r = harness.http_request(self.port, "GET", path, timeout=5.0)
        try:
            return r.status, json.loads(r.body.decode()) if r.body else None
        except ValueError:
            return r.status, None

    def writes(self):
        return self.get("/_store/writes")[1]["writes"]


if __name__ == "__main__":
    serve(int(sys.argv[1]))
