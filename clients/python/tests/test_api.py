"""test_api.py - inspect, ls, break, typed errors, several gateways."""

from fencegate import (BadRequest, LeaseLost, NotAcquired, StaleToken,
                       Unavailable)

from . import fgenv
from .fgenv import Case, unique, wait_until


class TestApi(Case):
    def test_inspect_and_ls(self):
        c = self.client(owner="tester")
        prefix = unique("app/", "/")
        names = [prefix + x for x in ("a", "b", "c")]
        leases = [c.acquire(n, ttl=10) for n in names]
        try:
            st = c.inspect(names[0])
            self.assertEqual((st["held"], st["token"], st["owner"]),
                             (True, leases[0].token, "tester"))
            seen = list(c.ls(prefix, limit=1))
            self.assertEqual([e["name"] for e in seen], names)
            self.assertEqual(seen[0]["holders"][0]["owner"], "tester")
        finally:
            for ls in leases:
                ls.release()
        self.assertEqual(list(c.ls(prefix)), [])

    def test_break_is_seen_by_the_holder(self):
        c, admin = self.client(), self.client()
        name = unique()
        lease = c.acquire(name, ttl=1.5)
        admin.break_lock(name, lease.token)
        # the next renewal answers 410
        self.assertTrue(lease.lost.wait(10 * fgenv.SLACK))
        self.assertIn("410", lease.reason)
        with self.assertRaises(LeaseLost):
            lease.check()
        with self.assertRaises(StaleToken):
            admin.break_lock(name, lease.token)
        with self.assertRaises(LeaseLost):
            with lease:
                pass

    def test_typed_errors(self):
        c = self.client()
        with self.assertRaises(BadRequest) as cm:
            c.inspect("a//b")
        self.assertEqual(cm.exception.code, "bad_lock_name")
        with self.assertRaises(NotAcquired):
            name = unique()
            with c.lock(name, ttl=5):
                c.acquire(name, ttl=5)
        dead = self.client([fgenv.var("FG_TEST_DEAD")], timeout=5)
        with self.assertRaises(Unavailable):
            dead.acquire(unique(), ttl=5)
        with self.assertRaises(ValueError):
            c.acquire(unique(), ttl=0.01)

    def test_shared_holders(self):
        a, b = self.client(), self.client()
        name = unique()
        with a.lock(name, ttl=5, shared=True) as la, \
                b.lock(name, ttl=5, shared=True) as lb:
            self.assertEqual(la.token, lb.token)
            self.assertEqual(a.inspect(name)["holders"], 2)
        wait_until(lambda: not a.inspect(name)["held"], 5, "both released")
