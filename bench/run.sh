#!/usr/bin/env bash
# fencegate benchmark: fencegate vs etcd's lock API vs the raw Redis floor,
# plus 10,000 blocked waiters (RSS) and release -> next-waiter handoff latency.
#
#   bench/run.sh [--bin PATH] [--skip-fencegate]
#
# --bin defaults to build/gateway/fencegate under the repository root; the
# script builds nothing. It starts its own redis-server, etcd and fencegate
# on free loopback ports (state in a temp dir), and stops them by PID on exit.
# Needs: redis-server, redis-cli, redis-benchmark, etcd, wrk, curl, python3.
#
# Knobs (environment): DURATION=10 WARMUP=2 CONNS=32 REDIS_N=400000
#   WAITERS=10000 WAITER_LOCKS=10 HANDOFF_WAITERS=1000 HANDOFF_ROUNDS=500
#   FG_THREADS=$(nproc) FG_MAX_CONN=16384 FG_MAX_WAITERS=20000 KEEP_TMP=0
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN="$ROOT/build/gateway/fencegate"
SKIP_FG=0

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) [ $# -ge 2 ] || { usage >&2; exit 2; }; BIN=$2; shift 2 ;;
	--bin=*) BIN=${1#--bin=}; shift ;;
	--skip-fencegate) SKIP_FG=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
done
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-32}
REDIS_N=${REDIS_N:-400000}
WAITERS=${WAITERS:-10000}
WAITER_LOCKS=${WAITER_LOCKS:-10}
HANDOFF_WAITERS=${HANDOFF_WAITERS:-1000}
HANDOFF_ROUNDS=${HANDOFF_ROUNDS:-500}
FG_THREADS=${FG_THREADS:-$(nproc)}
FG_MAX_CONN=${FG_MAX_CONN:-16384}
FG_MAX_WAITERS=${FG_MAX_WAITERS:-20000}
KEEP_TMP=${KEEP_TMP:-0}

for tool in redis-server redis-cli redis-benchmark etcd wrk curl python3; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done
if [ "$SKIP_FG" = 0 ] && [ ! -x "$BIN" ]; then
	echo "run.sh: no fencegate binary at $BIN (build it first, or pass --bin PATH / --skip-fencegate)" >&2
	exit 1
fi

# 10,000 waiter sockets on each side (client and fencegate) need a high fd limit.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
ulimit -n "$hard" 2>/dev/null || true
if [ "$(ulimit -n)" -lt $((WAITERS + 512)) ]; then
	echo "run.sh: warning: open-file limit $(ulimit -n) is below WAITERS+512; the waiter test may fail" >&2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fencegate-bench.XXXXXX")
RUNID=$(date +%s)-$$
PIDS=()

stop_pid() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}
cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
	if [ "$KEEP_TMP" = 1 ]; then echo "(logs kept in $TMP)"; else rm -rf "$TMP"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '%s\n' "$*"; }
pname() { case "$1" in "${REDIS_PID:-}") echo redis ;; "${ETCD_PID:-}") echo etcd ;; "${FG_PID:-}") echo fencegate ;; *) echo "pid$1" ;; esac; }
hr() { say "------------------------------------------------------------------------"; }
calc() { awk "BEGIN { $1 }"; }

# Free loopback ports: bind them all at once so they are distinct.
read -r REDIS_PORT ETCD_PORT ETCD_PEER_PORT FG_PORT UPSTREAM_PORT < <(python3 - <<'EOF'
import socket
socks = []
for _ in range(5):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)

