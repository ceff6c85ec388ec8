#!/usr/bin/env python3
"""run.py - the fencegate integration suite's runner.

    python3 tests/integration/run.py --bin build/gateway/fencegate [-k substr]
                                     [--redis-mode single|cluster]
                                     [--busy-core [N]]

Loads every test_*.py beside this file, runs the tests whose id contains
the -k substring (all of them without -k), prints each result, the
fencegate stderr tail of every failing test, and as its last line exactly
"N passed, N failed". Exits 1 if anything failed (or nothing ran).
Nothing is ever skipped: a test that cannot run fails.

--redis-mode cluster runs the same suite with a Redis Cluster (three
masters, three replicas: topology.RedisCluster) wherever a test environment
has a Redis, and every gateway given `--redis redis-cluster://...`. A test
marked @harness.single_redis(reason) needs one redis-server process and is
left out; so are the classes marked @harness.own_topology(reason), which
start their own Sentinel set or cluster and run in the default pass. Each
left-out test is listed with its reason, and none counts as passed.

The forwarding test classes (storage.on_both_origins) run twice, against
nginx and, as <Name>OnApache, against Apache httpd with mod_dav.

--busy-core keeps one core (or N) busy for the whole run with a spinning
process of its own (busy.py), started before the first test and stopped
by its PID after the last: the suite must pass on a loaded machine with
its usual bounds. The last lines say how much CPU the spinners took; a
spinner that ended before the run did fails the run.

With FENCEGATE_SANITIZED=thread in the environment (scripts/tsan.sh), every
process the suite starts writes its ThreadSanitizer reports to files under
the run's temporary directory; a report found after a test fails that test,
one found between tests or after the last counts as a failure of its own.
"""

import argparse
import importlib
import os
import shutil
import signal
import sys
import threading
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import busy  # noqa: E402
import harness  # noqa: E402

TEST_TIMEOUT = 120.0   # a test running longer than this gets its processes killed


class Result(unittest.TestResult):
    def __init__(self, verbose):
        super().__init__()
        self.verbose = verbose
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
        self._watchdog = threading.Timer(TEST_TIMEOUT, self._timeout, [test])
        self._watchdog.daemon = True
        self._watchdog.start()

    def _timeout(self, test):
        sys.stdout.write("\n!!! %s ran over %.0f s: killing its processes\n"
                         % (test.id(), TEST_TIMEOUT))
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
            print("FAIL  %s (%.2fs)" % (test.id(), dt))
        else:
            self.passed.append(test.id())
            print("ok    %s (%.2fs)" % (test.id(), dt))
        sys.stdout.flush()
        super().stopTest(test)

    def _record(self, test, err, kind):
        text = self._exc_info_to_string(err, test) if err else kind
        tid = test.id() if hasattr(test, "id") else str(test)
        self.failed.append((tid, text))
        print("\n==== %s: %s\n%s" % (kind, tid, text.rstrip()))
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


