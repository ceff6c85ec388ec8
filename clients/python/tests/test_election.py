"""test_election.py - campaign, observe, proclaim, resign: the lock API's
leader election (docs/api.md, "Leader election")."""

import threading

from .fgenv import Case, unique, wait_until


class TestElection(Case):
    def test_campaign_observe_resign(self):
        a, b, watcher = self.client(), self.client(), self.client()
        name = unique("app/", "")
        leader_a = a.campaign(name, "http://a", ttl=10, wait=5)
        self.assertEqual(watcher.leader(name), "http://a")
        leader_a.proclaim("http://a2")
        self.assertEqual(watcher.leader(name), "http://a2")

        got = {}
        stood = threading.Thread(target=lambda: got.setdefault(
            "b", b.campaign(name, "http://b", ttl=10, wait=60)))
        seen = threading.Thread(target=lambda: got.setdefault(
            "change", watcher.observe(name, wait=60, after=leader_a.token)))
        stood.start()
        seen.start()
        try:
            # b waits in the queue: the lock stays a's
            wait_until(lambda: watcher.inspect(name)["waiters"] == 1, 10,
                       "b queued")
            self.assertTrue(leader_a.held)
            self.assertEqual(watcher.leader(name), "http://a2")
            leader_a.resign()
        finally:
            stood.join(90)
            seen.join(90)
        self.assertIn("b", got)
        self.assertIn("change", got)
        change = got["change"]
        self.assertTrue(change["token"] != leader_a.token or
                        not change["held"])
        leader_b = got["b"]
        self.assertGreater(leader_b.token, leader_a.token)
        self.assertEqual(watcher.leader(name), "http://b")
        with leader_b:
            pass
        self.assertIsNone(watcher.leader(name))

    def test_elect_scope(self):
        a = self.client()
        name = unique("app/", "")
        with a.elect(name, "me", ttl=10) as lease:
            self.assertEqual(a.leader(name), "me")
            self.assertFalse(lease.lost.is_set())
        self.assertIsNone(a.leader(name))