wait_for() { # wait_for SECONDS PID DESC CMD...
	local secs=$1 pid=$2 desc=$3 i
	shift 3
	for ((i = 0; i < secs * 10; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: $desc exited during start-up; its log:" >&2
			tail -n 30 "$TMP/$desc.log" >&2 || true
			exit 1
		fi
		sleep 0.1
	done
	echo "run.sh: $desc not ready after ${secs}s; its log:" >&2
	tail -n 30 "$TMP/$desc.log" >&2 || true
	exit 1
}

say "fencegate benchmark  ($(date -u '+%Y-%m-%d %H:%M:%S UTC'))"
say "machine: $(nproc) cores, $(uname -sr); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
say "tools: $(redis-server --version | awk '{print $1, $2, $3}'); etcd $(etcd --version | awk 'NR==1{print $3}'); $(wrk --version 2>&1 | awk 'NR==1{print $1, $2}'); $(python3 --version)"
say "temp dir on: $(df -T "$TMP" | awk 'NR==2{print $2}') (etcd WAL fsyncs there); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
hr

# ---- redis-server --------------------------------------------------------
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
	--daemonize no --dir "$TMP" --logfile '' >"$TMP/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
wait_for 10 "$REDIS_PID" redis sh -c "redis-cli -h 127.0.0.1 -p $REDIS_PORT ping | grep -q PONG"
say "redis-server  pid $REDIS_PID  127.0.0.1:$REDIS_PORT"

# ---- etcd ----------------------------------------------------------------
ETCD_URL="http://127.0.0.1:$ETCD_PORT"
etcd --name fgbench --data-dir "$TMP/etcd" \
	--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "fgbench=http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster-state new >"$TMP/etcd.log" 2>&1 &
ETCD_PID=$!
PIDS+=("$ETCD_PID")
wait_for 30 "$ETCD_PID" etcd sh -c "curl -sf $ETCD_URL/health | grep -q true"
ETCD_API=""
for p in /v3 /v3beta /v3alpha; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "$ETCD_URL$p/lease/grant" -d '{"TTL":5}' || true)
	if [ "$code" = 200 ]; then ETCD_API=$p; break; fi
done
[ -n "$ETCD_API" ] || { echo "run.sh: etcd JSON gateway answers neither /v3 nor /v3beta" >&2; exit 1; }
say "etcd          pid $ETCD_PID  $ETCD_URL  (JSON gateway at $ETCD_API/)"

# ---- fencegate -----------------------------------------------------------
FG_URL="http://127.0.0.1:$FG_PORT"
FG_OK=0
if [ "$SKIP_FG" = 0 ]; then
	"$BIN" --listen "127.0.0.1:$FG_PORT" --redis "127.0.0.1:$REDIS_PORT" \
		--upstream "http://127.0.0.1:$UPSTREAM_PORT" --threads "$FG_THREADS" \
		--max-connections "$FG_MAX_CONN" --max-waiters "$FG_MAX_WAITERS" \
		--log-level error >"$TMP/fencegate.log" 2>&1 &
	FG_PID=$!
	PIDS+=("$FG_PID")
	wait_for 15 "$FG_PID" fencegate sh -c \
		"[ \"\$(curl -s -o /dev/null -w '%{http_code}' $FG_URL/_fence/v1/locks/fgbench-probe)\" != 000 ]"
	say "fencegate     pid $FG_PID  $FG_URL  (--threads $FG_THREADS --max-connections $FG_MAX_CONN --max-waiters $FG_MAX_WAITERS; fd limit $(ulimit -n))"

	# Smoke test: one acquire / inspect / release, shown verbatim.
	name="fgbench-smoke-$RUNID"
	acq=$(curl -s -w '\n%{http_code}' -XPOST -H 'Content-Type: application/json' \
		"$FG_URL/_fence/v1/locks/$name" -d '{"ttl_ms":30000}' || true)
	acq_code=${acq##*$'\n'}
	acq_body=${acq%$'\n'*}
	lease=$(printf '%s' "$acq_body" | python3 -c 'import sys,json; print(json.load(sys.stdin)["lease"])' 2>/dev/null || true)
	ins=$(curl -s -w ' -> %{http_code}' "$FG_URL/_fence/v1/locks/$name" || true)
	rel_code=$(curl -s -o "$TMP/rel.body" -w '%{http_code}' -XDELETE -H "Fence-Lease: $lease" \
		"$FG_URL/_fence/v1/locks/$name" || true)
	say "smoke: POST -> $acq_code $acq_body"
	say "smoke: GET  -> $ins"
	say "smoke: DELETE (Fence-Lease) -> $rel_code $(head -c 200 "$TMP/rel.body")"
	if [ "$acq_code" = 200 ] && [ -n "$lease" ] && [ "$rel_code" = 204 ]; then
		FG_OK=1
	else
		say "smoke test FAILED: skipping the fencegate measurements"
	fi
fi
hr

fg_alive() { # fg_alive PHASE
	if [ "$FG_OK" = 1 ] && ! kill -0 "$FG_PID" 2>/dev/null; then
		say "!! fencegate (pid $FG_PID) died during $1; last log lines:"
		tail -n 20 "$TMP/fencegate.log" | sed 's/^/   /'
		FG_OK=0
	fi
}
field() { # field LINE KEY
	printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1
}

# ---- 3. Redis floor ------------------------------------------------------
say "[redis floor] redis-benchmark -c $CONNS -n $REDIS_N -r 100000 (no pipelining), same redis-server"
REL_SHA=$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" script load \
	"if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end")
rb() {
	redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$CONNS" -n "$REDIS_N" -r 100000 --csv "$@" |
		awk -F'","' 'NR==2 { print $2 "," $5 "," $7 }' | tr -d '"'
}
IFS=, read -r SET_RPS SET_P50 SET_P99 < <(rb set 'fg:bench:__rand_int__' x nx px 30000)
IFS=, read -r EVAL_RPS EVAL_P50 EVAL_P99 < <(rb evalsha "$REL_SHA" 1 'fg:bench:__rand_int__' x)
FLOOR=$(calc "printf \"%.1f\", 1 / (1 / $SET_RPS + 1 / $EVAL_RPS)")
say "  SET NX PX 30000 : $SET_RPS req/s   (p50 $SET_P50 ms, p99 $SET_P99 ms)"
say "  EVALSHA release : $EVAL_RPS req/s   (p50 $EVAL_P50 ms, p99 $EVAL_P99 ms)"
say "  floor = 1/(1/set + 1/evalsha) = $FLOOR cycles/s"
redis-cli -h 127.0.0.1 -p "$REDIS_PORT" eval \
	"local n=0 for _,k in ipairs(redis.call('keys','fg:bench:*')) do n=n+redis.call('del',k) end return n" 0 >/dev/null
hr

# ---- 1. fencegate cycles -------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { # utime+stime of a process, in clock ticks (0 when gone)
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
run_wrk() { # run_wrk LABEL SCRIPT URL PREFIX [ARGS...]; echoes the RESULT line
	local label=$1 script=$2 url=$3 prefix=$4 out p t0 t1 cpu=""
	shift 4
	wrk -t"$CONNS" -c"$CONNS" -d"${WARMUP}s" --timeout 10s -s "$script" "$url" -- "warm-$prefix" "$@" \
		>"$TMP/$label-warm.txt" 2>&1 || true
	declare -A c0
	for p in "${PIDS[@]}"; do c0[$p]=$(cpu_ticks "$p"); done
	read -r -a s0 < <(head -n1 /proc/stat)
	t0=$(date +%s.%N)
	wrk -t"$CONNS" -c"$CONNS" -d"${DURATION}s" --timeout 10s -s "$script" "$url" -- "$prefix" "$@" \
		>"$TMP/$label.txt" 2>&1 || true
	t1=$(date +%s.%N)
	read -r -a s1 < <(head -n1 /proc/stat)
	for p in "${PIDS[@]}"; do
		cpu+=" $(pname "$p") $(calc "printf \"%.0f%%\", ($(cpu_ticks "$p") - ${c0[$p]}) / $CLK_TCK / ($t1 - $t0) * 100")"
	done
	# whole box: fields 1..8 of the cpu line, idle = idle + iowait
	local tot=0 idle i
	for i in 1 2 3 4 5 6 7 8; do tot=$((tot + s1[i] - s0[i])); done
	idle=$((s1[4] - s0[4] + s1[5] - s0[5]))
	cpu+="; whole box busy $(calc "printf \"%.0f%%\", ($tot - $idle) / $tot * 100 * $(nproc)") of $(($(nproc) * 100))%"
	printf '%s\n' "$cpu" >"$TMP/$label.cpu"
	out=$(grep '^RESULT ' "$TMP/$label.txt" || true)
	if [ -z "$out" ]; then
		say "  wrk produced no result; its output:" >&2
		sed 's/^/   /' "$TMP/$label.txt" >&2
	fi
	printf '%s\n' "$out"
}
report_wrk() { # report_wrk LABEL RESULTLINE
	local line=$2 kinds sample
	say "  cycles/s $(field "$line" cps)   ($(field "$line" cycles) cycles in $(field "$line" secs) s;" \
		"per-request p50 $(field "$line" req_p50_ms) ms, p99 $(field "$line" req_p99_ms) ms)"
	say "  errors: app $(field "$line" app_errors), http>=400 $(field "$line" http_ge400)," \
		"socket connect/read/write/timeout $(field "$line" sock_connect)/$(field "$line" sock_read)/$(field "$line" sock_write)/$(field "$line" sock_timeout)"
	kinds=$(sed -n 's/^ERRKINDS //p' "$TMP/$1.txt")
	sample=$(sed -n 's/^ERRSAMPLE //p' "$TMP/$1.txt")
	say "  CPU during the run (100% = one core):$(cat "$TMP/$1.cpu")"
	[ -n "$kinds" ] && say "  error kinds: $kinds"
	[ -n "$sample" ] && say "  first error: $sample"
	return 0
}

