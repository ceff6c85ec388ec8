"""test_cluster.py - gateways on a Redis Cluster
(--redis redis-cluster://N1,N2,...): locks spread over the masters, slots
moved under load, a master killed under load, grant and wake messages
across nodes, and the sequencer key agreed through the cluster.

Each test starts its own RedisCluster (topology.py): three masters, three
replicas, cluster-node-timeout 1000, cluster-require-full-coverage no."""

import time

import harness
from harness import LOCKS, slack
from topology import (LockLoad, RedisCluster, TopologyCase, check_load,
                      lock_slot)


@harness.own_topology("starts its own Redis Cluster; runs in the default pass")
class ClusterTests(TopologyCase):

    def cluster(self):
        return self.own(RedisCluster())

    def names_on(self, cluster, node, k, slots=None):
        """k lock names (unused by other tests) whose slot `node` serves
        (or, if given, is in `slots`)."""
        slots = set(slots if slots is not None else cluster.slots_of(node))
        out = []
        while len(out) < k:
            n = self.lock_name()
            if lock_slot(n) in slots:
                out.append(n)
        return out

    def wait_recovered(self, load, gws, names, since, quiet=2.0):
        """Every gateway has granted one of `names` after the last 503
        (answered after `since`), and `quiet` s passed without one."""
        def ok():
            un = load.unavailable(since)
            last = max((o.t_recv for o in un), default=since)
            if time.monotonic() - last < quiet:
                return False
            done = [o for o in load.successes_after(last)
                    if o.kind == "acquire" and o.name in names]
            return all(any(o.gw == g.port for o in done) for g in gws)
        self.wait_for(ok, slack(30.0), "every gateway to grant the failed "
                      "master's locks again, %.0f s without a 503" % quiet,
                      0.1)

    # -- placement ---------------------------------------------------------

    def test_locks_spread_over_every_master_each_on_the_node_owning_its_slot(self):
        c = self.cluster()
        up = self.recording_upstream()
        (gw,) = self.gateways(c.url(), up, 1)
        names = [self.lock_name() for _ in range(60)]
        grants = {n: self.acquire_ok(n, gw=gw) for n in names}
        per_master = {}
        for m in c.masters():
            keys = {k.decode() for k in m.command("KEYS", "fg:{*}:s")}
            per_master[m.port] = [n for n in names
                                  if "fg:{%s}:s" % n in keys]
        for port, held in per_master.items():
            self.assertTrue(held, "master on port %d holds none of 60 locks "
                            "(%r)" % (port, {p: len(v) for p, v in
                                             per_master.items()}))
        for n in names:
            owner = c.owner_of(n)
            self.assertEqual(owner.command("HGET", "fg:{%s}:s" % n, "t"),
                             str(grants[n]["token"]).encode(),
                             "lock %s is not on the node owning its slot" % n)
            self.release_ok(n, grants[n]["lease"], gw=gw)

    # -- resharding --------------------------------------------------------

    def test_reshard_under_load_no_5xx_and_tokens_never_repeat(self):
        c = self.cluster()
        up = self.recording_upstream()
        gws = self.gateways(c.url(), up, 2)
        src, dst, third = c.masters()
        n_slots = 2000
        moving_slots = c.slots_of(src)[:n_slots]
        moving = self.names_on(c, src, 6, moving_slots)
        staying = self.names_on(c, dst, 2) + self.names_on(c, third, 2)
        load = self.run_load(LockLoad(gws, moving + staying, threads=4))
        time.sleep(1.0)   # the cause: load runs before the reshard
        t0 = time.monotonic()
        dt = c.reshard(n_slots, src, dst)
        t1 = time.monotonic()
        time.sleep(1.5)   # the cause: and after it, on the moved slots
        load.stop()
        ops = load.snapshot()
        during = [o for o in ops if o.kind == "acquire" and o.status == 200
                  and o.name in moving and t0 <= o.t_sent <= t1]
        print("\ncluster reshard: %d slots moved in %.1f s under load, %d "
              "grants of moved locks during it, %d answers in all"
              % (n_slots, dt, len(during), len(ops)))
        for n in moving:
            self.assertEqual(c.owner_of(n).port, dst.port,
                             "lock %s did not move with its slot" % n)
        self.assertTrue(during, "no grant of a moving lock while the slots "
                        "moved: the load did not exercise the reshard")
        self.assert_no_problems(check_load(
            ops, up.records, unavailable_ok=lambda o: False), "load")
        after = [o for o in load.successes_after(t1) if o.name in moving]
        self.assertTrue(after, "no grant of a moved lock after the reshard")

    # -- failover ----------------------------------------------------------

    def test_master_killed_under_load_only_its_locks_are_unavailable_and_only_during_failover(self):
        c = self.cluster()
        up = self.recording_upstream()
        gws = self.gateways(c.url(), up, 2, ["--redis-timeout-ms", "1000"])
        victim, m1, m2 = c.masters()
        on_victim = self.names_on(c, victim, 3)
        others = self.names_on(c, m1, 2) + self.names_on(c, m2, 2)
        load = self.run_load(LockLoad(gws, on_victim + others, threads=4))
        time.sleep(1.5)   # the cause: load runs a while before the kill
        self.assertEqual(load.unavailable(0.0), [],
                         "503 answers before anything failed")
        t_kill = time.monotonic()
        c.kill_master(0)
        dt = c.wait_failover(slack(30.0))
        t_fo = t_kill + dt
        self.wait_recovered(load, gws, on_victim, t_kill)
        load.stop()
        un = load.unavailable(t_kill, names=on_victim)
        span = max((o.t_recv for o in un), default=t_kill) - t_kill
        print("\ncluster failover: unavailable %.1f s (%d answers 503; a "
              "replica took the slots %.1f s after the kill)"
              % (span, len(un), dt))
        window_end = t_fo + slack(3.0)
        self.assert_no_problems(check_load(
            load.snapshot(), up.records,
            lost_grant_ok=lambda o: o.name in on_victim and
            o.grant_sent < t_fo and o.t_recv > t_kill,
            unavailable_ok=lambda o: o.name in on_victim and
            t_kill <= o.t_recv <= window_end), "load")
        self.assertLess(span, dt + slack(3.0))

    # -- messages across nodes ---------------------------------------------

    def test_grant_and_wake_messages_reach_a_gateway_from_every_master(self):
        c = self.cluster()
        up = self.recording_upstream()
        a, b = self.gateways(c.url(), up, 2)
        for m in c.masters():
            with self.subTest(master=m.port):
                (n,) = self.names_on(c, m, 1)
                g = self.acquire_ok(n, gw=b, ttl_ms=60000)
                parked = harness.metric_value(a, "fencegate_waiters",
                                              kind="observe")
                w = self.waiter(n, gw=a, wait_ms=10000)
                obs = self.call("GET", LOCKS + n + "?wait_ms=10000&after=%d"
                                % g["token"], gw=a, timeout=20.0)
                self.wait_waiters(n, 1, gw=a)
                harness.wait_metric(a, "fencegate_waiters", parked + 1,
                                    slack(3.0), kind="observe")
                self.assertFalse(obs.done, "observer answered early: %r"
                                 % (obs.resp,))
                t_rel = time.monotonic()
                self.release_ok(n, g["lease"], gw=b)
                r = w.result(slack(5.0))
                self.assertEqual(r.status, 200, r)
                self.assertGreater(r.json["token"], g["token"])
                # ticks come every waiter-liveness-ms / 3 (3.3 s): only the
                # grant message is this fast
                self.assertLess(w.t_end - t_rel, slack(1.0))
                o = obs.result(slack(5.0))
                self.assertEqual(o.status, 200, o)
                self.assertEqual((o.json["held"], o.json["token"]),
                                 (True, r.json["token"]))
                self.assertLess(obs.t_end - t_rel, slack(1.0))
                self.release_ok(n, r.json["lease"], gw=a)

    # -- the sequencer key -------------------------------------------------

    def test_two_gateways_without_key_file_verify_each_others_sequencers(self):
        c = self.cluster()
        up = self.recording_upstream()
        (a,) = self.gateways(c.url(), up, 1)
        # the other one knows a single seed, a replica, by the alias scheme
        replica = c.replicas_of(c.masters()[0])[0]
        (b,) = self.gateways("cluster://127.0.0.1:%d" % replica.port, up, 1)
        for x, y in ((a, b), (b, a)):
            n = self.lock_name()
            g = self.acquire_ok(n, gw=x)
            self.assertEqual(self.check_ok(g["sequencer"], gw=y),
                             {"valid": True, "name": n, "token": g["token"],
                              "mode": "exclusive"})
            r = self.req("PUT", "/" + n, gw=y, raw=("%s %d" % (
                n, g["token"])).encode(),
                headers={"Fencing-Token": g["sequencer"]})
            self.assertEqual(r.status, 200, r)
            self.release_ok(n, g["lease"], gw=y)
        self.assertEqual(c.keys("fg:hmac-key"), ["fg:hmac-key"])
