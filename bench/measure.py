"""measure.py - what bench/run.py measures every run with: the CPU seconds
and context switches of the processes under watch, the client's own
(getrusage of its children), the whole box's busy share, wrk itself, the
RESULT lines of the wrk scripts and helpers, the Redis nodes' own figures
around a run, and with --profile a system-wide perf record.

A measured run is a Run: its label, the process under test (its CPU per
request is a figure), the CPU of every watched process (None when it was
gone at the end: then the run has no figures), and what the client printed.
"""

import os
import resource
import signal
import subprocess
import time

import harness
from harness import RespClient, RespError
from peers import children

CLK_TCK = os.sysconf("SC_CLK_TCK")
NPROC = os.cpu_count() or 1


# ---- processes -------------------------------------------------------------

def kids(pid):
    """A pid and its children (nginx's workers)."""
    return [pid] + children(pid)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not reaped yet) is gone too
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rindex(")") + 2] != "Z"
    except OSError:
        return False


def _stat_ticks(path):
    try:
        with open(path) as f:
            st = f.read()
    except OSError:
        return 0
    v = st[st.rindex(")") + 2:].split()
    return int(v[11]) + int(v[12])


def cpu_ticks(pid):
    """utime + stime of a process and its children, in clock ticks."""
    return sum(_stat_ticks("/proc/%d/stat" % p) for p in kids(pid))


def thread_ticks(pid):
    """{tid: ticks} of every thread of a process and of its children."""
    return {t: _stat_ticks("/proc/%d/task/%s/stat" % (p, t))
            for p, t in tasks(pid)}


def tasks(pid):
    """(pid, tid) of every thread of a process and of its children."""
    for p in kids(pid):
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tids:
            yield p, t


