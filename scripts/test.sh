#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds fencegate twice
# (plain with -Werror, then with AddressSanitizer + UndefinedBehaviorSanitizer),
# runs the unit tests and the integration tests against each build (the plain
# build's once more with a Redis Cluster in place of every redis-server, and
# the seeded fault-injection run of tests/chaos/ against it), then
# builds the libFuzzer harnesses with clang and runs each over its corpus for
# a few seconds (FUZZ_SECONDS, default 10), and ends with one line:
# `N passed, N failed`. BUSY_CORE=N keeps N cores spinning during each
# integration run (run.py --busy-core N): the suite must hold under load.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# Counts one build's cmocka cases: every OK and FAILED case line, and one
# failure more for each test executable meson saw fail without a FAILED
# line of its own (a crash, a sanitizer report).
count_meson() { # builddir
  local out="$log/meson-$(basename "$1").txt" tl="$1/meson-logs/testlog.txt"
  meson test -C "$1" --suite unit --print-errorlogs >"$out" 2>&1
  grep -E '^ *[0-9]+/[0-9]+ ' "$out" || true
  local ok fail exe_fail case_fail_exes
  ok=$(grep -c '^\[       OK \]' "$tl" 2>/dev/null || true)
  fail=$(grep -c '^\[  FAILED  \] test_' "$tl" 2>/dev/null || true)
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
  passed=$((passed + ok)); failed=$((failed + fail))
  echo "unit ($1): $ok passed, $fail failed"
}

# Runs a runner that ends with "N passed, N failed" and adds its counts; a
# runner that never prints that line counts as one failure.
count_runner() { # label hide-regex command...
  local label=$1 hide=$2; shift 2
  local out="$log/run-${label//[^a-z0-9]/_}.txt"
  "$@" 2>&1 | tee "$out" | grep -vE "$hide" || true
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
  if [ -z "$line" ]; then
    echo "$label: the runner did not finish"
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
  failed=$((failed + $(echo "$line" | cut -d' ' -f3)))
  echo "$label: $line"
}

count_integration() { # binary label [run.py options...]
  local bin=$1 label=$2; shift 2
  count_runner "integration ($label)" '^(ok|PASS) ' python3 tests/integration/run.py --bin "$bin" \
    ${BUSY_CORE:+--busy-core "$BUSY_CORE"} "$@"
}

count_fuzz() { # builddir seconds
  count_runner fuzz '^[0-9]+ passed, [0-9]+ failed' tests/fuzz/run.sh "$1" "$2"
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

echo "== plain build (-Wall -Wextra -Werror)"
if build build-test -Dwerror=true --buildtype=debugoptimized; then
  count_meson build-test
  count_integration "$top/build-test/gateway/fencegate" plain
  count_integration "$top/build-test/gateway/fencegate" "plain, Redis Cluster" --redis-mode cluster
  # seeded fault injection (tests/chaos/README.md); the seed is printed
  # first, CHAOS_SEED replays one
  count_runner "chaos (plain)" '^ok ' python3 tests/chaos/run.py \
    --bin "$top/build-test/gateway/fencegate" ${CHAOS_SEED:+--seed "$CHAOS_SEED"}
else
  echo "build failed"; failed=$((failed + 1))
fi

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=24"
if build build-asan -Dwerror=true --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false; then
  count_meson build-asan
  FENCEGATE_SANITIZED=1 count_integration "$top/build-asan/gateway/fencegate" sanitized
else
  echo "sanitizer build failed"; failed=$((failed + 1))
fi

echo "== libFuzzer harnesses (clang, AddressSanitizer + UndefinedBehaviorSanitizer)"
if CC=clang build build-fuzz -Dwerror=true --buildtype=debugoptimized -Dfuzz=true -Dtests=false \
    -Db_sanitize=address,undefined -Db_lundef=false; then
  count_fuzz build-fuzz "${FUZZ_SECONDS:-10}"
else
  echo "fuzz build failed"; failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
