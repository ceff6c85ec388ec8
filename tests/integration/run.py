#!/usr/bin/env python3
"""run.py - the fencegate integration suite's runner.

    python3 tests/integration/run.py --bin build/gateway/fencegate
    python3 tests/integration/run.py --build plain=build-test/gateway/fencegate \\
        --build sanitized=build-asan/gateway/fencegate --redis single,cluster -j 4

Loads every test_*.py beside this file and runs each test once in every
cell of the matrix (matrix.py: build x redis x origin) that can change its
outcome and that this run was given: the builds named by --build (--bin
is --build plain=PATH), the Redis kinds of --redis (single by default),
the origins of --origin (all by default). -k keeps the tests whose id
contains one of its substrings.

-j N runs N workers at once. A worker is a process of its own (this file,
--worker) with its own port block (harness.free_port), its own temporary
directory and its own servers; it takes one test class of one cell at a
time, so that a class's shared environment lives in one worker, and runs
its tests in order. The longest classes go first. What a class printed
(each result, the logs of each failing test) comes out in one piece when
the class is done, headed by its cell; a failure also names the seed of
the run (--seed; printed first, and handed to every worker as
FG_TEST_SEED) and the command that runs it again alone.

The last lines give each cell's counts and the time its classes took, the
wall time of the run, and exactly "N passed, N failed". Exits 1 if
anything failed, or nothing ran. Nothing is ever skipped: a test that
cannot run fails. A test pinned to a cell this run was not given (a test
that needs one redis-server, in a --redis cluster run) is listed as left
out, with its reason, and is not counted as passed.

--busy-core keeps one core (or N) busy for the whole run with a spinning
process of its own (busy.py), started before the first test and stopped
by its PID after the last: the suite must pass on a loaded machine with
its usual bounds. The last lines say how much CPU the spinners took; a
spinner that ended before the run did fails the run.

In a run with a ThreadSanitizer build (--build thread=PATH: scripts/tsan.sh,
scripts/test.sh), every process the suite starts writes its
ThreadSanitizer reports to files under its worker's temporary directory; a report found after a test fails that
test, one found between tests or after the last counts as a failure of
its own.
"""

import argparse
import fcntl
import importlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import busy  # noqa: E402
import harness  # noqa: E402
import matrix  # noqa: E402

TEST_TIMEOUT = 120.0   # a test running longer than this gets its processes
                       # killed; a class may set its own (test_timeout: a real
                       # client's whole scenario list, say)

# Port blocks: below the kernel's ephemeral range (32768 and up on Linux),
# so that no outgoing connection of anyone takes a port between its
# free_port() and its listen(); one lock file per block, held by the
# worker that uses it, so that two runs at once never share one.
PORT_LOW = 10000
PORT_BLOCK = 1500
PORT_BLOCKS = 15              # 10000-32499
PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), "fencegate-port-blocks")

END = "\x00@@end "           # a worker's last line of a job, then its JSON


class Result(unittest.TestResult):
    def __init__(self, tag):
        super().__init__()
        self.tag = tag            # "[cell] " before every result line
        self.passed = []
        self.failed = []          # (id, text)
        self.failed_ids = set()
        self._current_failed = False
        self._t0 = None
        self._watchdog = None

    # -- per test ---------------------------------------------------------

    def startTest(self, test):
        super().startTest(test)
        for r in harness.new_sanitizer_reports():
            # a class stops its shared gateways after its last test
            harness.LATE_FAILURES.append(
                "sanitizer report between tests (before %s):\n%s"
                % (test.id(), r))
        self._current_failed = False
        self._t0 = time.monotonic()
        bound = getattr(type(test), "test_timeout", TEST_TIMEOUT)
        self._watchdog = threading.Timer(bound, self._timeout, [test, bound])
        self._watchdog.daemon = True
        self._watchdog.start()

    def _timeout(self, test, bound):
        sys.stdout.write("\n!!! %s ran over %.0f s: killing its processes\n"
                         % (test.id(), bound))
        sys.stdout.flush()
        harness.kill_all_now()

    def stopTest(self, test):
        if self._watchdog:
            self._watchdog.cancel()
        dt = time.monotonic() - self._t0
        for r in harness.new_sanitizer_reports():
            self._current_failed = True
            self.failed.append((test.id(), r))
            print("\n==== SANITIZER REPORT: %s\n%s\n====" % (test.id(), r))
        if self._current_failed:
            self.failed_ids.add(test.id())
            print("FAIL  %s%s (%.2fs)" % (self.tag, test.id(), dt))
        else:
            self.passed.append(test.id())
            print("ok    %s%s (%.2fs)" % (self.tag, test.id(), dt))
        sys.stdout.flush()
        super().stopTest(test)

    def _record(self, test, err, kind):
        text = self._exc_info_to_string(err, test) if err else kind
        tid = test.id() if hasattr(test, "id") else str(test)
        self.failed.append((tid, text))
        print("\n==== %s: %s%s\n%s" % (kind, self.tag, tid, text.rstrip()))
        logs = getattr(test, "failure_logs", None)
        if logs:
            try:
                print(logs())
            except Exception as e:  # never let log printing hide a result
                print("(could not print logs: %r)" % e)
        print("====")
        sys.stdout.flush()

    def addFailure(self, test, err):
        self._fail(test, err, "FAILURE")

    def addError(self, test, err):
        self._fail(test, err, "ERROR")

    def _fail(self, test, err, kind):
        if isinstance(test, unittest.TestCase):
            self._current_failed = True
        else:
            # a class or module fixture failed (_ErrorHolder)
            self.failed_ids.add(str(test))
        self._record(test, err, kind)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._current_failed = True
            self._record(subtest, err, "SUBTEST FAILURE")

    def addSkip(self, test, reason):
        # nothing skipped counts as passed
        self._current_failed = True
        self._record(test, None, "SKIPPED (counts as failed): " + reason)

    def addExpectedFailure(self, test, err):
        self._current_failed = True
        self._record(test, err, "EXPECTED FAILURE (counts as failed)")

    def addUnexpectedSuccess(self, test):
        self._current_failed = True
        self._record(test, None, "UNEXPECTED SUCCESS")


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


