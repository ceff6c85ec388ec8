#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds fencegate four times
# (plain with -Werror; with AddressSanitizer + UndefinedBehaviorSanitizer;
# with ThreadSanitizer, unless TSAN=0; the libFuzzer harnesses with clang),
# then runs at once:
#   - the unit tests of both builds (meson test);
#   - the integration suite over the whole matrix (tests/integration/run.py:
#     the three builds, one Redis and a Redis Cluster, nginx and Apache; each test
#     in the cells that can change its outcome, docs/testing.md) with
#     TEST_JOBS workers (default 6);
#   - the seeded fault-injection run of tests/chaos/ against the plain build;
#   - each fuzz harness over its corpus for FUZZ_SECONDS (default 10);
# and ends with each part's time and one line: `N passed, N failed`.
# BUSY_CORE=N keeps N cores spinning during the integration run (run.py
# --busy-core N): the suite must hold under load. CHAOS_SEED replays a
# chaos run; TEST_SEED an integration run's order.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
t_start=$SECONDS

scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
times=()
part_time() { # label seconds
  times+=("$(printf '%-34s %5d s' "$1" "$2")")
}

build() { # dir, meson args...
  local dir=$1; shift
  if [ -d "$dir" ]; then
    meson setup --reconfigure "$dir" "$@" >"$log/setup.txt" 2>&1
  else
    meson setup "$dir" "$@" >"$log/setup.txt" 2>&1
  fi || { cat "$log/setup.txt"; return 1; }
  ninja -C "$dir" >"$log/ninja.txt" 2>&1 || { cat "$log/ninja.txt"; return 1; }
}

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=24"

t=$SECONDS
echo "== builds: plain (-Wall -Wextra -Werror), ASan+UBSan, ThreadSanitizer, libFuzzer (clang)"
plain_ok=0 asan_ok=0 tsan_ok=0 fuzz_ok=0
build build-test -Dwerror=true --buildtype=debugoptimized && plain_ok=1 ||
  { echo "build failed"; failed=$((failed + 1)); }
build build-asan -Dwerror=true --buildtype=debug -Db_sanitize=address,undefined \
  -Db_lundef=false && asan_ok=1 ||
  { echo "sanitizer build failed"; failed=$((failed + 1)); }
if [ "${TSAN:-1}" = 1 ]; then
  CC=gcc build build-tsan -Dwerror=true --buildtype=debug -Db_sanitize=thread \
    -Db_lundef=false && tsan_ok=1 ||
    { echo "ThreadSanitizer build failed"; failed=$((failed + 1)); }
fi
CC=clang build build-fuzz -Dwerror=true --buildtype=debugoptimized -Dfuzz=true \
  -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false && fuzz_ok=1 ||
  { echo "fuzz build failed"; failed=$((failed + 1)); }
part_time "builds" $((SECONDS - t))

# Counts one build's cmocka cases: every OK and FAILED case line, and one
# failure more for each test executable meson saw fail without a FAILED
# line of its own (a crash, a sanitizer report). Writes "ok fail" to $2.
count_meson() { # builddir countfile
  local out="$log/meson-$(basename "$1").txt" tl="$1/meson-logs/testlog.txt"
  meson test -C "$1" --suite unit --print-errorlogs >"$out" 2>&1
  local ok fail exe_fail case_fail_exes
  ok=$(grep -c '^\[       OK \]' "$tl" 2>/dev/null || true)
  # a failed case is named twice, as it runs and in its executable's
  # summary: the summaries' counts are the cases
  fail=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below.*/\1/p' \
    "$tl" 2>/dev/null | awk '{ n += $1 } END { print n + 0 }')
  exe_fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$out" | tail -1)
  case_fail_exes=$(grep -c '^\[  FAILED  \] [0-9]* test(s), listed below' "$tl" 2>/dev/null || true)
  ok=${ok:-0}; fail=${fail:-0}; exe_fail=${exe_fail:-1}; case_fail_exes=${case_fail_exes:-0}
  if [ "$exe_fail" -gt "$case_fail_exes" ]; then
    fail=$((fail + exe_fail - case_fail_exes))
    grep -E 'FAIL|ERROR|Sanitizer|runtime error' "$out" | head -20
  fi
  if [ "$ok" -eq 0 ] && [ "$fail" -eq 0 ]; then
    echo "unit ($1): no test ran"; fail=1
  fi
  echo "unit ($1): $ok passed, $fail failed"
  echo "$ok $fail" >"$2"
}

