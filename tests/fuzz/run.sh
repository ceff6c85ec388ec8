#!/usr/bin/env bash
# Runs every fuzz harness over its checked-in corpus for a while and says
# whether any property broke:
#
#   tests/fuzz/run.sh [BUILDDIR [SECONDS]]     (build-fuzz, 10 s per harness)
#
# One line per harness, "ok fuzz_x (<execs> execs)" or "FAILED fuzz_x",
# then "N passed, N failed". New inputs go to a scratch directory (the
# checked-in corpus is only read); a crashing input is kept under
# BUILDDIR/fuzz-artifacts/ and its log printed. FUZZ_JOBS harnesses run at
# once (default: the number of CPUs, at most 4).
set -uo pipefail
cd "$(dirname "$0")/../.."

build=${1:-build-fuzz}
secs=${2:-10}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 4 ] && jobs=4
[ "$jobs" -lt 1 ] && jobs=1

# harness and its extra libFuzzer flags
harnesses=(
  "fuzz_sequencer -max_len=1024"
  "fuzz_name -max_len=4096"
  "fuzz_json -max_len=4096"
  "fuzz_config -max_len=8192"
  "fuzz_path -max_len=8192"
  "fuzz_route -max_len=4096"
  "fuzz_destination -max_len=8192"
  "fuzz_accesslog -max_len=8192"
  "fuzz_authfile -max_len=8192"
  "fuzz_authz -max_len=1024"
  "fuzz_h1resp -max_len=8192"
  "fuzz_awschunk -max_len=8192"
  "fuzz_s3_target -max_len=8192"
  "fuzz_s3_delete -max_len=65536"
  "fuzz_sigv4 -max_len=8192"
  "fuzz_event_id -max_len=256"
)

# UBSan findings must stop the run; later flags win over the caller's.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

run_one() { # name flags...
  local name=$1; shift
  local exe="$build/tests/fuzz/$name" log="$scratch/$name.log"
  if [ ! -x "$exe" ]; then
    echo "$exe is not built" >"$log"
    echo 1 >"$scratch/$name.rc"
    return
  fi
  mkdir -p "$scratch/$name" "$artifacts/$name"
  "$exe" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$name/" "$@" \
    "$scratch/$name" "tests/fuzz/corpus/$name" >"$log" 2>&1
  echo $? >"$scratch/$name.rc"
}

running=0
for h in "${harnesses[@]}"; do
  # shellcheck disable=SC2086
  run_one $h &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

passed=0
failed=0
for h in "${harnesses[@]}"; do
  name=${h%% *}
  rc=$(cat "$scratch/$name.rc" 2>/dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$name.log" | tail -1)
  if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
    echo "ok $name ($execs execs)"
    passed=$((passed + 1))
  else
    grep -vE '^(#[0-9]+|INFO:|MERGE|\s*$)' "$scratch/$name.log" | tail -40
    echo "FAILED $name"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
