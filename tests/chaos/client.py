"""client.py - one client process of the chaos run (tests/chaos/run.py).

    python3 client.py ID SEED STOP_AT OUT PORT,PORT LOCK,LOCK,...

Loops until the wall clock reaches STOP_AT over a few locks, each guarding
the object whose path is "/" + the lock name, through either gateway at
random: acquires (try-once or blocking, sometimes with a TTL that outlasts
the run by a minute and that it shortens at once, so that a grant made for
an acquire answered 503 would still hold the lock when the run ends), writes (PUT fenced by the grant's sequencer,
quick or streamed slowly in chunks), renews longer or shorter and re-enters
longer or shorter (sometimes while a slow write of the grant is in flight),
releases (sometimes while a write is in flight), sleeps past its lease and
writes anyway (a stale write), and sometimes vanishes mid-body (resets the
connection halfway through a PUT's body) and then abandons its grant
without releasing it, like a crashed client.

Every write is sent with `Expect: 100-continue`: a write the gateway
refuses is answered before the client is asked for its body, so a final
answer that comes before `100 Continue` is a refusal proven to have sent
nothing upstream, while `100 Continue` means the write was admitted.

It records every operation as one JSON line in OUT (flushed at once, so a
killed client leaves its records), with the wall-clock times (time.time(),
the clock nginx's $msec uses too) at which the request was sent (t0) and
its answer received (t1). A write is recorded once before it is sent
(op "write-start") and once when it ended. When STOP_AT passes it releases
every grant it still holds (retrying a release that got no definite
answer) and exits; the run's checker reads OUT afterwards.

All randomness comes from random.Random(SEED * 1000 + ID): the same seed
makes the same choices (the timing of the run, and so the answers, is not
replayable, but the workload and the fault schedule are).
"""

import json
import random
import socket
import sys
import threading
import time

LONG_TTL_MS = 60000


class Recorder:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def __call__(self, rec):
        with self.lock:
            self.f.write(json.dumps(rec, sort_keys=True) + "\n")
            self.f.flush()


class Answer:
    def __init__(self, status, body):
        self.status = status
        self.body = body

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return {}


def _read_response(sock, buf, timeout):
    """Reads one HTTP/1.1 response from sock (buf: bytes already read).
    Returns (status, body, rest) or None when the peer closed or timed out
    before a whole head arrived. Interim (1xx) heads are returned too."""
    sock.settimeout(timeout)
    while b"\r\n\r\n" not in buf:
        try:
            chunk = sock.recv(65536)
        except (OSError, socket.timeout):
            return None
        if not chunk:
            return None
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None
    length = 0
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip() or b"0")
    if status < 200:
        return status, b"", buf
    while len(buf) < length:
        try:
            chunk = sock.recv(65536)
        except (OSError, socket.timeout):
            break
        if not chunk:
            break
        buf += chunk
    return status, buf[:length], buf[length:]


