#!/usr/bin/env bash
# fencegate benchmark: fencegate vs etcd's lock API vs the raw Redis floor,
# plus 10,000 blocked waiters (RSS) and release -> next-waiter handoff latency,
# plus the fencing proxy: 1 KiB GET/PUT direct to a WebDAV nginx, through a
# plain nginx reverse proxy and through fencegate (fenced PUTs), and a 1 GiB
# fenced PUT + GET streamed through fencegate (MB/s, RSS growth).
#
#   bench/run.sh [--bin PATH] [--skip-fencegate] [--skip-proxy]
#
# --bin defaults to build/gateway/fencegate under the repository root; the
# script builds nothing. It starts its own redis-server, etcd, two nginx
# (WebDAV storage, plain reverse proxy) and fencegate on free loopback ports
# (state in a temp dir), and stops them by PID on exit.
# Needs: redis-server, redis-cli, redis-benchmark, etcd, wrk, curl, python3;
# nginx (with the dav module) for the proxy part, which is skipped without it.
#
# Knobs (environment): DURATION=10 WARMUP=2 CONNS=32 REDIS_N=400000
#   WAITERS=10000 WAITER_LOCKS=10 HANDOFF_WAITERS=1000 HANDOFF_ROUNDS=500
#   FG_THREADS=8 FG_MAX_CONN=16384 FG_MAX_WAITERS=20000 KEEP_TMP=0
#   OBJ_SIZE=1024 GET_THREADS_FEW=2 PUT_ROUNDS=2 BIG_MB=1024 RSS_EVERY=0.2
#   BIN_WAIT=120
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN="$ROOT/build/gateway/fencegate"
SKIP_FG=0
SKIP_PROXY=0

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) [ $# -ge 2 ] || { usage >&2; exit 2; }; BIN=$2; shift 2 ;;
	--bin=*) BIN=${1#--bin=}; shift ;;
	--skip-fencegate) SKIP_FG=1; shift ;;
	--skip-proxy) SKIP_PROXY=1; shift ;;
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
FG_THREADS=${FG_THREADS:-8}   # fencegate's own default
FG_MAX_CONN=${FG_MAX_CONN:-16384}
FG_MAX_WAITERS=${FG_MAX_WAITERS:-20000}
KEEP_TMP=${KEEP_TMP:-0}
OBJ_SIZE=${OBJ_SIZE:-1024}
GET_THREADS_FEW=${GET_THREADS_FEW:-2}
BIG_MB=${BIG_MB:-1024}
RSS_EVERY=${RSS_EVERY:-0.2}
BIN_WAIT=${BIN_WAIT:-120}
PUT_ROUNDS=${PUT_ROUNDS:-2}
NOBJ=$CONNS # one object (and, for fenced PUTs, one lock) per connection

for tool in redis-server redis-cli redis-benchmark etcd wrk curl python3; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done
if [ "$SKIP_PROXY" = 0 ] && ! command -v nginx >/dev/null; then
	echo "run.sh: nginx not found: skipping the proxy part" >&2
	SKIP_PROXY=1
fi
# The binary may be mid-rebuild (briefly missing): wait a little for it.
if [ "$SKIP_FG" = 0 ] && [ ! -x "$BIN" ]; then
	echo "run.sh: waiting up to ${BIN_WAIT}s for $BIN to appear" >&2
	for ((i = 0; i < BIN_WAIT * 2; i++)); do [ -x "$BIN" ] && break; sleep 0.5; done
fi
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
pname() { case "$1" in "${REDIS_PID:-}") echo redis ;; "${ETCD_PID:-}") echo etcd ;; "${FG_PID:-}") echo fencegate ;;
	"${STORE_PID:-}") echo nginx-store ;; "${NPROXY_PID:-}") echo nginx-proxy ;; "${FGS_PID:-}") echo fencegate-stream ;; *) echo "pid$1" ;; esac; }
hr() { say "------------------------------------------------------------------------"; }
calc() { awk "BEGIN { $1 }"; }

