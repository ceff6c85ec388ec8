"""test_list.py - contract v1.3 "Who holds what", against the real
processes (one Redis or, with --redis-mode cluster, a Redis Cluster; one
gateway, open mode):

- GET /_fence/v1/locks?prefix=P lists the locks starting with P that are
  held, waited for or in lock-delay, in name order, in pages of at most
  `limit`, each page's cursor leading to the next, null after the last;
  a free lock is not listed.
- Each entry names its mode, token, ttl_ms, delay_ms, its holders (owner,
  principal, client, held_ms; shared ones all of them) and its waiters in
  queue order (owner, principal, client, waited_ms). A lock in lock-delay
  has mode null, no holders, ttl_ms 0 and the last grant's token.
- No lease ever appears.
- limit out of 1..1000 is 400 bad_request; so is a cursor the listing did
  not give, and a prefix no lock name can start with; any method but GET
  is 405.
- A page costs Redis work bounded by its size: locks elsewhere in the
  name space do not add calls.
- The index of names behind it shrinks back: a release that leaves a lock
  idle drops its name at once, a lock that fell idle otherwise (expiry)
  goes at the gateway's next sweep (every 5 s), and a lock acquired again
  is back in it; a held lock whose index update was lost is listed again
  at its holder's next renewal.
"""

import time
import urllib.parse

from harness import TestCase, cluster_mode, slack, RespClient

LIST = "/_fence/v1/locks"


