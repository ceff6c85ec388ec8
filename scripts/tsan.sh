#!/usr/bin/env bash
# One ThreadSanitizer pass: builds fencegate with -fsanitize=thread in
# build-tsan/ (gcc; Debian's libtsan) and runs the integration suite against
# it. Any ThreadSanitizer report from any process the suite starts
# (fencegate, fencectl) fails the test it happened in, or counts as a
# failure of its own if it came between tests: in a run with a thread build
# the harness sends every process's reports to files and sweeps them after
# each test (tests/integration/harness.py, run.py). Reports whose frames
# lie only in uninstrumented third-party libraries may be suppressed in
# tests/tsan.supp; fencegate's own code never is.
#
#     scripts/tsan.sh [run.py options, e.g. -k test_proxy]
#
# Slow (the gateway runs several times slower than plain): the matrix
# gives the thread build three times the timing slack (matrix.SLOW). Ends with run.py's
# "N passed, N failed" line; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
dir=build-tsan

# -Db_lundef=false: the sanitizer runtime is a shared library the linker
# cannot see undefined references resolved in (as for the ASan build).
if [ -d "$dir" ]; then
  meson setup --reconfigure "$dir" -Dwerror=true --buildtype=debug \
    -Db_sanitize=thread -Db_lundef=false >/dev/null
else
  CC=${CC:-gcc} meson setup "$dir" -Dwerror=true --buildtype=debug \
    -Db_sanitize=thread -Db_lundef=false >/dev/null
fi || { echo "meson setup failed"; echo "0 passed, 1 failed"; exit 1; }
ninja -C "$dir" >/dev/null || { ninja -C "$dir"; echo "0 passed, 1 failed"; exit 1; }

# halt_on_error=0: a report does not stop the gateway, so the test that
# caused it finishes and names it; exitcode=66 makes the process's exit say
# so too. second_deadlock_stack: both stacks of a lock-order inversion.
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:suppressions=$top/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
python3 tests/integration/run.py --build "thread=$top/$dir/gateway/fencegate" "$@"
