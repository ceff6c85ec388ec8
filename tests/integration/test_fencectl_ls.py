"""test_fencectl_ls.py - `fencectl ls [PREFIX]` (contract v1.3's listing
as a table), with the real fencectl, gateway and Redis: a row per lock in
name order across pages, a line per holder and per waiter, free locks
left out, no lease printed; --json joins the pages; an unreachable gateway
is an error within --timeout."""

import json
import time

from harness import slack
from test_fencectl import EXIT_UNAVAILABLE, FencectlTestCase


class LsTests(FencectlTestCase):

    def prefix(self):
        n = self.lock_name()
        return n[:n.rindex("/") + 1]

    def test_ls_prints_a_row_per_lock_and_a_line_per_holder_and_waiter(self):
        p = self.prefix()
        a = self.acquire_ok(p + "a", owner="alpha", ttl_ms=30000)
        b = self.acquire_ok(p + "b", owner="beta", ttl_ms=30000)
        w = self.waiter(p + "b", wait_ms=20000, owner="gamma")
        self.wait_for(lambda: self.state(p + "b")["waiters"] == 1,
                      slack(5.0), "the waiter to queue")
        f = self.acquire_ok(p + "c")
        self.release_ok(p + "c", f["lease"])
        rc, out, err = self.fc("ls", p)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "MODE", "TOKEN", "TTL_MS",
                                            "DELAY_MS", "HOLDERS", "WAITERS"])
        rows = [l.split() for l in lines[1:] if not l.startswith(" ")]
        self.assertEqual([r[0] for r in rows], [p + "a", p + "b"])
        self.assertEqual(rows[0][1:3], ["exclusive", str(a["token"])])
        self.assertEqual(rows[1][5:7], ["1", "1"])
        self.assertIn("holder owner=alpha", " ".join(out.split()))
        self.assertIn("holder owner=beta", " ".join(out.split()))
        self.assertIn("waiter owner=gamma", " ".join(out.split()))
        for g in (a, b, f):
            self.assertNotIn(g["lease"], out)
        rc, out, err = self.fc("--json", "ls", p)
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["name"] for l in json.loads(out)["locks"]],
                         [p + "a", p + "b"])
        self.release_ok(p + "a", a["lease"])
        self.release_ok(p + "b", b["lease"])
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.release_ok(p + "b", r.json["lease"])

    def test_ls_prints_an_owner_s_control_bytes_escaped(self):
        p = self.prefix()
        evil = "x\x1b[2J\ny lock fake"
        g = self.acquire_ok(p + "a", owner=evil)
        rc, out, err = self.fc("ls", p)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("\x1b", out)
        self.assertIn("owner=x\\x1b[2J\\x0ay\\x20lock\\x20fake", out)
        self.assertEqual(len([l for l in out.splitlines()
                              if not l.startswith(" ")]), 2,
                         "a header and one row: %r" % out)
        self.release_ok(p + "a", g["lease"])

    def test_ls_of_an_unreachable_gateway_fails_within_its_timeout(self):
        env = self.env_for()
        env["FENCEGATE_URL"] = "http://127.0.0.1:1"
        t0 = time.monotonic()
        rc, out, err = self.fc("--timeout", "2s", "ls", env=env)
        self.assertEqual(rc, EXIT_UNAVAILABLE, err)
        self.assertIn("cannot list locks", err)
        self.assertLess(time.monotonic() - t0, slack(5.0))
