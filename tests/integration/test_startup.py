"""test_startup.py - a gateway just started serves its first lock call
(real redis-server, or a Redis Cluster with --redis-mode cluster): the
loops start accepting once the sequencer key is known (agreed through
Redis without a key file) and so is where the lock state lives (a
Cluster's slot map), and health says Redis is up only once every loop can
take a call, so neither a first acquire nor one right after the first
healthy answer meets a 503 while Redis is fine."""

import time

import harness
import storage
from harness import LOCKS, TestCase, http_request, slack


class StartupTests(TestCase):

    uses_shared_env = False

    def first_acquires_are_granted(self, flags=()):
        redis = harness.new_redis()
        redis.start()
        self.addCleanup(redis.stop)
        for i in range(5):
            g = self.start_gateway(redis.port, 1, flags, wait=False)
            deadline = time.monotonic() + slack(10.0)
            while True:
                try:
                    r = http_request(g.port, "POST", LOCKS + "start/%d" % i,
                                     body={}, timeout=slack(5.0))
                    break
                except OSError:
                    self.assertLess(time.monotonic(), deadline,
                                    "the gateway never answered")
                    time.sleep(0.005)
            self.assertEqual(r.status, 200, "first acquire, start %d: %r"
                             % (i, r))
            # once health says Redis is up, every loop serves: fresh
            # connections, on whichever loops take them
            self.wait_for(lambda: g.request("GET", "/_fence/v1/health")
                          .json.get("redis") == "up", slack(5.0),
                          "health to say Redis is up")
            for k in range(4):
                r = http_request(g.port, "POST", LOCKS + "start/%d/%d" % (i, k),
                                 body={}, timeout=slack(5.0))
                self.assertEqual(r.status, 200, r)
            g.stop()

    def test_the_first_acquire_after_the_start_is_granted(self):
        self.first_acquires_are_granted()

    def test_with_a_key_file_the_first_acquire_after_the_start_is_granted(self):
        # the key is there at once; behind a Cluster the slot map is not
        _, path = storage.new_key_file()
        self.first_acquires_are_granted(["--key-file", path])
