"""test_aio.py - fencegate.aio: `async with`, the asyncio renewer and
Event, release of a cancelled task's lock."""

import asyncio
import unittest

import httpx

from fencegate import (Forbidden, LeaseLost, NotAcquired, StaleToken,
                       TLSError, error_for)
from fencegate.aio import AsyncClient

from . import fgenv
from .fakegw import SilentRelay
from .fgenv import raw_put, store_get, unique


class TestAsync(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        # the test loop runs in debug mode: its notes on slow steps (a
        # loaded machine) would break unittest's one line per test
        asyncio.get_running_loop().slow_callback_duration = 60
        self.gws = fgenv.gateways()
        self.c = AsyncClient(self.gws)
        self.other = AsyncClient(self.gws)

    async def asyncTearDown(self):
        await self.c.aclose()
        await self.other.aclose()

    async def test_cancelled_task_releases(self):
        name = unique()
        inside = asyncio.Event()
        ran_after = []

        async def holder():
            async with self.c.lock(name, ttl=30):
                inside.set()
                await asyncio.sleep(300)
                ran_after.append(1)

        t = asyncio.ensure_future(holder())
        await asyncio.wait_for(inside.wait(), 30)
        self.assertTrue((await self.c.inspect(name))["held"])
        t.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await t
        self.assertEqual(ran_after, [])
        st = await self.other.inspect(name)
        self.assertFalse(st["held"])

    async def test_timed_out_acquire_never_runs_the_body(self):
        name = unique()
        async with self.c.lock(name, ttl=10):
            ran = []
            with self.assertRaises(NotAcquired):
                async with self.other.lock(name, wait=0.3):
                    ran.append(1)
            self.assertEqual(ran, [])

    async def test_renews_and_stamps_httpx(self):
        name = unique()
        url = self.gws[1] + "/" + name
        async with self.c.lock(name, ttl=1.2) as lease:
            # three TTLs: only the renewer task keeps it
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(lease.lost.wait(), 3.6)
            async with httpx.AsyncClient(auth=lease.httpx_auth()) as h:
                r = await h.put(url, content=b"async put")
                self.assertIn(r.status_code, (201, 204), r.text)
        self.assertEqual(store_get(name), (200, b"async put"))

    async def test_paused_renewals_signal_loss_before_the_write(self):
        name = unique()
        url = self.gws[0] + "/" + name
        with self.assertRaises(LeaseLost):
            async with self.c.lock(name, ttl=1) as la:
                self.c._pause_renewals(True)
                async with self.other.lock(name, ttl=10, wait=20) as lb:
                    with self.assertRaises(LeaseLost):
                        la.check()
                    await asyncio.wait_for(la.lost.wait(),
                                           10 * fgenv.SLACK)
                    async with httpx.AsyncClient(
                            auth=lb.httpx_auth()) as h:
                        r = await h.put(url, content=b"from b")
                        self.assertIn(r.status_code, (201, 204))
                    async with httpx.AsyncClient(
                            auth=la.httpx_auth()) as h:
                        with self.assertRaises(LeaseLost):
                            await h.put(url, content=b"late a")
                    st, body = raw_put(self.gws[0], name, b"late a",
                                       la.sequencer)
                    self.assertIsInstance(error_for(st, body), StaleToken)
        self.c._pause_renewals(False)
        self.assertEqual(store_get(name), (200, b"from b"))

    async def test_max_hold(self):
        name = unique()
        async with self.c.lock(name, ttl=10, max_hold=0.3,
                               raise_on_loss=False) as lease:
            await asyncio.wait_for(lease.lost.wait(), 10 * fgenv.SLACK)
            self.assertIn("max_hold", lease.reason)
        self.assertFalse((await self.other.inspect(name))["held"])

    async def test_max_hold_counts_from_the_grant_not_the_wait(self):
        name = unique()
        held = await self.other.acquire(name, ttl=10)

        async def let_go():
            await asyncio.sleep(2)   # the other holder's hold
            await held.release()
        t = asyncio.ensure_future(let_go())
        lease = await self.c.acquire(name, ttl=10, wait=10, max_hold=1.5,
                                     raise_on_loss=False)
        got = asyncio.get_running_loop().time()
        await t
        self.assertGreater(lease.token, held.token)
        # the body gets its 1.5 s, not what was left after the wait
        with self.assertRaises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(lease.lost.wait()), 0.75)
        lease.check()
        await asyncio.wait_for(lease.lost.wait(), 10 * fgenv.SLACK)
        self.assertIn("max_hold", lease.reason)
        self.assertGreaterEqual(asyncio.get_running_loop().time() - got,
                                1.0)
        await lease.release()

    async def test_inspect_observe_ls(self):
        prefix = unique("app/", "/")
        name = prefix + "x"
        async with self.c.lock(name, ttl=10, value="v") as lease:
            st = await self.other.inspect(name)
            self.assertEqual((st["held"], st["token"], st["value"]),
                             (True, lease.token, "v"))
            self.assertEqual(await self.other.leader(name), "v")
            names = [e["name"] async for e in self.other.ls(prefix)]
            self.assertEqual(names, [name])
            watch = asyncio.ensure_future(
                self.other.observe(name, wait=60, after=lease.token))
            await asyncio.sleep(0)
        st = await asyncio.wait_for(watch, 60)
        self.assertFalse(st["held"])

    async def test_key_and_tls(self):
        gw, ca = fgenv.var("FG_TEST_AUTH_GATEWAY"), fgenv.var("FG_TEST_CA")
        async with AsyncClient([gw], key=fgenv.var("FG_TEST_KEY"),
                               ca=ca) as c:
            name = unique()
            async with c.lock(name, ttl=5):
                self.assertTrue((await c.inspect(name))["held"])
        async with AsyncClient([gw], key=fgenv.var("FG_TEST_OTHER_KEY"),
                               ca=ca) as c:
            with self.assertRaises(Forbidden):
                await c.acquire(unique(), ttl=5)

    async def test_a_tls_failure_moves_on_to_the_next_gateway(self):
        # no CA given: the system's CAs do not verify the TLS gateway
        gw = fgenv.var("FG_TEST_AUTH_GATEWAY")
        async with AsyncClient([gw, self.gws[1]]) as c:
            name = unique()
            async with c.lock(name, ttl=5):
                self.assertEqual(c.gateway, self.gws[1])
                self.assertTrue((await c.inspect(name))["held"])
        async with AsyncClient([gw]) as c:
            with self.assertRaises(TLSError):
                await c.inspect(unique())

    async def test_a_dead_gateway_first_in_the_list(self):
        async with AsyncClient([fgenv.var("FG_TEST_DEAD"), self.gws[1]]) \
                as c:
            name = unique()
            async with c.lock(name, ttl=5):
                self.assertEqual(c.gateway, self.gws[1])
                self.assertTrue((await c.inspect(name))["held"])

    async def test_a_silent_gateway_leaves_the_second_time_to_renew(self):
        relay = SilentRelay(self.gws[0])
        self.addCleanup(relay.close)
        async with AsyncClient([relay.url, self.gws[1]]) as c:
            name = unique()
            async with c.lock(name, ttl=3) as lease:
                self.assertEqual(c.gateway, relay.url)
                relay.silence()
                # two TTLs with the first gateway silent
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(lease.lost.wait(), 6)
                lease.check()
                self.assertEqual(c.gateway, self.gws[1])
                st = await self.other.inspect(name)
                self.assertEqual((st["held"], st["token"]),
                                 (True, lease.token))
        self.assertFalse((await self.other.inspect(name))["held"])