FG_CPS=""
if [ "$FG_OK" = 1 ]; then
	say "[fencegate] $CONNS connections (wrk -t$CONNS -c$CONNS), own lock per connection," \
		"cycle = POST acquire (200) + DELETE release (204); ${WARMUP}s warm-up, ${DURATION}s run"
	FG_LINE=$(run_wrk fencegate "$HERE/fence_cycle.lua" "$FG_URL" "fgb-$RUNID")
	if [ -n "$FG_LINE" ]; then
		report_wrk fencegate "$FG_LINE"
		FG_CPS=$(field "$FG_LINE" cps)
		FG_ERRS=$(($(field "$FG_LINE" app_errors) + $(field "$FG_LINE" sock_connect) + $(field "$FG_LINE" sock_read) + $(field "$FG_LINE" sock_write) + $(field "$FG_LINE" sock_timeout)))
	fi
	fg_alive "the cycle benchmark"
	hr
fi

# ---- 2. etcd lock API ----------------------------------------------------
say "[etcd] $CONNS connections, own lock name per connection, ONE lease per connection" \
	"(granted once, TTL 30, reused); cycle = $ETCD_API/lock/lock + $ETCD_API/lock/unlock; ${WARMUP}s warm-up, ${DURATION}s run"
ETCD_LINE=$(run_wrk etcd "$HERE/etcd_cycle.lua" "$ETCD_URL" "fgb-$RUNID" "$ETCD_API")
ETCD_CPS=""
if [ -n "$ETCD_LINE" ]; then
	report_wrk etcd "$ETCD_LINE"
	ETCD_CPS=$(field "$ETCD_LINE" cps)
	ETCD_ERRS=$(($(field "$ETCD_LINE" app_errors) + $(field "$ETCD_LINE" sock_connect) + $(field "$ETCD_LINE" sock_read) + $(field "$ETCD_LINE" sock_write) + $(field "$ETCD_LINE" sock_timeout)))