# The signals the tests send to the processes they start. One the runner
# inherited as ignored (nohup(1) ignores SIGHUP, a shell's background job
# SIGINT and SIGQUIT) would stay ignored in every child across exec(2),
# and a test that sends it would fail for a reason of its launcher's.
SENT_BY_TESTS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
                 signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
                 signal.SIGWINCH)


def children_start_with_default_signals():
    """Catches, with a handler that does nothing, each signal of
    SENT_BY_TESTS that the runner inherited as ignored: the runner goes on
    ignoring it, and exec(2) resets a caught signal (never an ignored one)
    to its default in every process the suite starts."""
    for sig in SENT_BY_TESTS:
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, lambda signum, frame: None)


def load_all():
    """Every test of every test_*.py, and the files that would not load."""
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    errors = []
    for fn in sorted(os.listdir(HERE)):
        if fn.startswith("test_") and fn.endswith(".py"):
            try:
                mod = importlib.import_module(fn[:-3])
            except Exception:
                errors.append((fn, traceback.format_exc()))
                continue
            suite.addTests(loader.loadTestsFromModule(mod))
    return list(iter_tests(suite)), errors


# ---------------------------------------------------------------------------
# the worker: one class of one cell at a time, told on stdin


def worker_main(args):
    builds = json.loads(os.environ["FG_BUILDS"])
    harness.Config.log_level = args.log_level
    harness.Config.slow = args.slow
    harness.Config.port_base = int(os.environ["FG_PORT_BASE"])
    harness.Config.port_span = int(os.environ["FG_PORT_SPAN"])
    tmp = harness.tmp_root()
    harness.route_sanitizer_reports()
    children_start_with_default_signals()

    def on_signal(signum, frame):
        harness.stop_all()
        os._exit(130)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    tests, _ = load_all()
    by_id = {t.id(): t for t in tests}
    for line in sys.stdin:
        job = json.loads(line)
        cell = job["cell"]
        harness.Config.bin = builds[cell["build"]]
        harness.Config.slow = args.slow * matrix.SLOW.get(cell["build"], 1.0)
        harness.Config.redis_mode = cell["redis"]
        harness.Config.origin = cell["origin"]
        harness._REDIS_URLS.clear()
        harness.SPAWNED.clear()
        del harness.LATE_FAILURES[:]
        suite = unittest.TestSuite()
        for tid in job["tests"]:
            # a fresh instance: a class that ran in another cell before
            # keeps nothing of it
            t = by_id[tid]
            suite.addTest(type(t)(t._testMethodName))
        result = Result("[%s] " % matrix.cell_name(cell))
        t0 = time.monotonic()
        try:
            suite.run(result)
        except Exception:
            harness.LATE_FAILURES.append("the runner failed:\n"
                                         + traceback.format_exc())
        finally:
            harness.stop_all()
        for r in harness.new_sanitizer_reports():
            harness.LATE_FAILURES.append(
                "sanitizer report after the class's last test:\n" + r)
        cls = type(by_id[job["tests"][0]])
        spawned = sorted(harness.SPAWNED)
        if "redis" not in cls.axes and "redis-server" in spawned:
            harness.LATE_FAILURES.append(
                "%s started a redis-server, but its matrix axes (%s) leave "
                "redis out: it would not run on a Redis Cluster"
                % (job["class"], ", ".join(cls.axes) or "none"))
        if "redis" in cls.axes and job["whole"] and \
                "redis-server" not in spawned:
            harness.LATE_FAILURES.append(
                "%s started no redis-server, but its matrix axes name redis: "
                "it runs once per Redis kind for nothing (say axes = %r)"
                % (job["class"], tuple(a for a in cls.axes if a != "redis")))
        if args.keep_tmp:
            print("logs kept in " + tmp)
        late = list(harness.LATE_FAILURES)
        for text in late:
            print("\n==== %sfailure outside a test\n%s"
                  % (result.tag, text))
        out = {"job": job["job"], "passed": len(result.passed),
               "failed": sorted(result.failed_ids), "late": len(late),
               "ran": result.testsRun, "seconds": time.monotonic() - t0,
               "spawned": spawned}
        sys.stdout.write(END + json.dumps(out) + "\n")
        sys.stdout.flush()
    harness.stop_all()
    if not args.keep_tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


