"""test_proxy_ordering.py - fencing where it matters: Kleppmann's
scenario with real client processes paused by SIGSTOP past their lease,
and the ordering guarantee (a write still running at its deadline, or when
its grant is released, is aborted upstream, never completed late, and a
write under token N+1 waits at most the fence margin after it), judged by
what nginx logged and stored."""

import json
import threading
import time
import uuid

from harness import LOCKS, slack, wait_until
from storage import on_both_origins, ClientProcess, RawRequest, StoreTestCase

# A lock client. argv: port lock path ttl_ms wait_ms work_s mode label
#   mode "before": acquire, report, work (the parent may SIGSTOP it here),
#                  then PUT its data with the sequencer
#   mode "mid":    acquire, send the head and half the body, report, work,
#                  then the rest of the body
# Reports JSON lines: granted {token, sequencer}, sending, wrote {status,
# body, test_id}.
CLIENT = r'''
import http.client, json, socket, sys, time, uuid
port, lock, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ttl, wait_ms, work = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
mode, label = sys.argv[7], sys.argv[8]

def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()

c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("POST", "/_fence/v1/locks/" + lock,
          body=json.dumps({"ttl_ms": ttl, "wait_ms": wait_ms}),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
g = json.loads(r.read())
c.close()
if r.status != 200:
    say(event="refused_lock", status=r.status, body=g)
    sys.exit(1)
say(event="granted", token=g["token"], sequencer=g["sequencer"])
data = ("written by %s under token %d\n" % (label, g["token"])).encode()
data = data * 2000
tid = label + "-" + uuid.uuid4().hex[:8]
if mode == "before":
    time.sleep(work)   # the cause: the client's work under the lease
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("PUT", path, body=data,
                  headers={"Fencing-Token": g["sequencer"], "X-Test-Id": tid})
        r = c.getresponse()
        say(event="wrote", status=r.status,
            body=r.read().decode("utf-8", "replace"), test_id=tid)
    except OSError as e:
        say(event="wrote", status=None, body=repr(e), test_id=tid)
else:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = ("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
            "Fencing-Token: %s\r\nX-Test-Id: %s\r\n\r\n"
            % (path, len(data), g["sequencer"], tid)).encode()
    half = len(data) // 2
    s.sendall(head + data[:half])
    say(event="sending", test_id=tid)
    time.sleep(work)   # the cause: the client pauses mid-body
    buf = b""
    try:
        s.sendall(data[half:])
    except OSError:
        pass
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        status = None
        if head.startswith(b"HTTP/"):
            status = int(head.split(b" ")[1])
        say(event="wrote", status=status, body=rest.decode("utf-8", "replace"),
            test_id=tid)
    except OSError as e:
        say(event="wrote", status=None, body=repr(e), test_id=tid)
'''


def expected_data(label, token):
    return ("written by %s under token %d\n" % (label, token)).encode() * 2000