# Runs a runner that ends with "N passed, N failed" into its own log, and
# writes "passed failed seconds" to $2; a runner that never prints that
# line counts as one failure.
run_part() { # label countfile command...
  local label=$1 counts=$2; shift 2
  local out="$counts.log" t0=$SECONDS line
  "$@" >"$out" 2>&1
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
  if [ -z "$line" ]; then
    echo "0 1 $((SECONDS - t0))" >"$counts"
  else
    echo "$(echo "$line" | cut -d' ' -f1) $(echo "$line" | cut -d' ' -f3) $((SECONDS - t0))" >"$counts"
  fi
}

# Prints a part's log (results lines hidden: `hide` matches them) and adds
# its counts.
report_part() { # label countfile hide-regex
  local label=$1 counts=$2 hide=$3 p f s
  echo "== $label"
  grep -vE "$hide" "$counts.log" || true
  if [ ! -s "$counts" ]; then
    echo "$label: the runner did not finish"; failed=$((failed + 1)); return
  fi
  read -r p f s <"$counts"
  passed=$((passed + p)); failed=$((failed + f))
  echo "$label: $p passed, $f failed"
  part_time "$label" "$s"
}

t=$SECONDS
echo "== unit tests and the integration, chaos and fuzz runs, at once"
pids=()
builds=()
[ $plain_ok = 1 ] && builds+=(--build "plain=$top/build-test/gateway/fencegate")
[ $asan_ok = 1 ] && builds+=(--build "sanitized=$top/build-asan/gateway/fencegate")
[ $tsan_ok = 1 ] && builds+=(--build "thread=$top/build-tsan/gateway/fencegate")
# halt_on_error=0: a report does not stop the gateway, so the test that
# caused it finishes and names it; the suite sweeps every process's report
# file after each test (tests/integration/harness.py)
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:suppressions=$top/tests/tsan.supp"
if [ ${#builds[@]} -gt 0 ]; then
  run_part integration "$log/it" python3 tests/integration/run.py "${builds[@]}" \
    --redis single,cluster -j "${TEST_JOBS:-6}" \
    ${BUSY_CORE:+--busy-core "$BUSY_CORE"} ${TEST_SEED:+--seed "$TEST_SEED"} &
  pids+=($!)
fi
if [ $plain_ok = 1 ]; then
  # the client libraries' own suites (Python, Go, C), in their own runners,
  # against one real environment (tests/clients/env.py)
  run_part "client libraries" "$log/clients" python3 tests/clients/run.py \
    --fencegate "$top/build-test/gateway/fencegate" \
    --fencectl "$top/build-test/fencectl/fencectl" \
    --c-test "$top/build-test/clients/c/tests/client_test" &
  pids+=($!)
  run_part "chaos (plain)" "$log/chaos" python3 tests/chaos/run.py \
    --bin "$top/build-test/gateway/fencegate" ${CHAOS_SEED:+--seed "$CHAOS_SEED"} &
  pids+=($!)
fi
if [ $fuzz_ok = 1 ]; then
  FUZZ_JOBS=${FUZZ_JOBS:-1} run_part fuzz "$log/fuzz" tests/fuzz/run.sh build-fuzz "${FUZZ_SECONDS:-10}" &
  pids+=($!)
fi
# the unit tests meanwhile, in this shell (their counts are its own)
for b in build-test build-asan; do
  [ -x "$b/gateway/fencegate" ] || continue
  t0=$SECONDS
  count_meson "$b" "$log/unit-$b"
  read -r p f <"$log/unit-$b"
  passed=$((passed + p)); failed=$((failed + f))
  part_time "unit ($b)" $((SECONDS - t0))
done
for pid in "${pids[@]}"; do wait "$pid"; done

[ ${#builds[@]} -gt 0 ] && report_part "integration (every cell)" "$log/it" '^(ok|PASS) '
[ $plain_ok = 1 ] && report_part "client libraries" "$log/clients" '^(ok |.* \.\.\. ok$|--- PASS: |=== RUN )'
[ $plain_ok = 1 ] && report_part "chaos (plain)" "$log/chaos" '^ok '
[ $fuzz_ok = 1 ] && report_part fuzz "$log/fuzz" '^[0-9]+ passed, [0-9]+ failed'
part_time "tests (all parts at once)" $((SECONDS - t))
part_time "the whole command" $((SECONDS - t_start))

echo "== time per part"
printf '%s\n' "${times[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
