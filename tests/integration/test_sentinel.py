"""test_sentinel.py - gateways on a Redis Sentinel set
(--redis redis-sentinel://S1,S2,S3/mymaster): a failover under load, a
grant the failover loses, replica acknowledgement (--redis-replicas), and
masters demoted while gateways use them.

Each test starts its own SentinelSet (topology.py): a primary, two
replicas, three sentinels with down-after-milliseconds 1000."""

import time

import harness
from harness import slack
from topology import (LockLoad, SentinelSet, TopologyCase, check_load,
                      node_info)

REDIS_TIMEOUT = ["--redis-timeout-ms", "1000"]

# A gateway asks the Sentinels again once a second (docs/safety.md, section
# 9): a master demoted while alive can take its grants until then, and
# those grants are lost with what it wrote.
LOOK_AGAIN_S = 1.0


def grants_lost_before(watch, t_new):
    """Grants are replicated asynchronously in these tests, so one the
    killed master took may be lost: those asked for before the new master
    was named (t_new). Sentinels sometimes switch twice after one loss
    (two leaders elected in two epochs, the later one winning): a grant the
    first new master took is then lost too, and the gateways may take some
    there until they look again. The bound moves to the last switch."""
    masters = watch.masters()
    if len(masters) <= 1:
        return t_new
    print("\nsentinel failover: the sentinels named %d masters in turn "
          "after one loss" % len(masters))
    return max(t_new, watch.last_change(t_new)) + slack(LOOK_AGAIN_S + 0.5)


def fcall_stats(node):
    """(calls, rejected calls) of FCALL on one Redis."""
    info = node_info(node.port, "commandstats")
    fields = dict(kv.split("=") for kv in
                  info.get("cmdstat_fcall", "calls=0").split(","))
    return int(fields.get("calls", 0)), int(fields.get("rejected_calls", 0))