def single_redis_reason(test):
    """The reason a test needs one redis-server, if it is marked so (on its
    method or its class)."""
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    return getattr(method, "single_redis_reason", None) or \
        getattr(type(test), "single_redis_reason", None)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True,
                    help="path of the fencegate binary under test")
    ap.add_argument("-k", dest="substr", action="append", default=None,
                    help="run only tests whose id contains this substring "
                         "(may be given more than once: any of them)")
    ap.add_argument("--log-level", default=None,
                    help="passed to every fencegate as --log-level")
    ap.add_argument("--slow", type=float, default=None,
                    help="timing slack multiplier (default: env "
                         "FG_TEST_SLOW or 1.0)")
    ap.add_argument("--keep-tmp", action="store_true",
                    help="keep the temporary directory (logs)")
    ap.add_argument("--redis-mode", choices=("single", "cluster"),
                    default="single",
                    help="single: one redis-server per environment (the "
                         "default); cluster: a Redis Cluster in its place")
    ap.add_argument("--busy-core", type=int, nargs="?", const=1, default=0,
                    metavar="N",
                    help="keep N cores (default 1) busy with spinning "
                         "processes for the whole run")
    args = ap.parse_args()
    if args.busy_core < 0:
        ap.error("--busy-core: N must be 0 or more")

    harness.Config.bin = os.path.abspath(args.bin)
    harness.Config.log_level = args.log_level
    harness.Config.slow = args.slow or float(os.environ.get("FG_TEST_SLOW")
                                             or 1.0)
    harness.Config.redis_mode = args.redis_mode
    tmp = harness.tmp_root()
    harness.route_sanitizer_reports()

    spinners = busy.BusyCores(args.busy_core)

    def on_signal(signum, frame):
        spinners.stop()
        harness.stop_all()
        sys.exit(130)
    children_start_with_default_signals()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    load_errors = []
    for fn in sorted(os.listdir(HERE)):
        if fn.startswith("test_") and fn.endswith(".py"):
            try:
                mod = importlib.import_module(fn[:-3])
            except Exception:
                load_errors.append((fn, traceback.format_exc()))
                continue
            suite.addTests(loader.loadTestsFromModule(mod))

    selected = unittest.TestSuite()
    left_out = []        # (test id, reason)
    elsewhere = {}       # class id -> reason
    for t in iter_tests(suite):
        if args.substr is None or any(s in t.id() for s in args.substr):
            if harness.cluster_mode():
                topo = getattr(type(t), "own_topology_reason", None)
                if topo:
                    cid = t.id().rsplit(".", 1)[0]
                    elsewhere[cid] = topo
                    continue
                reason = single_redis_reason(t)
                if reason:
                    left_out.append((t.id(), reason))
                    continue
            selected.addTest(t)
    if harness.cluster_mode():
        print("redis mode: cluster (three masters, three replicas)")
        for cid, reason in sorted(elsewhere.items()):
            print("not run in cluster mode: %s (%s)" % (cid, reason))
        for tid, reason in left_out:
            print("left out in cluster mode: %s: %s" % (tid, reason))
        sys.stdout.flush()

    result = Result(verbose=True)
    spinners.start()
    if args.busy_core:
        print("busy cores: %d, spinning as pid %s"
              % (args.busy_core, ", ".join(map(str, spinners.pids()))))
        sys.stdout.flush()
    t0 = time.monotonic()
    busy_cpu = 0.0
    try:
        selected.run(result)
    finally:
        busy_cpu = spinners.cpu_seconds()
        for pid in spinners.stop():
            harness.LATE_FAILURES.append(
                "the busy-core spinner (pid %d) ended before the run: the "
                "run was not as loaded as asked" % pid)
        harness.stop_all()
    wall = time.monotonic() - t0
    for r in harness.new_sanitizer_reports():
        harness.LATE_FAILURES.append("sanitizer report after the last test:\n"
                                     + r)

    failed = len(result.failed_ids) + len(harness.LATE_FAILURES) \
        + len(load_errors)
    for fn, tb in load_errors:
        print("\n==== cannot load %s\n%s" % (fn, tb))
    for text in harness.LATE_FAILURES:
        print("\n==== failure outside a test\n%s" % text)
    if result.failed_ids:
        print("\nfailed:")
        for tid in sorted(result.failed_ids):
            print("  " + tid)
    print("\nran %d tests in %.1f s" % (result.testsRun, wall))
    if args.busy_core:
        print("busy cores: the spinners used %.1f s of CPU in %.1f s"
              % (busy_cpu, wall))
    if args.keep_tmp:
        print("logs kept in " + tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    if result.testsRun == 0:
        print("no test matched")
        failed = max(failed, 1)
    if left_out:
        print("%d left out in cluster mode (not counted as passed)"
              % len(left_out))
    print("%d passed, %d failed" % (len(result.passed), failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
