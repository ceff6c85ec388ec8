"""test_lease_truth_replicas.py - contract v1.1.1, "an answer that was lost
leaves nothing behind", with --redis-replicas (docs/safety.md, sections 9
and 10.2), against a real primary and one replica of it:

- A connection lost while the gateway waits in WAIT for the replica's
  acknowledgement: the acquire is answered 503 lock_store_unavailable and
  the grant it made in Redis is given back within about a second (the lock
  is not held by nobody for its TTL), counted in
  fencegate_lock_given_back_total.
- WAIT falling short: that the grant is released and answered 503 is
  test_sentinel.py's test_grant_without_replica_acknowledgement_is_undone_
  and_answered_503; here only that it is counted in
  fencegate_lock_given_back_total{reason="replicas"}.

The replica is kept from acknowledging by SIGSTOP: a stopped replica sends
no REPLCONF ACK, so WAIT blocks until its own timeout, every time.

Each test starts its own primary and replica (ReplicatedRedis below), so
the class runs in the default pass only.
"""

import time

import harness
from harness import RedisServer, RespClient, SetupError, slack, wait_until
from test_lease_truth import metric_sum
from topology import TopologyCase

GIVEN_BACK = "fencegate_lock_given_back_total"


class ReplicatedRedis:
    """A primary and one replica of it (--replicaof), each a
    harness.RedisServer on a free loopback port; started with
    TopologyCase.own()."""

    def __init__(self):
        self.primary = RedisServer(extra_args=[
            "--repl-diskless-sync-delay", "0"])
        self.replica = RedisServer(extra_args=[
            "--replicaof", "127.0.0.1", str(self.primary.port)])
        self.nodes = [self.primary, self.replica]

    def url(self):
        return self.primary.url()

    def start(self, timeout=None):
        timeout = timeout or slack(20.0)
        try:
            for n in self.nodes:
                n.start()
            self.wait_caught_up(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_caught_up(self, timeout):
        """A write on the primary, then WAIT 1 on the same connection:
        returns once the replica acknowledged it (a replica just synced
        acknowledges nothing until its first REPLCONF ACK, up to a second
        later). Bounded by `timeout`."""
        with RespClient(self.primary.port, timeout=timeout + 5.0) as c:
            c.command("INCR", "fg-test:replica-sync")
            n = c.command("WAIT", 1, int(timeout * 1000))
        if n < 1:
            raise SetupError("the replica of port %d did not acknowledge a "
                             "write within %.1f s" % (self.primary.port,
                                                      timeout))

    def alive(self):
        return all(n.alive() for n in self.nodes)

    def stop(self):
        for n in reversed(self.nodes):
            n.stop()


@harness.own_topology("starts its own primary and replica; runs in the "
                      "default pass")
class ReplicaAckLostAnswerTests(TopologyCase):

    def replicated(self):
        return self.own(ReplicatedRedis())

    def holders_on(self, node, name):
        """The holder fields of lock `name` on one Redis."""
        fields = node.command("HKEYS", "fg:{%s}:s" % name)
        return [f for f in fields if f.startswith(b"h:")]

    def paused(self, node):
        """SIGSTOPs a node until the test's cleanup (or resume_now())."""
        node.pause()
        state = {"paused": True}

        def resume_now():
            if state["paused"]:
                state["paused"] = False
                node.resume()
        self.addCleanup(resume_now)
        return resume_now

    def waiting_clients(self, node):
        """The ids of the clients of `node` blocked in WAIT now (cmd is a
        client's last command: flag b tells one still blocked in it)."""
        text = node.command("CLIENT", "LIST").decode("utf-8", "replace")
        out = []
        for line in text.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if f.get("cmd") == "wait" and "b" in f.get("flags", ""):
                out.append(f["id"])
        return out

    # -- a connection lost during WAIT -------------------------------------

    def test_connection_lost_during_wait_leaves_the_lock_free(self):
        wait_ms = 10000          # WAIT's bound: far past the kill below
        rr = self.replicated()
        up = self.recording_upstream()
        (gw,) = self.gateways(rr.url(), up, 1, [
            "--redis-timeout-ms", str(wait_ms + 5000),
            "--redis-replicas", "1",
            "--redis-replicas-timeout-ms", str(wait_ms)])
        name = self.lock_name()
        g0 = self.acquire_ok(name, gw=gw)        # replica acknowledges
        self.release_ok(name, g0["lease"], gw=gw)
        before = metric_sum(gw, GIVEN_BACK)

        resume = self.paused(rr.replica)
        call = self.call("POST", name, body={"ttl_ms": 60000}, gw=gw,
                         timeout=wait_ms / 1000.0 + slack(10.0))
        ids = self.wait_for(lambda: self.waiting_clients(rr.primary),
                            slack(5.0), "the gateway's connection to block "
                            "in WAIT on the primary")
        self.assertEqual(len(ids), 1, "clients in WAIT: %r" % ids)
        self.assertFalse(call.done, "the acquire was answered while its "
                         "WAIT was still blocked: %r" % call.resp)
        self.assertEqual(len(self.holders_on(rr.primary, name)), 1,
                         "the acquire blocked in WAIT has no grant in Redis: "
                         "the test would not lose one")
        t_kill = time.monotonic()
        self.assertEqual(rr.primary.command("CLIENT", "KILL", "ID", ids[0]),
                         1, "CLIENT KILL ID %s" % ids[0])

        r = call.result(slack(5.0))
        self.assert_error(r, 503, "lock_store_unavailable",
                          "acquire whose connection was lost during WAIT")
        self.assertLess(call.t_end - t_kill, wait_ms / 1000.0,
                        "answered by WAIT's timeout, not by the lost "
                        "connection")

        # within a second (plus slack) of the kill the grant is given back:
        # the lock is free, nothing of it held in Redis, and it is counted
        limit = t_kill + 1.0 + slack(1.0)
        last = {}

        def free():
            # a 503 while the gateway connects again counts as not yet
            r = self.inspect(name, gw=gw, timeout=slack(5.0))
            last["s"] = r.json if r.status == 200 else r
            return r.status == 200 and not r.json["held"] and \
                r.json["waiters"] == 0
        if not wait_until(free, max(0.0, limit - time.monotonic()), 0.05):
            self.fail("lock %s still held %.1f s after the connection "
                      "blocked in WAIT was lost: %r"
                      % (name, time.monotonic() - t_kill, last.get("s")))
        self.assertEqual(self.holders_on(rr.primary, name), [],
                         "the lost grant is still held in Redis")
        grew = wait_until(lambda: metric_sum(gw, GIVEN_BACK) > before,
                          max(0.0, limit - time.monotonic()), 0.05)
        self.assertTrue(grew, "%s (summed over its reason labels) did not "
                        "grow: %s -> %s" % (GIVEN_BACK, before,
                                            metric_sum(gw, GIVEN_BACK)))

        # the replica back, the lock is granted at once, not 409 until the
        # lost grant's 60 s run out
        resume()
        rr.wait_caught_up(slack(10.0))
        r = self.acquire(name, gw=gw, body={"ttl_ms": 5000},
                         timeout=wait_ms / 1000.0 + slack(5.0))
        self.assertEqual(r.status, 200, "acquire after the lost grant was "
                         "given back: %r" % r)
        self.assertGreater(r.json["token"], g0["token"])

    # -- WAIT falls short ---------------------------------------------------

    def test_grant_wait_falls_short_of_is_counted_as_given_back_for_replicas(self):
        rr = self.replicated()
        up = self.recording_upstream()
        (gw,) = self.gateways(rr.url(), up, 1, [
            "--redis-timeout-ms", "3000",
            "--redis-replicas", "1", "--redis-replicas-timeout-ms", "1500"])
        name = self.lock_name()
        # the replica acknowledges (WAIT's bound leaves a loaded machine's
        # replica time to; only the stopped replica below must fall short)
        g0 = self.acquire_ok(name, gw=gw)
        self.release_ok(name, g0["lease"], gw=gw)
        labels = {"reason": "replicas"}
        before = metric_sum(gw, GIVEN_BACK, labels)

        self.paused(rr.replica)
        r = self.acquire(name, gw=gw, body={"ttl_ms": 60000},
                         timeout=slack(10.0))
        self.assert_error(r, 503, "lock_store_unavailable",
                          "acquire with the replica stopped")
        # counted once Redis has answered the give-back, which the gateway
        # sends after the 503 (and again until Redis answers)
        wait_until(lambda: metric_sum(gw, GIVEN_BACK, labels) > before,
                   slack(10.0), 0.05)
        after = metric_sum(gw, GIVEN_BACK, labels)
        self.assertEqual(after, before + 1,
                         '%s{reason="replicas"} after one grant WAIT fell '
                         "short of: %s -> %s" % (GIVEN_BACK, before, after))