# Free loopback ports: bind them all at once so they are distinct.
# UPSTREAM_PORT is the WebDAV storage nginx (fencegate's --upstream), NPROXY_PORT
# the plain nginx reverse proxy in front of it, FGS_PORT a second, fresh
# fencegate for the streaming test.
read -r REDIS_PORT ETCD_PORT ETCD_PEER_PORT FG_PORT UPSTREAM_PORT NPROXY_PORT FGS_PORT < <(python3 - <<'EOF'
import socket
socks = []
for _ in range(7):
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

# ---- nginx: WebDAV storage, and a plain reverse proxy in front of it -----
STORE_URL="http://127.0.0.1:$UPSTREAM_PORT"
NPROXY_URL="http://127.0.0.1:$NPROXY_PORT"
PROXY_OK=0
# nginx_conf NAME SERVER-BLOCK [HTTP-EXTRA]: a self-contained nginx.conf whose
# prefix, pid, logs and temp dirs all live in $TMP/NAME.
nginx_conf() {
	local d="$TMP/$1"
	mkdir -p "$d"
	{
		[ "$(id -u)" = 0 ] && echo "user root;"
		cat <<EOF
worker_processes 1;
daemon off;
pid $d/nginx.pid;
lock_file $d/nginx.lock;
error_log $TMP/$1.log error;
events { worker_connections 4096; }
http {
	access_log off;
	log_not_found off;
	default_type application/octet-stream;
	client_max_body_size 0;
	keepalive_requests 1000000;
	keepalive_timeout 120s;
	client_body_temp_path $d/client_body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	uwsgi_temp_path $d/uwsgi;
	scgi_temp_path $d/scgi;
${3:-}
	server {
$2
	}
}
EOF
	} >"$d/nginx.conf"
}
start_nginx() { # start_nginx NAME URL -> pid in NGINX_PID; on failure says why and returns 1
	local i
	nginx -p "$TMP/$1/" -c "$TMP/$1/nginx.conf" -e "$TMP/$1.log" >>"$TMP/$1.log" 2>&1 &
	NGINX_PID=$!
	PIDS+=("$NGINX_PID")
	for ((i = 0; i < 100; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$2/fgb-probe" || true)" != 000 ] && return 0
		kill -0 "$NGINX_PID" 2>/dev/null || break
		sleep 0.1
	done
	say "!! $1 did not start (the proxy part is skipped); its log:"
	tail -n 20 "$TMP/$1.log" | sed 's/^/   /'
	return 1
}
if [ "$SKIP_PROXY" = 0 ]; then
	mkdir -p "$TMP/dav"
	nginx_conf nginx-store "		listen 127.0.0.1:$UPSTREAM_PORT;
		root $TMP/dav;
		sendfile on;
		dav_methods PUT DELETE MKCOL COPY MOVE;
		create_full_put_path on;
		dav_access user:rw group:r all:r;"
	start_nginx nginx-store "$STORE_URL" && PROXY_OK=1
	STORE_PID=$NGINX_PID
	nginx_conf nginx-proxy "		listen 127.0.0.1:$NPROXY_PORT;
		location / {
			proxy_pass http://fgb_store;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_request_buffering off;
		}" "	upstream fgb_store {
		server 127.0.0.1:$UPSTREAM_PORT;
		keepalive 64;
		keepalive_requests 1000000;
	}"
	if [ "$PROXY_OK" = 1 ]; then
		start_nginx nginx-proxy "$NPROXY_URL" || PROXY_OK=0
		NPROXY_PID=$NGINX_PID
	fi
	if [ "$PROXY_OK" = 1 ]; then
		say "nginx storage pid $STORE_PID  $STORE_URL  (WebDAV, 1 worker; $(nginx -v 2>&1 | sed 's/^nginx version: //'))"
		say "nginx proxy   pid $NPROXY_PID  $NPROXY_URL  (proxy_pass to the storage, upstream keepalive 64, 1 worker)"
	fi
fi

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
cpu_ticks() { # utime+stime of a process and its children (nginx workers), in clock ticks (0 when gone)
	local p t=0 v
	for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
		v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
task_ticks() { # task_ticks PID: "tid ticks" per thread
	local t
	for t in /proc/"$1"/task/*; do
		awk -v tid="${t##*/}" '{ sub(/^.*\) /, ""); print tid, $12 + $13 }' "$t/stat" 2>/dev/null || true
	done
}
run_wrk() { # run_wrk LABEL SCRIPT URL PREFIX [ARGS...]; echoes the RESULT line
	# also writes $TMP/LABEL.cpu (CPU per process) and, while fencegate runs,
	# $TMP/LABEL.fg (its busiest threads, and its VmRSS before -> after)
	local label=$1 script=$2 url=$3 prefix=$4 out p t0 t1 cpu=""
	shift 4
	wrk -t"${WRK_THREADS:-$CONNS}" -c"$CONNS" -d"${WARMUP}s" --timeout 10s -s "$script" "$url" -- "warm-$prefix" "$@" \
		>"$TMP/$label-warm.txt" 2>&1 || true
	declare -A c0
	for p in "${PIDS[@]}"; do c0[$p]=$(cpu_ticks "$p"); done
	local fg_rss0=""
	if [ "${FG_OK:-0}" = 1 ]; then
		task_ticks "$FG_PID" >"$TMP/$label.tasks0"
		fg_rss0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$FG_PID/status" 2>/dev/null || true)
	fi
	read -r -a s0 < <(head -n1 /proc/stat)
	t0=$(date +%s.%N)
	wrk -t"${WRK_THREADS:-$CONNS}" -c"$CONNS" -d"${DURATION}s" --timeout 10s -s "$script" "$url" -- "$prefix" "$@" \
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
	if [ -n "$fg_rss0" ]; then
		task_ticks "$FG_PID" >"$TMP/$label.tasks1"
		{
			printf 'threads busiest first:'
			awk -v secs="$(calc "print $t1 - $t0")" -v hz="$CLK_TCK" \
				'NR == FNR { a[$1] = $2; next } { printf " %.0f%%\n", ($2 - a[$1]) / hz / secs * 100 }' \
				"$TMP/$label.tasks0" "$TMP/$label.tasks1" | sort -t' ' -k2 -rn | head -n 6 | tr -d '\n'
			printf ' (of %s); VmRSS %s -> %s kB\n' "$(wc -l <"$TMP/$label.tasks1")" "$fg_rss0" \
				"$(awk '/^VmRSS:/ { print $2 }' "/proc/$FG_PID/status" 2>/dev/null || true)"
		} >"$TMP/$label.fg"
	fi
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
# ---- 7. fencing proxy: 1 KiB GET / PUT ----------------------------------
# Objects <P_PATH>0 .. <P_PATH>NOBJ-1 on the storage nginx; a fenced PUT of one
# carries the sequencer of the lock named by its path without the leading '/'.
P_PATH="/fgp-$RUNID/obj-"
declare -A IO=()
io_run() { # io_run LABEL WRK-THREADS URL METHOD [TOKEN-FILE]: result line in IO[LABEL]
	local label=$1 threads=$2 url=$3 method=$4
	shift 4
	IO[$label]=$(WRK_THREADS=$threads run_wrk "$label" "$HERE/object_io.lua" "$url" "$label" \
		"$method" "$P_PATH" "$NOBJ" "$OBJ_SIZE" "$@")
	local line=${IO[$label]}
	[ -n "$line" ] || return 0
	printf '  %-28s %9s req/s   p50 %7s ms  p99 %7s ms   (%s requests; http>=400 %s, socket c/r/w/t %s/%s/%s/%s)\n' \
		"$label" "$(field "$line" rps)" "$(field "$line" req_p50_ms)" "$(field "$line" req_p99_ms)" \
		"$(field "$line" requests)" "$(field "$line" http_ge400)" "$(field "$line" sock_connect)" \
		"$(field "$line" sock_read)" "$(field "$line" sock_write)" "$(field "$line" sock_timeout)"
	say "  $(printf '%-28s' '') CPU (100% = one core):$(cat "$TMP/$label.cpu")"
	case "$label" in *fencegate*) [ -s "$TMP/$label.fg" ] && say "  $(printf '%-28s' '') fencegate $(cat "$TMP/$label.fg")" ;; esac
	return 0
}
io_merge() { # io_merge LABEL PARTS...: IO[LABEL] = mean rps, p50, p99 and summed counts of the PARTS
	local out=$1 l k n=0 line
	shift
	local -A acc=()
	for l in "$@"; do
		[ -n "${IO[$l]:-}" ] || continue
		n=$((n + 1))
		for k in rps req_p50_ms req_p99_ms requests http_ge400 sock_connect sock_read sock_write sock_timeout; do
			acc[$k]=$(calc "print ${acc[$k]:-0} + $(iof "$l" "$k")")
		done
	done
	[ "$n" -gt 0 ] || return 0
	line="RESULT rounds=$n"
	line+=" rps=$(calc "printf \"%.1f\", ${acc[rps]} / $n")"
	for k in req_p50_ms req_p99_ms; do line+=" $k=$(calc "printf \"%.3f\", ${acc[$k]} / $n")"; done
	for k in requests http_ge400 sock_connect sock_read sock_write sock_timeout; do line+=" $k=${acc[$k]}"; done
	IO[$out]=$line
	[ "$n" -gt 1 ] && printf '  %-28s %9s req/s   p50 %7s ms  p99 %7s ms   (mean of %s rounds)\n' "$out" \
		"$(field "$line" rps)" "$(field "$line" req_p50_ms)" "$(field "$line" req_p99_ms)" "$n"
	return 0
}
iof() { # iof LABEL KEY -> that field of IO[LABEL], or empty
	[ -n "${IO[$1]:-}" ] && field "${IO[$1]}" "$2" || true
}
# fence_acquire NAME TTL_MS -> "sequencer lease" (empty on failure; the answer in $TMP/acquire.last)
fence_acquire() {
	curl -s -o "$TMP/acquire.last" -XPOST -H 'Content-Type: application/json' \
		"${LOCK_URL:-$FG_URL}/_fence/v1/locks/$1" -d "{\"ttl_ms\":$2}" || true
	python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(d["sequencer"], d["lease"])' \
		"$TMP/acquire.last" 2>/dev/null || true
}
fence_release() { # fence_release NAME LEASE -> HTTP status
	curl -s -o "$TMP/release.last" -w '%{http_code}' -XDELETE -H "Fence-Lease: $2" \
		"${LOCK_URL:-$FG_URL}/_fence/v1/locks/$1" || true
}
show() { # show FILE: its first 200 bytes on one line
	head -c 200 "$1" 2>/dev/null | tr '\r\n' '  '
}

