"""test_lease_scripts.py - the lock scripts' side of v1.1.1, called directly
on the real Redis the gateway loaded them into: every move of a lease's end
earlier reaches the records of its admitted writes and tells their gateway
(`follow_end()`), and `giveback.lua` undoes a call whose answer was lost,
leaving the lease a no-op for a call that reaches Redis after it.

The gateway loads the library on its first call; the tests then send FCALL
with the same keys and arguments the gateway's calls.c builds, so what is
asserted is the scripts' contract with the gateway, step by step, without
timing races."""

import socket
import time

import harness
from harness import RespClient, TestCase
from test_lease_truth import metric_sum

IDLE_MS = 60000
MARGIN_MS = 250


def functions(redis):
    """{'acquire': 'fg_acquire_<version>', ...} of the loaded library."""
    out = {}
    for lib in redis.command("FUNCTION", "LIST"):
        fields = dict(zip(lib[::2], lib[1::2]))
        if not fields[b"library_name"].decode().startswith("fencegate_"):
            continue
        for fn in fields[b"functions"]:
            f = dict(zip(fn[::2], fn[1::2]))
            name = f[b"name"].decode()
            out[name.split("_")[1]] = name
    return out


def keys(name):
    return ["fg:{%s}:%s" % (name, k) for k in "sqwf"]


class Subscriber:
    """A RESP subscription to one channel, read with a bound."""

    def __init__(self, port, channel):
        self.c = RespClient(port)
        self.c.command("SUBSCRIBE", channel)

    def messages(self, wait=0.5):
        out = []
        self.c.sock.settimeout(wait)
        try:
            while True:
                m = self.c._read()
                out.append(m[2].decode())
                self.c.sock.settimeout(0.05)
        except (socket.timeout, TimeoutError):
            pass
        return out

    def close(self):
        self.c.close()


