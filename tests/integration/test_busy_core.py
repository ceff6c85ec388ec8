"""test_busy_core.py - run.py --busy-core's spinners (busy.py), as real
processes: one takes a core's worth of CPU, stop() ends it by its PID, and
a spinner whose runner was killed with SIGKILL ends by itself.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import busy
import harness
from harness import slack

HERE = os.path.dirname(os.path.abspath(__file__))


def ended(pid):
    """The process is gone, or a zombie waiting to be reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return st[st.rindex(")") + 2] in "ZX"


class BusyCoreTests(harness.TestCase):
    uses_shared_env = False

    def test_a_spinner_takes_cpu_until_stopped_by_its_pid(self):
        b = busy.BusyCores(1).start()
        self.addCleanup(b.stop)
        pid = b.pids()[0]
        t0 = time.monotonic()
        # it spins: half a second of CPU comes within a bound, however
        # loaded the machine
        self.wait_for(lambda: b.cpu_seconds() >= 0.5, slack(10.0),
                      "the spinner to use 0.5 s of CPU")
        self.assertLessEqual(b.cpu_seconds(), time.monotonic() - t0 + 0.1)
        self.assertEqual(b.stop(), [], "the spinner had ended by itself")
        self.assertTrue(ended(pid))
        self.assertEqual(b.pids(), [])

    def test_a_spinner_ends_when_its_runner_is_killed(self):
        runner = textwrap.dedent("""
            import sys, time
            sys.path.insert(0, %r)
            import busy
            b = busy.BusyCores(2).start()
            print(" ".join(map(str, b.pids())), flush=True)
            time.sleep(60)
            """ % HERE)
        p = harness.spawn([sys.executable, "-c", runner],
                          stdout=subprocess.PIPE)
        self.addCleanup(harness.stop_process, p)
        pids = [int(x) for x in p.stdout.readline().split()]
        self.assertEqual(len(pids), 2)
        for pid in pids:
            self.assertFalse(ended(pid), "spinner %d did not start" % pid)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        self.wait_for(lambda: all(ended(pid) for pid in pids), slack(5.0),
                      "the spinners to end after their runner was killed")