if [ "$PROXY_OK" = 1 ]; then
	say "[proxy] 1 KiB objects (${OBJ_SIZE} B), $CONNS connections; direct = storage nginx $STORE_URL," \
		"nginx-proxy = $NPROXY_URL, fencegate = $FG_URL; ${WARMUP}s warm-up, ${DURATION}s run each"
	[ "$FG_OK" = 1 ] && FG_RSS_P0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$FG_PID/status" 2>/dev/null || true)
	head -c "$OBJ_SIZE" /dev/zero | tr '\0' x >"$TMP/obj.bin"
	bad=0
	for ((i = 0; i < NOBJ; i++)); do
		code=$(curl -s -o "$TMP/put.last" -w '%{http_code}' -T "$TMP/obj.bin" "$STORE_URL$P_PATH$i" || true)
		case "$code" in 201|204) ;; *) bad=$((bad + 1)); [ "$bad" = 1 ] && say "  pre-create PUT $P_PATH$i -> $code $(show "$TMP/put.last")" ;; esac
	done
	say "  pre-created $((NOBJ - bad))/$NOBJ objects $P_PATH{0..$((NOBJ - 1))} directly on the storage"
	[ "$bad" = 0 ] || PROXY_OK=0
fi
if [ "$PROXY_OK" = 1 ]; then
	say "  smoke: GET ${P_PATH}0 direct -> $(curl -s -o /dev/null -w '%{http_code} %{size_download} B' "$STORE_URL${P_PATH}0" || true)," \
		"nginx-proxy -> $(curl -s -o /dev/null -w '%{http_code} %{size_download} B' "$NPROXY_URL${P_PATH}0" || true)"
	[ "$FG_OK" = 1 ] && say "  smoke: GET ${P_PATH}0 via fencegate -> $(curl -s -o /dev/null -w '%{http_code} %{size_download} B' "$FG_URL${P_PATH}0" || true)"
	say "[proxy GET, wrk -t$CONNS -c$CONNS]"
	io_run get-direct "$CONNS" "$STORE_URL" GET
	io_run get-nginx-proxy "$CONNS" "$NPROXY_URL" GET
	if [ "$FG_OK" = 1 ]; then io_run get-fencegate "$CONNS" "$FG_URL" GET; fg_alive "the GET benchmark"; fi
	say "[proxy GET, wrk -t$GET_THREADS_FEW -c$CONNS (wrk itself uses less CPU)]"
	io_run get-direct-t$GET_THREADS_FEW "$GET_THREADS_FEW" "$STORE_URL" GET
	io_run get-nginx-proxy-t$GET_THREADS_FEW "$GET_THREADS_FEW" "$NPROXY_URL" GET
	if [ "$FG_OK" = 1 ]; then io_run get-fencegate-t$GET_THREADS_FEW "$GET_THREADS_FEW" "$FG_URL" GET; fg_alive "the GET benchmark"; fi

	say "[proxy PUT, wrk -t$CONNS -c$CONNS; each connection PUTs its own object; via fencegate fenced: own lock per object," \
		"acquired before the runs; $PUT_ROUNDS round(s), the order reversed every other round (storage-bound, so noisy)]"
	PUT_FG=0
	if [ "$FG_OK" = 1 ]; then
		: >"$TMP/tokens.txt"
		: >"$TMP/leases.txt"
		for ((i = 0; i < NOBJ; i++)); do
			read -r sq ls < <(fence_acquire "${P_PATH#/}$i" 600000; echo)
			if [ -z "${ls:-}" ]; then
				say "  acquire ${P_PATH#/}$i failed: $(show "$TMP/acquire.last")"
				break
			fi
			printf '%s %s\n' "$i" "$sq" >>"$TMP/tokens.txt"
			printf '%s %s\n' "$i" "$ls" >>"$TMP/leases.txt"
		done
		if [ "$(wc -l <"$TMP/tokens.txt")" = "$NOBJ" ]; then
			sq0=$(awk '$1 == 0 { print $2 }' "$TMP/tokens.txt")
			say "  smoke: PUT ${P_PATH}0 via fencegate without Fencing-Token -> $(curl -s -o "$TMP/put.last" -w '%{http_code}' -T "$TMP/obj.bin" "$FG_URL${P_PATH}0" || true) $(show "$TMP/put.last")"
			say "  smoke: PUT ${P_PATH}0 via fencegate with its sequencer  -> $(curl -s -o "$TMP/put.last" -w '%{http_code}' -T "$TMP/obj.bin" -H "Fencing-Token: $sq0" "$FG_URL${P_PATH}0" || true) $(show "$TMP/put.last")"
			PUT_FG=1
		fi
	fi
	for ((r = 1; r <= PUT_ROUNDS; r++)); do
		order="direct nginx-proxy fencegate-fenced"
		[ $((r % 2)) = 0 ] && order="fencegate-fenced nginx-proxy direct"
		for t in $order; do
			case $t in
			direct) io_run put-direct-r$r "$CONNS" "$STORE_URL" PUT ;;
			nginx-proxy) io_run put-nginx-proxy-r$r "$CONNS" "$NPROXY_URL" PUT ;;
			fencegate-fenced)
				if [ "$PUT_FG" = 1 ] && [ "$FG_OK" = 1 ]; then
					io_run put-fencegate-fenced-r$r "$CONNS" "$FG_URL" PUT "$TMP/tokens.txt"
					fg_alive "the fenced PUT benchmark"
				fi ;;
			esac
		done
	done
	for t in direct nginx-proxy fencegate-fenced; do
		io_merge put-$t $(for ((r = 1; r <= PUT_ROUNDS; r++)); do echo put-$t-r$r; done)
	done
	if [ "$FG_OK" = 1 ] && [ -s "$TMP/leases.txt" ]; then
		size=$(stat -c %s "$TMP/dav${P_PATH}0" 2>/dev/null || echo missing)
		say "  after the runs: ${P_PATH}0 on the storage is $size bytes (expected $OBJ_SIZE)"
		rel_bad=0
		while read -r i ls; do
			code=$(fence_release "${P_PATH#/}$i" "$ls")
			if [ "$code" != 204 ]; then
				rel_bad=$((rel_bad + 1))
				[ "$rel_bad" = 1 ] && say "  release ${P_PATH#/}$i -> $code $(show "$TMP/release.last")"
			fi
		done <"$TMP/leases.txt"
		say "  released $(($(wc -l <"$TMP/leases.txt") - rel_bad))/$(wc -l <"$TMP/leases.txt") object locks"
	fi
	if [ "$FG_OK" = 1 ]; then
		FG_RSS_P1=$(awk '/^VmRSS:/ { print $2 }' "/proc/$FG_PID/status" 2>/dev/null || true)
		say "  fencegate VmRSS before -> after the 1 KiB runs (with warm-ups): ${FG_RSS_P0:-?} -> ${FG_RSS_P1:-?} kB"
	fi
	hr
