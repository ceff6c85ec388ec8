"""test_runner.py - what run.py promises about the processes of a run:
--busy-core's spinners (busy.py) take a core's worth of CPU, stop() ends
each by its PID, and one whose runner was killed with SIGKILL ends by
itself; every process the suite starts has the default disposition of the
signals tests send, also when the runner was started under nohup(1), and
a process group of its own, so that one a test has stopped stays stopped
when the runner's group is orphaned (its launching shell exits).
"""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import busy
import harness
import run
from harness import slack

HERE = os.path.dirname(os.path.abspath(__file__))


def ignored_signals(pid):
    """The signals process `pid` ignores (SigIgn in /proc/PID/status)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("SigIgn:"):
                mask = int(line.split()[1], 16)
                return {s for s in range(1, 65) if mask & (1 << (s - 1))}
    raise AssertionError("no SigIgn line for pid %d" % pid)


def ended(pid):
    """The process is gone, or a zombie waiting to be reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return st[st.rindex(")") + 2] in "ZX"


class SignalTests(harness.TestCase):
    axes = ()               # the runner's own promises
    uses_shared_env = False

    def test_the_suites_processes_start_with_the_default_signals(self):
        p = harness.spawn(["sleep", "30"])
        self.addCleanup(harness.stop_process, p)
        self.assertEqual(ignored_signals(p.pid) & set(run.SENT_BY_TESTS),
                         set())

    def test_a_runner_under_nohup_starts_them_with_the_default_too(self):
        p = harness.spawn(["nohup", sys.executable,
                           os.path.join(HERE, "run.py"), "--bin",
                           harness.Config.bin, "-k",
                           "test_runner.SignalTests.test_the_suites_"
                           "processes_start_with_the_default_signals"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(harness.stop_process, p)
        try:
            out, _ = p.communicate(timeout=slack(60.0))
        except subprocess.TimeoutExpired:
            harness.kill_process(p)
            self.fail("the runner under nohup did not end within %.0f s"
                      % slack(60.0))
        out = out.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertTrue(out.rstrip().endswith("1 passed, 0 failed"), out)


# The runner's stand-in: starts a process through harness.spawn(), stops
# it, and once its own parent has exited (which orphans its process group)
# tells the state the stopped process is in half a second later.
_ORPHANED_RUNNER = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
import harness
signal.signal(signal.SIGHUP, signal.SIG_IGN)
out = sys.argv[2]
c = harness.spawn(["sleep", "30"])
os.kill(c.pid, signal.SIGSTOP)
def state():
    with open("/proc/%d/stat" % c.pid) as f:
        st = f.read()
    return st[st.rindex(")") + 2]
end = time.monotonic() + 10
while state() not in "tT" and time.monotonic() < end:
    time.sleep(0.01)
parent = os.getppid()
with open(out + ".tmp", "w") as f:
    f.write("%d %s" % (parent, state()))
os.rename(out + ".tmp", out)
end = time.monotonic() + 10
while os.getppid() == parent and time.monotonic() < end:
    time.sleep(0.01)
# a window: the kernel continues a newly orphaned group's stopped members
# just after it reparents them; no event marks that it did not
time.sleep(0.5)
with open(out + ".tmp", "w") as f:
    f.write("%s %s" % ("orphaned" if os.getppid() != parent else "not",
                       state()))
os.rename(out + ".tmp", out + ".after")
c.kill()
c.wait()
"""

# Its parent: starts it in a process group of its own and exits once the
# stand-in has stopped its child.
_PARENT = """
import os, subprocess, sys, time
out = sys.argv[3]
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], out],
                 process_group=0, stdin=subprocess.DEVNULL)
end = time.monotonic() + 10
while not os.path.exists(out) and time.monotonic() < end:
    time.sleep(0.01)
"""


class ProcessGroupTests(harness.TestCase):
    axes = ()               # the runner's own promises
    uses_shared_env = False

    def test_a_paused_process_stays_paused_when_the_runners_group_is_orphaned(self):
        d = tempfile.mkdtemp(prefix="orphan-", dir=harness.tmp_root())
        out = os.path.join(d, "state")
        m = harness.spawn([sys.executable, "-c", _PARENT, _ORPHANED_RUNNER,
                           HERE, out])
        self.assertEqual(m.wait(slack(15.0)), 0)
        harness.stop_process(m)
        self.wait_for(lambda: os.path.exists(out), slack(5.0),
                      "the stand-in to stop its child")
        with open(out) as f:
            self.assertEqual(f.read().split()[1], "T", "not stopped")
        self.wait_for(lambda: os.path.exists(out + ".after"), slack(15.0),
                      "the stand-in's report")
        with open(out + ".after") as f:
            after = f.read().split()
        # SIGCONT (and SIGHUP) to an orphaned group would have woken it
        self.assertEqual(after, ["orphaned", "T"])


class BusyCoreTests(harness.TestCase):
    axes = ()               # the runner's own promises
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
            time.sleep(60)   # the cause: alive until the test kills it
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