# ---------------------------------------------------------------------------
# the parent: the plan, the workers, the counts


def take_port_block():
    """A lock on a free port block: (its file, its first port)."""
    os.makedirs(PORT_LOCK_DIR, exist_ok=True)
    while True:
        for k in range(PORT_BLOCKS):
            f = open(os.path.join(PORT_LOCK_DIR, "block-%d" % k), "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            return f, PORT_LOW + k * PORT_BLOCK
        # every block taken by other runs: wait for one to end
        f = open(os.path.join(PORT_LOCK_DIR, "block-0"), "a")
        fcntl.flock(f, fcntl.LOCK_EX)
        return f, PORT_LOW


class Worker:
    """One worker process and the thread that reads what it prints."""

    def __init__(self, n, argv, env, done):
        self.n = n
        self.lock_file, base = take_port_block()
        env = dict(env, FG_PORT_BASE=str(base), FG_PORT_SPAN=str(PORT_BLOCK))
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=env, pass_fds=(self.lock_file.fileno(),))
        self.job = None
        self.done = done
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def give(self, job):
        self.job = job
        self.job_t0 = time.monotonic()
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()

    def _read(self):
        lines = []
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            if line.startswith(END):
                self.done.put((self, "".join(lines),
                               json.loads(line[len(END):])))
                lines = []
            else:
                lines.append(line)
        self.done.put((self, "".join(lines), None))    # the worker ended

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.lock_file.close()


def plan(tests, allowed):
    """Jobs (one class in one cell, its tests in order) and the tests left
    out with their reasons."""
    jobs = {}
    order = []
    left_out = []
    for t in tests:
        cls = type(t)
        cells = matrix.cells_for(cls.axes, matrix.test_pins(t), allowed)
        if not cells:
            reason = matrix.pin_reason(getattr(t, t._testMethodName, None)) \
                or matrix.pin_reason(cls)
            if reason:
                left_out.append((t.id(), reason))
            continue
        cid = t.id().rsplit(".", 1)[0]
        for cell in cells:
            key = (matrix.cell_name(cell), cid)
            if key not in jobs:
                jobs[key] = {"cell": cell, "class": cid, "tests": []}
                order.append(key)
            jobs[key]["tests"].append(t.id())
    return [jobs[k] for k in order], left_out