def api(port, method, path, body=None, headers=(), timeout=10.0):
    """One lock API call on a fresh connection: an Answer, or None when no
    answer came (connection refused, reset, timed out)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % port,
            "Connection: close", "Content-Length: %d" % len(data)]
    head += ["%s: %s" % kv for kv in headers]
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return None
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        got = _read_response(sock, b"", timeout)
        while got is not None and got[0] < 200:
            got = _read_response(sock, got[2], timeout)
        return None if got is None else Answer(got[0], got[1])
    except OSError:
        return None
    finally:
        sock.close()


def body_of(tid, size):
    """The body of write `tid`: deterministic, so the checker can compare
    the stored object with the write that should have left it."""
    line = ("%s\n" % tid).encode()
    return (line * (size // len(line) + 1))[:size]


class Client:
    def __init__(self, cid, seed, stop_at, out, ports, locks):
        self.cid = cid
        self.rng = random.Random(seed * 1000 + cid)
        self.stop_at = stop_at
        self.rec = Recorder(out)
        self.ports = ports
        self.locks = locks
        self.n = 0
        self.held = {}     # gid -> grant dict, grants not yet released

    # -- helpers ----------------------------------------------------------

    def next_id(self, kind):
        self.n += 1
        return "c%d-%s%d" % (self.cid, kind, self.n)

    def port(self):
        return self.rng.choice(self.ports)

    def call(self, op, port, method, name, body=None, headers=(),
             timeout=10.0, **extra):
        t0 = time.time()
        a = api(port, method, "/_fence/v1/locks/" + name, body, headers,
                timeout)
        t1 = time.time()
        r = dict(op=op, cid=self.cid, lock=name, gw=port, t0=t0, t1=t1,
                 status=a.status if a else None, **extra)
        if a is not None and a.status >= 300:
            r["error"] = a.json().get("error")
        return a, r

    # -- lock calls -------------------------------------------------------

    def acquire(self, name):
        ttl = self.rng.choice((800, 1200, 2000, 3000))
        long_first = self.rng.random() < 0.4
        wait_ms = 0 if self.rng.random() < 0.4 else \
            self.rng.choice((300, 1000, 2500))
        gid = self.next_id("g")
        # the long TTL outlasts the run, so that a grant nobody received
        # still holds the lock when the run checks it at the end
        long_ttl = min(3600000, max(LONG_TTL_MS, int(
            (self.stop_at - time.time() + 60.0) * 1000)))
        body = {"ttl_ms": long_ttl if long_first else ttl,
                "wait_ms": wait_ms, "owner": gid}
        a, r = self.call("acquire", self.port(), "POST", name, body,
                         timeout=wait_ms / 1000.0 + 8.0, grant=gid,
                         ttl=body["ttl_ms"], wait_ms=wait_ms)
        if a is not None and a.status == 200:
            j = a.json()
            r.update(token=j.get("token"), holds=j.get("holds"))
            g = dict(gid=gid, lock=name, lease=j["lease"], token=j["token"],
                     seq=j["sequencer"], end=r["t1"] + body["ttl_ms"] / 1000.0,
                     holds=1, uncertain=False)
            self.rec(r)
            self.held[gid] = g
            if long_first:
                self.renew(g, ttl)
            return g
        self.rec(r)
        time.sleep(self.rng.uniform(0.02, 0.2))   # a refused client backs off
        return None

    def renew(self, g, ttl, reenter=False):
        """Renewal (PATCH) or re-entry (POST with the lease) setting ttl."""
        port = self.port()
        if reenter:
            a, r = self.call("reenter", port, "POST", g["lock"],
                             {"lease": g["lease"], "ttl_ms": ttl},
                             grant=g["gid"], ttl=ttl)
        else:
            a, r = self.call("renew", port, "PATCH", g["lock"],
                             {"lease": g["lease"], "ttl_ms": ttl},
                             grant=g["gid"], ttl=ttl)
        if a is not None and a.status == 200:
            g["end"] = r["t1"] + ttl / 1000.0
            if reenter:
                g["holds"] = a.json().get("holds", g["holds"] + 1)
                r["holds"] = g["holds"]
        elif a is None or a.status >= 500:
            g["uncertain"] = True   # it may or may not have been applied
        self.rec(r)
        return a is not None and a.status == 200

    def release(self, g, final=False):
        """One release call; final=True retries until a definite answer
        (204 or 410) or 8 s. Forgets the grant when its holds reach 0."""
        deadline = time.time() + 8.0
        while True:
            a, r = self.call("release", self.port(), "DELETE", g["lock"],
                             headers=[("Fence-Lease", g["lease"])],
                             grant=g["gid"])
            self.rec(r)
            if a is not None and a.status == 204:
                g["holds"] -= 1
                if g["holds"] <= 0:
                    self.held.pop(g["gid"], None)
                return True
            if a is not None and a.status == 410:
                self.held.pop(g["gid"], None)
                return True
            if not final or time.time() > deadline:
                return False
            time.sleep(0.2)   # the final release's retry pace

    # -- writes -----------------------------------------------------------

    def write(self, g, kind, mid=None):
        """A PUT of the grant's object fenced by its sequencer. kind:
        quick (whole body at once), slow (chunks with sleeps; `mid` runs
        in this thread while the body streams), vanish (reset halfway
        through the body)."""
        tid = self.next_id("w")
        path = "/" + g["lock"]
        size = 4096 if kind == "quick" else self.rng.choice((16384, 32768))
        chunks = 1 if kind == "quick" else self.rng.randint(6, 14)
        pause = 0.0 if kind == "quick" else self.rng.uniform(0.05, 0.2)
        data = body_of(tid, size)
        port = self.port()
        self.rec(dict(op="write-start", cid=self.cid, lock=g["lock"],
                      grant=g["gid"], tid=tid, token=g["token"], path=path,
                      size=size, kind=kind, gw=port, t0=time.time()))
        out = dict(op="write", cid=self.cid, lock=g["lock"], grant=g["gid"],
                   tid=tid, token=g["token"], path=path, size=size,
                   kind=kind, gw=port, admitted=False, sent=0, status=None)
        mid_thread = None
        if mid is not None:
            mid_thread = threading.Timer(
                self.rng.uniform(0.2, 0.6) * chunks * pause, mid)
        out["t0"] = time.time()
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError as e:
            out.update(t1=time.time(), err=str(e))
            self.rec(out)
            return out
        buf = b""
        try:
            head = ["PUT %s HTTP/1.1" % path, "Host: 127.0.0.1:%d" % port,
                    "Content-Length: %d" % size, "Expect: 100-continue",
                    "Fencing-Token: %s" % g["seq"], "X-Test-Id: %s" % tid,
                    "Connection: close"]
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            got = _read_response(sock, b"", 10.0)
            if got is None:
                out["err"] = "no answer to the head"
                return out
            status, body, buf = got
            if status != 100:          # refused before the body was asked
                out["status"] = status
                out["error"] = Answer(status, body).json().get("error")
                return out
            out["admitted"] = True
            out["t_admit"] = time.time()
            if mid_thread is not None:
                mid_thread.start()
            step = size // chunks
            for i in range(chunks):
                piece = data[i * step:] if i == chunks - 1 else \
                    data[i * step:(i + 1) * step]
                if kind == "vanish" and out["sent"] + len(piece) > size // 2:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    out["vanished"] = True
                    return out
                try:
                    sock.sendall(piece)
                except OSError as e:
                    out["err"] = "send: %s" % e
                    break
                out["sent"] += len(piece)
                if pause and i < chunks - 1:
                    time.sleep(pause)   # the cause: a body that trickles
            got = _read_response(sock, buf, 10.0)
            while got is not None and got[0] < 200:
                got = _read_response(sock, got[2], 10.0)
            if got is not None:
                out["status"] = got[0]
                if got[0] >= 300:
                    out["error"] = Answer(got[0], got[1]).json().get("error")
            elif "err" not in out:
                out["err"] = "no final answer"
            return out
        finally:
            sock.close()
            out["t1"] = time.time()
            self.rec(out)
            if mid_thread is not None and mid_thread.ident is not None:
                mid_thread.join()

    # -- the loop ---------------------------------------------------------

    def mid_action(self, g):
        """What runs while a slow write of grant g is in flight."""
        what = self.rng.choice(("renew-longer", "renew-shorter",
                                "renew-shorter", "reenter-longer",
                                "reenter-shorter", "release", "none"))
        if what == "renew-longer":
            return lambda: self.renew(g, self.rng.choice((3000, 5000)))
        if what == "renew-shorter":
            return lambda: self.renew(g, self.rng.choice((100, 200, 300)))
        if what == "reenter-longer":
            return lambda: self.renew(g, 4000, reenter=True)
        if what == "reenter-shorter":
            return lambda: self.renew(g, self.rng.choice((100, 250)),
                                      reenter=True)
        if what == "release":
            return lambda: self.release(g)
        return None

    def session(self, g):
        """A few operations on one grant, then its release (or not)."""
        for _ in range(self.rng.randint(1, 4)):
            if g["gid"] not in self.held or time.time() >= self.stop_at:
                break
            x = self.rng.random()
            if x < 0.30:
                self.write(g, "quick")
            elif x < 0.60:
                self.write(g, "slow", mid=self.mid_action(g))
            elif x < 0.67:
                self.write(g, "vanish")
                if not g["uncertain"] and self.rng.random() < 0.5:
                    # a crashed client: its grant is left to expire
                    self.held.pop(g["gid"], None)
                    self.rec(dict(op="abandon", cid=self.cid, grant=g["gid"],
                                  lock=g["lock"], t0=time.time()))
                    return
            elif x < 0.77:
                shorter = self.rng.random() < 0.5
                self.renew(g, self.rng.choice((300, 500)) if shorter
                           else self.rng.choice((2000, 4000)))
            elif x < 0.87:
                if self.renew(g, self.rng.choice((400, 2500)), reenter=True):
                    if self.rng.random() < 0.7:
                        self.release(g)       # back to one hold
            else:
                # outlive the lease, then write anyway: a stale write (the
                # sleep is the cause)
                time.sleep(max(0.0, min(g["end"] - time.time(), 3.5))
                           + self.rng.uniform(0.1, 0.4))
                self.write(g, "quick")
        while g["gid"] in self.held and g["holds"] > 0:
            if not self.release(g, final=True):
                break

    def run(self):
        while time.time() < self.stop_at:
            name = self.rng.choice(self.locks)
            g = self.acquire(name)
            if g is not None:
                self.session(g)
        for g in list(self.held.values()):
            while g["gid"] in self.held:
                if not self.release(g, final=True):
                    self.rec(dict(op="unreleased", cid=self.cid,
                                  grant=g["gid"], lock=g["lock"],
                                  t0=time.time()))
                    break
        self.rec(dict(op="done", cid=self.cid, t0=time.time()))


def main():
    cid, seed, stop_at, out = (int(sys.argv[1]), int(sys.argv[2]),
                               float(sys.argv[3]), sys.argv[4])
    ports = [int(p) for p in sys.argv[5].split(",")]
    locks = sys.argv[6].split(",")
    Client(cid, seed, stop_at, out, ports, locks).run()


if __name__ == "__main__":
    main()
