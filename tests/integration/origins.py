"""origins.py - the stand-in origin: what a gateway under test forwards to
when the test wants to see, or to choose, what the storage does.

An origin is whatever harness.Env puts behind its gateways. Every kind
(StandIn here, storage.Nginx, apache.ApacheDav) offers the same small
interface, which is all Env relies on:

    port         the loopback port the gateway's --upstream names
    start()      starts it; returns self
    stop()       stops it (a stopped one may be started again)
    alive()      whether it still serves
    log_paths()  files worth showing when a test fails

StandIn is a threaded HTTP/1.1 server in the test's own process. It keeps
a Request for every request it reads, and answers like a store ("200
upstream ok") unless told otherwise: on(method, path, ...) says, per
method and path, what to answer or how to misbehave (hold the answer,
hold it until an event, read the body late, stall mid-body, close, echo,
send raw bytes, or whatever a function of the Request returns). Made with
script=, it is instead a raw-socket origin that sends, byte for byte,
what the script returns for each request head, for tests of how the
gateway reads a broken or hostile answer.

A test that plays something else than a storage (the stand-in gateways
fencectl talks to) brings its own Handler class (handler=): StandIn then
only serves it, and keeps what it appends to server.records.

Invariant: unless a handler of a test's own serves it, a request is in
`records` (in arrival order, with its head) before any byte of its answer
is sent, and its `done` is set once the stand-in has finished with it,
answered or not.
"""

import hashlib
import json
import re
import select
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STORE_BODY = b"upstream ok\n"
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS",
           "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK",
           "UNLOCK")


class Request(dict):
    """One request as the stand-in received it. A dict (tests filter and
    compare records as dicts) with these keys:

    method, path   as in the request line (path with its query)
    headers        [(name, value)] in the order received, repeats kept
    body           the bytes read (None while still being read)
    t              time.monotonic() when its head had been read
    token, test_id its Fencing-Token and X-Test-Id (None when absent)
    conn, rank     the stand-in's number of its connection, and its place
                   among the requests on that connection (from 0)
    head           the raw request head (script mode only)
    want           the body length its Content-Length announced
    got            how many body bytes were read
    complete       whether the whole announced body was read
    answered       whether an answer was sent in full
    hung_up_at     when the gateway was seen to hang up while the
                   stand-in held the answer (monotonic), else None
    done           set once the stand-in has finished with it
    """

    def header(self, name):
        for k, v in self["headers"]:
            if k.lower() == name.lower():
                return v
        return None

    def headers_named(self, name):
        return [v for k, v in self["headers"] if k.lower() == name.lower()]

    @property
    def query(self):
        return dict(urllib.parse.parse_qsl(
            urllib.parse.urlsplit(self["path"]).query))


def _new_request(method, path, headers, conn, rank, head=None):
    want = None
    for k, v in headers:
        if k.lower() == "content-length":
            try:
                want = int(v)
            except ValueError:
                pass
    r = Request(method=method, path=path, headers=list(headers), body=None,
                t=time.monotonic(), conn=conn, rank=rank, head=head,
                want=want, got=0, complete=False, answered=False,
                hung_up_at=None, done=False)
    r["token"] = r.header("Fencing-Token")
    r["test_id"] = r.header("X-Test-Id")
    return r


def echo_body(req):
    """The JSON an echoing answer carries: what the request was."""
    body = req["body"] or b""
    return json.dumps({
        "method": req["method"], "path": req["path"],
        "headers": [[k, v] for k, v in req["headers"]],
        "body_len": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }).encode()


