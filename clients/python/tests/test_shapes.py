"""test_shapes.py - answers the real gateways do not give on demand, from
a scripted local gateway: a grant that arrives late and cannot be
confirmed, a grant that cannot be read, a renewal answered 404, a slow
release at max_hold and a slow renewal beside other leases; and URLs with
a password in them."""

import asyncio
import threading
import time
import unittest

from fencegate import Client, FenceError
from fencegate.aio import AsyncClient

from . import fgenv
from .fakegw import Scripted, grant

SECRET = "lease-SECRET-0123456789"


def _flat(e):
    return " ".join((str(e), repr(e), repr(e.body), e.message))


class _Script:
    """Answers per lease: grants in `grants` order (each (lease, ttl_ms,
    delay)), PATCH by `patch(lease, n)` -> (status, json), DELETE 204."""

    def __init__(self, grants, patch=None, delete_delay=0.0,
                 patch_delay=None):
        self.grants = list(grants)
        self.patch = patch or (lambda lease, n: (200, None))
        self.delete_delay = delete_delay
        self.patch_delay = patch_delay or (lambda lease: 0.0)
        self.patches = {}
        self.mu = threading.Lock()
        self.token = 0

    def __call__(self, method, path, h, body):
        with self.mu:
            if method == "POST":
                if not self.grants:
                    return 409, {"error": "lock_held", "message": "held"}
                g = self.grants[0] if len(self.grants) == 1 else \
                    self.grants.pop(0)
                if callable(g):
                    return g()
                lease, ttl_ms, delay = g
                self.token += 1
                return 200, grant(lease, self.token, ttl_ms), delay
            if method == "PATCH":
                lease = (body or {}).get("lease")
                n = self.patches.get(lease, 0) + 1
                self.patches[lease] = n
                st, j = self.patch(lease, n)
                if j is None and st == 200:
                    j = {"ttl_ms": body.get("ttl_ms")}
                return st, j, self.patch_delay(lease)
            if method == "DELETE":
                return 204, None, self.delete_delay
        return 404, {"error": "not_found"}


def deletes(fake):
    return [r[2].get("fence-lease") for r in fake.requests("DELETE")]


class TestShapesSync(unittest.TestCase):
    def fake(self, script):
        f = Scripted(script)
        self.addCleanup(f.close)
        return f

    def client(self, f, **kw):
        c = Client([f.url], **kw)
        self.addCleanup(c.close)
        return c

    def test_a_late_grant_not_confirmed_is_given_back_and_asked_again(self):
        # the first grant comes after more than a third of its TTL and
        # its confirmation fails: it is given back, and the wait goes on
        f = self.fake(_Script(
            [(SECRET, 600, 0.4), ("L2", 10000, 0)],
            patch=lambda lease, n: (503, {"error": "lock_store_unavailable"})
            if lease == SECRET else (200, None)))
        c = self.client(f)
        lease = c.acquire("app/x", ttl=0.6, wait=5)
        self.assertEqual(lease._lease, "L2")
        self.assertIn(SECRET, deletes(f))
        lease.release()

    def test_late_grants_never_confirmed_raise_without_the_grant(self):
        f = self.fake(_Script(
            [(SECRET, 600, 0.4)],
            patch=lambda lease, n: (503, {"error": "lock_store_unavailable"})))
        c = self.client(f)
        with self.assertRaises(FenceError) as cm:
            c.acquire("app/x", ttl=0.6, wait=1)
        self.assertNotIn(SECRET, _flat(cm.exception))
        self.assertNotIn("seq-", _flat(cm.exception))
        self.assertGreaterEqual(len(f.requests("POST")), 2)
        self.assertEqual(deletes(f), [SECRET] * len(f.requests("POST")))

    def test_an_unreadable_grant_is_given_back(self):
        f = self.fake(_Script([lambda: (200, {"lease": SECRET,
                                              "token": "seven"})]))
        c = self.client(f)
        with self.assertRaises(FenceError) as cm:
            c.acquire("app/x", ttl=5)
        self.assertNotIn(SECRET, _flat(cm.exception))
        self.assertEqual(deletes(f), [SECRET])

    def test_a_404_on_renewal_is_asked_again(self):
        f = self.fake(_Script(
            [("L1", 3000, 0)],
            patch=lambda lease, n: (404, {"error": "not_found"}) if n <= 2
            else (200, None)))
        c = self.client(f)
        with c.lock("app/x", ttl=3) as lease:
            self.assertFalse(lease.lost.wait(4))
            self.assertGreaterEqual(f_patches(f), 3)

    def test_a_409_on_renewal_ends_the_lease(self):
        f = self.fake(_Script(
            [("L1", 1000, 0)],
            patch=lambda lease, n: (409, {"error": "stale_token"})))
        c = self.client(f)
        lease = c.acquire("app/x", ttl=1, raise_on_loss=False)
        self.assertTrue(lease.lost.wait(5 * fgenv.SLACK))
        self.assertIn("409", lease.reason)
        lease.release()

    def test_a_slow_release_at_max_hold_blocks_no_renewal(self):
        # the release of A at max_hold takes 5 s; B (TTL 1 s) is renewed
        # meanwhile
        f = self.fake(_Script([("A", 10000, 0), ("B", 1000, 0)],
                              delete_delay=5))
        c = self.client(f)
        a = c.acquire("app/a", ttl=10, max_hold=0.3, raise_on_loss=False)
        b = c.acquire("app/b", ttl=1)
        self.assertTrue(a.lost.wait(5 * fgenv.SLACK))
        self.assertFalse(b.lost.wait(3))
        b.check()

    def test_a_slow_renewal_does_not_delay_anothers_loss_signal(self):
        # A's renewal (due at 2 s) takes 8 s; B's renewals fail, so B
        # ends at 3 s: its loss is signalled then, not after A's call
        f = self.fake(_Script(
            [("A", 6000, 0), ("B", 3000, 0)],
            patch=lambda lease, n: (200, None) if lease == "A" else
            (503, {"error": "lock_store_unavailable"}),
            patch_delay=lambda lease: 8 if lease == "A" else 0))
        c = self.client(f)
        c.acquire("app/a", ttl=6, raise_on_loss=False)
        t0 = time.monotonic()
        b = c.acquire("app/b", ttl=3, raise_on_loss=False)
        self.assertTrue(b.lost.wait(10 * fgenv.SLACK))
        self.assertLess(time.monotonic() - t0, 4.5 * fgenv.SLACK)

    def test_repr_hides_a_password_in_a_url(self):
        c = Client("http://user:pw-SECRET@127.0.0.1:9/base")
        try:
            self.assertNotIn("pw-SECRET", repr(c))
            self.assertNotIn("user", repr(c))
            self.assertIn("127.0.0.1:9", repr(c))
        finally:
            c.close()