@harness.single_redis("calls the scripts on the one redis-server directly")
class LeaseScriptTests(TestCase):

    def setUp(self):
        super().setUp()
        self.acquire_ok(self.lock_name("load"))  # the gateway loads the library
        self.fn = functions(self.redis)
        self.assertIn("giveback", self.fn, self.fn)

    def fcall(self, script, name, *args):
        return self.redis.command("FCALL", self.fn[script], 4, *keys(name),
                                  IDLE_MS, name, *args)

    def fc_acquire(self, name, lease, ttl=60000, wait=0, wid="", gw=""):
        r = self.fcall("acquire", name, lease, "x", ttl, 0, wait, wid, gw,
                       30000, 100, "", "0", "", "0", "")
        return [x.decode() if isinstance(x, bytes) else x for x in r]

    def fc_renew(self, name, lease, ttl):
        return self.fcall("renew", name, lease, ttl, "0", "")

    def fc_admit(self, name, token, wid):
        r = self.fcall("admit", name, token, wid, MARGIN_MS, 3600000)
        return [x.decode() if isinstance(x, bytes) else x for x in r]

    def giveback(self, name, lease, wid=""):
        r = self.fcall("giveback", name, lease, wid, 60000)
        return r[0].decode()

    def record(self, name, wid):
        s = self.redis.command("ZSCORE", keys(name)[3], wid)
        return None if s is None else int(float(s))

    def assert_ends_in(self, msgs, wid, ttl):
        self.assertEqual(len(msgs), 1, msgs)
        kind, got, ms = msgs[0].split(" ")
        self.assertEqual((kind, got), ("e", wid), msgs)
        self.assertTrue(ttl - 50 <= int(ms) <= ttl, msgs)

    def redis_ms(self):
        t = self.redis.command("TIME")
        return int(t[0]) * 1000 + int(t[1]) // 1000

    def held(self, name):
        return self.redis.command("HGET", keys(name)[0], "n") is not None

    # ---- follow_end(): every end of a lease reaches its writes --------

    def test_renewal_to_a_shorter_ttl_cuts_the_write_record_back_and_tells_its_gateway(self):
        name = self.lock_name()
        gw = "gwA"
        sub = Subscriber(self.redis.port, "fg:gw:" + gw)
        try:
            g = self.fc_acquire(name, "L" * 22, ttl=60000)
            self.assertEqual(g[0], "granted", g)
            tok = int(g[1])
            a = self.fc_admit(name, tok, gw + "-w1")
            self.assertEqual(a[0], "admitted", a)
            before = self.record(name, gw + "-w1")
            self.assertGreater(before - self.redis_ms(), 50000)
            r = self.fc_renew(name, "L" * 22, 1000)
            self.assertEqual(r[0], b"granted", r)
            after = self.record(name, gw + "-w1")
            now = self.redis_ms()
            # cut back to the new end (now + 1000), not left at ~60 s
            self.assertLessEqual(after, now + 1000 + 50, (after, now))
            self.assertGreaterEqual(after, now + MARGIN_MS - 50, (after, now))
            # the gateway hears how soon the grant now ends
            self.assert_ends_in(sub.messages(), gw + "-w1", 1000)
        finally:
            sub.close()

    def test_reentry_with_a_shorter_ttl_cuts_the_write_record_back(self):
        name = self.lock_name()
        sub = Subscriber(self.redis.port, "fg:gw:gwB")
        try:
            g = self.fc_acquire(name, "M" * 22, ttl=60000)
            tok = int(g[1])
            self.assertEqual(self.fc_admit(name, tok, "gwB-w7")[0], "admitted")
            r = self.fcall("acquire", name, "N" * 22, "x", 100, 0, 0, "", "",
                           30000, 100, "M" * 22, "0", "", "0", "")
            self.assertEqual(r[0], b"granted", r)
            self.assertEqual(int(r[3]), 2, r)  # holds
            after = self.record(name, "gwB-w7")
            # the new end is 100 ms away: the record keeps the margin
            self.assertLessEqual(after - self.redis_ms(), MARGIN_MS + 50)
            self.assert_ends_in(sub.messages(), "gwB-w7", 100)
        finally:
            sub.close()

    def test_renewal_to_a_longer_ttl_leaves_the_records_and_says_nothing(self):
        name = self.lock_name()
        sub = Subscriber(self.redis.port, "fg:gw:gwC")
        try:
            g = self.fc_acquire(name, "P" * 22, ttl=5000)
            tok = int(g[1])
            self.assertEqual(self.fc_admit(name, tok, "gwC-w1")[0], "admitted")
            before = self.record(name, "gwC-w1")
            self.fc_renew(name, "P" * 22, 60000)
            self.assertEqual(self.record(name, "gwC-w1"), before)
            self.assertEqual(sub.messages(wait=0.3), [])
        finally:
            sub.close()

    def test_release_aborts_the_writes_through_the_same_path(self):
        name = self.lock_name()
        sub = Subscriber(self.redis.port, "fg:gw:gwD")
        try:
            g = self.fc_acquire(name, "Q" * 22, ttl=60000)
            self.assertEqual(self.fc_admit(name, int(g[1]), "gwD-w3")[0], "admitted")
            r = self.fcall("release", name, "Q" * 22, MARGIN_MS)
            self.assertEqual(r[0], b"granted", r)
            self.assertLessEqual(self.record(name, "gwD-w3") - self.redis_ms(),
                                 MARGIN_MS + 50)
            self.assertEqual(sub.messages(), ["x gwD-w3"])
        finally:
            sub.close()

    # ---- giveback.lua --------------------------------------------------

    def test_giveback_releases_a_grant_and_hands_the_lock_to_the_next_waiter(self):
        name = self.lock_name()
        self.assertEqual(self.fc_acquire(name, "A" * 22)[0], "granted")
        q = self.fc_acquire(name, "B" * 22, wait=30000, wid="gwE-1", gw="gwE")
        self.assertEqual(q[0], "queued", q)
        sub = Subscriber(self.redis.port, "fg:gw:gwE")
        try:
            self.assertEqual(self.giveback(name, "A" * 22), "removed")
            msgs = sub.messages()
            self.assertEqual(len(msgs), 1, msgs)
            wid, tok, mode, lease, lock = msgs[0].split(" ")
            self.assertEqual((wid, mode, lease, lock),
                             ("gwE-1", "x", "B" * 22, name))
        finally:
            sub.close()
        self.assertTrue(self.held(name))
        # idempotent: nothing left to give back, the new holder untouched
        self.assertEqual(self.giveback(name, "A" * 22), "expired")
        self.assertTrue(self.held(name))

    def test_giveback_takes_a_waiter_out_of_the_queue_before_it_is_granted(self):
        name = self.lock_name()
        self.assertEqual(self.fc_acquire(name, "C" * 22)[0], "granted")
        q = self.fc_acquire(name, "D" * 22, wait=30000, wid="gwF-1", gw="gwF")
        self.assertEqual(q[0], "queued", q)
        self.assertEqual(self.giveback(name, "D" * 22, "gwF-1"), "removed")
        self.assertEqual(self.redis.command("ZCARD", keys(name)[1]), 0)
        r = self.fcall("release", name, "C" * 22, MARGIN_MS)
        self.assertEqual(r[0], b"granted", r)
        self.assertFalse(self.held(name))

    def test_an_acquire_that_reaches_redis_after_its_giveback_does_nothing(self):
        name = self.lock_name()
        # the give-back runs first (a new connection), the acquire's bytes
        # from the dropped one after it
        self.assertEqual(self.giveback(name, "E" * 22, "gwG-1"), "expired")
        self.assertEqual(self.fc_acquire(name, "E" * 22)[0], "expired")
        self.assertFalse(self.held(name))
        self.assertEqual(self.fc_acquire(name, "E" * 22, wait=30000,
                                      wid="gwG-1", gw="gwG")[0], "expired")
        self.assertEqual(self.redis.command("ZCARD", keys(name)[1]), 0)
        # another lease is granted as usual
        self.assertEqual(self.fc_acquire(name, "F" * 22)[0], "granted")

    def test_a_remembered_lease_keeps_the_lock_keys_alive_past_its_memory(self):
        name = self.lock_name()
        self.giveback(name, "G" * 22)
        s = keys(name)[0]
        pttl = self.redis.command("PTTL", s)
        # remembered 60 s, and the keys outlive that by the idle time
        self.assertGreater(pttl, 60000 + IDLE_MS - 5000, pttl)
        self.assertIsNotNone(self.redis.command("HGET", s, "k:" + "G" * 22))