# What an answer may say (StandIn.on's keywords, or the dict a respond=
# function returns):
#   status     the status code (default 200)
#   headers    [(name, value)] or a dict, sent before Content-Length
#   body       bytes (default "upstream ok\n"); never sent to a HEAD
#   ctype      its Content-Type (default text/plain, none for no body)
#   echo       True: the body is echo_body(request), as JSON
#   chunked    n: the body goes chunked, in pieces of n bytes
#   hold       seconds, or a threading.Event: the answer waits that long
#              (or until the event is set, 30 s at most) once the body
#              has been read, watching whether the gateway hangs up; if
#              it does, no answer is sent (request's hung_up_at says when)
#   read_after seconds to wait before reading the body at all
#   stall      (n, seconds): the head announces the whole body, n bytes
#              of it are sent, then nothing for `seconds` (watching for a
#              hang-up) before the connection is closed
#   close      True: Connection: close, and the connection is closed
#              after the answer
#   drop       True: the connection is closed without an answer
#   raw        bytes sent in place of an answer (head and all)
#   respond    a function of the Request returning a dict of the above
#              (asked once the body is in)
# Any value may also be given as a function of the Request.
ANSWER_KEYS = {"status", "headers", "body", "ctype", "echo", "chunked",
               "hold", "read_after", "stall", "close", "drop", "raw",
               "respond"}


class _Rule:
    def __init__(self, method, path, answer):
        unknown = set(answer) - ANSWER_KEYS
        if unknown:
            raise TypeError("unknown answer keywords: %s" % sorted(unknown))
        if isinstance(method, str):
            method = (method,)
        self.methods = tuple(m.upper() for m in method) if method else None
        self.path = path
        self.answer = answer

    def matches(self, req):
        if self.methods is not None and req["method"] not in self.methods:
            return False
        p = self.path
        if p is None:
            return True
        if callable(p):
            return bool(p(req))
        if isinstance(p, re.Pattern):
            return bool(p.search(req["path"]))
        return urllib.parse.urlsplit(req["path"]).path == p


def _peer_hung_up(sock, seconds):
    """Waits `seconds` (or until an Event is set) watching `sock`; returns
    when the peer hung up (monotonic), or None if it did not."""
    event = seconds if isinstance(seconds, threading.Event) else None
    end = time.monotonic() + (30.0 if event else float(seconds))
    while True:
        if event is not None and event.is_set():
            return None
        left = end - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([sock], [], [], min(left, 0.05))
        if r:
            try:
                if not sock.recv(1, socket.MSG_PEEK):
                    return time.monotonic()
            except OSError:
                return time.monotonic()
            time.sleep(0.01)   # bytes of a next request: not a hang-up


class Handler(BaseHTTPRequestHandler):
    """The base of a handler class of one's own (handler= of StandIn):
    HTTP/1.1 keep-alive, silent, and a peer that hangs up mid-request only
    ends its connection. What it appends to self.server.records is kept
    in the StandIn's records."""

    protocol_version = "HTTP/1.1"

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (ConnectionError, socket.timeout):
            self.close_connection = True

    def log_message(self, *a):
        pass


