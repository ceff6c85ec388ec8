"""busy.py - keeps CPU cores busy while the integration suite runs
(run.py --busy-core), so that a test which holds only on an idle machine
fails here rather than on a loaded CI host.

Invariant: every spinner is a direct child of this process in a process
group of its own (as harness.spawn() makes them), is stopped by its own
PID (never by name), and ends on its own as soon as its parent is gone, so
that a runner killed with SIGKILL leaves no spinner behind.
"""

import os
import signal
import subprocess
import sys

# The spinner: pure Python, no sleep, at normal priority, so that it takes
# a whole core from the scheduler. It checks its parent between rounds of
# a few milliseconds and exits once it has been re-parented.
_SPIN = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(100000):
        pass
"""


def _cpu_seconds(pid):
    """User + system CPU time of a live process, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    # fields[0] is the state (stat field 3): utime and stime are fields
    # 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BusyCores:
    """n spinning processes, from start() to stop()."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def start(self):
        for _ in range(self.n):
            pg = ({"process_group": 0} if sys.version_info >= (3, 11)
                  else {"preexec_fn": os.setpgrp})
            p = subprocess.Popen([sys.executable, "-c", _SPIN,
                                  str(os.getpid())],
                                 stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, **pg)
            self.procs.append(p)
        return self

    def pids(self):
        return [p.pid for p in self.procs]

    def cpu_seconds(self):
        """CPU time the spinners used so far (those still running)."""
        total = 0.0
        for p in self.procs:
            if p.poll() is None:
                try:
                    total += _cpu_seconds(p.pid)
                except (FileNotFoundError, ProcessLookupError, ValueError):
                    pass
        return total

    def stop(self):
        """SIGKILL to each spinner by its PID, then reaps it. A spinner
        that ended early is only reaped. Returns the PIDs of those that
        had ended before stop() (each one a load the run did not have)."""
        ended = []
        for p in self.procs:
            if p.poll() is not None:
                ended.append(p.pid)
                continue
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.procs = []
        return ended
