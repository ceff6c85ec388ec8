"""test_faults.py - a hold through a gateway that stops, or that goes
silent (accepts and never answers), a Redis that stalls for less than
the lease, and a Redis that comes back empty."""

from fencegate import LeaseLost, StaleToken, error_for

from . import fgenv
from .fakegw import SilentRelay
from .fgenv import Case, control, raw_put, store_get, unique, wait_until


class TestGatewayFailover(Case):
    def test_renewal_fails_over_to_the_second_gateway(self):
        c = self.client()
        name = unique()
        self.assertEqual(c.gateway, self.gws[0])
        with c.lock(name, ttl=1.5) as lease:
            control("gateway/0/stop")
            self.addCleanup(control, "gateway/0/start")
            # three TTLs with the first gateway gone: only renewals
            # through the second keep the lease
            self.assertFalse(lease.lost.wait(4.5))
            lease.check()
            self.assertEqual(c.gateway, self.gws[1])
            st = c.inspect(name)
            self.assertTrue(st["held"])
            self.assertEqual(st["token"], lease.token)
            s = lease.requests_session()
            self.addCleanup(s.close)
            r = s.put(self.gws[1] + "/" + name, data=b"still held")
            self.assertIn(r.status_code, (201, 204))
        self.assertFalse(c.inspect(name)["held"])
        self.assertEqual(store_get(name), (200, b"still held"))

    def test_a_silent_gateway_leaves_the_second_time_to_renew(self):
        # the first gateway answers the grant, then accepts and never
        # answers: each renewal attempt gets only its share of the time
        # left, so the second gateway is asked before the lease's end
        relay = SilentRelay(self.gws[0])
        self.addCleanup(relay.close)
        c = self.client([relay.url, self.gws[1]])
        name = unique()
        with c.lock(name, ttl=3) as lease:
            self.assertEqual(c.gateway, relay.url)
            relay.silence()
            self.assertFalse(lease.lost.wait(6))
            lease.check()
            self.assertEqual(c.gateway, self.gws[1])
            st = c.inspect(name)
            self.assertTrue(st["held"])
            self.assertEqual(st["token"], lease.token)
        self.assertFalse(c.inspect(name)["held"])

    def test_a_dead_gateway_first_in_the_list(self):
        c = self.client([fgenv.var("FG_TEST_DEAD"), self.gws[1]])
        name = unique()
        with c.lock(name, ttl=5):
            self.assertEqual(c.gateway, self.gws[1])
            self.assertTrue(c.inspect(name)["held"])


class TestRedisStall(Case):
    def test_a_stall_shorter_than_the_lease_loses_nothing(self):
        c = self.client()
        name = unique()
        with c.lock(name, ttl=4) as lease:
            control("redis/stall?ms=1500")
            # renewals fall in the stall and are asked again
            self.assertFalse(lease.lost.wait(6))
            lease.check()
            s = lease.requests_session()
            self.addCleanup(s.close)
            r = s.put(self.gws[0] + "/" + name, data=b"after the stall")
            self.assertIn(r.status_code, (201, 204))
        self.assertEqual(store_get(name), (200, b"after the stall"))


class TestRedisRestart(Case):
    def test_an_empty_redis_loses_the_lease_and_refuses_its_write(self):
        c = self.client()
        name = unique()
        gw = self.gws[0]
        with self.assertRaises(LeaseLost):
            with c.lock(name, ttl=2) as lease:
                s = lease.requests_session()
                self.addCleanup(s.close)
                r = s.put(gw + "/" + name, data=b"before")
                self.assertIn(r.status_code, (201, 204))
                control("redis/restart")
                # the next renewal finds no lease
                self.assertTrue(lease.lost.wait(10 * fgenv.SLACK))
                with self.assertRaises(LeaseLost):
                    s.put(gw + "/" + name, data=b"after")
                # the gateway refuses the old sequencer too, once it is
                # back on the new Redis: its grant ended with no newer
                # token known
                st, body = wait_until(
                    lambda: (lambda a: a if a[0] != 503 else None)(
                        raw_put(gw, name, b"after", lease.sequencer)),
                    20, "the gateway back on Redis")
                self.assertEqual(st, 409, body)
                self.assertIsInstance(error_for(st, body), StaleToken)
        self.assertEqual(store_get(name), (200, b"before"))