class _Handler(Handler):
    """Serves one connection of a StandIn by its rules (Handler: keep-alive,
    silent, a peer that hangs up mid-request only ends its connection)."""

    def setup(self):
        super().setup()
        self.conn_no = self.server.stand_in._next_conn()
        self.rank = 0

    def __getattr__(self, name):
        # every method, whatever it is, is answered the same way
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    # -- one request -----------------------------------------------------

    def _serve(self):
        origin = self.server.stand_in
        req = _new_request(self.command, self.path, self.headers.items(),
                           self.conn_no, self.rank)
        self.rank += 1
        origin._record(req)
        a = dict(origin._answer_for(req))
        try:
            self._act(req, a)
        finally:
            req["done"] = True

    def _read_body(self, req):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            req["body"] = read_request_body(self)
            req["got"] = len(req["body"])
            req["complete"] = True
            return
        want = req["want"] or 0
        out = []
        got = 0
        while got < want:
            try:
                data = self.rfile.read1(min(want - got, 1 << 16))
            except OSError:
                break
            if not data:
                break
            out.append(data)
            got += len(data)
        req["body"] = b"".join(out)
        req["got"] = got
        req["complete"] = got == want

    def _act(self, req, a):
        # a value given as a function is one of the request: read_after
        # is asked with only the head in, the others once the body is
        if callable(a.get("read_after")):
            a["read_after"] = a["read_after"](req)
        if a.get("read_after"):
            time.sleep(a["read_after"])
        self._read_body(req)
        if not req["complete"]:
            self.close_connection = True
            return
        if a.get("respond"):
            a.update(a.pop("respond")(req) or {})
        for k, v in list(a.items()):
            if callable(v):
                a[k] = v(req)
        if a.get("hold") is not None:
            req["hung_up_at"] = _peer_hung_up(self.connection, a["hold"])
            if req["hung_up_at"] is not None:
                self.close_connection = True
                return
        if a.get("drop"):
            self.close_connection = True
            return
        if a.get("raw") is not None:
            self.wfile.write(a["raw"])
            self.wfile.flush()
            req["answered"] = True
            self.close_connection = bool(a.get("close"))
            return
        self._answer(req, a)

    def _answer(self, req, a):
        if a.get("echo"):
            body, ctype = echo_body(req), a.get("ctype", "application/json")
        else:
            body = a.get("body", STORE_BODY)
            ctype = a.get("ctype", "text/plain" if body else None)
        headers = a.get("headers") or ()
        if isinstance(headers, dict):
            headers = list(headers.items())
        self.send_response(a.get("status", 200))
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        if a.get("close"):
            self.send_header("Connection", "close")
        with_body = self.command != "HEAD"
        stall = a.get("stall")
        try:
            if a.get("chunked"):
                n = a["chunked"]
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if with_body:
                    for i in range(0, len(body), n):
                        part = body[i:i + n]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if stall:
                    self.wfile.write(body[:stall[0]])
                    self.wfile.flush()
                    req["answered"] = True   # as far as it ever will be
                    req["hung_up_at"] = _peer_hung_up(self.connection,
                                                      stall[1])
                    self.close_connection = True
                    return
                if with_body:
                    self.wfile.write(body)
            self.wfile.flush()
            req["answered"] = True
        except OSError:
            self.close_connection = True
            return
        if a.get("close"):
            self.close_connection = True


def read_request_body(handler):
    """The request body a BaseHTTPRequestHandler was sent, Content-Length
    or chunked."""
    te = (handler.headers.get("Transfer-Encoding") or "").lower()
    if "chunked" in te:
        out = b""
        while True:
            line = handler.rfile.readline()
            n = int(line.split(b";")[0].strip() or b"0", 16)
            if n == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return out
            out += handler.rfile.read(n)
            handler.rfile.readline()
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else b""


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