def ctxsw(pid):
    """(voluntary, involuntary) context switches over its threads and its
    children's."""
    v = n = 0
    for p, t in tasks(pid):
        try:
            with open("/proc/%d/task/%s/status" % (p, t)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        n += int(line.split()[1])
        except OSError:
            pass
    return v, n


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def box_stat():
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def kfmt(v):
    if v >= 10000:
        return "%.0fk" % (v / 1000)
    if v >= 1000:
        return "%.1fk" % (v / 1000)
    return "%d" % v


# ---- what the clients print -------------------------------------------------

def result_line(text):
    """The k=v fields of the first "RESULT " line (strings), or None."""
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return dict(kv.split("=", 1) for kv in line.split()[1:]
                        if "=" in kv)
    return None


def prefixed(text, prefix):
    """{KEY: value} of the first "<prefix>KEY=value" line of each KEY."""
    out = {}
    for line in text.splitlines():
        if line.startswith(prefix) and "=" in line:
            k, _, v = line[len(prefix):].partition("=")
            out.setdefault(k, v)
    return out


def num(v):
    """A float of a figure, None when it is not one."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def errs_of(r):
    """app + socket errors + answers >= 400 of a RESULT line."""
    if not r:
        return 0
    return sum(int(float(r.get(k, 0) or 0)) for k in (
        "app_errors", "http_ge400", "sock_connect", "sock_read",
        "sock_write", "sock_timeout"))


# ---- Redis nodes ----------------------------------------------------------

def redis_info(port, section):
    from topology import parse_info
    with RespClient(port) as c:
        return parse_info(c.command("INFO", section))


def redis_cpu(port):
    """used_cpu_sys + used_cpu_user (s), or None."""
    try:
        i = redis_info(port, "cpu")
        return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])
    except (OSError, RespError, KeyError, ValueError):
        return None


def commandstats(port):
    """{command: {calls, usec, failed_calls, ...}} of INFO commandstats."""
    out = {}
    try:
        info = redis_info(port, "commandstats")
    except (OSError, RespError):
        return out
    for k, v in info.items():
        if not k.startswith("cmdstat_"):
            continue
        d = {}
        for kv in v.split(","):
            a, _, b = kv.partition("=")
            try:
                d[a] = float(b)
            except ValueError:
                pass
        out[k[len("cmdstat_"):]] = d
    return out


class RedisHook:
    """Around a run, for every port: CONFIG RESETSTAT and INFO cpu before,
    INFO cpu and INFO commandstats after."""

    def __init__(self, ports):
        self.ports = list(ports)
        self.before_cpu, self.after_cpu, self.stats = {}, {}, {}

    def before(self, label):
        for p in self.ports:
            try:
                with RespClient(p) as c:
                    c.command("CONFIG", "RESETSTAT")
            except (OSError, RespError):
                pass
            self.before_cpu[(label, p)] = redis_cpu(p)

    def after(self, label):
        for p in self.ports:
            self.after_cpu[(label, p)] = redis_cpu(p)
            self.stats[(label, p)] = commandstats(p)

    def delta(self, label, port):
        a = self.before_cpu.get((label, port))
        b = self.after_cpu.get((label, port))
        return None if a is None or b is None else b - a

    def calls(self, label, port, names):
        """(calls, failed_calls) over the commandstats rows named."""
        st = self.stats.get((label, port), {})
        return (int(sum(st.get(n, {}).get("calls", 0) for n in names)),
                int(sum(st.get(n, {}).get("failed_calls", 0) for n in names)))


class SpreadHook:
    """How a server spread its CPU over its threads in a run: the busiest
    thread's share of the server's CPU, in %, in spread[label]."""

    def __init__(self, pid):
        self.pid = pid
        self.t0 = {}
        self.spread = {}

    def before(self, label):
        self.t0[label] = thread_ticks(self.pid)

    def after(self, label):
        t1 = thread_ticks(self.pid)
        d = [t1[t] - self.t0[label].get(t, 0) for t in t1]
        tot = sum(d)
        self.spread[label] = round(max(d) / tot * 100) if tot > 0 else None


# ---- runs ------------------------------------------------------------------

class Run:
    def __init__(self, label, subject):
        self.label = label
        self.subject = subject
        self.cpu = {}      # name -> (seconds, voluntary, involuntary) or None
        self.order = []    # the names, in the order they were watched
        self.box = None    # busy share of the whole box, % of NPROC * 100
        self.secs = 0.0
        self.text = ""     # what the client printed
        self.result = None  # its RESULT line
        self.client = None  # (name, (CPU s, voluntary, involuntary)) of
                            # the client, from getrusage of its children

    def cpu_of(self, name):
        c = self.cpu.get(name)
        return None if c is None else c[0]

    def ops(self):
        """(count, unit) of the run: cycles, else requests."""
        r = self.result or {}
        if r.get("cycles"):
            return int(float(r["cycles"])), "cycle"
        if r.get("requests"):
            return int(float(r["requests"])), "req"
        return None, None

    def cpu_line(self):
        out = ""
        for p in self.order:
            c = self.cpu[p]
            if c is None:
                out += " %s gone" % p
            else:
                out += " %s %.2fs (%s/%s)" % (p, c[0], kfmt(c[1]), kfmt(c[2]))
        if self.client:
            n, c = self.client
            out += " %s %.3fs (%s/%s)" % (n, c[0], kfmt(c[1]), kfmt(c[2]))
        if self.box is not None:
            out += "; box busy %s%% of %d%%" % (self.box, NPROC * 100)
        return out


class Meter:
    """The processes under watch ([(name, pid)]) and every measured run."""

    def __init__(self, tmp, say, knobs):
        self.tmp = tmp
        self.say = say
        self.k = knobs
        self.main = []
        self.watch = self.main
        self.runs = {}
        self.order = []
        self.hooks = []
        self.profile_runs = set()
        self.profiled = []

    def track(self, name, pid):
        self.main.append((name, pid))

    def only(self, pairs):
        """Watch only these in the runs that follow (back with main())."""
        self.watch = list(pairs)

    def back(self):
        self.watch = self.main

    def _call_hooks(self, when, label):
        for h in self.hooks:
            getattr(h, when)(label)

    def measure(self, label, subject, client, fn):
        """Runs fn() (which starts the client and waits for it) as the
        measured run `label`; returns the Run."""
        self._call_hooks("before", label)
        c0 = {n: (cpu_ticks(p), ctxsw(p)) for n, p in self.watch}
        perf = None
        if label in self.profile_runs:
            perf = self._perf_start(label)
        s0 = box_stat()
        t0 = time.monotonic()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = fn()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t1 = time.monotonic()
        s1 = box_stat()
        self._call_hooks("after", label)
        run = Run(label, subject)
        run.secs = t1 - t0
        for n, p in self.watch:
            run.order.append(n)
            if not alive(p):
                run.cpu[n] = None
                continue
            t, (v, iv) = cpu_ticks(p), ctxsw(p)
            run.cpu[n] = ((t - c0[n][0]) / CLK_TCK, v - c0[n][1][0],
                          iv - c0[n][1][1])
        if perf is not None:
            self._perf_stop(perf)
        if client:
            run.client = (client, (
                ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime,
                ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw))
        tot = sum(b - a for a, b in zip(s0, s1))
        idle = s1[3] - s0[3] + s1[4] - s0[4]
        if tot > 0:
            run.box = "%.0f" % ((tot - idle) / tot * 100 * NPROC)
        run.text = text
        run.result = result_line(text or "")
        self.runs[label] = run
        self.order.append(label)
        return run

    # -- clients -------------------------------------------------------

    def call(self, argv, out_path, timeout=None, env=None):
        """Runs argv to its end (registered with the harness, so that it is
        stopped on every way out), its output in out_path; the output."""
        with open(out_path, "wb") as f:
            p = harness.spawn(argv, stdout=f, stderr=subprocess.STDOUT,
                              env=env)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            harness.kill_process(p)
        harness.stop_process(p)
        with open(out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wrk(self, label, subject, script, url, lua_args, threads=None,
            conns=None, duration=None):
        """A warm-up run, then the measured one; the RESULT line (None
        when wrk gave none or the process under test died)."""
        k = self.k
        threads = threads or k.WRK_THREADS
        conns = conns or k.CONNS
        duration = duration or k.DURATION
        base = ["wrk", "-t%d" % threads, "-c%d" % conns]
        tail = ["--timeout", "10s", "-s", script, url, "--"]
        lua_args = [str(a) for a in lua_args]
        self.call(base + ["-d%ds" % k.WARMUP] + tail + ["warm-" + lua_args[0]]
                  + lua_args[1:], os.path.join(self.tmp, label + "-warm.txt"))
        out = os.path.join(self.tmp, label + ".txt")
        run = self.measure(label, subject, "wrk", lambda: self.call(
            base + ["-d%ds" % duration] + tail + lua_args, out))
        if run.result is None:
            self.say("  wrk produced no result; its output:")
            for line in run.text.splitlines():
                self.say("   " + line)
        elif subject and run.cpu.get(subject, 0) is None:
            self.say("  %s: %s died during the run; its figures are left "
                     "out: %s" % (label, subject, " ".join(
                         "%s=%s" % kv for kv in run.result.items())))
            run.result = None
        return run.result

    def cmd(self, label, subject, client, argv):
        """A measured run of another client; the Run."""
        return self.measure(label, subject, client, lambda: self.call(
            argv, os.path.join(self.tmp, label + ".txt")))

    # -- figures over runs ---------------------------------------------------

    def cpu_us_per(self, proc, unit, labels):
        """proc's CPU microseconds per unit (requests, cycles: that field of
        the RESULT lines) over those runs; None when none has figures."""
        c = n = 0
        for l in labels:
            r = self.runs.get(l)
            if r is None or r.result is None or r.cpu_of(proc) is None:
                continue
            q = r.result.get(unit)
            if not q:
                continue
            c += r.cpu_of(proc)
            n += int(float(q))
        return "%.0f" % (c / n * 1e6) if n > 0 else None

    # -- perf ---------------------------------------------------------------

    def _perf_start(self, label):
        data = os.path.join(self.tmp, label + ".perf")
        with open(os.path.join(self.tmp, label + ".pids"), "w") as f:
            for n, p in self.watch:
                f.write("%s %s\n" % (n, ",".join(map(str, kids(p)))))
        with open(os.path.join(self.tmp, label + ".perf.log"), "wb") as log:
            p = harness.spawn(["perf", "record", "-a", "-F",
                               str(self.k.PERF_FREQ), "-o", data],
                              stdout=log, stderr=subprocess.STDOUT)
        # perf writes its file's header once it records
        harness.wait_until(lambda: p.poll() is not None or (
            os.path.exists(data) and os.path.getsize(data) > 0), 5.0, 0.02)
        self.profiled.append(label)
        return p

    def _perf_stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            pass
        harness.stop_process(p)