class ListingTests(TestCase):

    def prefix(self):
        """The prefix of every lock name this test makes."""
        n = self.lock_name()
        return n[:n.rindex("/") + 1]

    def list(self, prefix=None, limit=None, cursor=None, gw=None):
        q = {}
        if prefix is not None:
            q["prefix"] = prefix
        if limit is not None:
            q["limit"] = str(limit)
        if cursor is not None:
            q["cursor"] = cursor
        path = LIST + ("?" + urllib.parse.urlencode(q) if q else "")
        return self.req("GET", path, gw=gw)

    def list_all(self, prefix, limit):
        """Every page in turn: (entries, pages)."""
        out, pages, cursor = [], 0, None
        while True:
            r = self.list(prefix, limit, cursor)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(set(r.json), {"locks", "cursor"}, r.json)
            self.assertLessEqual(len(r.json["locks"]), limit)
            out += r.json["locks"]
            pages += 1
            cursor = r.json["cursor"]
            if cursor is None:
                return out, pages
            self.assertIsInstance(cursor, str)
            self.assertLess(pages, 100, "the cursor never ends")

    def wait_waiters(self, name, n):
        self.wait_for(lambda: self.state(name)["waiters"] == n, slack(5.0),
                      "%d waiters on %s" % (n, name))

    def test_pages_list_holders_shared_holders_waiters_and_delay_in_order(self):
        p = self.prefix()
        t0 = time.monotonic()
        leases = []
        held = {}
        for i in range(5):
            n = p + "held-%d" % i
            g = self.acquire_ok(n, owner="job-%d" % i, ttl_ms=30000)
            leases.append(g["lease"])
            held[n] = g
        shared = p + "shared"
        s1 = self.acquire_ok(shared, mode="shared", owner="reader-1")
        s2 = self.acquire_ok(shared, mode="shared", owner="reader-2")
        leases += [s1["lease"], s2["lease"]]
        queued = p + "queued"
        q0 = self.acquire_ok(queued, owner="holder", ttl_ms=30000)
        leases.append(q0["lease"])
        w1 = self.waiter(queued, wait_ms=20000, owner="waiter-1")
        self.wait_waiters(queued, 1)
        w2 = self.waiter(queued, wait_ms=20000, owner="waiter-2")
        self.wait_waiters(queued, 2)
        delayed = p + "delayed"
        d0 = self.acquire_ok(delayed, ttl_ms=100, lock_delay_ms=60000)
        leases.append(d0["lease"])
        free = p + "free"
        f0 = self.acquire_ok(free)
        self.release_ok(free, f0["lease"])
        leases.append(f0["lease"])
        self.wait_for(lambda: self.state(delayed)["delay_ms"] > 0,
                      slack(5.0), "the grant of %s to expire" % delayed)
        elapsed_ms = (time.monotonic() - t0) * 1000 + 1000

        entries, pages = self.list_all(p, 3)
        names = [e["name"] for e in entries]
        want = sorted(list(held) + [shared, queued, delayed])
        self.assertEqual(names, want, "listed in name order, free left out")
        self.assertGreaterEqual(pages, 3)
        by = {e["name"]: e for e in entries}
        for e in entries:
            self.assertEqual(set(e), {"name", "mode", "token", "ttl_ms",
                                      "delay_ms", "holders", "waiters"}, e)
        for n, g in held.items():
            e = by[n]
            self.assertEqual((e["mode"], e["token"], e["delay_ms"]),
                             ("exclusive", g["token"], 0), e)
            self.assertTrue(0 < e["ttl_ms"] <= 30000, e)
            self.assertEqual(len(e["holders"]), 1, e)
            h = e["holders"][0]
            self.assertEqual(set(h), {"owner", "principal", "client",
                                      "held_ms"}, h)
            self.assertEqual(h["owner"], "job-" + n[-1])
            self.assertIsNone(h["principal"], "open mode: no principal")
            self.assertEqual(h["client"], "127.0.0.1")
            self.assertTrue(0 <= h["held_ms"] <= elapsed_ms, h)
            self.assertEqual(e["waiters"], [])
        e = by[shared]
        self.assertEqual((e["mode"], e["token"]), ("shared", s1["token"]))
        self.assertEqual(sorted(h["owner"] for h in e["holders"]),
                         ["reader-1", "reader-2"])
        # longest held first
        self.assertEqual(e["holders"][0]["owner"], "reader-1")
        e = by[queued]
        self.assertEqual([h["owner"] for h in e["holders"]], ["holder"])
        self.assertEqual([w["owner"] for w in e["waiters"]],
                         ["waiter-1", "waiter-2"], "queue order")
        for w in e["waiters"]:
            self.assertEqual(set(w), {"owner", "principal", "client",
                                      "waited_ms"}, w)
            self.assertEqual(w["client"], "127.0.0.1")
            self.assertTrue(0 <= w["waited_ms"] <= elapsed_ms, w)
        self.assertGreaterEqual(e["waiters"][0]["waited_ms"],
                                e["waiters"][1]["waited_ms"])
        e = by[delayed]
        self.assertEqual((e["mode"], e["holders"], e["ttl_ms"], e["token"]),
                         (None, [], 0, d0["token"]), e)
        self.assertTrue(0 < e["delay_ms"] <= 60000, e)
        # one page with everything, and no lease in any answer
        r = self.list(p, 1000)
        self.assertEqual([e["name"] for e in r.json["locks"]], want)
        self.assertIsNone(r.json["cursor"])
        for lease in leases:
            self.assertNotIn(lease.encode(), r.body)
        # the waiters get the lock in turn once it is released
        self.release_ok(queued, q0["lease"])
        r1 = w1.result(slack(10.0))
        self.assertEqual(r1.status, 200, r1)
        self.release_ok(queued, r1.json["lease"])
        r2 = w2.result(slack(10.0))
        self.assertEqual(r2.status, 200, r2)
        self.release_ok(queued, r2.json["lease"])
        for n, g in held.items():
            self.release_ok(n, g["lease"])
        self.release_ok(shared, s1["lease"])
        self.release_ok(shared, s2["lease"])
        entries, _ = self.list_all(p, 1000)
        self.assertEqual([e["name"] for e in entries], [delayed],
                         "released locks leave the listing")

    def test_prefix_narrows_and_an_empty_prefix_lists_from_the_start(self):
        p = self.prefix()
        a = self.acquire_ok(p + "a/1")
        b = self.acquire_ok(p + "b/1")
        r = self.list(p + "a/")
        self.assertEqual([e["name"] for e in r.json["locks"]], [p + "a/1"])
        r = self.list(p + "c")
        self.assertEqual(r.json, {"locks": [], "cursor": None})
        r = self.list(limit=1000)
        self.assertEqual(r.status, 200, r)
        names = [e["name"] for e in r.json["locks"]]
        self.assertEqual(names, sorted(names))
        if r.json["cursor"] is None:
            self.assertIn(p + "a/1", names)
        self.release_ok(p + "a/1", a["lease"])
        self.release_ok(p + "b/1", b["lease"])

    def test_bad_limit_cursor_prefix_and_method_are_refused(self):
        p = self.prefix()
        for limit in ("0", "1001", "-1", "ten", ""):
            self.assert_bad_request(self.list(p, limit), "limit=%r" % limit)
        for cursor in ("!!", "bm90IGEgbmFtZQ", ""):
            self.assert_bad_request(self.list(p, cursor=cursor),
                                    "cursor=%r" % cursor)
        self.assert_bad_request(self.list("a b"), "a prefix with a space")
        self.assert_bad_request(self.list("x" * 256), "a 256-byte prefix")
        for m in ("POST", "DELETE", "PUT"):
            r = self.req(m, LIST + "?prefix=" + p)
            self.assertEqual(r.status, 405, "%s: %r" % (m, r))
        r = self.req("GET", LIST + "?prefix=" + p, body={"limit": 1})
        self.assert_bad_request(r, "a body")

    def test_a_page_costs_its_size_not_the_number_of_locks(self):
        p = self.prefix()
        others = [self.acquire_ok(p + "other/%03d" % i, ttl_ms=60000)
                  for i in range(300)]
        mine = [self.acquire_ok(p + "mine/%d" % i, ttl_ms=60000)
                for i in range(2)]

        def fcalls():
            total = 0
            for port in self.redis_ports():
                with RespClient(port) as c:
                    info = c.command("INFO", "commandstats").decode()
                for line in info.splitlines():
                    if line.startswith("cmdstat_fcall:"):
                        total += int(line.split("calls=")[1].split(",")[0])
            return total

        before = fcalls()
        r = self.list(p + "mine/", 100)
        after = fcalls()
        self.assertEqual(len(r.json["locks"]), 2, r)
        # one index page and one look per lock listed; locks elsewhere
        # cost nothing (a scan would be hundreds)
        self.assertLessEqual(after - before, 3 + 5)
        before = fcalls()
        r = self.list(p, 10)
        after = fcalls()
        self.assertEqual(len(r.json["locks"]), 10, r)
        self.assertLessEqual(after - before, 11 + 5)
        for i, g in enumerate(others):
            self.release_ok(p + "other/%03d" % i, g["lease"])
        for i, g in enumerate(mine):
            self.release_ok(p + "mine/%d" % i, g["lease"])

    def indexed(self, name):
        return self.redis.command("ZSCORE", "fg:{!index}:n", name) \
            is not None

    def test_the_index_forgets_idle_locks_and_learns_them_again(self):
        # a Redis of its own: the sweep's first step reads this test's
        # names, not those every other test left
        env = self.start_env()
        self.gw, self.redis = env.gw, env.redis
        p = self.prefix()
        a = self.acquire_ok(p + "released", ttl_ms=30000)
        b = self.acquire_ok(p + "expired", ttl_ms=100)
        self.assertTrue(self.indexed(p + "released"))
        self.assertTrue(self.indexed(p + "expired"))
        self.release_ok(p + "released", a["lease"])
        self.wait_for(lambda: not self.indexed(p + "released"), slack(2.0),
                      "the release to drop the name")
        # nobody lists: the gateway's sweep finds the expired one
        self.wait_for(lambda: not self.indexed(p + "expired"),
                      slack(5.0) + 6.0, "the sweep to drop the expired lock")
        self.assertEqual(self.list(p).json, {"locks": [], "cursor": None})
        c = self.acquire_ok(p + "expired")
        self.assertTrue(self.indexed(p + "expired"))
        self.assertEqual([e["name"] for e in self.list(p).json["locks"]],
                         [p + "expired"])
        self.assertNotEqual(c["token"], b["token"])
        self.release_ok(p + "expired", c["lease"])

    def test_a_lost_index_update_is_made_good_at_the_next_renewal(self):
        p = self.prefix()
        g = self.acquire_ok(p + "held", ttl_ms=30000)
        # as if the index update had been lost on its way
        self.redis.command("ZREM", "fg:{!index}:n", p + "held")
        self.redis.command("HDEL", "fg:{!index}:v", p + "held")
        self.assertEqual(self.list(p).json["locks"], [])
        r = self.renew(p + "held", g["lease"])
        self.assertEqual(r.status, 200, r)
        self.wait_for(lambda: self.indexed(p + "held"), slack(2.0),
                      "the renewal to index the lock again")
        self.assertEqual([e["name"] for e in self.list(p).json["locks"]],
                         [p + "held"])
        self.release_ok(p + "held", g["lease"])

    def redis_ports(self):
        if cluster_mode():
            return [n.port for n in self.redis.masters()]
        return [self.redis.port]