class StandIn:
    """A stand-in origin on `port` (a free one unless given).

    HTTP mode (the default): every request is recorded and answered by the
    most recent on() rule it matches, else like a store. `handler` (a
    Handler subclass) replaces the whole of that for a test that plays
    something else than a storage (a gateway, for fencectl).

    Script mode (script=): raw sockets; for each request head (its body
    read as its Content-Length says) script(conn, rank, head) returns the
    bytes to send back, or None to close without answering;
    close_after(conn, rank) says whether to close once answered; with
    `tls` (an ssl.SSLContext) the origin speaks https."""

    def __init__(self, port=None, handler=None, script=None,
                 close_after=None, tls=None):
        if port is None:
            import harness   # harness imports this module
            port = harness.free_port()
        self.port = port
        self.handler = handler
        self.script = script
        self.close_after = close_after or (lambda conn, rank: False)
        self.tls = tls
        self.rules = []
        self._records = []
        self._lock = threading.Lock()
        self._conns = 0
        self.server = None
        self.thread = None
        # script mode
        self.sock = None
        self.live = {}      # conn -> its socket, while it is open
        self.hung_up = 0    # connections closed by close_after()
        self._stopping = None

    # -- the origin interface ---------------------------------------------

    def log_paths(self):
        return []

    def alive(self):
        return self.server is not None or self.sock is not None

    def start(self):
        if self.script is not None:
            return self._start_raw()
        self.server = _Server(("127.0.0.1", self.port),
                              self.handler or _Handler)
        self.server.stand_in = self
        # a handler of a test's own appends to server.records
        self.server.records = self._records
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.sock is not None:
            self._stopping.set()
            self.sock.close()
            self.thread.join(2.0)
            self.sock = None

    # -- what it answers ----------------------------------------------------

    def on(self, method=None, path=None, **answer):
        """From now on, a request of `method` (a name, a tuple of them, or
        None: any) to `path` (the URL path without its query; a compiled
        regex searched in the path with its query; a function of the
        Request; None: any) gets `answer` (see ANSWER_KEYS). The most
        recent rule that matches wins."""
        rule = _Rule(method, path, answer)
        with self._lock:
            self.rules.append(rule)
        return rule

    def _answer_for(self, req):
        with self._lock:
            rules = list(self.rules)
        for rule in reversed(rules):
            if rule.matches(req):
                return rule.answer
        return {}

    # -- what it was sent ---------------------------------------------------

    @property
    def records(self):
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._records)

    def clear(self):
        with self._lock:
            del self._records[:]

    def records_for(self, path_prefix=None, method=None):
        return [r for r in self.records
                if (path_prefix is None or r["path"].startswith(path_prefix))
                and (method is None or r["method"] == method)]

    def _record(self, req):
        with self._lock:
            self._records.append(req)

    def _next_conn(self):
        with self._lock:
            n = self._conns
            self._conns += 1
            return n

    # -- script mode: raw sockets ------------------------------------------

    def requests(self):
        """(conn, rank, head) of every request head received."""
        return [(r["conn"], r["rank"], r["head"]) for r in self.records]

    def carried(self):
        """(connection, rank) of every request, the connections numbered
        in the order they carried their first request (the gateway's
        health checks open connections that carry none)."""
        order = {}
        return [(order.setdefault(c, len(order)), k)
                for c, k, _ in self.requests()]

    def body(self, i):
        """(body, whole) of the i-th request recorded, None while it is
        still being read."""
        r = self.records[i]
        if r["body"] is None:
            return None
        return r["body"], r["complete"]

    def push(self, conn, data):
        """Sends `data` on connection `conn` (plain http only), unasked."""
        with self._lock:
            c = self.live[conn]
        c.sendall(data)

    def _start_raw(self):
        self._stopping = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.thread = threading.Thread(target=self._accept,
                                       args=(self.sock, self._stopping),
                                       daemon=True)
        self.thread.start()
        return self

    def _accept(self, sock, stopping):
        while not stopping.is_set():
            try:
                c, _ = sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve_raw,
                             args=(c, self._next_conn(), stopping),
                             daemon=True).start()

    def _serve_raw(self, c, n, stopping):
        import harness
        c.settimeout(harness.slack(10.0))
        if self.tls:
            try:
                c = self.tls.wrap_socket(c, server_side=True)
            except OSError:
                c.close()
                return
        with self._lock:
            self.live[n] = c
        try:
            with c:
                self._exchange(c, n, stopping)
        finally:
            with self._lock:
                self.live.pop(n, None)

    def _exchange(self, c, n, stopping):
        buf = b""
        rank = 0
        while not stopping.is_set():
            while b"\r\n\r\n" not in buf:
                try:
                    data = c.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            head += b"\r\n\r\n"
            req = _new_request(*_parse_head(head), conn=n, rank=rank,
                               head=head)
            self._record(req)
            try:
                want = req["want"] or 0
                while len(buf) < want:
                    try:
                        data = c.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        break
                    buf += data
                body, buf = buf[:want], buf[want:]
                req["got"] = len(body)
                req["complete"] = len(body) == want
                req["body"] = body
                if not req["complete"]:
                    return
                out = self.script(n, rank, head)
                if out is None:
                    return
                try:
                    c.sendall(out)
                except OSError:
                    return
                req["answered"] = True
                if self.close_after(n, rank):
                    c.close()
                    with self._lock:
                        self.hung_up += 1
                    return
            finally:
                req["done"] = True
            rank += 1


def _parse_head(head):
    """(method, target, [(name, value)]) of a raw request head, as far as
    it can be read: a script is sent whatever the gateway wrote."""
    lines = head.split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    method = parts[0]
    path = parts[1] if len(parts) > 1 else ""
    headers = []
    for ln in lines[1:]:
        if not ln:
            continue
        k, _, v = ln.partition(b":")
        headers.append((k.strip().decode("latin-1"),
                        v.strip().decode("latin-1")))
    return method, path, headers