fi

# ---- 8. fencing proxy: 1 GiB streamed through fencegate ------------------
# On a second fencegate started just for this (same flags, Redis and storage):
# the main one has served 10,000 waiters and ~10^6 requests by now, and memory
# it freed but kept would hide a growth.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true; }
sampler_start() { # sampler_start FILE: fencegate's VmRSS (kB) every RSS_EVERY s into FILE
	(while kill -0 "$FGS_PID" 2>/dev/null; do rss_kb "$FGS_PID"; sleep "$RSS_EVERY"; done) >"$1" 2>/dev/null &
	SAMPLER_PID=$!
}
sampler_stop() { # sampler_stop FILE -> peak kB (one more sample taken after the transfer)
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	rss_kb "$FGS_PID" >>"$1"
	sort -n "$1" | tail -n1
}
mbps() { # mbps BYTES SECONDS
	calc "if ($2 > 0) printf \"%.1f\", $1 / $2 / 1e6; else print \"\""
}
BIG_PUT_MBPS="" BIG_GET_MBPS="" BIG_PUT_GROW="" BIG_GET_GROW="" BIG_D_PUT_MBPS="" BIG_D_GET_MBPS=""
FGS_OK=0
if [ "$PROXY_OK" = 1 ] && [ "$SKIP_FG" = 0 ]; then
	for ((i = 0; i < BIN_WAIT * 2; i++)); do [ -x "$BIN" ] && break; sleep 0.5; done
	FGS_URL="http://127.0.0.1:$FGS_PORT"
	"$BIN" --listen "127.0.0.1:$FGS_PORT" --redis "127.0.0.1:$REDIS_PORT" \
		--upstream "$STORE_URL" --threads "$FG_THREADS" \
		--max-connections "$FG_MAX_CONN" --max-waiters "$FG_MAX_WAITERS" \
		--log-level error >"$TMP/fencegate-stream.log" 2>&1 &
	FGS_PID=$!
	PIDS+=("$FGS_PID")
	for ((i = 0; i < 150; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$FGS_URL/_fence/v1/locks/fgbench-probe" || true)" != 000 ] && { FGS_OK=1; break; }
		kill -0 "$FGS_PID" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$FGS_OK" = 1 ]; then
		say "fencegate (streaming) pid $FGS_PID  $FGS_URL  (fresh; same flags, Redis and storage)"
	else
		say "!! second fencegate did not start; its log:"
		tail -n 20 "$TMP/fencegate-stream.log" | sed 's/^/   /'
	fi
fi
fgs_alive() { # fgs_alive PHASE
	if [ "$FGS_OK" = 1 ] && ! kill -0 "$FGS_PID" 2>/dev/null; then
		say "!! fencegate (streaming, pid $FGS_PID) died during $1; last log lines:"
		tail -n 20 "$TMP/fencegate-stream.log" | sed 's/^/   /'
		FGS_OK=0
	fi
}
if [ "$FGS_OK" = 1 ]; then
	LOCK_URL=$FGS_URL
	BIG_BYTES=$((BIG_MB * 1024 * 1024))
	BIG_PATH="/fgp-$RUNID/big"
	say "[stream] $BIG_MB MiB body (sparse file, zeros): fenced PUT through fencegate, then GET back through fencegate;" \
		"fencegate VmRSS sampled every ${RSS_EVERY}s; direct to the storage for comparison"
	truncate -s "$BIG_BYTES" "$TMP/big.bin"
	read -r bsq bls < <(fence_acquire "${BIG_PATH#/}" 600000; echo)
	if [ -z "${bls:-}" ]; then
		say "  acquire ${BIG_PATH#/} failed: $(show "$TMP/acquire.last")"
	else
		sleep 0.5
		idle=$(rss_kb "$FGS_PID")
		say "  fencegate idle VmRSS: $idle kB"
		sampler_start "$TMP/rss-put.txt"
		r=$(curl -s -o "$TMP/bigput.body" --max-time 900 -w '%{http_code} %{size_upload} %{time_total}' \
			-T "$TMP/big.bin" -H "Fencing-Token: $bsq" "$FGS_URL$BIG_PATH" || true)
		peak=$(sampler_stop "$TMP/rss-put.txt")
		read -r code up secs <<<"$r"
		stored=$(stat -c %s "$TMP/dav$BIG_PATH" 2>/dev/null || echo missing)
		say "  PUT via fencegate (fenced): -> ${code:-?} $(show "$TMP/bigput.body") ; ${up:-?} B sent in ${secs:-?} s;" \
			"stored $stored B; VmRSS peak $peak kB ($(wc -l <"$TMP/rss-put.txt") samples)"
		if [ "${code:-}" = 201 ] || [ "${code:-}" = 204 ]; then
			if [ "$stored" = "$BIG_BYTES" ]; then BIG_PUT_MBPS=$(mbps "$up" "$secs"); else say "  !! stored size differs from the body"; fi
		fi
		[ -n "$peak" ] && [ -n "$idle" ] && BIG_PUT_GROW=$(calc "printf \"%.1f\", ($peak - $idle) / 1024")
		fgs_alive "the 1 GiB PUT"
	fi
	if [ "$FGS_OK" = 1 ] && [ -n "$BIG_PUT_MBPS" ]; then
		sleep 0.5
		idle2=$(rss_kb "$FGS_PID")
		sampler_start "$TMP/rss-get.txt"
		r=$(curl -s -o /dev/null --max-time 900 -w '%{http_code} %{size_download} %{time_total}' "$FGS_URL$BIG_PATH" || true)
		peak=$(sampler_stop "$TMP/rss-get.txt")
		read -r code down secs <<<"$r"
		say "  GET via fencegate: -> ${code:-?} ; ${down:-?} B received in ${secs:-?} s;" \
			"VmRSS before $idle2 kB, peak $peak kB ($(wc -l <"$TMP/rss-get.txt") samples)"
		if [ "${code:-}" = 200 ] && [ "${down:-}" = "$BIG_BYTES" ]; then BIG_GET_MBPS=$(mbps "$down" "$secs"); fi
		[ -n "$peak" ] && [ -n "$idle2" ] && BIG_GET_GROW=$(calc "printf \"%.1f\", ($peak - $idle2) / 1024")
		fgs_alive "the 1 GiB GET"
	fi
	# the same transfers direct to the storage, for comparison
	r=$(curl -s -o /dev/null --max-time 900 -w '%{http_code} %{size_upload} %{time_total}' -T "$TMP/big.bin" "$STORE_URL$BIG_PATH-direct" || true)
	read -r code up secs <<<"$r"
	case "${code:-}" in 201|204) BIG_D_PUT_MBPS=$(mbps "$up" "$secs") ;; esac
	r=$(curl -s -o /dev/null --max-time 900 -w '%{http_code} %{size_download} %{time_total}' "$STORE_URL$BIG_PATH-direct" || true)
	read -r code down secs <<<"$r"
	[ "${code:-}" = 200 ] && [ "${down:-}" = "$BIG_BYTES" ] && BIG_D_GET_MBPS=$(mbps "$down" "$secs")
	say "  direct to the storage: PUT ${BIG_D_PUT_MBPS:--} MB/s, GET ${BIG_D_GET_MBPS:--} MB/s"
	# clean up: the fenced object through fencegate (a fenced DELETE), the other one directly
	if [ "$FGS_OK" = 1 ] && [ -n "${bls:-}" ]; then
		say "  DELETE $BIG_PATH via fencegate (fenced) -> $(curl -s -o "$TMP/del.last" -w '%{http_code}' -XDELETE -H "Fencing-Token: $bsq" "$FGS_URL$BIG_PATH" || true) $(show "$TMP/del.last")"
		say "  release ${BIG_PATH#/} -> $(fence_release "${BIG_PATH#/}" "$bls")"
	fi
	curl -s -o /dev/null -XDELETE "$STORE_URL$BIG_PATH-direct" || true
	[ -e "$TMP/dav$BIG_PATH" ] && say "  !! $BIG_PATH still on the storage after the DELETE"
	rm -f "$TMP/big.bin" "$TMP/dav$BIG_PATH" "$TMP/dav$BIG_PATH-direct"
	unset LOCK_URL
	stop_pid "$FGS_PID"
	hr
fi
sleep 0.2 # let the helpers' stderr drain before the summary

# ---- summary -------------------------------------------------------------
verdict() { # verdict VALUE OP TARGET -> PASS/FAIL/n/a
	if [ -z "$1" ] || [ "$1" = nan ]; then echo "n/a"; return; fi
	calc "print (($1 $2 $3) ? \"PASS\" : \"FAIL\")"
}
num() { [ -n "$1" ] && echo "$1" || echo "-"; }
ROW='%-50s %26s %9s %6s\n'
RATIO_ETCD=""
RATIO_FLOOR=""
if [ -n "$FG_CPS" ] && [ -n "$ETCD_CPS" ]; then RATIO_ETCD=$(calc "printf \"%.2f\", $FG_CPS / $ETCD_CPS"); fi
if [ -n "$FG_CPS" ] && [ -n "$FLOOR" ]; then RATIO_FLOOR=$(calc "printf \"%.3f\", $FG_CPS / $FLOOR"); fi

say ""
say "SUMMARY ($CONNS connections, ${DURATION}s runs, $(nproc) cores, everything on this box)"
printf "$ROW" "measure" "value" "target" ""
printf "$ROW" "fencegate acquire+release cycles/s" "$(num "$FG_CPS")" "" ""
printf "$ROW" "etcd lock+unlock cycles/s (1 lease/conn)" "$(num "$ETCD_CPS")" "" ""
printf "$ROW" "redis floor cycles/s (SET NX PX + EVALSHA)" "$(num "$FLOOR")" "" ""
printf "$ROW" "  redis SET NX PX req/s" "$(num "$SET_RPS")" "" ""
printf "$ROW" "  redis EVALSHA req/s" "$(num "$EVAL_RPS")" "" ""
printf "$ROW" "ratio fencegate / etcd" "$(num "$RATIO_ETCD")" ">= 4" "$(verdict "$RATIO_ETCD" '>=' 4)"
printf "$ROW" "ratio fencegate / redis floor" "$(num "$RATIO_FLOOR")" ">= 0.40" "$(verdict "$RATIO_FLOOR" '>=' 0.40)"
printf "$ROW" "errors in fencegate / etcd cycle runs" "$(num "${FG_ERRS:-}") / $(num "${ETCD_ERRS:-}")" "0" ""
if [ -n "$W_OUT" ] && [ -n "$(wres RSS_KB)" ]; then
	W_RSS_MB=$(calc "printf \"%.1f\", $(wres RSS_KB) / 1024")
	W_BASE_MB=$(calc "printf \"%.1f\", $(wres BASE_RSS_KB) / 1024")
	[ "$(wres ALLQUEUED)" = 1 ] || W_RSS_NOTE=" (NOT all queued)"
	printf "$ROW" "waiters queued (seen in GET .../locks/<name>)" "$(wres QUEUED)/$(wres TARGET)" "$(wres TARGET)" \
		"$(verdict "$(wres QUEUED)" '>=' "$(wres TARGET)")"
	printf "$ROW" "fencegate VmRSS with them blocked, MB${W_RSS_NOTE:-}" "$W_RSS_MB" "< 150" "$(verdict "$W_RSS_MB" '<' 150)"
	printf "$ROW" "  (VmRSS before, MB / fds with waiters)" "$W_BASE_MB / $(wres FDS)" "" ""
	printf "$ROW" "  waiters still listed after they hung up" "$(wres LEFT_AFTER_CLOSE)" "(info)" ""
fi
if [ -n "$H_OUT" ] && [ -n "$(hres P99_MS)" ]; then
	printf "$ROW" "handoff latency p50 ms ($(hres N) releases, $(hres WAITERS) queued)" "$(hres P50_MS)" "" ""
	printf "$ROW" "handoff latency p99 ms" "$(hres P99_MS)" "< 5" "$(verdict "$(hres P99_MS)" '<' 5)"
	printf "$ROW" "  handoff max ms / errors" "$(hres MAX_MS) / $(hres ERRORS)" "" ""
fi
if [ "$SKIP_PROXY" = 0 ]; then
	T=$GET_THREADS_FEW
	three() { # three KEY LABEL1 LABEL2 LABEL3 -> "a / b / c"
		echo "$(num "$(iof "$2" "$1")") / $(num "$(iof "$3" "$1")") / $(num "$(iof "$4" "$1")")"
	}
	ratio() { # ratio LABEL-A LABEL-B -> rps(A) / rps(B)
		local a b
		a=$(iof "$1" rps)
		b=$(iof "$2" rps)
		if [ -n "$a" ] && [ -n "$b" ]; then calc "printf \"%.3f\", $a / $b"; fi
	}
	added() { # added LABEL -> p50(LABEL) - p50 of the direct run with the same wrk threads
		local a b direct=get-direct${2:-}
		a=$(iof "$1" req_p50_ms)
		b=$(iof "$direct" req_p50_ms)
		if [ -n "$a" ] && [ -n "$b" ]; then calc "printf \"%.3f\", $a - $b"; fi
	}
	sum_errs() { # sum_errs LABEL...: http>=400 + socket errors over the runs
		local l t=0 k v seen=0
		for l in "$@"; do
			[ -n "${IO[$l]:-}" ] && seen=1
			for k in http_ge400 sock_connect sock_read sock_write sock_timeout; do
				v=$(iof "$l" "$k")
				t=$((t + ${v:-0}))
			done
		done
		[ "$seen" = 1 ] && echo "$t" || echo "-"
	}
	R_GET=$(ratio get-fencegate get-nginx-proxy)
	R_GET_T=$(ratio get-fencegate-t$T get-nginx-proxy-t$T)
	R_PUT=$(ratio put-fencegate-fenced put-nginx-proxy)
	A_FG=$(added get-fencegate)
	A_NP=$(added get-nginx-proxy)
	A_FG_T=$(added get-fencegate-t$T -t$T)
	A_NP_T=$(added get-nginx-proxy-t$T -t$T)
	say "proxy, ${OBJ_SIZE} B objects; columns: direct to storage nginx / via nginx proxy / via fencegate"
	printf "$ROW" "GET req/s (wrk -t$CONNS -c$CONNS)" "$(three rps get-direct get-nginx-proxy get-fencegate)" "" ""
	printf "$ROW" "  GET p50 ms" "$(three req_p50_ms get-direct get-nginx-proxy get-fencegate)" "" ""
	printf "$ROW" "  GET p99 ms" "$(three req_p99_ms get-direct get-nginx-proxy get-fencegate)" "" ""
	printf "$ROW" "GET req/s (wrk -t$T -c$CONNS)" "$(three rps get-direct-t$T get-nginx-proxy-t$T get-fencegate-t$T)" "" ""
	printf "$ROW" "  GET p50 ms" "$(three req_p50_ms get-direct-t$T get-nginx-proxy-t$T get-fencegate-t$T)" "" ""
	printf "$ROW" "  GET p99 ms" "$(three req_p99_ms get-direct-t$T get-nginx-proxy-t$T get-fencegate-t$T)" "" ""
	printf "$ROW" "PUT req/s (wrk -t$CONNS; fg fenced; mean of $PUT_ROUNDS)" "$(three rps put-direct put-nginx-proxy put-fencegate-fenced)" "" ""
	printf "$ROW" "  PUT p50 ms" "$(three req_p50_ms put-direct put-nginx-proxy put-fencegate-fenced)" "" ""
	printf "$ROW" "  PUT p99 ms" "$(three req_p99_ms put-direct put-nginx-proxy put-fencegate-fenced)" "" ""
	printf "$ROW" "ratio fencegate GET / nginx-proxy GET (-t$CONNS)" "$(num "$R_GET")" ">= 0.9" "$(verdict "$R_GET" '>=' 0.9)"
	printf "$ROW" "ratio fencegate GET / nginx-proxy GET (-t$T)" "$(num "$R_GET_T")" ">= 0.9" "$(verdict "$R_GET_T" '>=' 0.9)"
	printf "$ROW" "ratio fencegate fenced PUT / nginx-proxy PUT" "$(num "$R_PUT")" ">= 0.7" "$(verdict "$R_PUT" '>=' 0.7)"
	printf "$ROW" "GET p50 added over direct, fencegate (-t$CONNS) ms" "$(num "$A_FG")" "< 0.5" "$(verdict "$A_FG" '<' 0.5)"
	printf "$ROW" "  same, nginx proxy (-t$CONNS) ms" "$(num "$A_NP")" "(info)" ""
	printf "$ROW" "GET p50 added over direct, fencegate (-t$T) ms" "$(num "$A_FG_T")" "< 0.5" "$(verdict "$A_FG_T" '<' 0.5)"
	printf "$ROW" "  same, nginx proxy (-t$T) ms" "$(num "$A_NP_T")" "(info)" ""
	printf "$ROW" "errors in the proxy runs (http>=400 + socket)" \
		"$(sum_errs get-direct get-direct-t$T put-direct) / $(sum_errs get-nginx-proxy get-nginx-proxy-t$T put-nginx-proxy) / $(sum_errs get-fencegate get-fencegate-t$T put-fencegate-fenced)" "0" ""
	BIG_GROW=""
	if [ -n "$BIG_PUT_GROW" ] && [ -n "$BIG_GET_GROW" ]; then
		BIG_GROW=$(calc "printf \"%.1f\", ($BIG_PUT_GROW > $BIG_GET_GROW) ? $BIG_PUT_GROW : $BIG_GET_GROW")
	fi
	printf "$ROW" "$BIG_MB MiB fenced PUT via fencegate, MB/s" "$(num "$BIG_PUT_MBPS")" "" ""
	printf "$ROW" "$BIG_MB MiB GET via fencegate, MB/s" "$(num "$BIG_GET_MBPS")" "" ""
	printf "$ROW" "  same direct to storage PUT / GET, MB/s" "$(num "$BIG_D_PUT_MBPS") / $(num "$BIG_D_GET_MBPS")" "(info)" ""
	printf "$ROW" "VmRSS growth over idle, PUT / GET MB (fresh fg)" "$(num "$BIG_PUT_GROW") / $(num "$BIG_GET_GROW")" "< 32" "$(verdict "$BIG_GROW" '<' 32)"
	if [ -n "${FG_RSS_P0:-}" ] && [ -n "${FG_RSS_P1:-}" ]; then
		printf "$ROW" "main fencegate VmRSS before -> after 1 KiB runs MB" \
			"$(calc "printf \"%.1f -> %.1f\", $FG_RSS_P0 / 1024, $FG_RSS_P1 / 1024")" "(info)" ""
	fi
fi
if [ "$SKIP_FG" = 0 ] && [ "$FG_OK" != 1 ]; then
	say "fencegate measurements incomplete (see above)"
fi