def weight(job):
    """How long a job is taken to run, to start the longest first: tests
    of a class, a cluster's start and a sanitized build costing more."""
    w = len(job["tests"])
    if job["cell"]["redis"] == "cluster":
        w *= 1.6
    if job["cell"]["build"] == "sanitized":
        w *= 1.5
    if job["cell"]["build"] == "thread":
        w *= 2.0
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=None,
                    help="the fencegate binary of the plain build "
                         "(= --build plain=PATH)")
    ap.add_argument("--build", action="append", default=[],
                    metavar="NAME=PATH",
                    help="a build of the matrix and its fencegate binary "
                         "(plain, sanitized); may be given more than once")
    ap.add_argument("--redis", default=None,
                    help="comma-separated values of the redis axis to run "
                         "(single, cluster; default single)")
    ap.add_argument("--redis-mode", choices=("single", "cluster"),
                    default=None, help="the same as --redis with one value")
    ap.add_argument("--origin", default=",".join(dict(matrix.AXES)["origin"]),
                    help="comma-separated origins to run (default: all)")
    ap.add_argument("-j", dest="jobs", type=int, default=1,
                    help="workers at once (default 1)")
    ap.add_argument("-k", dest="substr", action="append", default=None,
                    help="run only tests whose id contains this substring "
                         "(may be given more than once: any of them)")
    ap.add_argument("--seed", type=int, default=None,
                    help="the run's seed (default: a new one, printed)")
    ap.add_argument("--log-level", default=None,
                    help="passed to every fencegate as --log-level")
    ap.add_argument("--slow", type=float, default=None,
                    help="timing slack multiplier (default: env "
                         "FG_TEST_SLOW or 1.0)")
    ap.add_argument("--keep-tmp", action="store_true",
                    help="keep the temporary directories (logs)")
    ap.add_argument("--busy-core", type=int, nargs="?", const=1, default=0,
                    metavar="N",
                    help="keep N cores (default 1) busy with spinning "
                         "processes for the whole run")
    ap.add_argument("--plan", action="store_true",
                    help="print which tests run in which cell, and run none")
    ap.add_argument("--spawned", metavar="FILE", default=None,
                    help="write, as JSON, which programs each class started "
                         "(to check its matrix axes)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.slow = args.slow or float(os.environ.get("FG_TEST_SLOW") or 1.0)
    if args.worker:
        return worker_main(args)
    if args.busy_core < 0:
        ap.error("--busy-core: N must be 0 or more")
    if args.jobs < 1:
        ap.error("-j: N must be 1 or more")

    builds = {}
    if args.bin:
        builds["plain"] = os.path.abspath(args.bin)
    for b in args.build:
        name, sep, path = b.partition("=")
        if not sep or name not in dict(matrix.AXES)["build"]:
            ap.error("--build takes NAME=PATH, NAME one of %s"
                     % ", ".join(dict(matrix.AXES)["build"]))
        builds[name] = os.path.abspath(path)
    if not builds:
        ap.error("no build to run: give --bin or --build")
    redis = (args.redis or args.redis_mode or "single").split(",")
    origins = args.origin.split(",")
    for v in redis:
        if v not in dict(matrix.AXES)["redis"]:
            ap.error("--redis: %s is not a value of the redis axis" % v)
    for v in origins:
        if v not in dict(matrix.AXES)["origin"]:
            ap.error("--origin: %s is not a value of the origin axis" % v)
    allowed = [matrix.cell_name(c) for c in matrix.all_cells()
               if c["build"] in builds and c["redis"] in redis
               and c["origin"] in origins]
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)

    tests, load_errors = load_all()
    whole = {(matrix.cell_name(j["cell"]), j["class"]): len(j["tests"])
             for j in plan(tests, allowed)[0]}
    if args.substr is not None:
        tests = [t for t in tests if any(s in t.id() for s in args.substr)]
    jobs, left_out = plan(tests, allowed)
    for n, job in enumerate(jobs):
        job["job"] = n
        job["whole"] = whole[(matrix.cell_name(job["cell"]), job["class"])] \
            == len(job["tests"])
    per_cell = {}
    for job in jobs:
        per_cell.setdefault(matrix.cell_name(job["cell"]), []).append(job)
    print("seed: %d" % seed)
    print("cells: " + ", ".join("%s (%d tests)" % (c, sum(
        len(j["tests"]) for j in per_cell.get(c, []))) for c in allowed))
    for rule, why in matrix.EXCLUDED:
        print("not run: %s: %s" % (
            ", ".join("%s=%s" % kv for kv in rule.items()), why))
    for tid, reason in left_out:
        print("left out: %s: %s" % (tid, reason))
    if args.plan:
        for job in jobs:
            print("%s %s (%d)" % (matrix.cell_name(job["cell"]),
                                  job["class"], len(job["tests"])))
        return 0
    sys.stdout.flush()

    rng = random.Random(seed)
    rng.shuffle(jobs)
    jobs.sort(key=weight, reverse=True)
    pending = list(jobs)

    spinners = busy.BusyCores(args.busy_core)
    workers = []
    children_start_with_default_signals()

    def on_signal(signum, frame):
        spinners.stop()
        for w in workers:
            w.proc.terminate()
        sys.exit(130)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    env = dict(os.environ, FG_BUILDS=json.dumps(builds),
               FG_TEST_SEED=str(seed))
    argv = [sys.executable, os.path.abspath(__file__), "--worker",
            "--slow", str(args.slow)]
    if args.log_level:
        argv += ["--log-level", args.log_level]
    if args.keep_tmp:
        argv.append("--keep-tmp")

    spinners.start()
    if args.busy_core:
        print("busy cores: %d, spinning as pid %s"
              % (args.busy_core, ", ".join(map(str, spinners.pids()))))
        sys.stdout.flush()
    t0 = time.monotonic()
    done = queue.Queue()
    passed = 0
    failed_ids = []
    late = 0
    ran = 0
    cell_stats = {c: [0, 0, 0.0] for c in allowed}   # passed, failed, s
    replay = [sys.executable, os.path.relpath(os.path.abspath(__file__))] + \
        sum((["--build", "%s=%s" % kv] for kv in sorted(builds.items())), [])
    busy_cpu = 0.0
    spawned = {}        # class -> programs its tests started
    job_times = []      # (seconds, cell, class)
    try:
        for n in range(min(args.jobs, len(pending))):
            w = Worker(n, argv, env, done)
            workers.append(w)
            w.give(pending.pop(0))
        live = len(workers)
        while live:
            w, text, res = done.get()
            job = w.job
            if job is None:
                continue        # the end of a worker stopped below
            cname = matrix.cell_name(job["cell"])
            if res is None:
                # the worker ended in the middle of a job: the job fails
                # whole, and a new worker takes the rest
                sys.stdout.write(text)
                print("\n==== the worker running %s [%s] ended (exit %s): "
                      "its %d tests count as failed"
                      % (job["class"], cname, w.proc.wait(),
                         len(job["tests"])))
                failed_ids += ["[%s] %s" % (cname, t) for t in job["tests"]]
                cell_stats[cname][1] += len(job["tests"])
                w.stop()
                workers.remove(w)
                live -= 1
                if pending:
                    w = Worker(len(workers), argv, env, done)
                    workers.append(w)
                    live += 1
                    w.give(pending.pop(0))
                continue
            sys.stdout.write(text)
            if res["failed"] or res["late"]:
                print("(seed %d; again alone: %s --redis %s --origin %s "
                      "--seed %d -k %s)" % (seed, " ".join(replay),
                                            job["cell"]["redis"],
                                            job["cell"]["origin"], seed,
                                            job["class"]))
            sys.stdout.flush()
            spawned.setdefault(job["class"], set()).update(res["spawned"])
            passed += res["passed"]
            ran += res["ran"]
            late += res["late"]
            failed_ids += ["[%s] %s" % (cname, t) for t in res["failed"]]
            job_times.append((res["seconds"], cname, job["class"]))
            st = cell_stats[cname]
            st[0] += res["passed"]
            st[1] += len(res["failed"]) + res["late"]
            st[2] += res["seconds"]
            if pending:
                w.give(pending.pop(0))
            else:
                w.job = None
                w.stop()
                live -= 1
    finally:
        busy_cpu = spinners.cpu_seconds()
        stopped_early = spinners.stop()
        for w in workers:
            if w.proc.poll() is None:
                w.proc.terminate()
                w.proc.wait()
    wall = time.monotonic() - t0
    if args.spawned:
        with open(args.spawned, "w") as f:
            json.dump({c: sorted(p) for c, p in sorted(spawned.items())}, f,
                      indent=1)

    failed = len(failed_ids) + late + len(load_errors)
    for pid in stopped_early:
        print("\n==== the busy-core spinner (pid %d) ended before the run: "
              "the run was not as loaded as asked" % pid)
        failed += 1
    for fn, tb in load_errors:
        print("\n==== cannot load %s\n%s" % (fn, tb))
    if failed_ids:
        print("\nfailed:")
        for tid in sorted(failed_ids):
            print("  " + tid)
    print("\n%-26s %7s %7s %9s" % ("cell", "passed", "failed", "class s"))
    for c in allowed:
        p, f, s = cell_stats[c]
        print("%-26s %7d %7d %9.1f" % (c, p, f, s))
    if job_times:
        print("longest classes: " + ", ".join(
            "%s [%s] %.0f s" % (c, cell, sec)
            for sec, cell, c in sorted(job_times, reverse=True)[:5]))
    print("ran %d tests in %.1f s with %d workers (seed %d)"
          % (ran, wall, args.jobs, seed))
    if args.busy_core:
        print("busy cores: the spinners used %.1f s of CPU in %.1f s"
              % (busy_cpu, wall))
    if ran == 0:
        print("no test matched")
        failed = max(failed, 1)
    if left_out:
        print("%d left out (pinned to a cell not run; not counted as passed)"
              % len(left_out))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
