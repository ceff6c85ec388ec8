"""test_functions.py - the lock scripts are a Redis function library: a
Redis that lost it (FUNCTION FLUSH, or a restart without data) gets it
again from the first call that misses it, on the blocking and on the
asynchronous connections alike, and the call itself succeeds."""

import os
import re
from harness import TestCase, slack, wait_until


def function_loads(redis):
    """How many FUNCTION LOAD commands Redis has run so far."""
    info = redis.command("INFO", "commandstats").decode()
    m = re.search(r"^cmdstat_function\|load:calls=(\d+)", info, re.M)
    return int(m.group(1)) if m else 0


def function_loads_per_node(redis):
    """{port: FUNCTION LOADs so far} of each Redis a gateway sends scripts
    to: the one server, or every master of a cluster."""
    nodes = redis.masters() if hasattr(redis, "masters") else [redis]
    return {n.port: function_loads(n) for n in nodes}


def libraries(redis):
    """Names of the function libraries Redis holds."""
    out = []
    for lib in redis.command("FUNCTION", "LIST"):
        fields = dict(zip(lib[::2], lib[1::2]))
        out.append(fields[b"library_name"].decode())
    return out


class FunctionLibraryTests(TestCase):

    def flush(self):
        self.redis.command("FUNCTION", "FLUSH")
        self.assertEqual(libraries(self.redis), [])

    def test_library_is_loaded_under_a_versioned_name(self):
        self.acquire_ok(self.lock_name())
        libs = [n for n in libraries(self.redis) if n.startswith("fencegate")]
        self.assertEqual(len(libs), 1, libraries(self.redis))
        self.assertRegex(libs[0], r"^fencegate_[0-9a-f]{12}$")

    def test_every_lock_call_works_after_function_flush(self):
        name = self.lock_name()
        self.flush()
        g = self.acquire_ok(name, value="v1")
        self.assertTrue(any(n.startswith("fencegate_")
                            for n in libraries(self.redis)))
        self.flush()
        r = self.renew(name, g["lease"], value="v2")
        self.assertEqual(r.status, 200, r)
        self.flush()
        s = self.state(name)
        self.assertTrue(s["held"])
        self.assertEqual(s["token"], g["token"])
        self.assertEqual(s["value"], "v2")
        self.flush()
        self.assertIs(self.check_ok(g["sequencer"])["valid"], True)
        self.flush()
        self.release_ok(name, g["lease"])
        self.assertFalse(self.state(name)["held"])

    def test_release_after_function_flush_frees_the_lock(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.flush()
        self.release_ok(name, g["lease"])
        self.assertFalse(self.state(name)["held"])
        g2 = self.acquire_ok(name)
        self.assertGreater(g2["token"], g["token"])

    def test_fenced_write_after_function_flush(self):
        name = self.lock_name()
        g = self.acquire_ok(name)
        self.flush()
        r = self.req("PUT", "/" + name, raw=b"data",
                     headers={"Fencing-Token": g["sequencer"]})
        self.assertEqual(r.status, 200, r)
        # the write's record goes with its finish (from the wait loop)
        self.wait_for(lambda: self.redis.command(
            "ZCARD", "fg:{%s}:f" % name) == 0, slack(3.0),
            "the finished write's record to go")

    def test_wait_loop_reloads_once_for_calls_in_flight(self):
        # Waiters on several locks whose holders expire together: the
        # gateway's event loops tick each lock (asynchronous connections)
        # and find the library gone. One load per loop's connection serves
        # all its calls in flight, and every waiter is granted. The shared
        # gateway runs one loop per core (its default).
        names = [self.lock_name() for _ in range(6)]
        for n in names:
            self.acquire_ok(n, ttl_ms=700)
        ws = [self.waiter(n, wait_ms=8000) for n in names]
        for n in names:
            self.wait_waiters(n, 1)
        self.flush()
        before = function_loads_per_node(self.redis)
        for w in ws:
            r = w.result(slack(5.0))
            self.assertEqual(r.status, 200, r)
        after = function_loads_per_node(self.redis)
        loads = {p: n - before.get(p, 0) for p, n in after.items()}
        self.assertGreaterEqual(sum(loads.values()), 1)
        for port, n in loads.items():
            self.assertLessEqual(n, os.cpu_count() or 1,
                                 "a loop loaded the library more than once "
                                 "(Redis on port %d)" % port)
        for n, w in zip(names, ws):
            self.release_ok(n, w.resp.json["lease"])

    def test_calls_in_flight_on_worker_threads_after_flush(self):
        # Many workers find the library gone at once: each loads it on
        # its own connection and its call succeeds.
        self.flush()
        calls = [self.call("POST", self.lock_name(), body={})
                 for _ in range(24)]
        for c in calls:
            self.assertEqual(c.result(slack(5.0)).status, 200)
        self.assertTrue(wait_until(
            lambda: any(n.startswith("fencegate_")
                        for n in libraries(self.redis)), 1.0))