@harness.single_redis("queues a waiter by calling the script on the one redis-server")
class UnknownWaiterTests(TestCase):
    """A grant the lock's script hands to a waiter id of this gateway's
    loop that the loop does not know (its acquire was answered 503, it
    timed out, its client left) is given back at once, not held for its
    TTL."""

    def test_grant_to_a_waiter_the_gateway_does_not_know_is_given_back_at_once(self):
        name = self.lock_name()
        holder = self.acquire_ok(name, ttl_ms=60000)
        fn = functions(self.redis)
        chans = [c.decode() for c in
                 self.redis.command("PUBSUB", "CHANNELS", "fg:gw:*")]
        self.assertTrue(chans, "the gateway's loops subscribe to fg:gw:<id>")
        loop = chans[0][len("fg:gw:"):]
        wid = loop + "-999999"  # never issued by that loop
        r = self.redis.command("FCALL", fn["acquire"], 4, *keys(name),
                               IDLE_MS, name, "W" * 22, "x", 60000, 0, 30000,
                               wid, loop, 30000, 100, "", "0", "", "0", "")
        self.assertEqual(r[0], b"queued", r)
        before = metric_sum(self.gw, "fencegate_lock_given_back_total",
                            {"reason": "unknown_waiter"})
        t0 = time.monotonic()
        self.release_ok(name, holder["lease"])

        def free():
            s = self.state(name)
            return not s["held"] and s["waiters"] == 0
        # handed to the unknown waiter by the release, then given back
        self.assertTrue(harness.wait_until(free, 1.0 + harness.slack(1.0)),
                        "the lock stayed held by a waiter nobody knows: %r"
                        % self.state(name))
        self.assertLess(time.monotonic() - t0, 1.0 + harness.slack(1.0))
        self.assertTrue(harness.wait_until(
            lambda: metric_sum(self.gw, "fencegate_lock_given_back_total",
                               {"reason": "unknown_waiter"}) > before,
            harness.slack(2.0)))
        # and the lock is anyone's again
        self.acquire_ok(name, ttl_ms=1000)