@on_both_origins
class KleppmannTests(StoreTestCase):
    """Client 1 takes the lock, is paused (SIGSTOP) past its TTL, client 2
    takes the lock and writes, client 1 resumes and writes with its old
    sequencer: refused, and the store keeps client 2's data."""

    TTL_MS = 1000

    def setUp(self):
        super().setUp()
        self.use_shared()

    def client(self, path, mode, label, wait_ms=0, work=0.0):
        c = ClientProcess(CLIENT, [self.gw.port, self.lock_of(path), path,
                                   self.TTL_MS, wait_ms, work, mode, label])
        self.addCleanup(c.stop)
        return c

    def pause_past_the_lease(self, c1, path):
        c1.pause()
        self.assertTrue(wait_until(c1.stopped, slack(2.0)),
                        "SIGSTOP did not take effect")
        # the lease runs out while client 1 is stopped
        lock = self.lock_of(path)
        self.assertTrue(wait_until(
            lambda: not self.state(lock)["held"],
            self.TTL_MS / 1000.0 + slack(2.0), 0.05),
            "the lock is still held after the TTL")

    def second_client_writes(self, path, first_token):
        c2 = self.client(path, "before", "client2", wait_ms=5000)
        g2 = c2.expect("granted", slack(10.0))
        self.assertGreater(g2["token"], first_token)
        w2 = c2.expect("wrote", slack(10.0))
        self.assertEqual(w2["status"], 201, w2)
        c2.wait(slack(5.0))
        return g2, w2

    def judge(self, path, g1, w1, g2, w2):
        data2 = expected_data("client2", g2["token"])
        self.assert_stored(path, data2, "after the stale write")
        self.assertTrue(self.store.wait_log(slack(2.0),
                                            test_id=w2["test_id"]))
        # a window for a late write of client 1 to reach nginx's log (a
        # refused one never does): no event marks its absence
        time.sleep(slack(0.2))
        puts = self.store.log_for(path=path, method="PUT")
        applied = [(e.test_id, e.token) for e in puts if e.applied]
        self.assertEqual(applied, [(w2["test_id"], g2["token"])],
                         "nginx applied other writes than client 2's: %r"
                         % puts)
        first = [e for e in puts if e.test_id == w1["test_id"]]
        return first

    def test_client_paused_past_its_lease_before_writing_is_refused_and_the_second_clients_data_stays(self):
        path = self.obj("kleppmann")
        c1 = self.client(path, "before", "client1", work=slack(0.5))
        g1 = c1.expect("granted", slack(10.0))
        self.pause_past_the_lease(c1, path)
        g2, w2 = self.second_client_writes(path, g1["token"])
        c1.resume()
        w1 = c1.expect("wrote", slack(10.0))
        c1.wait(slack(5.0))
        self.assertEqual(w1["status"], 409, w1)
        body = json.loads(w1["body"])
        self.assertEqual(body["error"], "stale_token")
        self.assertEqual(body["token"], g1["token"])
        self.assertEqual(body["current"], g2["token"])
        first = self.judge(path, g1, w1, g2, w2)
        self.assertEqual(first, [], "client 1's stale write reached nginx")
        self.assertEqual([e.test_id for e in self.store.log_for(path=path)],
                         [w2["test_id"]], "nginx saw more than client 2's "
                         "write")

    def test_client_paused_mid_upload_past_its_lease_is_aborted_and_the_second_clients_data_stays(self):
        path = self.obj("kleppmann-mid")
        c1 = self.client(path, "mid", "client1", work=slack(0.5))
        g1 = c1.expect("granted", slack(10.0))
        c1.expect("sending", slack(10.0))
        self.pause_past_the_lease(c1, path)
        g2, w2 = self.second_client_writes(path, g1["token"])
        c1.resume()
        w1 = c1.expect("wrote", slack(10.0))
        c1.wait(slack(5.0))
        # the gateway aborted the write at its deadline: client 1 learns
        # it was stale, or finds the connection gone; never a 2xx
        self.assertTrue(w1["status"] in (409, None), w1)
        if w1["status"] == 409:
                self.assertEqual(json.loads(w1["body"])["error"], "stale_token")
        first = self.judge(path, g1, w1, g2, w2)
        # nginx saw client 1's upload start, and end unfinished, before
        # client 2's write
        self.assertTrue(all(not e.applied for e in first), first)
        order = [e.test_id for e in self.store.log_for(path=path)]
        if first:
            self.assertLess(order.index(w1["test_id"]),
                            order.index(w2["test_id"]))


class Trickle:
    """A chunked upload the test paces: a small chunk every `every` s
    from a thread until stop() or a send error."""

    def __init__(self, port, path, headers, every=0.05):
        self.rq = RawRequest(port, "PUT", path, headers + [
            ("Transfer-Encoding", "chunked")])
        self.every = every
        self.sent = b""
        self.failed_at = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self, first):
        self.chunk(first)
        self.thread.start()
        return self

    def chunk(self, data):
        with self._lock:
            self.rq.send_chunk(data)
            self.sent += data

    def _run(self):
        i = 0
        while not self._stop.wait(self.every):
            i += 1
            try:
                self.chunk(b"trickle %06d\n" % i)
            except OSError:
                self.failed_at = time.monotonic()
                return

    def stop(self):
        self._stop.set()
        self.thread.join(5.0)

    def finish(self, last):
        """Stops trickling and ends the body; returns the sent bytes."""
        self.stop()
        self.chunk(last)
        with self._lock:
            self.rq.end_chunks()
        return self.sent