@harness.own_topology("starts its own Sentinel set; runs in the default pass")
class SentinelTests(TopologyCase):

    def sentinel(self):
        return self.own(SentinelSet())

    def wait_recovered(self, load, gws, since, quiet=2.0, timeout=None):
        """Waits until every gateway has served a grant after the last 503
        answered after `since`, and `quiet` s passed without a 503."""
        def ok():
            un = load.unavailable(since)
            last = max((o.t_recv for o in un), default=since)
            if time.monotonic() - last < quiet:
                return False
            return all(any(o.kind == "acquire" and o.gw == g.port
                           for o in load.successes_after(last))
                       for g in gws)
        self.wait_for(ok, timeout or slack(30.0),
                      "every gateway to serve again, %.0f s without a 503"
                      % quiet, 0.1)

    # -- failover under load -----------------------------------------------

    def test_primary_killed_under_load_gateways_recover_and_tokens_never_repeat(self):
        s = self.sentinel()
        up = self.recording_upstream()
        gws = self.gateways(s.url(), up, 2, REDIS_TIMEOUT)
        load = self.run_load(LockLoad(gws, [self.lock_name()
                                            for _ in range(6)], threads=4))
        time.sleep(1.5)   # the cause: load runs a while before the kill
        self.assertTrue(load.grants(), "no grant before the failover")
        self.assertEqual(load.unavailable(0.0), [],
                         "503 answers before anything failed")
        old = s.master_node()
        watch = s.watch_master()
        t_kill = time.monotonic()
        old.kill()
        s.wait_new_master(old.port, slack(30.0))
        t_new = time.monotonic()
        self.wait_recovered(load, gws, t_kill)
        load.stop()
        lost_before = grants_lost_before(watch.stop(), t_new)
        un = load.unavailable(t_kill)
        span = max((o.t_recv for o in un), default=t_kill) - t_kill
        print("\nsentinel failover: unavailable %.1f s (%d answers 503; "
              "new master named %.1f s after the kill)"
              % (span, len(un), t_new - t_kill))
        self.assertLess(span, (t_new - t_kill) + slack(5.0),
                        "the gateways answered 503 long after the new "
                        "master was named")
        self.assert_no_problems(check_load(
            load.snapshot(), up.records,
            lost_grant_ok=lambda o: o.grant_sent < lost_before and
            o.t_recv > t_kill,
            unavailable_ok=lambda o: o.t_recv >= t_kill), "load")
        self.assertTrue(load.successes_after(t_new, gws[0].port) and
                        load.successes_after(t_new, gws[1].port))

    # -- a grant the failover loses ----------------------------------------

    def test_grant_lost_in_failover_is_refused_as_stale(self):
        s = self.sentinel()
        up = self.recording_upstream()
        (gw,) = self.gateways(s.url(), up, 1, REDIS_TIMEOUT)
        name = self.lock_name()
        g0 = self.acquire_ok(name, gw=gw)
        self.release_ok(name, g0["lease"], gw=gw)
        primary = s.master_node()
        s.wait_replicas_synced(primary, slack(5.0))
        # The replicas stop, and their links are cut, so that nothing the
        # primary does from now on can reach them (bytes already in a
        # stopped replica's socket would still be read after SIGCONT).
        paused = s.pause_replicas()
        try:
            primary.command("CLIENT", "KILL", "TYPE", "replica")
            g = self.acquire_ok(name, gw=gw, ttl_ms=60000)
            primary.kill()
        finally:
            s.resume(paused)
        new = s.node(s.wait_new_master(primary.port, slack(30.0)))
        self.assertNotEqual(new.command("HGET", "fg:{%s}:s" % name, "t"),
                            str(g["token"]).encode(),
                            "the grant reached the new master: the test did "
                            "not lose it")
        r = self.retrying(lambda: self.req(
            "PUT", "/" + name, gw=gw, raw=b"late write",
            headers={"Fencing-Token": g["sequencer"]}), "fenced write")
        self.assert_error(r, 409, "stale_token")
        self.assertEqual([x for x in up.records if x["body"] == b"late write"],
                         [], "the lost grant's write reached the upstream")
        self.assertIs(self.check_ok(g["sequencer"], gw=gw)["valid"], False)
        r = self.retrying(lambda: self.acquire(name, gw=gw, body={}),
                          "acquire")
        self.assertEqual(r.status, 200, r)
        g2 = r.json
        self.assertGreater(g2["token"], g["token"])
        r = self.req("PUT", "/" + name, gw=gw, raw=b"late write",
                     headers={"Fencing-Token": g["sequencer"]})
        self.assert_error(r, 409, "stale_token")
        self.assertEqual((r.json.get("token"), r.json.get("current")),
                         (g["token"], g2["token"]), r)
        w = self.req("PUT", "/" + name, gw=gw, raw=b"new write",
                     headers={"Fencing-Token": g2["sequencer"]})
        self.assertEqual(w.status, 200, w)
        self.assertEqual([x["token"] for x in up.records
                          if x["path"] == "/" + name],
                         [str(g2["token"])])

    # -- replica acknowledgement -------------------------------------------

    def holders_on(self, node, name):
        """The holder fields of lock `name` on one Redis."""
        fields = node.command("HKEYS", "fg:{%s}:s" % name)
        return [f for f in fields if f.startswith(b"h:")]

    def test_grant_without_replica_acknowledgement_is_undone_and_answered_503(self):
        s = self.sentinel()
        up = self.recording_upstream()
        (gw,) = self.gateways(s.url(), up, 1, REDIS_TIMEOUT + [
            "--redis-replicas", "1", "--redis-replicas-timeout-ms", "200"])
        names = [self.lock_name() for _ in range(3)]
        last = {}
        for n in names:
            g = self.acquire_ok(n, gw=gw)
            last[n] = g["token"]
            self.release_ok(n, g["lease"], gw=gw)
        n = names[0]
        primary = s.master_node()
        paused = s.pause_replicas()
        try:
            r = self.acquire(n, gw=gw, body={"ttl_ms": 30000})
            self.assert_error(r, 503, "lock_store_unavailable",
                              "acquire with both replicas stopped")
            self.assertIsNotNone(r.header("Retry-After"))
            self.assertLess(r.elapsed, 0.2 + slack(2.0))
            st = self.state(n, gw=gw)
            self.assertFalse(st["held"], st)
            self.assertEqual(self.holders_on(primary, n), [],
                             "the unacknowledged grant was left in Redis")
            r = self.acquire(names[1], gw=gw, body={"wait_ms": 1000})
            self.assert_error(r, 503, "lock_store_unavailable",
                              "blocking acquire with both replicas stopped")
            self.assertFalse(self.state(names[1], gw=gw)["held"])
        finally:
            s.resume(paused)
        s.wait_replicas_synced(primary, slack(10.0))
        for n in names[:2]:
            g = self.acquire_ok(n, gw=gw)
            self.assertGreater(g["token"], last[n])
            self.release_ok(n, g["lease"], gw=gw)

    def test_more_replicas_asked_for_than_exist_refuses_every_grant(self):
        s = self.sentinel()
        up = self.recording_upstream()
        (plain,) = self.gateways(s.url(), up, 1, REDIS_TIMEOUT)
        (three,) = self.gateways(s.url(), up, 1, REDIS_TIMEOUT + [
            "--redis-replicas", "3", "--redis-replicas-timeout-ms", "200"])
        primary = s.master_node()
        for _ in range(3):
            n = self.lock_name()
            r = self.acquire(n, gw=three, body={"ttl_ms": 30000})
            self.assert_error(r, 503, "lock_store_unavailable")
            self.assertFalse(self.state(n, gw=plain)["held"])
            self.assertEqual(self.holders_on(primary, n), [])
            g = self.acquire_ok(n, gw=plain)
            self.release_ok(n, g["lease"], gw=plain)

    # -- demoted masters ---------------------------------------------------

    def test_restarted_old_primary_rejoins_as_replica_and_is_never_written(self):
        s = self.sentinel()
        up = self.recording_upstream()
        gws = self.gateways(s.url(), up, 2, REDIS_TIMEOUT)
        load = self.run_load(LockLoad(gws, [self.lock_name()
                                            for _ in range(4)], threads=3))
        time.sleep(1.0)   # the cause: load runs a while before the kill
        old = s.master_node()
        watch = s.watch_master()
        t_kill = time.monotonic()
        old.kill()
        s.wait_new_master(old.port, slack(30.0))
        t_new = time.monotonic()
        self.wait_recovered(load, gws, t_kill, quiet=1.0)
        t_restart = time.monotonic()
        s.restart_node(old)
        self.wait_for(lambda: s.role(old) == "slave" and node_info(
            old.port, "replication").get("master_link_status") == "up",
            slack(40.0), "the old primary to rejoin as a replica", 0.2)
        t_demoted = time.monotonic()
        # the cause: load runs on with the old primary back as a replica,
        # which must never be written
        time.sleep(2.0)
        load.stop()
        lost_before = grants_lost_before(watch.stop(), t_new)
        ops = load.snapshot()
        self.assert_no_problems(check_load(
            ops, up.records,
            lost_grant_ok=lambda o: o.grant_sent < lost_before and
            o.t_recv > t_kill,
            unavailable_ok=lambda o: o.t_recv < t_restart), "load")
        after = [o for o in ops if o.t_sent >= t_demoted]
        self.assertTrue([o for o in after if o.status == 200],
                        "no grant after the old primary rejoined")
        calls, rejected = fcall_stats(old)
        readonly = node_info(old.port, "errorstats").get(
            "errorstat_READONLY", "count=0")
        self.assertEqual((calls, rejected), (0, 0),
                         "gateways ran lock scripts on the restarted old "
                         "primary (%s READONLY errors)" % readonly)

    def test_master_demoted_while_in_use_gateways_follow_the_new_master(self):
        # SENTINEL FAILOVER: the old master stays up and becomes a replica
        # under the gateways' connections; writes there answer -READONLY.
        s = self.sentinel()
        up = self.recording_upstream()
        gws = self.gateways(s.url(), up, 2, REDIS_TIMEOUT)
        load = self.run_load(LockLoad(gws, [self.lock_name()
                                            for _ in range(4)], threads=3))
        time.sleep(1.0)   # the cause: load runs a while before the failover
        old = s.master_node()
        t0 = time.monotonic()
        s.sentinel_command("SENTINEL", "FAILOVER", s.name)
        s.wait_new_master(old.port, slack(30.0))
        t_new = time.monotonic()
        self.wait_for(lambda: s.role(old) == "slave", slack(30.0),
                      "the old master to become a replica", 0.1)
        self.wait_recovered(load, gws, t0)
        load.stop()
        un = load.unavailable(t0)
        span = max((o.t_recv for o in un), default=t0) - t0
        print("\nsentinel manual failover: unavailable %.1f s (%d answers "
              "503; new master named %.1f s after the request)"
              % (span, len(un), t_new - t0))
        self.assertLess(span, (t_new - t0) + slack(5.0),
                        "the gateways answered 503 long after the switch")
        self.assert_no_problems(check_load(
            load.snapshot(), up.records,
            lost_grant_ok=lambda o: o.t_recv > t0 and
            o.grant_sent < t_new + slack(LOOK_AGAIN_S + 0.5),
            unavailable_ok=lambda o: o.t_recv >= t0), "load")
        lost = [o for o in load.snapshot() if o.status in (409, 410) and
                o.kind != "acquire"]
        if lost:
            print("sentinel manual failover: %d writes/releases of grants "
                  "the demoted master took after the switch (last grant "
                  "asked for %.2f s after the new master was named)"
                  % (len(lost), max(o.grant_sent for o in lost) - t_new))
        readonly = node_info(old.port, "errorstats").get(
            "errorstat_READONLY", "count=0")
        # gateways keep working on the new master: no -READONLY loop
        later = time.monotonic()
        for g in gws:
            n = self.lock_name()
            r = self.acquire(n, gw=g, body={})
            self.assertEqual(r.status, 200, "after the switch (%s READONLY "
                             "errors on the old master): %r" % (readonly, r))
        self.assertEqual(node_info(old.port, "errorstats").get(
            "errorstat_READONLY", "count=0"), readonly,
            "requests after recovery still reached the demoted master")
        self.assertLess(time.monotonic() - later, slack(2.0))

    # -- start-up ----------------------------------------------------------

    def test_gateway_started_before_the_sentinels_finds_the_master_when_they_start(self):
        s = SentinelSet()
        up = self.recording_upstream()
        gw = self.start_gateway(s.url(), up.port, REDIS_TIMEOUT)
        h = self.health(gw)
        self.assertEqual(h.status, 503, h)
        self.assertEqual(h.json, {"redis": "down", "upstream": "up"})
        self.own(s)
        self.assertTrue(gw.wait_healthy(slack(10.0)), "the gateway did not "
                        "find the master within 10 s of the Sentinels "
                        "starting: %r" % self.health(gw))
        name = self.lock_name()
        g = self.acquire_ok(name, gw=gw)
        self.assertEqual(s.master_node().command(
            "HGET", "fg:{%s}:s" % name, "t"), str(g["token"]).encode())

    # -- the URL -----------------------------------------------------------

    def test_sentinel_alias_scheme_writes_to_the_master_the_sentinels_name(self):
        s = self.sentinel()
        up = self.recording_upstream()
        (gw,) = self.gateways(s.url("sentinel"), up, 1, REDIS_TIMEOUT)
        name = self.lock_name()
        g = self.acquire_ok(name, gw=gw)
        self.assertEqual(s.master_node().command(
            "HGET", "fg:{%s}:s" % name, "t"), str(g["token"]).encode())
        self.release_ok(name, g["lease"], gw=gw)
