"""test_lease_scripts.py - the lock scripts' side of v1.1.1 and v1.2, called
directly on the real Redis the gateway loaded them into: every move of a
lease's end earlier reaches the records of its admitted writes and tells
their gateway (`follow_end()`), and `giveback.lua` undoes a call whose
answer was lost, leaving the lease a no-op for a call that reaches Redis
after it; a grant belongs to the principal it was made for (re-entry,
renewal and release by another are refused and change nothing, a lease
that no longer holds is expired whoever asks); `break.lua` ends the grant
of the token it names, every holder of it, as an expiry now.

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
            # fg_<script>_<version>; a script's name may hold '_'
            out[name[3:].rsplit("_", 1)[0]] = name
    return out


def keys(name):
    return ["fg:{%s}:%s" % (name, k) for k in "sqwf"]


def acquire_args(lease, mode="x", ttl=60000, ld=0, wait=0, wid="", gw="",
                 reenter="", client="", value=None, owner=None, prin=None,
                 liveness=30000, max_waiters=100):
    """acquire's arguments after the idle time and the name, as calls.c
    builds them: lease, mode, ttl, client, the letters of the optional
    arguments that follow (d lock-delay; w wait, waiter id, gateway id,
    liveness, max waiters; r re-entry lease; v value; o owner; p
    principal), then those, in that order."""
    letters, rest = "", []
    if ld:
        letters += "d"
        rest.append(ld)
    if wait:
        letters += "w"
        rest += [wait, wid, gw, liveness, max_waiters]
    if reenter:
        letters += "r"
        rest.append(reenter)
    for letter, v in (("v", value), ("o", owner), ("p", prin)):
        if v is not None:
            letters += letter
            rest.append(v)
    return [lease, mode, ttl, client, letters] + rest


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


class ScriptCalls(TestCase):
    """Calls of the loaded library's functions, as calls.c builds them
    (no tests of its own)."""

    def setUp(self):
        super().setUp()
        self.acquire_ok(self.lock_name("load"))  # the gateway loads the library
        self.fn = functions(self.redis)
        self.assertIn("giveback", self.fn, self.fn)

    def fcall(self, script, name, *args):
        return self.redis.command("FCALL", self.fn[script], 4, *keys(name),
                                  IDLE_MS, name, *args)

    def fc_acquire(self, name, lease, ttl=60000, wait=0, wid="", gw=""):
        r = self.fcall("acquire", name, *acquire_args(
            lease, ttl=ttl, wait=wait, wid=wid, gw=gw))
        return [x.decode() if isinstance(x, bytes) else x for x in r]

    def fc_renew(self, name, lease, ttl):
        return self.fcall("renew", name, lease, ttl, "")

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


@harness.single_redis("calls the scripts on the one redis-server directly")
class LeaseScriptTests(ScriptCalls):

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
            r = self.fcall("acquire", name, *acquire_args(
                "N" * 22, ttl=100, reenter="M" * 22))
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

    # ---- undo ids: a renewal or re-entry whose answer was lost -------

    def holder_value(self, name, lease):
        v = self.redis.command("HGET", keys(name)[0], "h:" + lease)
        return None if v is None else v.decode()

    def undo(self, name, lease, uid, ran=False):
        args = [lease, "", 60000, uid] + (["1"] if ran else [])
        r = self.fcall("giveback", name, *args)
        return r[0].decode()

    def test_a_renewal_undone_by_its_id_gets_its_first_expiry_back(self):
        name, lease = self.lock_name(), "U" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        before = self.holder_value(name, lease)
        r = self.fcall("renew", name, lease, 600000, "u", "gw1.1")
        self.assertEqual(r[0], b"granted", r)
        self.assertNotEqual(self.holder_value(name, lease), before)
        self.assertEqual(self.undo(name, lease, "gw1.1"), "removed")
        self.assertEqual(self.holder_value(name, lease), before)
        # idempotent, and an id of another call changes nothing
        self.assertEqual(self.undo(name, lease, "gw1.1"), "expired")
        self.assertEqual(self.undo(name, lease, "gw1.9"), "expired")
        self.assertEqual(self.holder_value(name, lease), before)

    def test_a_renewal_that_reaches_redis_after_its_undo_does_nothing(self):
        name, lease = self.lock_name(), "V" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        before = self.holder_value(name, lease)
        self.assertEqual(self.undo(name, lease, "gw2.1"), "expired")
        r = self.fcall("renew", name, lease, 600000, "u", "gw2.1")
        self.assertEqual(r[0], b"expired", r)
        self.assertEqual(self.holder_value(name, lease), before)
        # the next renewal, with its own id, renews
        r = self.fcall("renew", name, lease, 600000, "u", "gw2.2")
        self.assertEqual(r[0], b"granted", r)

    def test_a_reentry_undone_by_its_id_loses_its_hold(self):
        name, lease = self.lock_name(), "W" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        args = acquire_args("X" * 22, ttl=600000, reenter=lease)
        args[4] += "u"
        r = self.fcall("acquire", name, *(args + ["gw3.1"]))
        self.assertEqual(r[0], b"granted", r)
        self.assertEqual(r[3], 2, r)
        self.assertEqual(self.undo(name, lease, "gw3.1"), "removed")
        self.assertTrue(self.holder_value(name, lease).startswith("1:60000:"))
        # one release frees the lock
        r = self.fcall("release", name, lease, MARGIN_MS)
        self.assertEqual(r[0], b"granted", r)
        self.assertFalse(self.held(name))

    def test_a_reentry_undone_after_a_release_of_its_hold_ends_the_lease(self):
        # the client, told the re-entry failed, released its one hold: the
        # re-entry's hold was the last, and goes as at a release
        name, lease = self.lock_name(), "Y" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        args = acquire_args("Z" * 22, ttl=60000, reenter=lease)
        args[4] += "u"
        self.assertEqual(self.fcall("acquire", name, *(args + ["gw4.1"]))[0],
                         b"granted")
        self.assertEqual(self.fcall("release", name, lease, MARGIN_MS)[0],
                         b"granted")
        self.assertTrue(self.held(name))
        self.assertEqual(self.undo(name, lease, "gw4.1"), "removed")
        self.assertFalse(self.held(name))

    def reenter(self, name, lease, uid, ttl=60000, value=None):
        args = acquire_args("N" * 22, ttl=ttl, reenter=lease, value=value)
        args[4] += "u"
        return self.fcall("acquire", name, *(args + [uid]))

    def test_an_undo_puts_no_value_back_onto_a_grant_that_ended(self):
        name, lease = self.lock_name(), "P" * 22
        t0 = time.monotonic()
        r = self.fcall("acquire", name, *acquire_args(lease, ttl=2000,
                                                       value="v0"))
        self.assertEqual(r[0], b"granted", r)
        r = self.fcall("renew", name, lease, 60000, "vu", "v1", "gw5.1")
        self.assertEqual(r[0], b"granted", r)
        # the first expiry has passed: the undo ends it (the cause: Redis'
        # clock must pass the first grant's end)
        time.sleep(max(0.0, t0 + 2.2 - time.monotonic()))
        self.assertEqual(self.undo(name, lease, "gw5.1"), "removed")
        self.assertFalse(self.held(name))
        self.assertIsNone(self.redis.command("HGET", keys(name)[0], "v"))

    def test_an_undo_leaves_the_expiry_a_later_renewal_without_an_id_set(self):
        name, lease = self.lock_name(), "Q" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        self.assertEqual(self.fcall("renew", name, lease, 90000, "u",
                                    "gw6.1")[0], b"granted")
        self.assertEqual(self.fcall("renew", name, lease, 600000, "")[0],
                         b"granted")
        after = self.holder_value(name, lease)
        self.assertEqual(self.undo(name, lease, "gw6.1"), "removed")
        self.assertEqual(self.holder_value(name, lease), after)

    def test_an_undone_reentry_loses_its_hold_after_a_later_renewal(self):
        name, lease = self.lock_name(), "R" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        self.assertEqual(self.reenter(name, lease, "gw7.1")[3], 2)
        self.assertEqual(self.fcall("renew", name, lease, 90000, "u",
                                    "gw7.2")[0], b"granted")
        renewed = self.holder_value(name, lease)
        self.assertEqual(self.undo(name, lease, "gw7.1"), "removed")
        # one hold, the later renewal's expiry
        self.assertEqual(self.holder_value(name, lease),
                         "1" + renewed[renewed.index(":"):])

    def test_a_late_call_after_its_undo_does_nothing_though_another_came_between(self):
        name, lease = self.lock_name(), "S" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        self.assertEqual(self.undo(name, lease, "gw8.1"), "expired")
        self.assertEqual(self.fcall("renew", name, lease, 90000, "u",
                                    "gw8.2")[0], b"granted")
        before = self.holder_value(name, lease)
        self.assertEqual(self.reenter(name, lease, "gw8.1")[0], b"expired")
        self.assertEqual(self.holder_value(name, lease), before)

    def test_two_renewals_undone_oldest_first_leave_what_neither_did(self):
        name, lease = self.lock_name(), "T" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        first = self.holder_value(name, lease)
        for uid, ttl in (("gw9.1", 600000), ("gw9.2", 700000)):
            self.assertEqual(self.fcall("renew", name, lease, ttl, "u",
                                        uid)[0], b"granted")
        self.assertEqual(self.undo(name, lease, "gw9.1"), "removed")
        self.assertEqual(self.undo(name, lease, "gw9.2"), "removed")
        self.assertEqual(self.holder_value(name, lease), first)

    def test_a_spent_id_is_not_forgotten_behind_later_renewals(self):
        name, lease = self.lock_name(), "K" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        self.assertEqual(self.undo(name, lease, "gwA.1"), "expired")
        for i in range(2, 7):
            self.assertEqual(self.fcall("renew", name, lease, 60000, "u",
                                        "gwA.%d" % i)[0], b"granted")
        before = self.holder_value(name, lease)
        self.assertEqual(self.reenter(name, lease, "gwA.1")[0], b"expired")
        self.assertEqual(self.holder_value(name, lease), before)

    def test_an_undelivered_reentry_pushed_out_of_the_records_still_loses_its_hold(self):
        name, lease = self.lock_name(), "L" * 22
        self.assertEqual(self.fc_acquire(name, lease, ttl=60000)[0], "granted")
        self.assertEqual(self.reenter(name, lease, "gwB.1")[3], 2)
        for i in range(2, 7):
            self.assertEqual(self.fcall("renew", name, lease, 60000, "u",
                                        "gwB.%d" % i)[0], b"granted")
        # not known to have run (a 503): nothing to take back by
        self.assertEqual(self.undo(name, lease, "gwB.1"), "expired")
        self.assertTrue(self.holder_value(name, lease).startswith("2:"))
        # known to have run (its answer was not delivered): its hold goes
        self.assertEqual(self.undo(name, lease, "gwB.1", ran=True), "removed")
        self.assertTrue(self.holder_value(name, lease).startswith("1:"))

    def test_a_remembered_lease_keeps_the_lock_keys_alive_past_its_memory(self):
        name = self.lock_name()
        self.giveback(name, "G" * 22)
        s = keys(name)[0]
        pttl = self.redis.command("PTTL", s)
        # remembered 60 s, and the keys outlive that by the idle time
        self.assertGreater(pttl, 60000 + IDLE_MS - 5000, pttl)
        self.assertIsNotNone(self.redis.command("HGET", s, "k:" + "G" * 22))

    # ---- idle forgetting after a release ---------------------------------

    def test_a_release_with_most_of_its_lease_left_forgets_the_lock_idle_ms_later(self):
        name = self.lock_name()
        self.assertEqual(self.fc_acquire(name, "H" * 22, ttl=40000)[0],
                         "granted")
        s = keys(name)[0]
        self.assertGreater(self.redis.command("PTTL", s), 40000 + IDLE_MS - 5000)
        self.assertEqual(self.fcall("release", name, "H" * 22, MARGIN_MS)[0],
                         b"granted")
        # 40 s left is more than an eighth of the idle time: the expiry
        # moves to the idle time from now
        pttl = self.redis.command("PTTL", s)
        self.assertLessEqual(pttl, IDLE_MS, pttl)
        self.assertGreater(pttl, IDLE_MS - 5000, pttl)

    def test_a_release_near_its_leases_end_leaves_the_grants_expiry(self):
        name = self.lock_name()
        ttl = IDLE_MS // 8 - 2000
        self.assertEqual(self.fc_acquire(name, "I" * 22, ttl=ttl)[0],
                         "granted")
        s = keys(name)[0]
        self.assertEqual(self.fcall("release", name, "I" * 22, MARGIN_MS)[0],
                         b"granted")
        self.assertFalse(self.held(name))
        # the grant's own: the lease's end plus the idle time, which is
        # later than the idle time from now by what was left, at most an
        # eighth of the idle time
        pttl = self.redis.command("PTTL", s)
        self.assertGreater(pttl, IDLE_MS, pttl)
        self.assertLessEqual(pttl, IDLE_MS + ttl, pttl)


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
                               IDLE_MS, name, *acquire_args(
                                   "W" * 22, wait=30000, wid=wid, gw=loop))
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



def dec(r):
    return [x.decode() if isinstance(x, bytes) else x for x in r]


@harness.single_redis("calls the scripts on the one redis-server directly")
class PrincipalScriptTests(ScriptCalls):
    """A grant belongs to its principal (contract v1.2): the acquire,
    renew and release scripts take the caller's principal as optional
    last arguments, exactly as calls.c builds them (release: the name;
    acquire and renew: 'p' among the letters of what follows, then the
    name); without it (open mode) nothing is checked."""

    def acq(self, name, lease, prin=None, mode="x", ttl=60000, wait=0,
            wid="", gw="", reenter=""):
        return dec(self.fcall("acquire", name, *acquire_args(
            lease, mode=mode, ttl=ttl, wait=wait, wid=wid, gw=gw,
            reenter=reenter, prin=prin)))

    def ren(self, name, lease, prin=None, ttl=0):
        args = [lease, ttl, ""]
        if prin is not None:
            args[-1] = "p"
            args.append(prin)
        return dec(self.fcall("renew", name, *args))

    def rel(self, name, lease, prin=None):
        args = [lease, MARGIN_MS]
        if prin is not None:
            args.append(prin)
        return dec(self.fcall("release", name, *args))

    def hfield(self, name, lease):
        v = self.redis.command("HGET", keys(name)[0], "h:" + lease)
        return None if v is None else v.decode()

    def test_renew_release_and_reentry_by_another_principal_are_forbidden_and_change_nothing(self):
        name = self.lock_name()
        lease = "A" * 22
        g = self.acq(name, lease, "alice", ttl=60000)
        self.assertEqual(g[0], "granted", g)
        before = self.hfield(name, lease)
        self.assertTrue(before.endswith(":alice"), before)
        self.assertEqual(self.ren(name, lease, "bob", ttl=100), ["forbidden"])
        self.assertEqual(self.rel(name, lease, "bob"), ["forbidden"])
        self.assertEqual(self.acq(name, "Z" * 22, "bob", ttl=100,
                                  reenter=lease), ["forbidden"])
        # nothing moved: the holder's expiry, holds and principal
        self.assertEqual(self.hfield(name, lease), before)
        self.assertTrue(self.held(name))
        # the principal it was granted to may
        r = self.acq(name, "Z" * 22, "alice", ttl=60000, reenter=lease)
        self.assertEqual((r[0], r[3]), ("granted", 2), r)
        self.assertEqual(self.ren(name, lease, "alice")[0], "granted")
        self.assertTrue(self.hfield(name, lease).endswith(":alice"))
        self.assertEqual(self.rel(name, lease, "alice")[:4],
                         ["granted", g[1], "x", 1])
        self.assertEqual(self.rel(name, lease, "alice")[0], "granted")
        self.assertFalse(self.held(name))

    def test_open_mode_calls_are_not_checked(self):
        name = self.lock_name()
        lease = "B" * 22
        self.assertEqual(self.acq(name, lease, "alice")[0], "granted")
        # no principal given: nothing is checked, and the stored one stays
        self.assertEqual(self.ren(name, lease)[0], "granted")
        r = self.acq(name, "Y" * 22, reenter=lease)
        self.assertEqual((r[0], r[3]), ("granted", 2), r)
        self.assertTrue(self.hfield(name, lease).endswith(":alice"))
        self.assertEqual(self.rel(name, lease)[0], "granted")
        self.assertEqual(self.rel(name, lease)[0], "granted")
        self.assertFalse(self.held(name))

    def test_a_grant_made_in_open_mode_belongs_to_no_principal(self):
        name = self.lock_name()
        lease = "C" * 22
        self.assertEqual(self.acq(name, lease)[0], "granted")
        self.assertEqual(self.hfield(name, lease).count(":"), 2)
        self.assertEqual(self.ren(name, lease, "alice"), ["forbidden"])
        self.assertEqual(self.rel(name, lease, "alice"), ["forbidden"])
        self.assertTrue(self.held(name))
        self.assertEqual(self.rel(name, lease)[0], "granted")

    def test_a_lease_that_no_longer_holds_is_expired_whoever_asks(self):
        name = self.lock_name()
        # released
        self.assertEqual(self.acq(name, "D" * 22, "alice")[0], "granted")
        self.assertEqual(self.rel(name, "D" * 22, "alice")[0], "granted")
        self.assertEqual(self.ren(name, "D" * 22, "bob"), ["expired"])
        self.assertEqual(self.rel(name, "D" * 22, "bob"), ["expired"])
        self.assertEqual(self.acq(name, "X" * 22, "bob", reenter="D" * 22),
                         ["expired"])
        # run out: Redis' clock passed its expiry
        g = self.acq(name, "E" * 22, "alice", ttl=100)
        self.assertEqual(g[0], "granted", g)
        end = self.redis_ms() + 100
        self.wait_for(lambda: self.redis_ms() > end + 1, 2.0,
                      "Redis' clock to pass the lease's end")
        self.assertEqual(self.ren(name, "E" * 22, "bob"), ["expired"])
        self.assertEqual(self.rel(name, "E" * 22, "bob"), ["expired"])
        self.assertEqual(self.acq(name, "X" * 22, "bob", reenter="E" * 22),
                         ["expired"])
        self.assertFalse(self.held(name))

    def test_a_waiter_granted_from_the_queue_carries_its_principal(self):
        name = self.lock_name()
        self.assertEqual(self.acq(name, "F" * 22, "alice")[0], "granted")
        q = self.acq(name, "G" * 22, "bob", wait=30000, wid="gwP-1", gw="gwP")
        self.assertEqual(q[0], "queued", q)
        self.assertEqual(self.rel(name, "F" * 22, "alice")[0], "granted")
        self.assertTrue(self.hfield(name, "G" * 22).endswith(":bob"))
        self.assertEqual(self.ren(name, "G" * 22, "alice"), ["forbidden"])
        self.assertEqual(self.ren(name, "G" * 22, "bob")[0], "granted")

    def test_shared_holders_each_belong_to_their_own_principal(self):
        name = self.lock_name()
        self.assertEqual(self.acq(name, "H" * 22, "alice", mode="s")[0], "granted")
        self.assertEqual(self.acq(name, "I" * 22, "bob", mode="s")[0], "granted")
        self.assertEqual(self.rel(name, "H" * 22, "bob"), ["forbidden"])
        self.assertEqual(self.rel(name, "I" * 22, "alice"), ["forbidden"])
        self.assertEqual(self.rel(name, "I" * 22, "bob")[0], "granted")
        self.assertEqual(self.ren(name, "H" * 22, "alice")[0], "granted")
        self.assertTrue(self.hfield(name, "H" * 22).endswith(":alice"))


@harness.single_redis("calls the scripts on the one redis-server directly")
class BreakScriptTests(ScriptCalls):
    """break.lua: the grant of the token named ends as at an expiry now."""

    def acq(self, name, lease, mode="x", ttl=60000, ld=0, wait=0, wid="",
            gw=""):
        return dec(self.fcall("acquire", name, *acquire_args(
            lease, mode=mode, ttl=ttl, ld=ld, wait=wait, wid=wid, gw=gw)))

    def brk(self, name, token):
        return dec(self.fcall("break", name, token, MARGIN_MS))

    def fields(self, name):
        raw = self.redis.command("HGETALL", keys(name)[0])
        return {raw[i].decode(): raw[i + 1].decode()
                for i in range(0, len(raw), 2)}

    def test_break_ends_the_grant_and_aborts_its_writes_through_follow_end(self):
        name = self.lock_name()
        sub = Subscriber(self.redis.port, "fg:gw:gwK")
        try:
            g = self.acq(name, "K" * 22)
            tok = int(g[1])
            self.assertEqual(self.fc_admit(name, tok, "gwK-w1")[0], "admitted")
            self.assertEqual(self.brk(name, tok), ["removed", tok])
            self.assertFalse(self.held(name))
            self.assertEqual([f for f in self.fields(name) if f.startswith("h:")], [])
            self.assertLessEqual(self.record(name, "gwK-w1") - self.redis_ms(),
                                 MARGIN_MS + 50)
            self.assertEqual(sub.messages(), ["x gwK-w1"])
        finally:
            sub.close()
        self.assertEqual(self.fc_renew(name, "K" * 22, 0), [b"expired"])

    def test_break_ends_every_shared_holder(self):
        name = self.lock_name()
        g = self.acq(name, "L" * 22, mode="s")
        self.assertEqual(self.acq(name, "M" * 22, mode="s")[1], g[1])
        self.assertEqual(self.acq(name, "N" * 22, mode="s")[1], g[1])
        self.assertEqual(self.brk(name, int(g[1])), ["removed", int(g[1])])
        f = self.fields(name)
        self.assertEqual([k for k in f if k.startswith("h:")], [], f)
        for k in ("n", "x", "nx", "m"):
            self.assertNotIn(k, f)
        for lease in ("L", "M", "N"):
            self.assertEqual(self.fc_renew(name, lease * 22, 0), [b"expired"])

    def test_another_token_or_a_free_lock_changes_nothing(self):
        name = self.lock_name()
        self.assertEqual(self.brk(name, 12345), ["expired", 0])
        g = self.acq(name, "O" * 22)
        tok = int(g[1])
        before = self.fields(name)
        self.assertEqual(self.brk(name, tok - 1), ["expired", tok])
        self.assertEqual(self.brk(name, tok + 1), ["expired", tok])
        self.assertEqual(self.fields(name), before)
        self.assertEqual(self.fc_renew(name, "O" * 22, 0)[0], b"granted")

    def test_with_lock_delay_0_the_next_waiter_is_granted_in_the_same_step(self):
        name = self.lock_name()
        tok = int(self.acq(name, "P" * 22)[1])
        q = self.acq(name, "Q" * 22, wait=30000, wid="gwQ-1", gw="gwQ")
        self.assertEqual(q[0], "queued", q)
        sub = Subscriber(self.redis.port, "fg:gw:gwQ")
        try:
            self.assertEqual(self.brk(name, tok), ["removed", tok])
            msgs = sub.messages()
            self.assertEqual(len(msgs), 1, msgs)
            wid, tok2, mode, lease, lock = msgs[0].split(" ")
            self.assertEqual((wid, mode, lease, lock),
                             ("gwQ-1", "x", "Q" * 22, name))
            self.assertGreater(int(tok2), tok)
        finally:
            sub.close()
        self.assertTrue(self.held(name))

    def test_lock_delay_counts_from_the_break_and_the_waiters_gateways_hear_when_it_ends(self):
        name = self.lock_name()
        tok = int(self.acq(name, "R" * 22, ttl=60000, ld=2000)[1])
        q = self.acq(name, "S" * 22, wait=30000, wid="gwS-1", gw="gwS")
        self.assertEqual(q[0], "queued", q)
        sub = Subscriber(self.redis.port, "fg:gw:gwS")
        try:
            t0 = self.redis_ms()
            self.assertEqual(self.brk(name, tok), ["removed", tok])
            t1 = self.redis_ms()
            d = int(self.fields(name)["d"])
            self.assertTrue(t0 + 2000 <= d <= t1 + 2000, (t0, d, t1))
            msgs = sub.messages()
            self.assertEqual(len(msgs), 1, msgs)
            kind, ms, lock = msgs[0].split(" ")
            self.assertEqual((kind, lock), ("t", name), msgs)
            self.assertTrue(1900 <= int(ms) <= 2001, msgs)
        finally:
            sub.close()
        self.assertFalse(self.held(name))
        self.assertEqual(self.redis.command("ZCARD", keys(name)[1]), 1)
        # in lock-delay the lock is not the token's any more
        self.assertEqual(self.brk(name, tok), ["expired", tok])
        # a try-once acquire is refused until the delay ends
        self.assertEqual(self.acq(name, "T" * 22)[0], "busy")

    def test_inspect_and_a_refused_try_once_tell_what_remains_of_the_delay(self):
        # inspect's 9th element and a busy reply's 3rd are what remains of
        # the lock-delay by Redis' clock; a busy reply's is 0 unless the
        # delay alone refused the call (the lock free, nobody queued)
        name = self.lock_name()
        self.assertEqual(dec(self.fcall("inspect", name))[8], 0)
        tok = int(self.acq(name, "U" * 22, ttl=60000, ld=2000)[1])
        self.assertEqual(dec(self.fcall("inspect", name))[8], 0)
        busy = self.acq(name, "V" * 22)
        self.assertEqual((busy[0], busy[2]), ("busy", 0), busy)
        self.assertEqual(self.brk(name, tok), ["removed", tok])
        d = int(self.fields(name)["d"])
        t0 = self.redis_ms()
        left = dec(self.fcall("inspect", name))[8]
        t1 = self.redis_ms()
        self.assertTrue(d - t1 <= left <= d - t0, (d, t0, left, t1))
        t0 = self.redis_ms()
        busy = self.acq(name, "V" * 22)
        t1 = self.redis_ms()
        self.assertEqual(busy[0], "busy", busy)
        self.assertTrue(d - t1 <= busy[2] <= d - t0, (d, t0, busy, t1))
        # with a waiter queued, the waiter is next: no time to retry at
        q = self.acq(name, "W" * 22, wait=30000, wid="gwW-1", gw="gwW")
        self.assertEqual(q[0], "queued", q)
        busy = self.acq(name, "X" * 22)
        self.assertEqual((busy[0], busy[2]), ("busy", 0), busy)
        self.assertGreater(dec(self.fcall("inspect", name))[8], 0)


@harness.single_redis("calls the scripts on the one redis-server directly")
class IndexDropScriptTests(ScriptCalls):
    """On one Redis the lock scripts keep the listing's index and write no
    token to its :v hash; index_drop is given the lock's keys and looks at
    the lock itself."""

    def drop(self, name, seen):
        fn = functions(self.redis)["index_drop"]
        return self.redis.command("FCALL", fn, 6, "fg:{!index}:n",
                                  "fg:{!index}:v", *keys(name), name, seen)

    def indexed(self, name):
        return self.redis.command("ZSCORE", "fg:{!index}:n", name) \
            is not None

    def test_a_look_that_found_the_lock_idle_drops_no_grant_made_since(self):
        name = self.lock_name("since")
        g = self.acquire_ok(name, ttl_ms=30000)
        self.assertTrue(self.indexed(name))
        self.assertIsNone(self.redis.command("HGET", "fg:{!index}:v", name))
        # a look taken before the grant: its bound is below the token
        self.assertEqual(self.drop(name, 1), 0)
        self.assertTrue(self.indexed(name))
        self.release_ok(name, g["lease"])
        self.assertFalse(self.indexed(name))

    def test_a_waiter_or_a_lock_delay_keeps_the_name_and_an_idle_lock_drops_it(self):
        name = self.lock_name("kept")
        self.acquire_ok(name, ttl_ms=30000)
        q = self.fc_acquire(name, "Q" * 22, wait=30000, wid="gwQ-1",
                            gw="gwQ")
        self.assertEqual(q[0], "queued", q)
        # the holder leaves without the script: a waiter alone is active
        self.redis.command("HDEL", keys(name)[0], "n")
        self.assertEqual(self.drop(name, 1), 0)
        self.redis.command("DEL", *keys(name))
        self.redis.command("HSET", keys(name)[0], "d",
                           str(int(time.time() * 1000) + 60000))
        self.assertEqual(self.drop(name, 1), 0)
        self.redis.command("DEL", *keys(name))
        self.assertEqual(self.drop(name, 1), 1)
        self.assertFalse(self.indexed(name))
