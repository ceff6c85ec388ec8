"""test_lease.py - scoped use, the loss signal, release at the end of the
scope whatever ended it, and max_hold, against the real gateways."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from fencegate import LeaseLost, NotAcquired, StaleToken, error_for

from . import fgenv
from .fakegw import SilentRelay
from .fgenv import Case, raw_put, store_get, unique, wait_until


class TestScope(Case):
    def test_timed_out_acquire_never_runs_the_body(self):
        c, other = self.client(), self.client()
        name = unique()
        with c.lock(name, ttl=10):
            ran = []
            t0 = time.monotonic()
            with self.assertRaises(NotAcquired) as cm:
                with other.lock(name, ttl=10, wait=0.5):
                    ran.append(1)
            self.assertEqual(ran, [])
            self.assertEqual(cm.exception.code, "lock_held")
            self.assertGreaterEqual(time.monotonic() - t0, 0.45)
            with self.assertRaises(NotAcquired):
                with other.lock(name, ttl=10, wait=0):
                    ran.append(2)
            self.assertEqual(ran, [])
        self.assertFalse(c.inspect(name)["held"])

    def test_exception_and_interrupt_release(self):
        c = self.client()
        name = unique()
        for exc in (ValueError, KeyboardInterrupt):
            with self.assertRaises(exc):
                with c.lock(name, ttl=30) as lease:
                    self.assertTrue(c.inspect(name)["held"])
                    raise exc()
            self.assertFalse(c.inspect(name)["held"])
            with self.assertRaises(LeaseLost):
                lease.check()

    def test_an_interrupted_release_is_finished(self):
        c = self.client()
        name = unique()
        real = c._release
        calls = []

        def interrupted(lease, **kw):
            # a second Ctrl-C lands while the scope releases
            calls.append(1)
            if len(calls) == 1:
                raise KeyboardInterrupt()
            real(lease, **kw)
        c._release = interrupted
        with self.assertRaises(KeyboardInterrupt):
            with c.lock(name, ttl=30):
                pass
        wait_until(lambda: not c.inspect(name)["held"], 10,
                   "the release finished on its own thread")
        self.assertEqual(len(calls), 2)

    def test_an_interrupted_release_gives_up_after_the_timeout(self):
        # the gateway goes silent before the release: the thread that
        # finishes an interrupted release keeps the process alive for the
        # client's timeout, not for the lease's 30 s
        relay = SilentRelay(self.gws[0])
        self.addCleanup(relay.close)
        c = self.client([relay.url], timeout=1)
        name = unique()
        real = c._release
        calls = []

        def interrupted(lease, **kw):
            # the first release is interrupted; the thread's is real
            calls.append(1)
            if len(calls) == 1:
                raise KeyboardInterrupt()
            real(lease, **kw)
        c._release = interrupted
        before = set(threading.enumerate())
        with self.assertRaises(KeyboardInterrupt):
            with c.lock(name, ttl=30):
                relay.silence()
        started = [t for t in threading.enumerate()
                   if t not in before and t.name == "fencegate-release"]
        self.assertEqual(len(started), 1)
        started[0].join(10 * fgenv.SLACK)
        self.assertFalse(started[0].is_alive())
        self.assertEqual(len(calls), 2)

    def test_renews_past_its_ttl(self):
        c = self.client()
        name = unique()
        with c.lock(name, ttl=1.2) as lease:
            token = lease.token
            # three TTLs: only renewals keep it
            self.assertFalse(lease.lost.wait(3.6))
            st = c.inspect(name)
            self.assertTrue(st["held"])
            self.assertEqual(st["token"], token)
            lease.check()

    def test_a_shorter_ttl_set_by_hand_is_renewed_on_time(self):
        c = self.client()
        name = unique()
        with c.lock(name, ttl=30) as lease:
            lease.renew(ttl=1)
            self.assertLessEqual(lease.remaining(), 1.0)
            # three of the new TTLs: the renewer follows it
            self.assertFalse(lease.lost.wait(3))
            st = c.inspect(name)
            self.assertTrue(st["held"])
            self.assertLessEqual(st["ttl_ms"], 1000)

    def test_max_hold_ends_the_hold(self):
        c = self.client()
        name = unique()
        with self.assertRaises(LeaseLost):
            with c.lock(name, ttl=10, max_hold=0.5) as lease:
                self.assertTrue(lease.lost.wait(10 * fgenv.SLACK))
                self.assertIn("max_hold", lease.reason)
                wait_until(lambda: not c.inspect(name)["held"], 10,
                           "the lock released at max_hold")
                with self.assertRaises(LeaseLost):
                    lease.check()
        # said not to raise: the scope ends quietly
        with c.lock(name, ttl=10, max_hold=0.3,
                    raise_on_loss=False) as lease:
            self.assertTrue(lease.lost.wait(10 * fgenv.SLACK))
        self.assertFalse(c.inspect(name)["held"])


class TestMaxHoldAfterAWait(Case):
    def test_max_hold_counts_from_the_grant_not_the_wait(self):
        c, other = self.client(), self.client()
        name = unique()
        held = other.acquire(name, ttl=10)
        # the other holder lets go after 2 s, while c waits
        t = threading.Timer(2.0, held.release)
        t.start()
        self.addCleanup(t.join)
        lease = c.acquire(name, ttl=10, wait=10, max_hold=1.5,
                          raise_on_loss=False)
        got = time.monotonic()
        self.assertGreater(lease.token, held.token)
        # the body gets its 1.5 s, not what was left after the wait
        self.assertFalse(lease.lost.wait(0.75))
        lease.check()
        self.assertTrue(lease.lost.wait(10 * fgenv.SLACK))
        self.assertIn("max_hold", lease.reason)
        self.assertGreaterEqual(time.monotonic() - got, 1.0)
        wait_until(lambda: not c.inspect(name)["held"], 10,
                   "the lock released at max_hold")


class TestPausedHolder(Case):
    def test_loss_signalled_before_the_next_write_which_is_refused(self):
        gw = self.gws[0]
        a, b = self.client(), self.client()
        name = unique()
        with self.assertRaises(LeaseLost):
            with a.lock(name, ttl=1) as la:
                sa = la.requests_session()
                self.addCleanup(sa.close)
                r = sa.put(gw + "/" + name, data=b"from a")
                self.assertIn(r.status_code, (201, 204))
                old = la.sequencer
                # the holder stops renewing, as a paused process would
                a._renewer.pause()
                try:
                    with b.lock(name, ttl=10, wait=20) as lb:
                        # b was granted once a's lease ended at the
                        # gateway: a knows that already
                        self.assertGreater(lb.token, la.token)
                        with self.assertRaises(LeaseLost):
                            la.check()
                        self.assertTrue(la.lost.is_set())
                        sb = lb.requests_session()
                        self.addCleanup(sb.close)
                        r = sb.put(gw + "/" + name, data=b"from b")
                        self.assertIn(r.status_code, (201, 204))
                        # a's next write never leaves
                        with self.assertRaises(LeaseLost):
                            sa.put(gw + "/" + name, data=b"late a")
                        # and the gateway refuses it anyway
                        st, body = raw_put(gw, name, b"late a", old)
                        self.assertEqual(st, 409)
                        self.assertIsInstance(error_for(st, body),
                                              StaleToken)
                        self.assertEqual(store_get(name), (200, b"from b"))
                finally:
                    a._renewer.resume()
        self.assertEqual(store_get(name), (200, b"from b"))


class TestStoppedProcess(Case):
    """The holder is a whole process stopped (SIGSTOP) past its lease:
    renewer and all."""

    def test_a_stopped_holder_is_refused_after_it_resumes(self):
        gw = self.gws[0]
        name = unique()
        env = dict(os.environ, PYTHONPATH=os.path.dirname(
            os.path.dirname(os.path.abspath(__file__))))
        p = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(__file__),
                                          "holder.py"),
             ",".join(self.gws), name, "1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            text=True)

        def end():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait(30)
            p.stdin.close()
            p.stdout.close()
        self.addCleanup(end)
        held = json.loads(p.stdout.readline())
        p.send_signal(signal.SIGSTOP)
        b = self.client()
        with b.lock(name, ttl=10, wait=20) as lb:
            self.assertGreater(lb.token, held["token"])
            with lb.requests_session() as s:
                r = s.put(gw + "/" + name, data=b"from b")
                self.assertIn(r.status_code, (201, 204))
            p.send_signal(signal.SIGCONT)
            p.stdin.write("go\n")
            p.stdin.flush()
            # its next write never left
            self.assertEqual(p.stdout.readline().strip(), "lost")
            # and the gateway refuses one sent anyway
            st, body = raw_put(gw, name, b"late holder", held["sequencer"])
            self.assertIsInstance(error_for(st, body), StaleToken)
            self.assertEqual(store_get(name), (200, b"from b"))