fi
hr

# ---- 5. waiters / 6. handoff ---------------------------------------------
W_OUT=""
H_OUT=""
if [ "$FG_OK" = 1 ]; then
	say "[waiters] $WAITERS connections, each one blocking acquire {\"wait_ms\":120000,\"ttl_ms\":30000}" \
		"on $WAITER_LOCKS held locks ($((WAITERS / WAITER_LOCKS)) each)"
	W_OUT=$(python3 "$HERE/fence_waiters.py" waiters --port "$FG_PORT" --pid "$FG_PID" \
		--prefix "fgw-$RUNID" --n "$WAITERS" --locks "$WAITER_LOCKS" 2> >(sed 's/^/ /' >&2) || true)
	wres() { printf '%s\n' "$W_OUT" | sed -n "s/^RESULT_WAITERS_$1=//p" | head -n1; }
	if [ -n "$(wres FATAL)" ]; then say "  waiter test failed: $(wres FATAL)"; fi
	fg_alive "the waiter test"
	hr
fi
if [ "$FG_OK" = 1 ]; then
	say "[handoff] $HANDOFF_WAITERS waiters queued on one lock; $HANDOFF_ROUNDS timed releases" \
		"(after 20 untimed): DELETE sent -> next waiter's 200 received; each granted waiter re-queues at once"
	H_OUT=$(python3 "$HERE/fence_waiters.py" handoff --port "$FG_PORT" --prefix "fgh-$RUNID" \
		--n "$HANDOFF_WAITERS" --rounds "$HANDOFF_ROUNDS" 2> >(sed 's/^/ /' >&2) || true)
	hres() { printf '%s\n' "$H_OUT" | sed -n "s/^RESULT_HANDOFF_$1=//p" | head -n1; }
	if [ -n "$(hres FATAL)" ]; then say "  handoff test failed: $(hres FATAL)"; fi
	if [ -n "$(hres ERRSAMPLE)" ]; then say "  first handoff error: $(hres ERRSAMPLE)"; fi
	fg_alive "the handoff test"
	hr
fi
sleep 0.2 # let the helpers' stderr drain before the summary

