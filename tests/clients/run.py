#!/usr/bin/env python3
"""run.py - runs the client libraries' own test suites (Python's
unittest, `go test`, the C test program) against one real environment
(env.py), and ends with `N passed, N failed` like every part of the test
command.

Each runner's per-test lines are counted as that runner prints them; a
skipped test counts as failed, and a runner that exits non-zero with no
failure line of its own counts one failure more, so a crash is never a
pass. Runners run one after another: a test that restarts the Redis must
not pull it from under another language's test. Each is bounded.

  tests/clients/run.py --fencegate BUILD/gateway/fencegate
      [--fencectl BUILD/fencectl/fencectl] [--c-test EXE]
      [--only python,go,c] [--no-s3]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import env as client_env   # noqa: E402

RUNNER_SECONDS = 300
LANGS = ("python", "go", "c")


def python_runner(args):
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
        else sys.executable
    d = os.path.join(TOP, "clients", "python")
    return ([py, "-m", "unittest", "discover", "-v", "-s",
             os.path.join(d, "tests"), "-t", d],
            {"PYTHONPATH": d}, TOP)


def go_runner(args, scratch):
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    gohome = tempfile.mkdtemp(prefix="go-", dir=scratch)
    return ([go, "test", "-count=1", "-v", "./..."],
            {"GOFLAGS": "-mod=mod", "GOPROXY": "off",
             "GOTOOLCHAIN": "local", "GOSUMDB": "off",
             "GOCACHE": os.environ.get("GOCACHE") or
             os.path.join(gohome, "cache"),
             "GOPATH": os.path.join(gohome, "path")},
            os.path.join(TOP, "clients", "go"))


def c_runner(args):
    return [args.c_test], {}, TOP


# (passed, failed, skipped) line patterns per runner
PATTERNS = {
    "python": (re.compile(r" \.\.\. ok$", re.M),
               re.compile(r" \.\.\. (FAIL|ERROR)$|^(FAIL|ERROR): ", re.M),
               re.compile(r" \.\.\. skipped", re.M)),
    "go": (re.compile(r"^--- PASS: ", re.M),
           re.compile(r"^--- FAIL: ", re.M),
           re.compile(r"^--- SKIP: ", re.M)),
    "c": (re.compile(r"^ok ", re.M),
          re.compile(r"^FAIL ", re.M),
          re.compile(r"^skip ", re.M)),
}


def count(lang, out, rc):
    ok_re, fail_re, skip_re = PATTERNS[lang]
    passed = len(ok_re.findall(out))
    if lang == "python":
        # unittest -v prints "... FAIL" at the test and "FAIL: name" in the
        # summary: count the test lines only
        fails = len(re.findall(r" \.\.\. (?:FAIL|ERROR)$", out, re.M))
    else:
        fails = len(fail_re.findall(out))
    fails += len(skip_re.findall(out))
    if rc != 0 and fails == 0:
        fails = 1
    if passed == 0 and fails == 0:
        fails = 1   # nothing ran: never a pass
    return passed, fails


def run_one(lang, args, env, scratch):
    if lang == "python":
        argv, extra, cwd = python_runner(args)
    elif lang == "go":
        argv, extra, cwd = go_runner(args, scratch)
    else:
        if not args.c_test:
            print("c: no --c-test executable given")
            return 0, 1
        argv, extra, cwd = c_runner(args)
    vars_ = dict(os.environ, **env.variables())
    vars_.update(extra)
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=cwd, env=vars_, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=RUNNER_SECONDS)
        out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        out += "\n%s: still running after %d s: stopped\n" % (lang,
                                                             RUNNER_SECONDS)
        rc = -1
    except OSError as e:
        out, rc = "%s: cannot run %s: %s\n" % (lang, argv[0], e), -1
    passed, failed = count(lang, out, rc)
    print("== %s (%s), %.1f s, exit %s" % (lang, " ".join(argv[:3]),
                                            time.monotonic() - t0, rc))
    print(out.rstrip())
    print("%s: %d passed, %d failed" % (lang, passed, failed))
    return passed, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fencegate", required=True)
    ap.add_argument("--fencectl")
    ap.add_argument("--c-test")
    ap.add_argument("--only", default=",".join(LANGS))
    ap.add_argument("--no-s3", action="store_true")
    args = ap.parse_args()
    langs = [l for l in args.only.split(",") if l]
    bad = [l for l in langs if l not in LANGS]
    if bad:
        ap.error("unknown language: %s" % ",".join(bad))
    passed = failed = 0
    env = None
    t0 = time.monotonic()
    try:
        env = client_env.ClientEnv(os.path.abspath(args.fencegate),
                                   args.fencectl and
                                   os.path.abspath(args.fencectl),
                                   s3=not args.no_s3).start()
        print("environment up in %.1f s" % (time.monotonic() - t0))
        for lang in langs:
            p, f = run_one(lang, args, env, env.dir)
            passed += p
            failed += f
        for r in env.sanitizer_reports():
            print("sanitizer report from fencegate:\n" + r)
            failed += 1
    except client_env.SetupError as e:
        print("the environment did not start: %s" % e)
        failed += 1
    finally:
        if env is not None:
            env.stop()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