def f_patches(f):
    return len(f.requests("PATCH"))


class TestShapesAsync(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        asyncio.get_running_loop().slow_callback_duration = 60

    def fake(self, script):
        f = Scripted(script)
        self.addCleanup(f.close)
        return f

    async def test_a_late_grant_not_confirmed_is_given_back_and_asked_again(
            self):
        f = self.fake(_Script(
            [(SECRET, 600, 0.4), ("L2", 10000, 0)],
            patch=lambda lease, n: (503, {"error": "lock_store_unavailable"})
            if lease == SECRET else (200, None)))
        async with AsyncClient([f.url]) as c:
            lease = await c.acquire("app/x", ttl=0.6, wait=5)
            self.assertEqual(lease._lease, "L2")
            self.assertIn(SECRET, deletes(f))
            await lease.release()

    async def test_late_grants_never_confirmed_raise_without_the_grant(self):
        f = self.fake(_Script(
            [(SECRET, 600, 0.4)],
            patch=lambda lease, n: (503, {"error": "lock_store_unavailable"})))
        async with AsyncClient([f.url]) as c:
            with self.assertRaises(FenceError) as cm:
                await c.acquire("app/x", ttl=0.6, wait=1)
        self.assertNotIn(SECRET, _flat(cm.exception))
        self.assertNotIn("seq-", _flat(cm.exception))
        self.assertGreaterEqual(len(f.requests("POST")), 2)
        self.assertEqual(deletes(f), [SECRET] * len(f.requests("POST")))

    async def test_an_unreadable_grant_is_given_back(self):
        f = self.fake(_Script([lambda: (200, {"lease": SECRET,
                                              "token": "seven"})]))
        async with AsyncClient([f.url]) as c:
            with self.assertRaises(FenceError) as cm:
                await c.acquire("app/x", ttl=5)
        self.assertNotIn(SECRET, _flat(cm.exception))
        self.assertEqual(deletes(f), [SECRET])

    async def test_a_404_on_renewal_is_asked_again(self):
        f = self.fake(_Script(
            [("L1", 3000, 0)],
            patch=lambda lease, n: (404, {"error": "not_found"}) if n <= 2
            else (200, None)))
        async with AsyncClient([f.url]) as c:
            async with c.lock("app/x", ttl=3) as lease:
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(lease.lost.wait(), 4)
                self.assertGreaterEqual(f_patches(f), 3)

    async def test_a_slow_release_at_max_hold_blocks_no_renewal(self):
        f = self.fake(_Script([("A", 10000, 0), ("B", 1000, 0)],
                              delete_delay=5))
        async with AsyncClient([f.url]) as c:
            a = await c.acquire("app/a", ttl=10, max_hold=0.3,
                                raise_on_loss=False)
            b = await c.acquire("app/b", ttl=1)
            await asyncio.wait_for(a.lost.wait(), 5 * fgenv.SLACK)
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(b.lost.wait(), 3)
            b.check()
            await b.release()

    async def test_a_slow_renewal_does_not_delay_anothers_loss_signal(self):
        f = self.fake(_Script(
            [("A", 6000, 0), ("B", 3000, 0)],
            patch=lambda lease, n: (200, None) if lease == "A" else
            (503, {"error": "lock_store_unavailable"}),
            patch_delay=lambda lease: 8 if lease == "A" else 0))
        async with AsyncClient([f.url]) as c:
            await c.acquire("app/a", ttl=6, raise_on_loss=False)
            t0 = time.monotonic()
            b = await c.acquire("app/b", ttl=3, raise_on_loss=False)
            await asyncio.wait_for(b.lost.wait(), 10 * fgenv.SLACK)
            self.assertLess(time.monotonic() - t0, 4.5 * fgenv.SLACK)

    async def test_repr_hides_a_password_in_a_url(self):
        async with AsyncClient("http://user:pw-SECRET@127.0.0.1:9") as c:
            self.assertNotIn("pw-SECRET", repr(c))
            self.assertIn("127.0.0.1:9", repr(c))