# ---- summary -------------------------------------------------------------
verdict() { # verdict VALUE OP TARGET -> PASS/FAIL/n/a
	if [ -z "$1" ] || [ "$1" = nan ]; then echo "n/a"; return; fi
	calc "print (($1 $2 $3) ? \"PASS\" : \"FAIL\")"
}
num() { [ -n "$1" ] && echo "$1" || echo "-"; }
RATIO_ETCD=""
RATIO_FLOOR=""
if [ -n "$FG_CPS" ] && [ -n "$ETCD_CPS" ]; then RATIO_ETCD=$(calc "printf \"%.2f\", $FG_CPS / $ETCD_CPS"); fi
if [ -n "$FG_CPS" ] && [ -n "$FLOOR" ]; then RATIO_FLOOR=$(calc "printf \"%.3f\", $FG_CPS / $FLOOR"); fi

say ""
say "SUMMARY ($CONNS connections, ${DURATION}s runs, $(nproc) cores, everything on this box)"
printf '%-46s %16s %10s %6s\n' "measure" "value" "target" ""
printf '%-46s %16s %10s %6s\n' "fencegate acquire+release cycles/s" "$(num "$FG_CPS")" "" ""
printf '%-46s %16s %10s %6s\n' "etcd lock+unlock cycles/s (1 lease/conn)" "$(num "$ETCD_CPS")" "" ""
printf '%-46s %16s %10s %6s\n' "redis floor cycles/s (SET NX PX + EVALSHA)" "$(num "$FLOOR")" "" ""
printf '%-46s %16s %10s %6s\n' "  redis SET NX PX req/s" "$(num "$SET_RPS")" "" ""
printf '%-46s %16s %10s %6s\n' "  redis EVALSHA req/s" "$(num "$EVAL_RPS")" "" ""
printf '%-46s %16s %10s %6s\n' "ratio fencegate / etcd" "$(num "$RATIO_ETCD")" ">= 4" "$(verdict "$RATIO_ETCD" '>=' 4)"
printf '%-46s %16s %10s %6s\n' "ratio fencegate / redis floor" "$(num "$RATIO_FLOOR")" ">= 0.40" "$(verdict "$RATIO_FLOOR" '>=' 0.40)"
printf '%-46s %16s %10s %6s\n' "errors in fencegate / etcd cycle runs" "$(num "${FG_ERRS:-}") / $(num "${ETCD_ERRS:-}")" "0" ""
if [ -n "$W_OUT" ] && [ -n "$(wres RSS_KB)" ]; then
	W_RSS_MB=$(calc "printf \"%.1f\", $(wres RSS_KB) / 1024")
	W_BASE_MB=$(calc "printf \"%.1f\", $(wres BASE_RSS_KB) / 1024")
	[ "$(wres ALLQUEUED)" = 1 ] || W_RSS_NOTE=" (NOT all queued)"
	printf '%-46s %16s %10s %6s\n' "waiters queued (seen in GET .../locks/<name>)" "$(wres QUEUED)/$(wres TARGET)" "$(wres TARGET)" \
		"$(verdict "$(wres QUEUED)" '>=' "$(wres TARGET)")"
	printf '%-46s %16s %10s %6s\n' "fencegate VmRSS with them blocked, MB${W_RSS_NOTE:-}" "$W_RSS_MB" "< 150" "$(verdict "$W_RSS_MB" '<' 150)"
	printf '%-46s %16s %10s %6s\n' "  (VmRSS before, MB / fds with waiters)" "$W_BASE_MB / $(wres FDS)" "" ""
	printf '%-46s %16s %10s %6s\n' "  waiters still listed after they hung up" "$(wres LEFT_AFTER_CLOSE)" "(info)" ""
fi
if [ -n "$H_OUT" ] && [ -n "$(hres P99_MS)" ]; then
	printf '%-46s %16s %10s %6s\n' "handoff latency p50 ms ($(hres N) releases, $(hres WAITERS) queued)" "$(hres P50_MS)" "" ""
	printf '%-46s %16s %10s %6s\n' "handoff latency p99 ms" "$(hres P99_MS)" "< 5" "$(verdict "$(hres P99_MS)" '<' 5)"
	printf '%-46s %16s %10s %6s\n' "  handoff max ms / errors" "$(hres MAX_MS) / $(hres ERRORS)" "" ""
fi
if [ "$SKIP_FG" = 0 ] && [ "$FG_OK" != 1 ]; then
	say "fencegate measurements incomplete (see above)"
fi