@on_both_origins
class OrderingTests(StoreTestCase):
    """Two gateways on one Redis in front of one nginx, --forward-token
    yes, so nginx's log shows the token of every write."""

    store_gateways = 2

    def setUp(self):
        super().setUp()
        self.use_shared()
        self.gw1, self.gw2 = self.env.gateways
        # X-Test-Ids of the older and the newer write (unique per test)
        tag = uuid.uuid4().hex[:8]
        self.OLD, self.NEW = "older-" + tag, "newer-" + tag

    def put_in_background(self, gw, path, data, seq, tid):
        return self.call_put(gw, path, data, seq, tid)

    def call_put(self, gw, path, data, seq, tid):
        result = {}

        def run():
            try:
                result["r"] = self.send("PUT", path, data, gw=gw, token=seq,
                                        test_id=tid, timeout=slack(20.0))
            except Exception as e:   # reported by the test
                result["exc"] = e
            result["t"] = time.monotonic()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, result

    def applied_puts(self, path):
        return [(e.test_id, e.token) for e in
                self.store.log_for(path=path, method="PUT") if e.applied]

    def test_release_ends_the_grants_running_write_and_the_newer_write_goes_within_the_margin(self):
        """v1.1 "a release ends the grant's writes": the holder lets go while
        its upload is still running; the upload is aborted upstream at the
        release, and the next holder's write waits at most the fence margin
        (250 ms), not for the older lease to run out."""
        path = self.obj("released")
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=8000)
        t_a = time.monotonic()
        # the store's temporary files before the upload's head is sent
        # (Trickle() sends it): Apache's mod_dav opens the upload's file
        # at the head, and on a busy machine that can come before the
        # next line here
        spooled = set(self.store.body_temp_files())
        tr = Trickle(self.gw1.port, path, [("Fencing-Token", a["sequencer"]),
                                            ("X-Test-Id", self.OLD)])
        # more than the store buffers in memory: it spools the body to a
        # file, which shows the upload has reached it
        tr.start(b"older part 1\n" * 8192)
        self.addCleanup(tr.stop)
        self.addCleanup(tr.rq.close)
        self.assertTrue(wait_until(
            lambda: self.gw1_admitted(lock), slack(2.0)),
            "the older write was never admitted")
        self.assertTrue(wait_until(
            lambda: set(self.store.body_temp_files()) - spooled, slack(5.0)),
            "the older write never reached the storage")
        # the holder lets go while its write is still running upstream
        t_rel_wall = time.time()
        self.release_ok(lock, a["lease"], gw=self.gw1)
        b = self.grant(path, gw=self.gw2, ttl_ms=10000)
        self.assertGreater(b["token"], a["token"])
        newer = b"newer data\n"
        t, res = self.call_put(self.gw2, path, newer, b["sequencer"],
                               self.NEW)
        t.join(slack(10.0))
        self.assertIn("r", res, res.get("exc"))
        self.assertIn(res["r"].status, (201, 204), res["r"])
        self.assertLess(res["t"], t_a + 8.0 - 0.25 - 1.0,
                        "the newer write waited for the released grant's "
                        "deadline")
        # the older upload ended at nginx, unapplied, before the newer one
        old = self.store.wait_log(slack(3.0), test_id=self.OLD)
        self.assertEqual(len(old), 1, "nginx never saw the released write end")
        self.assertFalse(old[0].applied, "the released write completed: %r"
                         % old[0])
        self.assertLess(float(old[0].msec), t_rel_wall + slack(1.0),
                        "the released write was not aborted at the release")
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=self.NEW))
        new_entry = self.store.log_for(test_id=self.NEW)[0]
        self.assertGreaterEqual(float(new_entry.msec), float(old[0].msec))
        self.assertEqual(self.applied_puts(path), [(self.NEW, b["token"])])
        self.assert_stored(path, newer)
        self.assert_told_stale(tr, a["token"])
        self.assert_stored(path, newer)

    def gw1_admitted(self, lock):
        """Is a write recorded under the lock (its admission is in Redis)?"""
        return self.env.redis.command("ZCARD", "fg:{%s}:f" % lock) > 0

    def wait_abort(self, tid, t_asked, t_a_wall, ttl_s):
        """Waits for nginx to log the end of the upload `tid`, which the
        gateway must abort at its deadline (grant + ttl - margin); returns
        the entry. The grant was made between `t_asked` (wall clock, just
        before it was asked for) and `t_a_wall` (its answer's arrival)."""
        hits = self.store.wait_log(ttl_s + slack(3.0), test_id=tid)
        self.assertEqual(len(hits), 1, "nginx never saw the running write "
                         "end: it was not aborted at its deadline")
        e = hits[0]
        self.assertFalse(e.applied, "the write past its deadline completed "
                         "upstream: %r" % e)
        self.assertGreater(float(e.msec), t_asked + ttl_s - 0.25 - 0.1,
                           "aborted before its deadline")
        self.assertLess(float(e.msec), t_a_wall + ttl_s - 0.25 + slack(0.75),
                        "aborted late")
        return e

    def assert_told_stale(self, tr, token):
        """The trickling client ends its body and hears 409 stale_token."""
        try:
            tr.finish(b"older last part\n")
        except OSError:
            pass   # the gateway may have closed: no answer to read then
        r = tr.rq.read_response(slack(5.0))
        if r is None:
            return
        self.assert_error(r, 409, "stale_token", "the aborted write")
        self.assertEqual(r.json.get("token"), token, r)

    def test_a_renewal_extends_a_running_write_past_its_first_deadline(self):
        """A renewal moves the running write's deadline with the lease: the
        upload outlives the first lease, then ends normally and is applied."""
        path = self.obj("renewed")
        lock = self.lock_of(path)
        a = self.grant(path, gw=self.gw1, ttl_ms=1500)
        t_a = time.monotonic()
        tr = Trickle(self.gw1.port, path, [("Fencing-Token", a["sequencer"]),
                                            ("X-Test-Id", self.OLD)])
        tr.start(b"part 1\n")
        self.addCleanup(tr.stop)
        self.addCleanup(tr.rq.close)
        # the write is running (its admission is in Redis) when renewed
        self.assertTrue(wait_until(
            lambda: self.gw1_admitted(lock), slack(2.0)),
            "the write was never admitted")
        r = self.renew(lock, a["lease"], gw=self.gw2, ttl_ms=5000)
        self.assertEqual(r.status, 200, r)
        # past the first lease's deadline, the upload is still running (the
        # cause: the first lease's time must pass)
        time.sleep(max(0.0, t_a + 1.5 + 0.5 - time.monotonic()))
        self.assertEqual(self.store.log_for(test_id=self.OLD), [],
                         "the write was aborted at the first lease's end "
                         "although the lease was renewed")
        sent = tr.finish(b"last part\n")
        resp = tr.rq.read_response(slack(5.0))
        self.assertIsNotNone(resp)
        self.assertEqual(resp.status, 201, resp)
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=self.OLD))
        self.assertEqual(self.applied_puts(path), [(self.OLD, a["token"])])
        self.assert_stored(path, sent)

    def test_write_still_running_when_its_lease_expires_is_aborted_at_its_deadline_and_the_next_holder_wins(self):
        path = self.obj("expiry")
        lock = self.lock_of(path)
        t_asked = time.time()
        a = self.grant(path, gw=self.gw1, ttl_ms=1500)
        t_a = time.time()
        tr = Trickle(self.gw1.port, path, [("Fencing-Token", a["sequencer"]),
                                            ("X-Test-Id", self.OLD)])
        tr.start(b"older part 1\n")
        self.addCleanup(tr.stop)
        self.addCleanup(tr.rq.close)
        # the next holder queues for the lock on the other gateway
        waiter = self.call(
            "POST", LOCKS + lock, body={"ttl_ms": 10000, "wait_ms": 8000},
            gw=self.gw2, timeout=slack(15.0))
        aborted = self.wait_abort(self.OLD, t_asked, t_a, 1.5)
        g = waiter.result(slack(15.0))
        t_granted = time.time() - (time.monotonic() - waiter.t_end)
        self.assertEqual(g.status, 200, g)
        b = g.json
        self.assertGreater(b["token"], a["token"])
        self.assertGreaterEqual(t_granted, float(aborted.msec) - 0.05,
                                "the lock was granted again before the "
                                "running write was aborted")
        w = self.put_ok(path, b"next holder\n", b["sequencer"], gw=self.gw2)
        self.assertTrue(self.store.wait_log(slack(2.0), test_id=w.test_id))
        self.assertEqual(self.applied_puts(path), [(w.test_id, b["token"])])
        self.assert_stored(path, b"next holder\n")
        self.assert_told_stale(tr, a["token"])
        self.assert_stored(path, b"next holder\n")
