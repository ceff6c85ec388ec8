#!/usr/bin/env bash
# fencegate benchmark, one run for every target of the project (issues 7, 17
# and 20). It ends with one summary table, "figure | fencegate | peer |
# ratio | target | met/missed", in markdown so that it can be quoted as is.
# Exits 1 when a fencegate did not stay up to the end of its runs or the
# cluster, replica, auth or TLS ones did not start (the table is printed all
# the same), 0 otherwise, whatever was missed.
#
# How long: with the defaults about 15 minutes on a 2-core machine (base
# about 7, auth and tls about 4 each); the header prints an estimate for
# the knobs given, the summary the time taken. A quick check that every row
# fills, in about a minute and a half: ONLY=base DURATION=2 WARMUP=1
# GET_ROUNDS=1 PUT_ROUNDS=1 REDIS_N=20000 WAITERS=500 HANDOFF_WAITERS=50
# HANDOFF_ROUNDS=50 CALLS_N=2000 CALLS_PUTS=2000 ACK_N=500 PUBSUB_N=20000
# BIG_MB=64 SYNC_FILES=30 SYNC_ROUNDS=1. The figures mean something only on
# an otherwise idle machine.
#
# The figures of the summary, and how each is measured:
#   GET req/s: wrk -t WRK_THREADS -c CONNS, OBJ_SIZE-byte objects, one
#     object per connection in turn; answers below 400 per second, the mean
#     of GET_ROUNDS rounds of DURATION s (after WARMUP s untimed), the order
#     of the three targets reversed every other round. Peer: nginx as a
#     plain reverse proxy (proxy_pass, upstream keepalive, request buffering
#     off) in front of the same storage, with as many worker processes as
#     fencegate has event loops (FG_LOOPS; both checked at start).
#   fenced PUT req/s: the same with PUTs, each carrying the Fencing-Token of
#     its object's lock (acquired before the runs), so that every PUT is
#     admitted in Redis before the storage and finished after it. Peer:
#     unfenced PUTs through the nginx proxy.
#   p50 added over direct, GET and PUT: the mean p50 of fencegate's rounds
#     minus that of the same requests sent straight to the storage; under
#     CONNS connections that is mostly queueing (CONNS / throughput), so
#     the same is measured again on one connection, one request at a time
#     (wrk -t1 -c1 for LAT_DURATION s): the path's own added latency; and
#     on CONNS connections paced (each waits PACE_MS ms after an answer, so
#     they offer at most CONNS * 1000 / PACE_MS req/s, below what any
#     target saturates at; LAT_DURATION s): concurrent, but not queued.
#   lock cycles/s: wrk, each request pair a POST acquire (200) and a DELETE
#     release (204) of a free lock, every wrk thread going round NAME_RING
#     names of its own. Peers: etcd's v3 lock API (lock + unlock, one lease
#     per wrk thread) and the Redis floor, 1 / (1/a + 1/b) where a is
#     redis-benchmark's SET NX PX rate and b its EVALSHA compare-and-delete
#     rate, -c CONNS, on the same redis-server.
#   Redis CPU per lock cycle and per fenced PUT: as bench/script_cost.py
#     counts it: CONFIG RESETSTAT, a phase of only those calls (CALLS_N
#     acquires, then CALLS_N releases, then CALLS_PUTS fenced PUTs, over CONNS
#     connections, Redis pinned to the last core, the gateway, the storage
#     and the client to the others, so that they do not preempt it), then
#     the usec of the script rows of INFO commandstats (evalsha, eval,
#     fcall, fcall_ro) divided by the operations answered with success.
#     A cycle is an acquire plus a release, a fenced PUT its admit plus its
#     finish. Beside it, the Redis process's own CPU per operation over the
#     same phase (INFO cpu), which also counts reading and answering, but
#     not time preempted.
#   CPU us per request (fencegate; nginx proxy beside it): utime + stime
#     from /proc/PID/stat (every thread; nginx's master and all its workers)
#     before and after each measured wrk run, summed over the rounds and
#     divided by the requests wrk made in them.
#   10,000 blocked waiters: fencegate's VmRSS with every waiter queued.
#   1 GiB fenced PUT and GET: a fresh fencegate's VmRSS peak (sampled every
#     RSS_EVERY s) over its idle VmRSS. Both bounds are "must not regress".
# The storage (nginx WebDAV) keeps its root and its request bodies on tmpfs,
# under STORE_DIR (/dev/shm by default), so that its own disk writes do not
# hide the proxy's cost; when STORE_DIR is not tmpfs, the header and the
# summary say so.
#
# The other rows (informational unless a target is shown):
#   release -> next waiter with 1,000 queued;
#   lock cycles on a three-master Redis Cluster against the one-Redis cycles
#     (cycles/s, Redis CPU per cycle on each node, share of FCALLs per node);
#   the cost of replica acknowledgement (--redis-replicas 1, a primary and
#     one replica): added acquire latency and the cycles/s ratio;
#   Redis CPU per message of cluster-wide PUBLISH vs sharded SPUBLISH on the
#     three-master cluster, one subscriber connected;
#   one rclone sync of a tree of SYNC_FILES files to Apache httpd mod_dav,
#     direct vs through fencegate under `fencectl lock` (bench/sync_tree.py);
#   identity and TLS (issue 17, bench/auth_tls.sh): 1 KiB GETs and lock
#     cycles with a bearer key on every request (an auth-file of
#     AUTH_PRINCIPALS principals, --proxy-auth required) vs an open
#     fencegate; HTTPS GETs through fencegate vs nginx as an HTTPS reverse
#     proxy, over kept-alive connections and one new TLS connection per GET
#     (handshakes/s), one ECDSA P-256 certificate for both;
#   CPU seconds and context switches of every process in every measured run,
#   and with --profile where each process spends its time (perf).
#
#   bench/run.sh [--bin PATH] [--profile] [--skip-fencegate] [--skip-proxy] [--only GROUPS]
#
# --only (or ONLY=) runs some groups of rows: a comma list of base (every
# row before issue 17's), auth and tls; the default runs them all.
# --bin defaults to build/gateway/fencegate under the repository root; the
# script builds nothing. It starts its own redis-server, etcd, two nginx
# (WebDAV storage, plain reverse proxy) and fencegate on free loopback ports
# (state in a temp dir), and later, each for its own runs, a three-master
# Redis Cluster with a fencegate on it, a Redis primary with one replica
# with a fencegate on it (--redis-replicas 0, then 1), two fencegates for
# the auth rows and a fencegate and an nginx over TLS for the TLS rows; it
# stops every one of them by PID when its runs end, and whatever is left on
# exit.
# fencegate gets --threads $FG_LOOPS and the nginx proxy as many workers.
# Needs: redis-server, redis-cli, redis-benchmark, etcd, wrk, curl, python3,
# nginx, openssl; perf with --profile (scripts/install-deps.sh --bench
# installs them). The auth and TLS rows need the storage (no --skip-proxy)
# and a fencegate (no --skip-fencegate).
#
# Knobs (environment): STORE_DIR=/dev/shm FG_LOOPS=$(nproc) WRK_THREADS=2 CONNS=32 DURATION=10 LAT_DURATION=5 PACE_MS=5
#   WARMUP=2 GET_ROUNDS=2 PUT_ROUNDS=2 STORE_WORKERS=1 REDIS_N=400000
#   WAITERS=10000 WAITER_LOCKS=10 HANDOFF_WAITERS=1000 HANDOFF_ROUNDS=500
#   CALLS_N=20000 CALLS_PUTS=10000 OBJ_SIZE=1024 BIG_MB=1024 RSS_EVERY=0.2
#   FG_MAX_CONN=16384 FG_MAX_WAITERS=20000 NAME_RING=4096 BIN_WAIT=120
#   PROFILE=0 PERF_FREQ=999 PROFILE_RUNS="get-nginx-proxy-r1 get-fencegate-r1
#   cycles-fencegate" KEEP_TMP=0 ACK_N=5000 PUBSUB_N=200000 PUBSUB_CLIENTS=8
#   PUBSUB_PIPELINE=16 SYNC_FILES=300 SYNC_ROUNDS=3 AUTH_PRINCIPALS=200
#   AUTH_ROUNDS=4 TLS_ROUNDS=4 ONLY=base,auth,tls
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN="$ROOT/build/gateway/fencegate"
SKIP_FG=0
SKIP_PROXY=0
PROFILE=${PROFILE:-0}
ONLY=${ONLY:-}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) [ $# -ge 2 ] || { usage >&2; exit 2; }; BIN=$2; shift 2 ;;
	--bin=*) BIN=${1#--bin=}; shift ;;
	--profile) PROFILE=1; shift ;;
	--skip-fencegate) SKIP_FG=1; shift ;;
	--skip-proxy) SKIP_PROXY=1; shift ;;
	--only) [ $# -ge 2 ] || { usage >&2; exit 2; }; ONLY=$2; shift 2 ;;
	--only=*) ONLY=${1#--only=}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
done
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
IFS=, read -r -a only_groups <<<"$ONLY"
for g in "${only_groups[@]}"; do
	case "$g" in base | auth | tls) ;; *) echo "run.sh: --only takes base, auth and tls, not '$g'" >&2; exit 2 ;; esac
done
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; } # want GROUP: its rows are run

if [ -n "${FG_THREADS:-}" ]; then
	echo "run.sh: FG_THREADS is gone: set FG_LOOPS (fencegate's --threads, and the nginx proxy's workers)" >&2
	exit 2
fi
FG_LOOPS=${FG_LOOPS:-$(nproc)}
WRK_THREADS=${WRK_THREADS:-2}
CONNS=${CONNS:-32}
DURATION=${DURATION:-10}
LAT_DURATION=${LAT_DURATION:-5}
PACE_MS=${PACE_MS:-5}
WARMUP=${WARMUP:-2}
GET_ROUNDS=${GET_ROUNDS:-2}
PUT_ROUNDS=${PUT_ROUNDS:-2}
STORE_WORKERS=${STORE_WORKERS:-1}
REDIS_N=${REDIS_N:-400000}
WAITERS=${WAITERS:-10000}
WAITER_LOCKS=${WAITER_LOCKS:-10}
HANDOFF_WAITERS=${HANDOFF_WAITERS:-1000}
HANDOFF_ROUNDS=${HANDOFF_ROUNDS:-500}
CALLS_N=${CALLS_N:-20000}
CALLS_PUTS=${CALLS_PUTS:-10000}
OBJ_SIZE=${OBJ_SIZE:-1024}
BIG_MB=${BIG_MB:-1024}
RSS_EVERY=${RSS_EVERY:-0.2}
FG_MAX_CONN=${FG_MAX_CONN:-16384}
FG_MAX_WAITERS=${FG_MAX_WAITERS:-20000}
NAME_RING=${NAME_RING:-4096}
BIN_WAIT=${BIN_WAIT:-120}
PERF_FREQ=${PERF_FREQ:-999}
PROFILE_RUNS=${PROFILE_RUNS:-get-nginx-proxy-r1 get-fencegate-r1 cycles-fencegate}
KEEP_TMP=${KEEP_TMP:-0}
ACK_N=${ACK_N:-5000}
PUBSUB_N=${PUBSUB_N:-200000}
PUBSUB_CLIENTS=${PUBSUB_CLIENTS:-8}
PUBSUB_PIPELINE=${PUBSUB_PIPELINE:-16}
SYNC_FILES=${SYNC_FILES:-300}
SYNC_ROUNDS=${SYNC_ROUNDS:-3}
AUTH_PRINCIPALS=${AUTH_PRINCIPALS:-200}
AUTH_ROUNDS=${AUTH_ROUNDS:-4}
TLS_ROUNDS=${TLS_ROUNDS:-4}
NOBJ=$CONNS # one object (and, for fenced PUTs, one lock) per connection

for v in FG_LOOPS WRK_THREADS CONNS DURATION LAT_DURATION WARMUP GET_ROUNDS PUT_ROUNDS STORE_WORKERS CALLS_N CALLS_PUTS BIG_MB REDIS_N \
	WAITERS WAITER_LOCKS HANDOFF_WAITERS HANDOFF_ROUNDS SYNC_FILES SYNC_ROUNDS \
	ACK_N PUBSUB_N PUBSUB_CLIENTS PUBSUB_PIPELINE AUTH_PRINCIPALS AUTH_ROUNDS TLS_ROUNDS; do
	case "${!v}" in '' | *[!0-9]*) echo "run.sh: $v must be a whole number, not '${!v}'" >&2; exit 2 ;; esac
done
[ "$FG_LOOPS" -ge 1 ] && [ "$WRK_THREADS" -ge 1 ] && [ "$CONNS" -ge "$WRK_THREADS" ] &&
	[ $((CONNS % WRK_THREADS)) = 0 ] && [ "$AUTH_PRINCIPALS" -ge 2 ] || {
	echo "run.sh: need FG_LOOPS >= 1, WRK_THREADS >= 1, CONNS a multiple of WRK_THREADS (wrk gives each thread CONNS/WRK_THREADS)," \
		"and AUTH_PRINCIPALS >= 2" >&2
	exit 2
}

need=(redis-server redis-cli wrk curl python3)
want base && need+=(redis-benchmark etcd)
[ "$SKIP_PROXY" = 0 ] && need+=(nginx)
want tls && need+=(openssl)
[ "$PROFILE" = 1 ] && need+=(perf)
for tool in "${need[@]}"; do
	command -v "$tool" >/dev/null || {
		echo "run.sh: $tool not found (scripts/install-deps.sh --bench installs the tools)" >&2
		exit 1
	}
done
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
T_START=$(date +%s)
PIDS=()

# The storage's root and its request bodies (nginx writes a PUT's body to a
# temp file, then renames it into the root: both on one filesystem). On
# tmpfs, so that the storage's disk writes do not hide the proxy's cost; on
# the disk, under $TMP, only when STORE_DIR cannot be written, and then said
# in the header and the summary. STORE is removed on exit like $TMP.
STORE_DIR=${STORE_DIR:-/dev/shm}
STORE_NOTE=""
if ! STORE=$(mktemp -d "$STORE_DIR/fencegate-bench-store.XXXXXX" 2>/dev/null); then
	STORE_NOTE="STORE_DIR $STORE_DIR cannot be written: the storage is on the disk, under $TMP"
	STORE=$(mktemp -d "$TMP/store.XXXXXX")
fi
DAV="$STORE/dav"
mkdir -p "$DAV" "$STORE/body"
STORE_FS=$(df --output=fstype "$STORE" | tail -n1)
if [ "$STORE_FS" != tmpfs ]; then
	STORE_NOTE="${STORE_NOTE:+$STORE_NOTE; }the storage's root is on $STORE_FS, not tmpfs: its own writes add to every PUT and hide the proxy's cost (STORE_DIR chooses)"
	echo "run.sh: WARNING: $STORE_NOTE" >&2
fi

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
	if [ "$KEEP_TMP" = 1 ]; then
		echo "(logs kept in $TMP, the storage in $STORE)"
	else
		rm -rf "$STORE" "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '%s\n' "$*"; }
hr() { say "------------------------------------------------------------------------"; }
calc() { awk "BEGIN { $1 }"; }
die() { echo "run.sh: $*" >&2; exit 1; }

# The servers whose CPU is measured in every run: TRACK_NAMES[i] is TRACK_PIDS[i].
TRACK_NAMES=()
TRACK_PIDS=()
track() { TRACK_NAMES+=("$1"); TRACK_PIDS+=("$2"); }

# free_ports N -> N free loopback ports, bound all at once so they are distinct
free_ports() {
	python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
# UPSTREAM_PORT is the WebDAV storage nginx (fencegate's --upstream), NPROXY_PORT
# the plain nginx reverse proxy in front of it, FGS_PORT a second, fresh
# fencegate for the streaming test. CL_PORT1..3 are the cluster nodes (CL_BUS1..3
# their cluster bus, set explicitly: port + 10000 may be taken or out of range),
# FGC_PORT the fencegate on the cluster; PRI_PORT and REP_PORT the primary and
# its replica, ACK_PORT0 and ACK_PORT1 the fencegates on them. (The auth and
# TLS rows take theirs when they start: a port picked long before it is
# bound may be taken meanwhile.)
read -r REDIS_PORT ETCD_PORT ETCD_PEER_PORT FG_PORT UPSTREAM_PORT NPROXY_PORT FGS_PORT \
	CL_PORT1 CL_PORT2 CL_PORT3 CL_BUS1 CL_BUS2 CL_BUS3 FGC_PORT PRI_PORT REP_PORT ACK_PORT0 ACK_PORT1 < <(free_ports 18)

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

# est_minutes: roughly how long a run with these knobs takes on a 2-core
# machine: every wrk run exactly (its warm-up, its run, a second between),
# the rest at the rates a full run showed
est_minutes() {
	local w=$((WARMUP + DURATION + 1)) t=0 sync=0
	command -v rclone >/dev/null && sync=$((SYNC_FILES * SYNC_ROUNDS / 10))
	want base && t=$((t + (5 + 3 * GET_ROUNDS + 3 * PUT_ROUNDS) * w + 6 * (WARMUP + LAT_DURATION + 1) + 30 + 2 * REDIS_N / 40000 + 2 * ACK_N / 2000 +
		(2 * CALLS_N + CALLS_PUTS) / 4000 + WAITERS / 400 + HANDOFF_ROUNDS / 50 + BIG_MB / 100 + 2 * PUBSUB_N / 100000 + sync))
	want auth && t=$((t + 4 * AUTH_ROUNDS * w + 10))
	want tls && t=$((t + 4 * TLS_ROUNDS * w + 10))
	echo $(((t + 30) / 60))
}
say "fencegate benchmark  ($(date -u '+%Y-%m-%d %H:%M:%S UTC'))"
say "machine: $(nproc) cores, $(uname -sr); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
say "tools: $(redis-server --version | awk '{print $1, $2, $3}');$(want base && echo " etcd $(etcd --version | awk 'NR==1{print $3}');")" \
	"$(wrk --version 2>&1 | awk 'NR==1{print $1, $2}'); $(python3 --version)$(want tls && echo "; $(openssl version | awk '{print $1, $2}')")"
say "groups of rows: ${ONLY:-base,auth,tls}; expected length about $(est_minutes) min (the summary says how long it took)"
say "load: wrk -t$WRK_THREADS -c$CONNS for every HTTP run, ${WARMUP}s warm-up + ${DURATION}s measured; fencegate --threads $FG_LOOPS, nginx proxy $FG_LOOPS worker(s), storage nginx $STORE_WORKERS worker(s)"
say "temp dir on: $(df -T "$TMP" | awk 'NR==2{print $2}') (etcd WAL fsyncs there); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
say "storage root: $STORE_FS ($DAV; $(df -Pm "$STORE" | awk 'NR==2{print $4}') MB free)"
[ -z "$STORE_NOTE" ] || say "!! $STORE_NOTE"

# ---- perf ----------------------------------------------------------------
PERF_OK=0
PERF_WHY=""
if [ "$PROFILE" = 1 ]; then
	if perf record -a -F "$PERF_FREQ" -o "$TMP/perf-check.data" -- sleep 0.2 >"$TMP/perf-check.log" 2>&1 &&
		[ -n "$(perf report -i "$TMP/perf-check.data" --stdio -q --sort comm 2>/dev/null | head -n1)" ]; then
		PERF_OK=1
		say "profiles: perf $(perf --version | awk '{print $3}') records system-wide (-a -F $PERF_FREQ, event $(perf evlist -i "$TMP/perf-check.data" 2>/dev/null | head -n1))" \
			"during: $PROFILE_RUNS (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo ?))"
	else
		PERF_WHY=$(tr '\n' ' ' <"$TMP/perf-check.log" | cut -c1-300)
		say "profiles: perf cannot record here (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo ?): $PERF_WHY);" \
			"falling back to CPU seconds and context switches per process (printed for every run anyway)"
	fi
	rm -f "$TMP/perf-check.data"
fi
hr

# ---- redis-server --------------------------------------------------------
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
	--daemonize no --dir "$TMP" --logfile '' >"$TMP/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
track redis "$REDIS_PID"
wait_for 10 "$REDIS_PID" redis sh -c "redis-cli -h 127.0.0.1 -p $REDIS_PORT ping | grep -q PONG"
rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
say "redis-server  pid $REDIS_PID  127.0.0.1:$REDIS_PORT"

# ---- etcd ----------------------------------------------------------------
if want base; then
	ETCD_URL="http://127.0.0.1:$ETCD_PORT"
	etcd --name fgbench --data-dir "$TMP/etcd" \
		--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "fgbench=http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster-state new >"$TMP/etcd.log" 2>&1 &
	ETCD_PID=$!
	PIDS+=("$ETCD_PID")
	track etcd "$ETCD_PID"
	wait_for 30 "$ETCD_PID" etcd sh -c "curl -sf $ETCD_URL/health | grep -q true"
	ETCD_API=""
	for p in /v3 /v3beta /v3alpha; do
		code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "$ETCD_URL$p/lease/grant" -d '{"TTL":5}' || true)
		if [ "$code" = 200 ]; then ETCD_API=$p; break; fi
	done
	[ -n "$ETCD_API" ] || die "etcd JSON gateway answers neither /v3 nor /v3beta"
	say "etcd          pid $ETCD_PID  $ETCD_URL  (JSON gateway at $ETCD_API/)"
fi

# ---- nginx: WebDAV storage, and a plain reverse proxy in front of it -----
STORE_URL="http://127.0.0.1:$UPSTREAM_PORT"
NPROXY_URL="http://127.0.0.1:$NPROXY_PORT"
PROXY_OK=0
# nginx_conf NAME WORKERS SERVER-BLOCK [HTTP-EXTRA]: a self-contained
# nginx.conf whose prefix, pid, logs and temp dirs all live in $TMP/NAME.
nginx_conf() {
	local d="$TMP/$1"
	mkdir -p "$d"
	{
		[ "$(id -u)" = 0 ] && echo "user root;"
		cat <<EOF
worker_processes $2;
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
${4:-}
	server {
$3
	}
}
EOF
	} >"$d/nginx.conf"
}
start_nginx() { # start_nginx NAME URL [CURL-ARGS...] -> pid in NGINX_PID; exits when it does not answer
	local i
	nginx -p "$TMP/$1/" -c "$TMP/$1/nginx.conf" -e "$TMP/$1.log" >>"$TMP/$1.log" 2>&1 &
	NGINX_PID=$!
	PIDS+=("$NGINX_PID")
	for ((i = 0; i < 100; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "${@:3}" "$2/fgb-probe" || true)" != 000 ] && return 0
		kill -0 "$NGINX_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "run.sh: $1 did not start; its log:" >&2
	tail -n 20 "$TMP/$1.log" | sed 's/^/   /' >&2
	exit 1
}
# The plain reverse proxy's forwarding, and the HTTPS one's (auth_tls.sh)
NGINX_PROXY_LOCATION="		location / {
			proxy_pass http://fgb_store;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_request_buffering off;
		}"
NGINX_PROXY_UPSTREAM="	upstream fgb_store {
		server 127.0.0.1:$UPSTREAM_PORT;
		keepalive 64;
		keepalive_requests 1000000;
	}"
if [ "$SKIP_PROXY" = 0 ]; then
	nginx_conf nginx-store "$STORE_WORKERS" "		listen 127.0.0.1:$UPSTREAM_PORT;
		root $DAV;
		client_body_temp_path $STORE/body;
		sendfile on;
		dav_methods PUT DELETE MKCOL COPY MOVE;
		create_full_put_path on;
		dav_access user:rw group:r all:r;"
	start_nginx nginx-store "$STORE_URL"
	STORE_PID=$NGINX_PID
	track nginx-store "$STORE_PID"
	say "nginx storage pid $STORE_PID  $STORE_URL  (WebDAV, $STORE_WORKERS worker(s); $(nginx -v 2>&1 | sed 's/^nginx version: //'))"
	if want base; then
		# reuseport: one listening socket per worker, so the kernel spreads the
		# connections over all of them
		nginx_conf nginx-proxy "$FG_LOOPS" "		listen 127.0.0.1:$NPROXY_PORT reuseport;
$NGINX_PROXY_LOCATION" "$NGINX_PROXY_UPSTREAM"
		start_nginx nginx-proxy "$NPROXY_URL"
		NPROXY_PID=$NGINX_PID
		track nginx-proxy "$NPROXY_PID"
		# the peer gets the cores fencegate gets: as many workers as loops
		for ((i = 0; i < 50; i++)); do
			NPROXY_WORKERS=$(pgrep -P "$NPROXY_PID" | wc -l)
			[ "$NPROXY_WORKERS" -ge "$FG_LOOPS" ] && break
			sleep 0.1
		done
		[ "$NPROXY_WORKERS" = "$FG_LOOPS" ] || die "the nginx proxy runs $NPROXY_WORKERS worker process(es), not FG_LOOPS=$FG_LOOPS"
		say "nginx proxy   pid $NPROXY_PID  $NPROXY_URL  (proxy_pass to the storage, upstream keepalive 64, reuseport;" \
			"$NPROXY_WORKERS worker process(es), checked)"
	fi
	PROXY_OK=1
fi

# ---- fencegate -----------------------------------------------------------
FG_URL="http://127.0.0.1:$FG_PORT"
FG_OK=0
if [ "$SKIP_FG" = 0 ] && want base; then
	"$BIN" --listen "127.0.0.1:$FG_PORT" --redis "127.0.0.1:$REDIS_PORT" \
		--upstream "http://127.0.0.1:$UPSTREAM_PORT" --threads "$FG_LOOPS" \
		--max-connections "$FG_MAX_CONN" --max-waiters "$FG_MAX_WAITERS" \
		--log-level error >"$TMP/fencegate.log" 2>&1 &
	FG_PID=$!
	PIDS+=("$FG_PID")
	track fencegate "$FG_PID"
	wait_for 15 "$FG_PID" fencegate sh -c \
		"[ \"\$(curl -s -o /dev/null -w '%{http_code}' $FG_URL/_fence/v1/locks/fgbench-probe)\" != 000 ]"
	# its own count of its loops, to hold against the nginx proxy's workers
	FG_NLOOPS=$(curl -s "$FG_URL/_fence/v1/metrics" | awk '$1 == "fencegate_event_loops" { print $2 + 0 }' || true)
	[ -z "$FG_NLOOPS" ] || [ "$FG_NLOOPS" = "$FG_LOOPS" ] || die "fencegate reports $FG_NLOOPS event loops, not FG_LOOPS=$FG_LOOPS"
	say "fencegate     pid $FG_PID  $FG_URL  (--threads $FG_LOOPS --max-connections $FG_MAX_CONN --max-waiters $FG_MAX_WAITERS; fd limit $(ulimit -n));" \
		"$(ls /proc/"$FG_PID"/task | wc -l) threads, ${FG_NLOOPS:-? (no fencegate_event_loops metric)} event loop(s)"

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

FG_DIED=""
fg_alive() { # fg_alive PHASE
	if [ "$FG_OK" = 1 ] && ! kill -0 "$FG_PID" 2>/dev/null; then
		say "!! fencegate (pid $FG_PID) died during $1; last log lines:"
		tail -n 20 "$TMP/fencegate.log" | sed 's/^/   /'
		FG_OK=0
		FG_DIED=$1
	fi
}
field() { # field LINE KEY
	printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1
}
show() { # show FILE: its first 200 bytes on one line
	head -c 200 "$1" 2>/dev/null | tr '\r\n' '  '
}

# ---- CPU per process per run, and perf ----------------------------------
CLK_TCK=$(getconf CLK_TCK)
kids() { printf '%s\n' "$1"; pgrep -P "$1" 2>/dev/null || true; } # a pid and its children (nginx workers)
cpu_ticks() { # utime+stime of a process and its children, in clock ticks (0 when gone)
	local p t=0 v
	for p in $(kids "$1"); do
		v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
ctxsw() { # ctxsw PID -> "voluntary involuntary" context switches over its threads and its children's
	local p
	for p in $(kids "$1"); do cat /proc/"$p"/task/*/status 2>/dev/null || true; done |
		awk '/^voluntary_ctxt_switches:/ { v += $2 } /^nonvoluntary_ctxt_switches:/ { n += $2 } END { print v + 0, n + 0 }'
}
kfmt() { calc "v = $1; if (v >= 10000) printf \"%.0fk\", v / 1000; else if (v >= 1000) printf \"%.1fk\", v / 1000; else printf \"%d\", v"; }
want_profile() { [ "$PROFILE" = 1 ] && [ "$PERF_OK" = 1 ] && [[ " $PROFILE_RUNS " == *" $1 "* ]]; }
RUNS=()            # measured runs (wrk and the other measured commands), in order
declare -A SUBJ=() # run -> the process under test (for CPU per request)
declare -A CPU=()  # "run proc" -> CPU seconds; "run proc cs" -> context switches
PROFILED=()
# RUN_HOOK, when set, names a function run as `$RUN_HOOK before LABEL` just
# before a measured run starts (after its warm-up) and `$RUN_HOOK after LABEL`
# just after it ends (redis_hook below reads the Redis nodes' own figures).
RUN_HOOK=""
run_hook() { if [ -n "$RUN_HOOK" ]; then "$RUN_HOOK" "$@"; fi; }
M_C0=() M_V0=() M_N0=() M_S0=() M_T0=""
measure_begin() { # CPU ticks and context switches of every tracked process, then /proc/stat and the time
	local i v n
	M_C0=() M_V0=() M_N0=()
	for i in "${!TRACK_PIDS[@]}"; do
		M_C0[i]=$(cpu_ticks "${TRACK_PIDS[i]}")
		read -r v n < <(ctxsw "${TRACK_PIDS[i]}")
		M_V0[i]=$v
		M_N0[i]=$n
	done
}
measure_start() { read -r -a M_S0 < <(head -n1 /proc/stat); M_T0=$(date +%s.%N); }
measure_end() { # measure_end LABEL SUBJECT CLIENT RUSAGE-FILE [PERF-PID]: $TMP/LABEL.cpu, CPU[], RUNS, SUBJ
	local label=$1 subj=$2 client=$3 ru=$4 perf_pid=${5:-} t1 secs i c v n p
	local -a s1=()
	t1=$(date +%s.%N)
	read -r -a s1 < <(head -n1 /proc/stat)
	run_hook after "$label"
	secs=$(calc "print $t1 - $M_T0")
	: >"$TMP/$label.cpu"
	for i in "${!TRACK_PIDS[@]}"; do
		if ! kill -0 "${TRACK_PIDS[i]}" 2>/dev/null; then # gone (died): no figure
			printf '%s - - -\n' "${TRACK_NAMES[i]}" >>"$TMP/$label.cpu"
			continue
		fi
		c=$(cpu_ticks "${TRACK_PIDS[i]}")
		read -r v n < <(ctxsw "${TRACK_PIDS[i]}")
		printf '%s %s %s %s\n' "${TRACK_NAMES[i]}" "$(calc "printf \"%.2f\", ($c - ${M_C0[i]}) / $CLK_TCK")" \
			$((v - M_V0[i])) $((n - M_N0[i])) >>"$TMP/$label.cpu"
	done
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid" 2>/dev/null || true
		wait "$perf_pid" 2>/dev/null || true
	fi
	[ -s "$ru" ] && printf '%s %s\n' "$client" "$(cat "$ru")" >>"$TMP/$label.cpu"
	# whole box: fields 1..8 of the cpu line, idle = idle + iowait
	local tot=0 idle
	for i in 1 2 3 4 5 6 7 8; do tot=$((tot + s1[i] - M_S0[i])); done
	idle=$((s1[4] - M_S0[4] + s1[5] - M_S0[5]))
	printf 'box %s %s\n' "$(calc "printf \"%.0f\", ($tot - $idle) / $tot * 100 * $(nproc)")" "$secs" >>"$TMP/$label.cpu"
	while read -r p c v n; do
		[ "$p" = box ] && { CPU["$label box"]=$c; CPU["$label secs"]=$v; continue; }
		CPU["$label $p"]=$c
		if [ "$c" = - ]; then CPU["$label $p cs"]=-; else CPU["$label $p cs"]=$((v + n)); fi
	done <"$TMP/$label.cpu"
	RUNS+=("$label")
	SUBJ[$label]=$subj
}
run_wrk() { # run_wrk LABEL SUBJECT SCRIPT URL PREFIX [ARGS...]: RESULT line in WRK_LINE
	# and in $TMP/LABEL.txt; CPU seconds and context switches per process in
	# CPU[] and $TMP/LABEL.cpu; with --profile a system-wide perf record.
	local label=$1 subj=$2 script=$3 url=$4 prefix=$5 i line="" perf_pid=""
	shift 5
	wrk -t"$WRK_THREADS" -c"$CONNS" -d"${WARMUP}s" --timeout 10s -s "$script" "$url" -- "warm-$prefix" "$@" \
		>"$TMP/$label-warm.txt" 2>&1 || true
	run_hook before "$label"
	measure_begin
	if want_profile "$label"; then
		: >"$TMP/$label.pids"
		for i in "${!TRACK_PIDS[@]}"; do
			printf '%s %s\n' "${TRACK_NAMES[i]}" "$(kids "${TRACK_PIDS[i]}" | paste -sd,)" >>"$TMP/$label.pids"
		done
		perf record -a -F "$PERF_FREQ" -o "$TMP/$label.perf" >"$TMP/$label.perf.log" 2>&1 &
		perf_pid=$!
		sleep 0.3
		PROFILED+=("$label")
	fi
	measure_start
	python3 "$HERE/rusage.py" "$TMP/$label.wrkru" \
		wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 10s -s "$script" "$url" -- "$prefix" "$@" \
		>"$TMP/$label.txt" 2>&1 || true
	measure_end "$label" "$subj" wrk "$TMP/$label.wrkru" "$perf_pid"
	line=$(grep '^RESULT ' "$TMP/$label.txt" || true)
	if [ -z "$line" ]; then
		say "  wrk produced no result; its output:"
		sed 's/^/   /' "$TMP/$label.txt"
	elif [ "${CPU["$label $subj"]:-}" = - ]; then
		say "  $label: $subj died during the run; its figures are left out: $line"
		line=""
	fi
	WRK_LINE=$line
}
# cpu_us_per PROC UNIT LABEL... -> PROC's CPU microseconds per UNIT
# (requests, cycles: that field of the RESULT lines) over those runs: their
# CPU seconds summed, over their UNITs summed; empty when none has figures
cpu_us_per() {
	local l v q c=0 n=0
	for l in "${@:3}"; do
		v=${CPU["$l $1"]:-}
		q=$(field "$(grep '^RESULT ' "$TMP/$l.txt" 2>/dev/null || true)" "$2")
		[ -n "$v" ] && [ "$v" != - ] && [ -n "$q" ] || continue
		c=$(calc "print $c + $v")
		n=$((n + q))
	done
	[ "$n" -gt 0 ] && calc "printf \"%.0f\", $c / $n * 1e6"
	return 0
}
run_cmd() { # run_cmd LABEL SUBJECT CLIENT CMD...: CMD's output in $TMP/LABEL.txt; CPU as run_wrk does
	local label=$1 subj=$2 client=$3
	shift 3
	run_hook before "$label"
	measure_begin
	measure_start
	python3 "$HERE/rusage.py" "$TMP/$label.ru" "$@" >"$TMP/$label.txt" 2>&1 || true
	measure_end "$label" "$subj" "$client" "$TMP/$label.ru"
}
cpu_line() { # cpu_line LABEL: one line of CPU seconds (context switches vol/invol) per process
	local out="" p c v n
	while read -r p c v n; do
		if [ "$p" = box ]; then out+="; box busy ${c}% of $(($(nproc) * 100))%"; continue; fi
		if [ "$c" = - ]; then out+=" $p gone"; continue; fi
		out+=" $p ${c}s ($(kfmt "$v")/$(kfmt "$n"))"
	done <"$TMP/$1.cpu"
	printf '%s\n' "$out"
}
report_cycles() { # report_cycles LABEL RESULTLINE
	local line=$2 kinds sample
	say "  cycles/s $(field "$line" cps)   ($(field "$line" cycles) cycles in $(field "$line" secs) s;" \
		"per-request p50 $(field "$line" req_p50_ms) ms, p99 $(field "$line" req_p99_ms) ms)"
	say "  errors: app $(field "$line" app_errors), http>=400 $(field "$line" http_ge400)," \
		"socket connect/read/write/timeout $(field "$line" sock_connect)/$(field "$line" sock_read)/$(field "$line" sock_write)/$(field "$line" sock_timeout)"
	kinds=$(sed -n 's/^ERRKINDS //p' "$TMP/$1.txt")
	sample=$(sed -n 's/^ERRSAMPLE //p' "$TMP/$1.txt")
	say "  CPU s (context switches voluntary/involuntary):$(cpu_line "$1")"
	[ -n "$kinds" ] && say "  error kinds: $kinds"
	[ -n "$sample" ] && say "  first error: $sample"
	return 0
}
errs_of() { # errs_of RESULTLINE -> app + socket errors + answers >= 400
	local k t=0 v
	for k in app_errors http_ge400 sock_connect sock_read sock_write sock_timeout; do
		v=$(field "$1" "$k")
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

# ---- Redis nodes' own figures around a run -------------------------------
# redis_hook, as RUN_HOOK, reads for every port in RHOOK_PORTS: INFO cpu
# (used_cpu_sys + used_cpu_user, the server's own account of its CPU, all its
# threads) before and after the run, into $TMP/LABEL.redis-before / -after as
# "port seconds"; and INFO commandstats after the run, reset (CONFIG
# RESETSTAT) before it, into $TMP/LABEL.cmdstat-PORT.
RHOOK_PORTS=()
redis_cpu() { # redis_cpu PORT -> used_cpu_sys + used_cpu_user in seconds, or -
	redis-cli -h 127.0.0.1 -p "$1" info cpu 2>/dev/null | tr -d '\r' |
		awk -F: '/^used_cpu_(sys|user):/ { s += $2; n++ } END { if (n == 2) printf "%.6f\n", s; else print "-" }' || true
}
redis_hook() { # redis_hook before|after LABEL
	local p
	: >"$TMP/$2.redis-$1"
	for p in "${RHOOK_PORTS[@]}"; do
		[ "$1" = before ] && { redis-cli -h 127.0.0.1 -p "$p" config resetstat >/dev/null 2>&1 || true; }
		printf '%s %s\n' "$p" "$(redis_cpu "$p")" >>"$TMP/$2.redis-$1"
		[ "$1" = after ] && { redis-cli -h 127.0.0.1 -p "$p" info commandstats 2>/dev/null | tr -d '\r' >"$TMP/$2.cmdstat-$p" || true; }
	done
	return 0
}
cmd_calls() { # cmd_calls LABEL PORT REGEX -> "calls failed_calls" over the commandstats rows matching REGEX
	awk -F'[:,=]' -v re="$3" '$0 ~ re { for (i = 2; i < NF; i += 2) { if ($i == "calls") c += $(i + 1); if ($i == "failed_calls") f += $(i + 1) } }
		END { print c + 0, f + 0 }' "$TMP/$1.cmdstat-$2" 2>/dev/null || echo "0 0"
}
redis_delta() { # redis_delta LABEL PORT -> the node's Redis CPU seconds over the run, or -
	local a b
	a=$(awk -v p="$2" '$1 == p { print $2 }' "$TMP/$1.redis-before" 2>/dev/null || true)
	b=$(awk -v p="$2" '$1 == p { print $2 }' "$TMP/$1.redis-after" 2>/dev/null || true)
	if [ -z "$a" ] || [ -z "$b" ] || [ "$a" = - ] || [ "$b" = - ]; then echo -; return 0; fi
	calc "printf \"%.6f\", $b - $a"
}
# redis_report LABEL OPS UNIT NAME:PORT...: prints the Redis CPU per OPS (per
# node and in all) and each node's FCALL calls in the run; sets RR_US (per node,
# "a / b / c"), RR_TOT (all nodes), RR_SHARE (each node's share of the FCALLs)
redis_report() {
	local label=$1 ops=$2 unit=$3 np name port d fc ff tot=0 known=1 ftot=0 fftot=0 i
	shift 3
	local -a names=() ds=() fcs=()
	RR_US="" RR_TOT="" RR_SHARE=""
	for np in "$@"; do
		name=${np%%:*}
		port=${np##*:}
		d=$(redis_delta "$label" "$port")
		read -r fc ff < <(cmd_calls "$label" "$port" '^cmdstat_fcall(_ro)?:')
		names+=("$name")
		ds+=("$d")
		fcs+=("$fc")
		ftot=$((ftot + fc))
		fftot=$((fftot + ff))
		if [ "$d" = - ]; then known=0; else tot=$(calc "print $tot + $d"); fi
	done
	if [ -z "$ops" ] || [ "$ops" = 0 ]; then
		say "  Redis CPU per $unit: no $unit completed"
		return 0
	fi
	local line="" sline=""
	for i in "${!names[@]}"; do
		if [ "${ds[i]}" = - ]; then
			line+="${line:+, }${names[i]} -"
			RR_US+="${RR_US:+ / }-"
		else
			line+="${line:+, }${names[i]} $(calc "printf \"%.1f\", ${ds[i]} / $ops * 1e6") us"
			RR_US+="${RR_US:+ / }$(calc "printf \"%.1f\", ${ds[i]} / $ops * 1e6")"
		fi
		sline+="${sline:+, }${names[i]} ${fcs[i]} ($(calc "if ($ftot > 0) printf \"%.1f\", ${fcs[i]} / $ftot * 100; else print 0")%)"
		RR_SHARE+="${RR_SHARE:+ / }$(calc "if ($ftot > 0) printf \"%.0f\", ${fcs[i]} / $ftot * 100; else print 0")%"
	done
	[ "$known" = 1 ] && RR_TOT=$(calc "printf \"%.1f\", $tot / $ops * 1e6")
	say "  Redis CPU per $unit (INFO cpu, used_cpu_sys + used_cpu_user, over the run): $line${RR_TOT:+; all nodes $RR_TOT us}"
	say "  FCALL calls in the run: $sline; $(calc "printf \"%.2f\", $ftot / $ops") per $unit, $fftot failed"
}

# ---- more Redis servers, more fencegates ---------------------------------
start_redis() { # start_redis NAME PORT [ARGS...]: a redis-server on loopback, pid in RPID; 1 when it does not answer
	local name=$1 port=$2 i
	shift 2
	mkdir -p "$TMP/$name"
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize no \
		--dir "$TMP/$name" --logfile '' "$@" >"$TMP/$name.log" 2>&1 &
	RPID=$!
	PIDS+=("$RPID")
	for ((i = 0; i < 100; i++)); do
		[ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null || true)" = PONG ] && return 0
		kill -0 "$RPID" 2>/dev/null || break
		sleep 0.1
	done
	say "  !! $name did not start; its log:"
	tail -n 20 "$TMP/$name.log" | sed 's/^/     /'
	return 1
}
# start_fg NAME PORT REDIS-ADDRESS [ARGS...]: another fencegate with the first
# one's flags (but --log-level warn), log in $TMP/NAME.log, pid in XPID; then
# one acquire + release on it (the acquire tried again for up to 5 s while
# the gateway finds its Redis). 1 when it does not answer or the smoke fails.
# It is reached at FG_SCHEME://127.0.0.1:PORT with FG_CURL added to every
# curl (a key's header file, a CA), http and none unless set.
FG_SCHEME=http
FG_CURL=()
start_fg() {
	local name=$1 port=$2 addr=$3 i up=0 code="" rel="" lease="" url="$FG_SCHEME://127.0.0.1:$2"
	shift 3
	"$BIN" --listen "127.0.0.1:$port" --redis "$addr" --upstream "$STORE_URL" --threads "$FG_LOOPS" \
		--max-connections "$FG_MAX_CONN" --max-waiters "$FG_MAX_WAITERS" --log-level warn "$@" \
		>"$TMP/$name.log" 2>&1 &
	XPID=$!
	PIDS+=("$XPID")
	for ((i = 0; i < 150; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "${FG_CURL[@]}" "$url/_fence/v1/locks/fgbench-probe" || true)" != 000 ] && { up=1; break; }
		kill -0 "$XPID" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$up" = 1 ]; then
		for ((i = 0; i < 50; i++)); do
			code=$(curl -s -o "$TMP/$name.smoke" -w '%{http_code}' "${FG_CURL[@]}" -XPOST -H 'Content-Type: application/json' \
				"$url/_fence/v1/locks/fgbench-smoke-$RUNID" -d '{"ttl_ms":30000}' || true)
			[ "$code" = 200 ] && break
			kill -0 "$XPID" 2>/dev/null || break
			sleep 0.1
		done
		lease=$(python3 -c 'import sys,json; print(json.load(open(sys.argv[1]))["lease"])' "$TMP/$name.smoke" 2>/dev/null || true)
		rel=$(curl -s -o "$TMP/$name.smoke-rel" -w '%{http_code}' "${FG_CURL[@]}" -XDELETE -H "Fence-Lease: $lease" \
			"$url/_fence/v1/locks/fgbench-smoke-$RUNID" || true)
		if [ "$code" = 200 ] && [ -n "$lease" ] && [ "$rel" = 204 ]; then
			say "$(printf '%-13s' "$name") pid $XPID  $url  (--redis $addr${*:+ $*}; --threads $FG_LOOPS); smoke: acquire -> 200, release -> 204"
			return 0
		fi
		say "  !! $name: smoke acquire -> ${code:-?} $(show "$TMP/$name.smoke"); release -> ${rel:-?} $(show "$TMP/$name.smoke-rel")"
	else
		say "  !! $name did not start"
	fi
	say "     its log:"
	tail -n 20 "$TMP/$name.log" | sed 's/^/     /'
	stop_pid "$XPID"
	return 1
}
XFG_DIED="" # the other fencegates that died during their runs
xfg_done() { # xfg_done NAME PID PHASE: note a death, stop it, and quote what it logged
	local n
	if ! kill -0 "$2" 2>/dev/null; then
		say "  !! $1 (pid $2) died during $3; last log lines:"
		tail -n 20 "$TMP/$1.log" | sed 's/^/     /'
		XFG_DIED+="${XFG_DIED:+, }$1 during $3"
	fi
	stop_pid "$2"
	n=$(grep -c . "$TMP/$1.log" 2>/dev/null || true)
	if [ "${n:-0}" -gt 0 ]; then
		say "  $1 logged $n line(s) at level warn or above; the first ones:"
		head -n 5 "$TMP/$1.log" | cut -c1-200 | sed 's/^/     /'
	else
		say "  $1 logged nothing at level warn or above"
	fi
}
# track_only NAME PID [NAME PID...]: measure only these processes in the runs
# that follow; track_main goes back to the first set (redis, etcd, nginx, fencegate)
MAIN_TRACK_NAMES=() MAIN_TRACK_PIDS=()
track_only() {
	if [ "${#MAIN_TRACK_NAMES[@]}" = 0 ]; then
		MAIN_TRACK_NAMES=("${TRACK_NAMES[@]}")
		MAIN_TRACK_PIDS=("${TRACK_PIDS[@]}")
	fi
	TRACK_NAMES=() TRACK_PIDS=()
	while [ $# -ge 2 ]; do track "$1" "$2"; shift 2; done
}
track_main() {
	if [ "${#MAIN_TRACK_NAMES[@]}" -gt 0 ]; then
		TRACK_NAMES=("${MAIN_TRACK_NAMES[@]}")
		TRACK_PIDS=("${MAIN_TRACK_PIDS[@]}")
	fi
}

# ---- Redis floor ---------------------------------------------------------
if want base; then
	say "[redis floor] redis-benchmark -c $CONNS -n $REDIS_N -r 100000 (no pipelining), same redis-server"
	REL_SHA=$(rcli script load \
		"if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end")
	rb() {
		redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$CONNS" -n "$REDIS_N" -r 100000 --csv "$@" |
			awk -F'","' 'NR==2 { print $2 "," $5 "," $7 }' | tr -d '"'
	}
	IFS=, read -r SET_RPS SET_P50 SET_P99 < <(rb set 'fg:bench:__rand_int__' x nx px 30000)
	IFS=, read -r EVAL_RPS EVAL_P50 EVAL_P99 < <(rb evalsha "$REL_SHA" 1 'fg:bench:__rand_int__' x)
	[ -n "$SET_RPS" ] && [ -n "$EVAL_RPS" ] || die "redis-benchmark gave no figures"
	FLOOR=$(calc "printf \"%.1f\", 1 / (1 / $SET_RPS + 1 / $EVAL_RPS)")
	say "  SET NX PX 30000 : $SET_RPS req/s   (p50 $SET_P50 ms, p99 $SET_P99 ms)"
	say "  EVALSHA release : $EVAL_RPS req/s   (p50 $EVAL_P50 ms, p99 $EVAL_P99 ms)"
	say "  floor = 1/(1/set + 1/evalsha) = $FLOOR cycles/s"
	rcli eval "local n=0 for _,k in ipairs(redis.call('keys','fg:bench:*')) do n=n+redis.call('del',k) end return n" 0 >/dev/null
	rcli script flush >/dev/null
	hr
fi

# ---- lock cycles: fencegate, etcd ----------------------------------------
FG_CPS="" FG_CYC_ERRS="" ONE_RUS=""
if [ "$FG_OK" = 1 ]; then
	say "[lock cycles, fencegate] wrk -t$WRK_THREADS -c$CONNS; each wrk thread goes round $NAME_RING lock names of its own;" \
		"cycle = POST acquire (200) + DELETE release (204)"
	RHOOK_PORTS=("$REDIS_PORT")
	RUN_HOOK=redis_hook
	run_wrk cycles-fencegate fencegate "$HERE/fence_cycle.lua" "$FG_URL" "fgb-$RUNID" "$NAME_RING"
	RUN_HOOK=""
	if [ -n "$WRK_LINE" ]; then
		report_cycles cycles-fencegate "$WRK_LINE"
		FG_CPS=$(field "$WRK_LINE" cps)
		FG_CYC_ERRS=$(errs_of "$WRK_LINE")
		redis_report cycles-fencegate "$(field "$WRK_LINE" cycles)" cycle "redis:$REDIS_PORT"
		ONE_RUS=$RR_TOT
	fi
	fg_alive "the cycle benchmark"
	hr
fi

if want base; then
	say "[lock cycles, etcd] wrk -t$WRK_THREADS -c$CONNS; one lease per wrk thread (granted before, TTL 600, reused)," \
		"each thread goes round $NAME_RING lock names of its own; cycle = $ETCD_API/lock/lock + $ETCD_API/lock/unlock"
	ETCD_LEASES=""
	for ((i = 0; i < WRK_THREADS; i++)); do
		id=$(curl -s -XPOST "$ETCD_URL$ETCD_API/lease/grant" -d '{"TTL":600}' | sed -n 's/.*"ID":"\{0,1\}\([0-9][0-9]*\).*/\1/p')
		[ -n "$id" ] || die "etcd granted no lease"
		ETCD_LEASES+="${ETCD_LEASES:+,}$id"
	done
	run_wrk cycles-etcd etcd "$HERE/etcd_cycle.lua" "$ETCD_URL" "fgb-$RUNID" "$ETCD_API" "$ETCD_LEASES" "$NAME_RING"
	ETCD_CPS="" ETCD_ERRS=""
	if [ -n "$WRK_LINE" ]; then
		report_cycles cycles-etcd "$WRK_LINE"
		ETCD_CPS=$(field "$WRK_LINE" cps)
		ETCD_ERRS=$(errs_of "$WRK_LINE")
	fi
	hr
fi

# ---- lock cycles on a three-master Redis Cluster -------------------------
# Three cluster-enabled masters, no replicas; a fencegate on them (the first
# one's loops) under the same cycle load as [lock cycles, fencegate]. Each
# lock's scripts go to the master owning the slot of {NAME}.
CL_OK=0 CL_CPS="" CL_ERRS="" CL_RUS="" CL_RUS_NODES="" CL_SHARE=""
CL_PIDS=()
CL_NAMES=(redis-c1 redis-c2 redis-c3)
CL_PORTS=("$CL_PORT1" "$CL_PORT2" "$CL_PORT3")
CL_BUSES=("$CL_BUS1" "$CL_BUS2" "$CL_BUS3")
if want base; then
	say "[redis cluster] three cluster-enabled redis-server masters (no replicas, --save '' --appendonly no)," \
		"redis-cli --cluster create --cluster-replicas 0"
	for i in 0 1 2; do
		start_redis "${CL_NAMES[i]}" "${CL_PORTS[i]}" --cluster-enabled yes --cluster-port "${CL_BUSES[i]}" \
			--cluster-config-file "$TMP/${CL_NAMES[i]}/nodes.conf" || break
		CL_PIDS+=("$RPID")
	done
fi
if [ "${#CL_PIDS[@]}" = 3 ]; then
	if redis-cli --cluster create "127.0.0.1:$CL_PORT1" "127.0.0.1:$CL_PORT2" "127.0.0.1:$CL_PORT3" \
		--cluster-replicas 0 --cluster-yes >"$TMP/cluster-create.log" 2>&1; then
		for ((i = 0; i < 200; i++)); do
			n=0
			for p in "${CL_PORTS[@]}"; do
				redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok' && n=$((n + 1))
			done
			[ "$n" = 3 ] && { CL_OK=1; break; }
			sleep 0.1
		done
		[ "$CL_OK" = 1 ] || say "  !! the cluster did not reach cluster_state:ok on all three nodes within 20 s"
	else
		say "  !! redis-cli --cluster create failed:"
		tail -n 10 "$TMP/cluster-create.log" | sed 's/^/     /'
	fi
fi
if [ "$CL_OK" = 1 ]; then
	for i in 0 1 2; do
		say "$(printf '%-13s' "${CL_NAMES[i]}") pid ${CL_PIDS[i]}  127.0.0.1:${CL_PORTS[i]} (bus ${CL_BUSES[i]}), slots" \
			"$(redis-cli -h 127.0.0.1 -p "${CL_PORTS[i]}" cluster nodes | tr -d '\r' | awk '$3 ~ /myself/ { for (i = 9; i <= NF; i++) printf "%s%s", (i > 9 ? "," : ""), $i }')"
	done
	say "  cluster_state:ok on all three nodes"
fi
CL_NODES="127.0.0.1:$CL_PORT1,127.0.0.1:$CL_PORT2,127.0.0.1:$CL_PORT3"
if [ "$CL_OK" = 1 ] && [ "$SKIP_FG" = 0 ]; then
	if start_fg fg-cluster "$FGC_PORT" "redis-cluster://$CL_NODES"; then
		FGC_PID=$XPID
		say "[lock cycles, 3-master cluster] the load of [lock cycles, fencegate] (wrk -t$WRK_THREADS -c$CONNS, fence_cycle.lua," \
			"ring of $NAME_RING names per wrk thread) on fg-cluster; Redis figures from each node"
		track_only redis-c1 "${CL_PIDS[0]}" redis-c2 "${CL_PIDS[1]}" redis-c3 "${CL_PIDS[2]}" fg-cluster "$FGC_PID"
		RHOOK_PORTS=("${CL_PORTS[@]}")
		RUN_HOOK=redis_hook
		run_wrk cycles-cluster fg-cluster "$HERE/fence_cycle.lua" "http://127.0.0.1:$FGC_PORT" "fgk-$RUNID" "$NAME_RING"
		RUN_HOOK=""
		track_main
		if [ -n "$WRK_LINE" ]; then
			report_cycles cycles-cluster "$WRK_LINE"
			CL_CPS=$(field "$WRK_LINE" cps)
			CL_ERRS=$(errs_of "$WRK_LINE")
			redis_report cycles-cluster "$(field "$WRK_LINE" cycles)" cycle \
				"redis-c1:$CL_PORT1" "redis-c2:$CL_PORT2" "redis-c3:$CL_PORT3"
			CL_RUS=$RR_TOT CL_RUS_NODES=$RR_US CL_SHARE=$RR_SHARE
		fi
		xfg_done fg-cluster "$FGC_PID" "the cluster cycle benchmark"
	else
		XFG_DIED+="${XFG_DIED:+, }fg-cluster did not start"
	fi
fi
[ "$CL_OK" = 1 ] && hr

# ---- cluster-wide PUBLISH vs sharded SPUBLISH ----------------------------
# Informs a design choice: fencegate's grant and wake messages are PUBLISHed,
# which the cluster bus forwards to every node. PS_CH hashes to one master
# (PS_OWNER); both commands are sent to it by redis-benchmark (pipelined, so
# the message, not the client's round trip, dominates). PUBLISH's subscriber
# sits on another node (as a loop's subscription mostly does: a lock's master
# is seldom the one its gateway subscribed on); SSUBSCRIBE must be on the owner.
PS_PUB_US="" PS_SPUB_US="" PS_PUB_NODES="" PS_SPUB_NODES=""
pubsub_run() { # pubsub_run LABEL PUBLISH|SPUBLISH SUBSCRIBER-PORT: Redis CPU per message, all nodes, in PS_US
	local label=$1 cmd=$2 sport=$3 kind=subscribe spid i got rps tot=0 d line="" known=1
	[ "$cmd" = SPUBLISH ] && kind=ssubscribe
	PS_US="" PS_NODES=""
	python3 "$HERE/subscribe_count.py" "$sport" "$kind" "$PS_CH" "$TMP/$label.count" >"$TMP/$label.sub" 2>&1 &
	spid=$!
	PIDS+=("$spid")
	for ((i = 0; i < 50; i++)); do
		grep -q '^ready' "$TMP/$label.sub" 2>/dev/null && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q '^ready' "$TMP/$label.sub" 2>/dev/null; then
		say "  !! the $kind subscriber did not start: $(show "$TMP/$label.sub")"
		stop_pid "$spid"
		return 0
	fi
	track_only redis-c1 "${CL_PIDS[0]}" redis-c2 "${CL_PIDS[1]}" redis-c3 "${CL_PIDS[2]}" subscriber "$spid"
	RHOOK_PORTS=("${CL_PORTS[@]}")
	RUN_HOOK=redis_hook
	run_cmd "$label" "" redis-benchmark redis-benchmark -h 127.0.0.1 -p "$PS_OWNER" -c "$PUBSUB_CLIENTS" \
		-n "$PUBSUB_N" -P "$PUBSUB_PIPELINE" --csv "$cmd" "$PS_CH" msg
	RUN_HOOK=""
	track_main
	sleep 0.3 # the last messages reach the subscriber
	stop_pid "$spid"
	got=$(cat "$TMP/$label.count" 2>/dev/null || echo "?")
	rps=$(awk -F'","' 'NR == 2 { print $2 }' "$TMP/$label.txt" | tr -d '"')
	for i in 0 1 2; do
		d=$(redis_delta "$label" "${CL_PORTS[i]}")
		if [ "$d" = - ]; then known=0; line+="${line:+, }${CL_NAMES[i]} -"; PS_NODES+="${PS_NODES:+ / }-"; continue; fi
		tot=$(calc "print $tot + $d")
		line+="${line:+, }${CL_NAMES[i]} $(calc "printf \"%.2f\", $d / $PUBSUB_N * 1e6")"
		PS_NODES+="${PS_NODES:+ / }$(calc "printf \"%.2f\", $d / $PUBSUB_N * 1e6")"
	done
	[ "$known" = 1 ] && PS_US=$(calc "printf \"%.2f\", $tot / $PUBSUB_N * 1e6")
	say "  $cmd to $(cl_name "$PS_OWNER"), $kind on $(cl_name "$sport"): $PUBSUB_N messages at ${rps:-?}/s," \
		"subscriber received $got; Redis CPU us per message: $line${PS_US:+; all nodes $PS_US}"
	[ -n "$rps" ] || say "  redis-benchmark gave no figure: $(show "$TMP/$label.txt")"
	say "  CPU s (context switches voluntary/involuntary):$(cpu_line "$label")"
}
cl_name() { local i; for i in 0 1 2; do [ "${CL_PORTS[i]}" = "$1" ] && { echo "${CL_NAMES[i]}"; return 0; }; done; echo "$1"; }
if [ "$CL_OK" = 1 ]; then
	PS_CH="fg:bench:ps-$RUNID"
	out=$(redis-cli -h 127.0.0.1 -p "$CL_PORT1" spublish "$PS_CH" probe 2>&1 || true)
	case "$out" in MOVED*) PS_OWNER=${out##*:} ;; *) PS_OWNER=$CL_PORT1 ;; esac
	PS_OTHER=$CL_PORT1
	[ "$PS_OWNER" = "$CL_PORT1" ] && PS_OTHER=$CL_PORT2
	say "[cluster pub/sub] redis-benchmark -c $PUBSUB_CLIENTS -P $PUBSUB_PIPELINE -n $PUBSUB_N '<cmd> $PS_CH msg'" \
		"(slot $(redis-cli -h 127.0.0.1 -p "$CL_PORT1" cluster keyslot "$PS_CH"), owner $(cl_name "$PS_OWNER")); one subscriber;" \
		"Redis CPU from INFO cpu of all three nodes around each run"
	pubsub_run pubsub-publish PUBLISH "$PS_OTHER"
	PS_PUB_US=$PS_US PS_PUB_NODES=$PS_NODES
	pubsub_run pubsub-spublish SPUBLISH "$PS_OWNER"
	PS_SPUB_US=$PS_US PS_SPUB_NODES=$PS_NODES
fi
for ((i = ${#CL_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${CL_PIDS[i]}"; done
[ "$CL_OK" = 1 ] && hr

# ---- the cost of replica acknowledgement ---------------------------------
# A primary and one replica; a fencegate on the primary with --redis-replicas
# 0, then one with --redis-replicas 1 (every grant waits for WAIT 1 1000 before
# it is answered). Each: a sequential acquire + release loop on one connection
# (the unloaded acquire latency), then the cycle load of [lock cycles, fencegate].
declare -A ACK=()
ACK_PORTS=("$ACK_PORT0" "$ACK_PORT1")
ares() { sed -n "s/^RESULT_$2=//p" "$TMP/$1.txt" | head -n1; } # ares LABEL KEY: a RESULT_KEY= line of acquire_latency.py
ACK_ERRS=0
ACK_RS_OK=0
if [ "$SKIP_FG" = 0 ] && want base; then
	say "[replica acknowledgement] a primary and one replica (--replicaof) on loopback; fencegate on the primary with" \
		"--redis-replicas 0, then --redis-replicas 1 --redis-replicas-timeout-ms 1000"
	if start_redis redis-pri "$PRI_PORT"; then
		PRI_PID=$RPID
		if start_redis redis-rep "$REP_PORT" --replicaof 127.0.0.1 "$PRI_PORT"; then
			REP_PID=$RPID
			for ((i = 0; i < 200; i++)); do
				redis-cli -h 127.0.0.1 -p "$PRI_PORT" info replication 2>/dev/null | tr -d '\r' | grep -q '^slave0:.*state=online' &&
					{ ACK_RS_OK=1; break; }
				sleep 0.1
			done
			if [ "$ACK_RS_OK" = 1 ]; then
				say "redis-pri     pid $PRI_PID  127.0.0.1:$PRI_PORT; redis-rep pid $REP_PID  127.0.0.1:$REP_PORT," \
					"$(redis-cli -h 127.0.0.1 -p "$PRI_PORT" info replication | tr -d '\r' | grep '^slave0:')"
			else
				say "  !! the replica did not come online within 20 s"
			fi
		fi
	fi
fi
if [ "$ACK_RS_OK" = 1 ]; then
	for r in 0 1; do
		args=(--redis-replicas "$r")
		[ "$r" = 1 ] && args+=(--redis-replicas-timeout-ms 1000)
		aport=${ACK_PORTS[r]}
		if ! start_fg fg-ack$r "$aport" "127.0.0.1:$PRI_PORT" "${args[@]}"; then
			XFG_DIED+="${XFG_DIED:+, }fg-ack$r did not start"
			continue
		fi
		apid=$XPID
		track_only redis-pri "$PRI_PID" redis-rep "$REP_PID" fg-ack$r "$apid"
		say "[replica ack, --redis-replicas $r] sequential: $ACK_N acquire + release cycles on one connection (after 200 untimed)"
		run_cmd ack$r-seq fg-ack$r python3 python3 "$HERE/acquire_latency.py" --port "$aport" --n "$ACK_N" \
			--prefix "fga$r-$RUNID-"
		if [ -n "$(ares ack$r-seq N)" ]; then
			for k in N CPS ACQ_P50_US ACQ_P99_US ACQ_MEAN_US REL_P50_US REL_P99_US ERRORS; do ACK[$r $k]=$(ares ack$r-seq "$k"); done
			printf 'RESULT cycles=%s\n' "${ACK[$r N]}" >>"$TMP/ack$r-seq.txt"
			ACK_ERRS=$((ACK_ERRS + ${ACK[$r ERRORS]:-0}))
			say "  acquire p50 ${ACK[$r ACQ_P50_US]} us, p99 ${ACK[$r ACQ_P99_US]} us, mean ${ACK[$r ACQ_MEAN_US]} us;" \
				"release p50 ${ACK[$r REL_P50_US]} us, p99 ${ACK[$r REL_P99_US]} us; ${ACK[$r N]} cycles at ${ACK[$r CPS]}/s; errors ${ACK[$r ERRORS]}"
			[ -n "$(ares ack$r-seq ERRSAMPLE)" ] && say "  first error: $(ares ack$r-seq ERRSAMPLE)"
		else
			say "  the sequential loop gave no figures: $(tail -n 3 "$TMP/ack$r-seq.txt" | tr '\n' ' ')"
			ACK_ERRS=$((ACK_ERRS + 1))
		fi
		say "  CPU s (context switches voluntary/involuntary):$(cpu_line ack$r-seq)"
		say "[replica ack, --redis-replicas $r] cycles: the load of [lock cycles, fencegate]; Redis figures from the primary and the replica"
		RHOOK_PORTS=("$PRI_PORT" "$REP_PORT")
		RUN_HOOK=redis_hook
		run_wrk cycles-ack$r fg-ack$r "$HERE/fence_cycle.lua" "http://127.0.0.1:$aport" "fga$r-$RUNID" "$NAME_RING"
		RUN_HOOK=""
		track_main
		if [ -n "$WRK_LINE" ]; then
			report_cycles cycles-ack$r "$WRK_LINE"
			ACK[$r cycles_cps]=$(field "$WRK_LINE" cps)
			ACK[$r cycles_p50]=$(field "$WRK_LINE" req_p50_ms)
			ACK_ERRS=$((ACK_ERRS + $(errs_of "$WRK_LINE")))
			redis_report cycles-ack$r "$(field "$WRK_LINE" cycles)" cycle "redis-pri:$PRI_PORT" "redis-rep:$REP_PORT"
			ACK[$r rus]=$RR_US
			read -r waits _ < <(cmd_calls cycles-ack$r "$PRI_PORT" '^cmdstat_wait:')
			say "  WAIT calls on the primary: $waits ($(calc "printf \"%.2f\", $waits / $(field "$WRK_LINE" cycles)") per cycle)"
		else
			ACK_ERRS=$((ACK_ERRS + 1))
		fi
		xfg_done fg-ack$r "$apid" "the replica acknowledgement runs"
	done
fi
[ -n "${REP_PID:-}" ] && stop_pid "$REP_PID"
[ -n "${PRI_PID:-}" ] && stop_pid "$PRI_PID"
[ "$SKIP_FG" = 0 ] && want base && hr

# ---- Redis CPU per call --------------------------------------------------
# Redis's own account of the time it spent in the scripts fencegate runs
# (EVALSHA today, EVAL on a script-cache miss, FCALL for a function
# library), reset before each phase: usec / calls summed over those rows,
# per operation that fencegate answered with success.
SCRIPT_ROWS='^cmdstat_(evalsha|eval|fcall)(_ro)?:'
declare -A RC=()
calls_phase() { # calls_phase PHASE MODE ARGS...: RESETSTAT, fence_calls.py MODE, INFO commandstats
	local phase=$1 out c0 c1
	shift
	rcli config resetstat >/dev/null
	c0=$(redis_cpu "$REDIS_PORT")
	out=$("${PIN_REST[@]}" python3 "$HERE/fence_calls.py" "$@" --port "$FG_PORT" --conns "$CONNS" 2>&1 || true)
	c1=$(redis_cpu "$REDIS_PORT")
	rcli info commandstats | tr -d '\r' >"$TMP/cmdstat-$phase.txt"
	# beside the scripts' usec (wall time, which counts a preempted Redis's
	# wait), the process's own CPU over the phase, reading and answering too
	RC[$phase pcpu]=-
	[ "$c0" != - ] && [ "$c1" != - ] && RC[$phase pcpu]=$(calc "print $c1 - $c0")
	local ok errs secs fatal sample
	ok=$(printf '%s\n' "$out" | sed -n 's/^RESULT_OK=//p')
	errs=$(printf '%s\n' "$out" | sed -n 's/^RESULT_ERRORS=//p')
	secs=$(printf '%s\n' "$out" | sed -n 's/^RESULT_SECS=//p')
	fatal=$(printf '%s\n' "$out" | sed -n 's/^RESULT_FATAL=//p')
	sample=$(printf '%s\n' "$out" | sed -n 's/^RESULT_ERRSAMPLE=//p')
	if [ -n "$fatal" ] || [ -z "$ok" ]; then
		say "  $phase failed: ${fatal:-$(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')}"
		return 1
	fi
	RC[$phase ok]=$ok
	RC[$phase errs]=$errs
	# script rows: calls, usec; every other command (but INFO / CONFIG): calls, and the top ones
	local sc su oc
	read -r sc su oc < <(awk -F'[:,=]' -v re="$SCRIPT_ROWS" '
		/^cmdstat_/ { calls = $3; usec = $5
			if ($0 ~ re) { sc += calls; su += usec }
			else if ($1 !~ /^cmdstat_(info|config)/) oc += calls }
		END { print sc + 0, su + 0, oc + 0 }' "$TMP/cmdstat-$phase.txt")
	RC[$phase scalls]=$sc
	RC[$phase susec]=$su
	RC[$phase ocalls]=$oc
	RC[$phase inner]=$(awk -F'[:,=]' -v re="$SCRIPT_ROWS" -v n="${RC[$phase scalls]}" '
		/^cmdstat_/ && $0 !~ re && $1 !~ /^cmdstat_(info|config)/ { sub(/^cmdstat_/, "", $1); print $3, $1 }' \
		"$TMP/cmdstat-$phase.txt" | sort -rn | head -n 6 |
		awk -v n="${RC[$phase scalls]}" '{ printf "%s%s %.2f", (NR > 1 ? ", " : ""), $2, (n > 0 ? $1 / n : 0) }')
	say "  $phase: $ok ok, $errs failed in ${secs}s over $CONNS connections; Redis: script calls ${RC[$phase scalls]}," \
		"script usec ${RC[$phase susec]}, other commands ${RC[$phase ocalls]}${sample:+; first failure: $sample}"
}
# Redis alone on the last core, the gateway, the storage and the client on
# the others, as bench/script_cost.py does: a script's usec is wall time in
# Redis, so a Redis preempted mid-script would count another process's time
# as its own. pin CPUS PID...: every thread of every PID and its children.
PIN_REST=()
pin() {
	local cpus=$1 p
	shift
	for p in $(for q in "$@"; do kids "$q"; done); do taskset -a -p -c "$cpus" "$p" >/dev/null 2>&1 || true; done
}
CALLS_OK=0
if [ "$FG_OK" = 1 ] && [ "$PROXY_OK" = 1 ]; then
	read -r -a cpus < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')
	pin_note="not pinned (one core, or no taskset)"
	if [ "${#cpus[@]}" -gt 1 ] && command -v taskset >/dev/null; then
		CPUS_ALL=$(IFS=,; echo "${cpus[*]}")
		CPU_REDIS=${cpus[-1]}
		CPUS_REST=$(IFS=,; echo "${cpus[*]:0:${#cpus[@]}-1}")
		pin "$CPU_REDIS" "$REDIS_PID"
		pin "$CPUS_REST" "$FG_PID" "$STORE_PID"
		PIN_REST=(taskset -c "$CPUS_REST")
		pin_note="Redis pinned to CPU $CPU_REDIS, fencegate, the storage and the client to CPU $CPUS_REST"
	fi
	say "[redis cpu per call] CONFIG RESETSTAT, then INFO commandstats after each phase; script rows: evalsha, eval, fcall;" \
		"$CALLS_N acquires of distinct locks, $CALLS_N releases of them, $CALLS_PUTS fenced ${OBJ_SIZE}-byte PUTs" \
		"on $CONNS objects (locks acquired before the phase); exact counts, $CONNS connections; $pin_note"
	calls_phase acquire acquire --n "$CALLS_N" --prefix "fgc-$RUNID-" --out "$TMP/calls-grants.txt" &&
		calls_phase release release --in "$TMP/calls-grants.txt" &&
		python3 "$HERE/fence_calls.py" acquire --port "$FG_PORT" --conns "$CONNS" --n "$NOBJ" \
			--prefix "fgc-$RUNID/obj-" --out "$TMP/calls-objs.txt" >"$TMP/calls-objs.log" 2>&1 &&
		calls_phase put put --in "$TMP/calls-objs.txt" --n "$CALLS_PUTS" --size "$OBJ_SIZE" &&
		python3 "$HERE/fence_calls.py" release --port "$FG_PORT" --conns "$CONNS" \
			--in "$TMP/calls-objs.txt" >"$TMP/calls-objs-release.log" 2>&1 &&
		CALLS_OK=1
	if [ "${#PIN_REST[@]}" -gt 0 ]; then
		pin "$CPUS_ALL" "$REDIS_PID" "$FG_PID" "$STORE_PID"
		PIN_REST=()
	fi
	[ "$CALLS_OK" = 1 ] || say "  (the Redis CPU section did not complete; see above)"
	fg_alive "the Redis CPU phases"
	hr
fi

# ---- 10,000 waiters / handoff --------------------------------------------
W_OUT=""
H_OUT=""
wres() { printf '%s\n' "$W_OUT" | sed -n "s/^RESULT_WAITERS_$1=//p" | head -n1; }
hres() { printf '%s\n' "$H_OUT" | sed -n "s/^RESULT_HANDOFF_$1=//p" | head -n1; }
if [ "$FG_OK" = 1 ]; then
	say "[waiters] $WAITERS connections, each one blocking acquire {\"wait_ms\":120000,\"ttl_ms\":30000}" \
		"on $WAITER_LOCKS held locks ($((WAITERS / WAITER_LOCKS)) each)"
	W_OUT=$(python3 "$HERE/fence_waiters.py" waiters --port "$FG_PORT" --pid "$FG_PID" \
		--prefix "fgw-$RUNID" --n "$WAITERS" --locks "$WAITER_LOCKS" 2> >(sed 's/^/ /' >&2) || true)
	if [ -n "$(wres FATAL)" ]; then say "  waiter test failed: $(wres FATAL)"; fi
	fg_alive "the waiter test"
	hr
fi
if [ "$FG_OK" = 1 ]; then
	say "[handoff] $HANDOFF_WAITERS waiters queued on one lock; $HANDOFF_ROUNDS timed releases" \
		"(after 20 untimed): DELETE sent -> next waiter's 200 received; each granted waiter re-queues at once"
	H_OUT=$(python3 "$HERE/fence_waiters.py" handoff --port "$FG_PORT" --prefix "fgh-$RUNID" \
		--n "$HANDOFF_WAITERS" --rounds "$HANDOFF_ROUNDS" 2> >(sed 's/^/ /' >&2) || true)
	if [ -n "$(hres FATAL)" ]; then say "  handoff test failed: $(hres FATAL)"; fi
	if [ -n "$(hres ERRSAMPLE)" ]; then say "  first handoff error: $(hres ERRSAMPLE)"; fi
	fg_alive "the handoff test"
	hr
fi

# ---- fencing proxy: 1 KiB GET / PUT -------------------------------------
# Objects <P_PATH>0 .. <P_PATH>NOBJ-1 on the storage nginx; a fenced PUT of one
# carries the sequencer of the lock named by its path without the leading '/'.
P_PATH="/fgp-$RUNID/obj-"
declare -A IO=()
io_run() { # io_run LABEL SUBJECT URL METHOD [TOKEN-FILE]: result line in IO[LABEL]
	local label=$1 subj=$2 url=$3 method=$4
	shift 4
	run_wrk "$label" "$subj" "$HERE/object_io.lua" "$url" "$label" "$method" "$P_PATH" "$NOBJ" "$WRK_THREADS" "$OBJ_SIZE" "$@"
	IO[$label]=$WRK_LINE
	local line=$WRK_LINE
	[ -n "$line" ] || return 0
	printf '  %-28s %9s req/s   p50 %7s ms  p99 %7s ms   (%s requests; http>=400 %s, socket c/r/w/t %s/%s/%s/%s)\n' \
		"$label" "$(field "$line" rps)" "$(field "$line" req_p50_ms)" "$(field "$line" req_p99_ms)" \
		"$(field "$line" requests)" "$(field "$line" http_ge400)" "$(field "$line" sock_connect)" \
		"$(field "$line" sock_read)" "$(field "$line" sock_write)" "$(field "$line" sock_timeout)"
	say "  $(printf '%-28s' '') CPU s:$(cpu_line "$label")"
	return 0
}
io_merge() { # io_merge LABEL PARTS...: IO[LABEL] = mean rps, ok_rps, p50, p99 and summed counts of the PARTS
	local out=$1 l k n=0 line
	shift
	local -A acc=()
	for l in "$@"; do
		[ -n "${IO[$l]:-}" ] || continue
		n=$((n + 1))
		for k in rps ok_rps req_p50_ms req_p99_ms requests http_ge400 sock_connect sock_read sock_write sock_timeout; do
			acc[$k]=$(calc "print ${acc[$k]:-0} + $(iof "$l" "$k")")
		done
	done
	[ "$n" -gt 0 ] || return 0
	line="RESULT rounds=$n"
	for k in rps ok_rps; do line+=" $k=$(calc "printf \"%.1f\", ${acc[$k]} / $n")"; done
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
# failed requests would flatter a req/s figure: count them
sum_errs() { # sum_errs LABEL...: errors over the IO runs that have figures
	local l t=0
	for l in "$@"; do
		if [ -n "${IO[$l]:-}" ]; then t=$((t + $(errs_of "${IO[$l]}"))); fi
	done
	echo "$t"
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

if [ "$PROXY_OK" = 1 ] && want base; then
	say "[proxy] ${OBJ_SIZE}-byte objects, wrk -t$WRK_THREADS -c$CONNS, $NOBJ objects (each wrk thread takes its own in turn);" \
		"direct = storage nginx $STORE_URL, nginx-proxy = $NPROXY_URL, fencegate = $FG_URL"
	[ "$FG_OK" = 1 ] && FG_RSS_P0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$FG_PID/status" 2>/dev/null || true)
	head -c "$OBJ_SIZE" /dev/zero | tr '\0' x >"$TMP/obj.bin"
	bad=0
	for ((i = 0; i < NOBJ; i++)); do
		code=$(curl -s -o "$TMP/put.last" -w '%{http_code}' -T "$TMP/obj.bin" "$STORE_URL$P_PATH$i" || true)
		case "$code" in 201|204) ;; *) bad=$((bad + 1)); [ "$bad" = 1 ] && say "  pre-create PUT $P_PATH$i -> $code $(show "$TMP/put.last")" ;; esac
	done
	say "  pre-created $((NOBJ - bad))/$NOBJ objects $P_PATH{0..$((NOBJ - 1))} directly on the storage"
	[ "$bad" = 0 ] || die "could not create the objects on the storage"
	say "  smoke: GET ${P_PATH}0 direct -> $(curl -s -o /dev/null -w '%{http_code} %{size_download} B' "$STORE_URL${P_PATH}0" || true)," \
		"nginx-proxy -> $(curl -s -o /dev/null -w '%{http_code} %{size_download} B' "$NPROXY_URL${P_PATH}0" || true)"
	[ "$FG_OK" = 1 ] && say "  smoke: GET ${P_PATH}0 via fencegate -> $(curl -s -o /dev/null -w '%{http_code} %{size_download} B' "$FG_URL${P_PATH}0" || true)"

	say "[proxy GET] $GET_ROUNDS round(s), the order reversed every other round"
	for ((r = 1; r <= GET_ROUNDS; r++)); do
		order="direct nginx-proxy fencegate"
		[ $((r % 2)) = 0 ] && order="fencegate nginx-proxy direct"
		for t in $order; do
			case $t in
			direct) io_run get-direct-r$r nginx-store "$STORE_URL" GET ;;
			nginx-proxy) io_run get-nginx-proxy-r$r nginx-proxy "$NPROXY_URL" GET ;;
			fencegate)
				if [ "$FG_OK" = 1 ]; then io_run get-fencegate-r$r fencegate "$FG_URL" GET; fg_alive "the GET benchmark"; fi ;;
			esac
		done
	done
	for t in direct nginx-proxy fencegate; do
		io_merge get-$t $(for ((r = 1; r <= GET_ROUNDS; r++)); do echo get-$t-r$r; done)
	done

	say "[proxy PUT] each request PUTs an object of its wrk thread's; via fencegate fenced: own lock per object," \
		"acquired before the runs; $PUT_ROUNDS round(s), the order reversed every other round"
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
			direct) io_run put-direct-r$r nginx-store "$STORE_URL" PUT ;;
			nginx-proxy) io_run put-nginx-proxy-r$r nginx-proxy "$NPROXY_URL" PUT ;;
			fencegate-fenced)
				if [ "$PUT_FG" = 1 ] && [ "$FG_OK" = 1 ]; then
					io_run put-fencegate-fenced-r$r fencegate "$FG_URL" PUT "$TMP/tokens.txt"
					fg_alive "the fenced PUT benchmark"
				fi ;;
			esac
		done
	done
	for t in direct nginx-proxy fencegate-fenced; do
		io_merge put-$t $(for ((r = 1; r <= PUT_ROUNDS; r++)); do echo put-$t-r$r; done)
	done
	# Added latency with nothing queued: one connection, one request at a
	# time, so that the p50 is the path's own and not the queue's (under
	# CONNS connections a p50 is mostly CONNS / throughput).
	say "[proxy latency] one connection (wrk -t1 -c1), ${LAT_DURATION}s each: GET, then PUT (fenced via fencegate)"
	for t in direct nginx-proxy fencegate; do
		case $t in
		direct) WRK_THREADS=1 CONNS=1 DURATION=$LAT_DURATION io_run get1-direct nginx-store "$STORE_URL" GET
			WRK_THREADS=1 CONNS=1 DURATION=$LAT_DURATION io_run put1-direct nginx-store "$STORE_URL" PUT ;;
		nginx-proxy) WRK_THREADS=1 CONNS=1 DURATION=$LAT_DURATION io_run get1-nginx-proxy nginx-proxy "$NPROXY_URL" GET
			WRK_THREADS=1 CONNS=1 DURATION=$LAT_DURATION io_run put1-nginx-proxy nginx-proxy "$NPROXY_URL" PUT ;;
		fencegate)
			if [ "$FG_OK" = 1 ]; then
				WRK_THREADS=1 CONNS=1 DURATION=$LAT_DURATION io_run get1-fencegate fencegate "$FG_URL" GET
				if [ "$PUT_FG" = 1 ]; then
					WRK_THREADS=1 CONNS=1 DURATION=$LAT_DURATION io_run put1-fencegate-fenced fencegate "$FG_URL" PUT "$TMP/tokens.txt"
				fi
				fg_alive "the one-connection runs"
			fi ;;
		esac
	done
	# The same, CONNS connections at once but paced: what a proxy adds
	# under concurrent load that none of the three saturates at.
	say "[proxy latency, paced] wrk -t$WRK_THREADS -c$CONNS, each connection waiting ${PACE_MS} ms after an answer" \
		"(at most $((CONNS * 1000 / PACE_MS)) req/s offered), ${LAT_DURATION}s each: GET, then PUT (fenced via fencegate)"
	for t in direct nginx-proxy fencegate; do
		case $t in
		direct) DURATION=$LAT_DURATION io_run getp-direct nginx-store "$STORE_URL" GET "" "" "$PACE_MS"
			DURATION=$LAT_DURATION io_run putp-direct nginx-store "$STORE_URL" PUT "" "" "$PACE_MS" ;;
		nginx-proxy) DURATION=$LAT_DURATION io_run getp-nginx-proxy nginx-proxy "$NPROXY_URL" GET "" "" "$PACE_MS"
			DURATION=$LAT_DURATION io_run putp-nginx-proxy nginx-proxy "$NPROXY_URL" PUT "" "" "$PACE_MS" ;;
		fencegate)
			if [ "$FG_OK" = 1 ]; then
				DURATION=$LAT_DURATION io_run getp-fencegate fencegate "$FG_URL" GET "" "" "$PACE_MS"
				if [ "$PUT_FG" = 1 ]; then
					DURATION=$LAT_DURATION io_run putp-fencegate-fenced fencegate "$FG_URL" PUT "$TMP/tokens.txt" "" "$PACE_MS"
				fi
				fg_alive "the paced runs"
			fi ;;
		esac
	done
	if [ "$FG_OK" = 1 ] && [ -s "$TMP/leases.txt" ]; then
		size=$(stat -c %s "$DAV${P_PATH}0" 2>/dev/null || echo missing)
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

# ---- fencing proxy: 1 GiB streamed through fencegate ------------------
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
# the storage holds one BIG_MB body at a time (written to its body dir, then
# renamed into its root)
STREAM_ROOM=$(($(df -Pm "$STORE" | awk 'NR==2{print $4}') >= BIG_MB + 64))
if [ "$PROXY_OK" = 1 ] && [ "$SKIP_FG" = 0 ] && want base && [ "$STREAM_ROOM" = 0 ]; then
	say "!! [stream] skipped: the storage ($STORE_FS) has $(df -Pm "$STORE" | awk 'NR==2{print $4}') MB free," \
		"below BIG_MB=$BIG_MB plus 64 (STORE_DIR chooses another place)"
	hr
fi
if [ "$PROXY_OK" = 1 ] && [ "$SKIP_FG" = 0 ] && want base && [ "$STREAM_ROOM" = 1 ]; then
	for ((i = 0; i < BIN_WAIT * 2; i++)); do [ -x "$BIN" ] && break; sleep 0.5; done
	FGS_URL="http://127.0.0.1:$FGS_PORT"
	"$BIN" --listen "127.0.0.1:$FGS_PORT" --redis "127.0.0.1:$REDIS_PORT" \
		--upstream "$STORE_URL" --threads "$FG_LOOPS" \
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
		stored=$(stat -c %s "$DAV$BIG_PATH" 2>/dev/null || echo missing)
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
	# the fenced object goes (a fenced DELETE through fencegate) before the
	# direct copy comes: the storage, in memory, holds one of them at a time
	if [ "$FGS_OK" = 1 ] && [ -n "${bls:-}" ]; then
		say "  DELETE $BIG_PATH via fencegate (fenced) -> $(curl -s -o "$TMP/del.last" -w '%{http_code}' -XDELETE -H "Fencing-Token: $bsq" "$FGS_URL$BIG_PATH" || true) $(show "$TMP/del.last")"
		say "  release ${BIG_PATH#/} -> $(fence_release "${BIG_PATH#/}" "$bls")"
	fi
	[ -e "$DAV$BIG_PATH" ] && say "  !! $BIG_PATH still on the storage after the DELETE"
	rm -f "$DAV$BIG_PATH"
	# the same transfers direct to the storage, for comparison
	r=$(curl -s -o /dev/null --max-time 900 -w '%{http_code} %{size_upload} %{time_total}' -T "$TMP/big.bin" "$STORE_URL$BIG_PATH-direct" || true)
	read -r code up secs <<<"$r"
	case "${code:-}" in 201|204) BIG_D_PUT_MBPS=$(mbps "$up" "$secs") ;; esac
	r=$(curl -s -o /dev/null --max-time 900 -w '%{http_code} %{size_download} %{time_total}' "$STORE_URL$BIG_PATH-direct" || true)
	read -r code down secs <<<"$r"
	[ "${code:-}" = 200 ] && [ "${down:-}" = "$BIG_BYTES" ] && BIG_D_GET_MBPS=$(mbps "$down" "$secs")
	say "  direct to the storage: PUT ${BIG_D_PUT_MBPS:--} MB/s, GET ${BIG_D_GET_MBPS:--} MB/s"
	curl -s -o /dev/null -XDELETE "$STORE_URL$BIG_PATH-direct" || true
	rm -f "$TMP/big.bin" "$DAV$BIG_PATH-direct"
	unset LOCK_URL
	stop_pid "$FGS_PID"
	hr
fi
# ---- a real client: one rclone sync of a tree, direct vs through -----------
SYNC_DIRECT=""
SYNC_THROUGH=""
if want base && [ "$SKIP_FG" = 0 ] && command -v rclone >/dev/null && { command -v apache2 >/dev/null || [ -x /usr/sbin/apache2 ]; }; then
	say "== rclone sync of $SYNC_FILES files to Apache httpd mod_dav: direct vs through fencegate (fencectl lock)"
	out=$(python3 "$HERE/sync_tree.py" --bin "$BIN" --files "$SYNC_FILES" --rounds "$SYNC_ROUNDS" 2>&1 || true)
	printf '%s\n' "$out" | sed 's/^/  /'
	SYNC_DIRECT=$(printf '%s\n' "$out" | sed -n 's/^RESULT_DIRECT=//p')
	SYNC_THROUGH=$(printf '%s\n' "$out" | sed -n 's/^RESULT_THROUGH=//p')
	hr
elif want base; then
	say "== rclone sync: skipped (needs rclone and apache2: scripts/install-deps.sh)"
fi

# ---- identity and TLS (issue 17) -----------------------------------------
# bench/auth_tls.sh: each group on fencegates (and an nginx) of its own, on
# this Redis and this storage.
# shellcheck source=bench/auth_tls.sh
. "$HERE/auth_tls.sh"
if want auth || want tls; then
	if [ "$SKIP_FG" = 1 ] || [ "$PROXY_OK" = 0 ]; then
		say "== auth and TLS rows: skipped (they need a fencegate and the storage: no --skip-fencegate, no --skip-proxy)"
	else
		if want auth; then auth_rows; hr; fi
		if want tls; then tls_rows; hr; fi
	fi
fi
sleep 0.2 # let the helpers' stderr drain before the summary

# ---- profiles ------------------------------------------------------------
if [ "${#PROFILED[@]}" -gt 0 ]; then
	say "PROFILES (perf, system-wide during the run, whose figures include its sampling; per process using 0.2 CPU s or more: its top 10 symbols by share of its own samples)"
	for label in "${PROFILED[@]}"; do
		[ -s "$TMP/$label.perf" ] || { say "[$label] perf wrote nothing: $(tr '\n' ' ' <"$TMP/$label.perf.log" | cut -c1-200)"; continue; }
		say "[$label]"
		{
			cat "$TMP/$label.pids"
			echo "wrk -"
		} | while read -r p pids; do
			c=${CPU["$label $p"]:-0}
			[ "$c" != - ] && [ "$(calc "print ($c >= 0.2)")" = 1 ] || continue
			if [ "$pids" = - ]; then filt=(--comm wrk); else filt=(--pid "$pids"); fi
			# (perf's own --sort dso ignores --pid: the split by object is summed here)
			perf report -i "$TMP/$label.perf" --stdio -q --no-children --percentage relative \
				--sort dso,sym "${filt[@]}" >"$TMP/$label.$p.sym" 2>/dev/null || true
			say "  $p (${c} CPU s in the run); by object: $(awk 'NF >= 3 { s[$2] += $1 } END { for (k in s) printf "%.1f %s\n", s[k], k }' \
				"$TMP/$label.$p.sym" | sort -rn | head -n 5 | awk '{ printf "%s%s %s%%", (NR > 1 ? ", " : ""), $2, $1 }')"
			awk 'NF >= 3 && n < 10 { n++; sym = $0; sub(/^ *[^ ]+ +[^ ]+ +/, "", sym); printf "    %7s  %-24s %s\n", $1, $2, sym }' \
				"$TMP/$label.$p.sym" | cut -c1-120
		done
	done
	hr
elif [ "$PROFILE" = 1 ]; then
	say "PROFILES: perf could not record here ($PERF_WHY); see CPU seconds and context switches per process below"
	hr
fi

# ---- CPU per run ---------------------------------------------------------
if [ "${#RUNS[@]}" -gt 0 ]; then
	say "CPU SECONDS per process in each measured run (context switches, voluntary + involuntary, in brackets);"
	say "the last column is the CPU of the process under test per request (per cycle for lock cycles);"
	say "a new header starts the runs that measured another set of processes"
	cw=12
	prev=""
	for label in "${RUNS[@]}"; do
		hdr=(run)
		for p in $(awk '$1 != "box" { print $1 }' "$TMP/$label.cpu"); do hdr+=("$p"); done
		if [ "${hdr[*]}" != "$prev" ]; then
			printf '%-24s' "${hdr[0]}"
			for p in "${hdr[@]:1}"; do printf " %${cw}s" "$p"; done
			printf ' %6s %6s  %s\n' "secs" "box%" "under test: CPU per op"
			prev="${hdr[*]}"
		fi
		printf '%-24s' "$label"
		for p in "${hdr[@]:1}"; do
			c=${CPU["$label $p"]:-}
			case "$c" in
			'') printf " %${cw}s" - ;;
			-) printf " %${cw}s" gone ;;
			*) printf " %${cw}s" "$c ($(kfmt "${CPU["$label $p cs"]}"))" ;;
			esac
		done
		ops=$(field "$(grep '^RESULT ' "$TMP/$label.txt" 2>/dev/null || true)" cycles)
		unit=cycle
		if [ -z "$ops" ]; then ops=$(field "$(grep '^RESULT ' "$TMP/$label.txt" 2>/dev/null || true)" requests); unit=req; fi
		per=-
		s=${SUBJ[$label]}
		[ -n "$ops" ] && [ "$ops" != 0 ] && [ "${CPU["$label $s"]:--}" != - ] && per="$s $(calc "printf \"%.1f\", ${CPU["$label $s"]:-0} / $ops * 1e6") us/$unit"
		printf ' %6.1f %6s  %s\n' "${CPU["$label secs"]:-0}" "${CPU["$label box"]:-}" "$per"
	done
	hr
fi

# ---- Redis CPU per call --------------------------------------------------
if [ "$CALLS_OK" = 1 ]; then
	say "REDIS CPU PER CALL (INFO commandstats after CONFIG RESETSTAT; script = evalsha + eval + fcall rows;"
	say "other = every other command's calls, those the scripts make and any sent directly, per script call;"
	say "process = INFO cpu, used_cpu_sys + used_cpu_user, over the phase, per op)"
	printf '%-12s %7s %9s %12s %11s %13s %10s  %s\n' phase ops "calls/op" "script us/op" "us/call" "process us/op" "other/call" \
		"other commands per script call (top)"
	for ph in acquire release put; do
		n=${RC[$ph ok]}
		sc=${RC[$ph scalls]}
		pc=-
		[ "${RC[$ph pcpu]}" != - ] && pc=$(calc "printf \"%.1f\", ${RC[$ph pcpu]} / $n * 1e6")
		printf '%-12s %7s %9s %12s %11s %13s %10s  %s\n' "$([ "$ph" = put ] && echo "fenced PUT" || echo "$ph")" "$n" \
			"$(calc "printf \"%.2f\", $sc / $n")" "$(calc "printf \"%.1f\", ${RC[$ph susec]} / $n")" \
			"$(calc "if ($sc > 0) printf \"%.1f\", ${RC[$ph susec]} / $sc; else print \"-\"")" "$pc" \
			"$(calc "if ($sc > 0) printf \"%.1f\", ${RC[$ph ocalls]} / $sc; else print \"-\"")" "${RC[$ph inner]}"
	done
	hr
fi

# ---- summary -------------------------------------------------------------
verdict() { # verdict VALUE OP TARGET -> met/missed/n/a
	if [ -z "$1" ] || [ "$1" = nan ] || [ "$1" = - ]; then echo "n/a"; return; fi
	calc "print (($1 $2 $3) ? \"met\" : \"missed\")"
}
num() { [ -n "$1" ] && echo "$1" || echo "-"; }
# ratio A B -> A/B unrounded (for the verdict); shown with two decimals by r2
ratio() { [ -n "$1" ] && [ -n "$2" ] && calc "if ($2 > 0) printf \"%.6f\", $1 / $2" || true; }
r2() { [ -n "$1" ] && calc "printf \"%.2f\", $1" || echo "-"; }
pct() { [ -n "$1" ] && calc "printf \"%.0f %%\", $1 * 100" || echo "-"; }
rx() { [ -n "$1" ] && calc "printf \"%.2fx\", $1" || echo "-"; }
rounds() { local r; for ((r = 1; r <= $2; r++)); do echo "$1-r$r"; done; } # rounds LABEL N -> LABEL-r1 .. LABEL-rN
# one markdown table: figure | fencegate | peer | ratio | target | met/missed
ROW='| %-48s | %12s | %-48s | %6s | %-10s | %-10s |\n'
TITLE="" ROUNDS=""
if want base; then TITLE="issues 7 and 20" ROUNDS+=", GET x$GET_ROUNDS and PUT x$PUT_ROUNDS"; fi
if want auth || want tls; then TITLE+="${TITLE:+, }issue 17"; fi
if want auth; then ROUNDS+=", auth x$AUTH_ROUNDS"; fi
if want tls; then ROUNDS+=", TLS x$TLS_ROUNDS"; fi
say ""
say "SUMMARY: $TITLE targets, all from this one run  (fencegate --threads $FG_LOOPS, nginx proxies $FG_LOOPS worker(s);"
say "wrk -t$WRK_THREADS -c$CONNS; ${DURATION}s runs, rounds averaged (${ROUNDS#, }); storage root on $STORE_FS;" \
	"$(nproc) cores, everything on this box; $((($(date +%s) - T_START) / 60))m$((($(date +%s) - T_START) % 60))s)"
[ -z "$STORE_NOTE" ] || say "!! $STORE_NOTE"
say ""
# shellcheck disable=SC2059
printf "$ROW" "figure" "fencegate" "peer" "ratio" "target" "met/missed"
printf "$ROW" "$(printf '%048d' 0 | tr 0 -)" "$(printf '%011d' 0 | tr 0 -):" "$(printf '%048d' 0 | tr 0 -)" \
	"$(printf '%05d' 0 | tr 0 -):" "$(printf '%010d' 0 | tr 0 -)" "$(printf '%010d' 0 | tr 0 -)"
if want base; then
	FG_GET=$(iof get-fencegate ok_rps)
	NP_GET=$(iof get-nginx-proxy ok_rps)
	FG_PUT=$(iof put-fencegate-fenced ok_rps)
	NP_PUT=$(iof put-nginx-proxy ok_rps)
	R_GET=$(ratio "$FG_GET" "$NP_GET")
	R_PUT=$(ratio "$FG_PUT" "$NP_PUT")
	R_ETCD=$(ratio "$FG_CPS" "$ETCD_CPS")
	R_FLOOR=$(ratio "$FG_CPS" "$FLOOR")
	printf "$ROW" "GET ${OBJ_SIZE} B, req/s" "$(num "$FG_GET")" "nginx reverse proxy $(num "$NP_GET")" "$(rx "$R_GET")" ">= 0.9x" "$(verdict "$R_GET" '>=' 0.9)"
	printf "$ROW" "fenced PUT ${OBJ_SIZE} B, req/s" "$(num "$FG_PUT")" "nginx reverse proxy, unfenced PUT $(num "$NP_PUT")" "$(rx "$R_PUT")" ">= 0.6x" "$(verdict "$R_PUT" '>=' 0.6)"
	printf "$ROW" "lock cycles/s (acquire + release)" "$(num "$FG_CPS")" "etcd $(etcd --version | awk 'NR == 1 { print $3 }') lock API $(num "$ETCD_CPS")" "$(rx "$R_ETCD")" ">= 4x" "$(verdict "$R_ETCD" '>=' 4)"
	printf "$ROW" "lock cycles/s" "$(num "$FG_CPS")" "Redis floor (SET NX + EVALSHA) $(num "$FLOOR")" "$(pct "$R_FLOOR")" ">= 35 %" "$(verdict "$R_FLOOR" '>=' 0.35)"
	# p50 added over going straight to the storage: fencegate's, and beside
	# it the nginx proxy's (the direct p50 in brackets)
	# (a suffix 1: the runs on one connection; p: paced, with the req/s
	# that fencegate's run reached)
	for k in "" 1 p; do
		for m in get put; do
			f=fencegate what="GET" peer="nginx reverse proxy"
			[ "$m" = put ] && f=fencegate-fenced what="fenced PUT" peer="nginx proxy, unfenced"
			row="$what p50 added over direct, ms"
			[ "$k" = 1 ] && row="$what p50 added, one connection, ms"
			[ "$k" = p ] && row="$what p50 added, c$CONNS paced, ms"
			p50_d=$(iof "$m$k-direct" req_p50_ms)
			p50_n=$(iof "$m$k-nginx-proxy" req_p50_ms)
			p50_f=$(iof "$m$k-$f" req_p50_ms)
			add_f="" add_n=""
			[ -n "$p50_f" ] && [ -n "$p50_d" ] && add_f=$(calc "printf \"%.3f\", $p50_f - $p50_d")
			[ -n "$p50_n" ] && [ -n "$p50_d" ] && add_n=$(calc "printf \"%.3f\", $p50_n - $p50_d")
			rate=""
			[ "$k" = p ] && rate="; $(num "$(iof "$m$k-$f" rps)") req/s"
			printf "$ROW" "$row" "$(num "$add_f")" "$peer $(num "$add_n") (direct p50 $(num "$p50_d")$rate)" \
				"" "<= 0.5 ms" "$(verdict "$add_f" '<=' 0.5)"
		done
	done
	# Redis CPU as bench/script_cost.py counts it: the script rows' usec over
	# the operations of a phase of only those calls
	# (and beside them the Redis process's own CPU per operation, INFO cpu)
	RC_ACQ="" RC_REL="" RC_CYC="" RC_PUT="" RC_PUT_CALLS="" RP_CYC="" RP_PUT=""
	if [ "$CALLS_OK" = 1 ]; then
		RC_ACQ=$(calc "printf \"%.1f\", ${RC[acquire susec]} / ${RC[acquire ok]}")
		RC_REL=$(calc "printf \"%.1f\", ${RC[release susec]} / ${RC[release ok]}")
		RC_CYC=$(calc "printf \"%.1f\", $RC_ACQ + $RC_REL")
		RC_PUT=$(calc "printf \"%.1f\", ${RC[put susec]} / ${RC[put ok]}")
		RC_PUT_CALLS=$(calc "printf \"%.2f\", ${RC[put scalls]} / ${RC[put ok]}")
		[ "${RC[acquire pcpu]}" != - ] && [ "${RC[release pcpu]}" != - ] &&
			RP_CYC=$(calc "printf \"%.1f\", (${RC[acquire pcpu]} / ${RC[acquire ok]} + ${RC[release pcpu]} / ${RC[release ok]}) * 1e6")
		[ "${RC[put pcpu]}" != - ] && RP_PUT=$(calc "printf \"%.1f\", ${RC[put pcpu]} / ${RC[put ok]} * 1e6")
	fi
	printf "$ROW" "Redis CPU per lock cycle, us" "$(num "$RC_CYC")" "acquire $(num "$RC_ACQ") + release $(num "$RC_REL"); process $(num "$RP_CYC")" \
		"" "<= 35 us" "$(verdict "$RC_CYC" '<=' 35)"
	printf "$ROW" "Redis CPU per fenced PUT, us" "$(num "$RC_PUT")" "$(num "$RC_PUT_CALLS") script calls per PUT; process $(num "$RP_PUT")" \
		"" "<= 30 us" "$(verdict "$RC_PUT" '<=' 30)"
	# CPU per request of the process under test, from /proc/PID/stat over the wrk runs
	mapfile -t l_fg_get < <(rounds get-fencegate "$GET_ROUNDS")
	mapfile -t l_np_get < <(rounds get-nginx-proxy "$GET_ROUNDS")
	mapfile -t l_fg_put < <(rounds put-fencegate-fenced "$PUT_ROUNDS")
	mapfile -t l_np_put < <(rounds put-nginx-proxy "$PUT_ROUNDS")
	CPU_FG_GET=$(cpu_us_per fencegate requests "${l_fg_get[@]}")
	CPU_NP_GET=$(cpu_us_per nginx-proxy requests "${l_np_get[@]}")
	CPU_FG_PUT=$(cpu_us_per fencegate requests "${l_fg_put[@]}")
	CPU_NP_PUT=$(cpu_us_per nginx-proxy requests "${l_np_put[@]}")
	printf "$ROW" "CPU per GET, us" "$(num "$CPU_FG_GET")" "nginx reverse proxy $(num "$CPU_NP_GET")" \
		"$(rx "$(ratio "$CPU_FG_GET" "$CPU_NP_GET")")" "(info)" ""
	printf "$ROW" "CPU per fenced PUT, us" "$(num "$CPU_FG_PUT")" "nginx reverse proxy, unfenced $(num "$CPU_NP_PUT")" \
		"$(rx "$(ratio "$CPU_FG_PUT" "$CPU_NP_PUT")")" "(info)" ""
	H_P99=$(hres P99_MS)
	printf "$ROW" "release -> next waiter p99 ms, $(num "$(hres WAITERS)") queued" "$(num "$H_P99")" "p50 $(num "$(hres P50_MS)"), max $(num "$(hres MAX_MS)") (no peer)" "" "< 2 ms" "$(verdict "$H_P99" '<' 2)"
	W_RSS_MB=""
	if [ -n "$(wres RSS_KB)" ]; then
		W_RSS_MB=$(calc "printf \"%.1f\", $(wres RSS_KB) / 1024")
		W_NOTE="idle $(calc "printf \"%.1f\", $(wres BASE_RSS_KB) / 1024") MB; queued $(wres QUEUED)/$(wres TARGET)"
		W_RES=$(verdict "$W_RSS_MB" '<' 150)
		[ "$(wres ALLQUEUED)" = 1 ] || W_RES="missed (not all queued)"
	fi
	# must not regress: the bounds issue 7 set
	printf "$ROW" "$WAITERS blocked waiters, VmRSS MB (no regress)" "$(num "$W_RSS_MB")" "${W_NOTE:-}" "" "< 150 MB" "${W_RES:-n/a}"
	printf "$ROW" "$BIG_MB MiB fenced PUT, RSS growth MB (no regress)" "$(num "$BIG_PUT_GROW")" "$(num "$BIG_PUT_MBPS") MB/s (direct $(num "$BIG_D_PUT_MBPS"))" "" "< 32 MB" "$(verdict "$BIG_PUT_GROW" '<' 32)"
	printf "$ROW" "$BIG_MB MiB GET, RSS growth MB (no regress)" "$(num "$BIG_GET_GROW")" "$(num "$BIG_GET_MBPS") MB/s (direct $(num "$BIG_D_GET_MBPS"))" "" "< 32 MB" "$(verdict "$BIG_GET_GROW" '<' 32)"
	E_FG=""
	if [ "$SKIP_FG" = 0 ]; then E_FG=$((${FG_CYC_ERRS:-0} + $(sum_errs get-fencegate put-fencegate-fenced get1-fencegate put1-fencegate-fenced getp-fencegate putp-fencegate-fenced))); fi
	E_PEER=$((${ETCD_ERRS:-0} + $(sum_errs get-direct get-nginx-proxy put-direct put-nginx-proxy get1-direct get1-nginx-proxy put1-direct put1-nginx-proxy getp-direct getp-nginx-proxy putp-direct putp-nginx-proxy)))
	printf "$ROW" "failed requests in the runs above" "$(num "$E_FG")" "peers $E_PEER" "" "0" "$(verdict "$E_FG" '==' 0)"
	if [ -n "${FG_RSS_P0:-}" ] && [ -n "${FG_RSS_P1:-}" ]; then
		printf "$ROW" "fencegate VmRSS after the 1 KiB runs, MB" "$(calc "printf \"%.1f\", $FG_RSS_P1 / 1024")" "before them $(calc "printf \"%.1f\", $FG_RSS_P0 / 1024")" "" "(info)" ""
	fi
	# Redis beyond one server (informational): the cluster against one Redis, the
	# price of a replica's acknowledgement, and PUBLISH against SPUBLISH
	if [ "$SKIP_FG" = 0 ]; then
		printf "$ROW" "lock cycles, 1 Redis, cycles/s" "$(num "$FG_CPS")" "Redis $(num "$ONE_RUS") us/cycle" \
			"$([ -n "$FG_CPS" ] && echo 1.00)" "(info)" ""
		printf "$ROW" "lock cycles, 3-master cluster, cycles/s" "$(num "$CL_CPS")" "Redis $(num "$CL_RUS") us/cycle, 3 nodes" \
			"$(r2 "$(ratio "$CL_CPS" "$FG_CPS")")" "(info)" ""
		CL_PER=""
		if [ -n "$CL_RUS_NODES" ]; then
			IFS=/ read -r -a cl_us <<<"${CL_RUS_NODES// /}"
			IFS=/ read -r -a cl_sh <<<"${CL_SHARE// /}"
			for i in "${!cl_us[@]}"; do CL_PER+="${CL_PER:+ / }${cl_us[i]} ${cl_sh[i]:-}"; done
		fi
		printf "$ROW" "  Redis us/cycle per node, FCALL share" "" "$(num "$CL_PER")" "" "" ""
		ACK_ADD=""
		[ -n "${ACK[1 ACQ_P50_US]:-}" ] && [ -n "${ACK[0 ACQ_P50_US]:-}" ] &&
			ACK_ADD=$(calc "printf \"%.0f\", ${ACK[1 ACQ_P50_US]} - ${ACK[0 ACQ_P50_US]}")
		printf "$ROW" "replica ack: acquire p50 added, us" "$(num "$ACK_ADD")" \
			"p50 $(num "${ACK[0 ACQ_P50_US]:-}") -> $(num "${ACK[1 ACQ_P50_US]:-}"), p99 $(num "${ACK[0 ACQ_P99_US]:-}") -> $(num "${ACK[1 ACQ_P99_US]:-}")" \
			"" "(info)" ""
		printf "$ROW" "replica ack: cycles/s, --redis-replicas 1" "$(num "${ACK[1 cycles_cps]:-}")" \
			"--redis-replicas 0: $(num "${ACK[0 cycles_cps]:-}")" "$(r2 "$(ratio "${ACK[1 cycles_cps]:-}" "${ACK[0 cycles_cps]:-}")")" "(info)" ""
		printf "$ROW" "replica ack: sequential cycles/s, replicas 1" "$(num "${ACK[1 CPS]:-}")" \
			"--redis-replicas 0: $(num "${ACK[0 CPS]:-}")" "$(r2 "$(ratio "${ACK[1 CPS]:-}" "${ACK[0 CPS]:-}")")" "(info)" ""
	fi
	printf "$ROW" "rclone sync of $SYNC_FILES files, s" "$(num "$SYNC_THROUGH")" "direct to Apache $(num "$SYNC_DIRECT")" \
		"$(r2 "$(ratio "$SYNC_THROUGH" "$SYNC_DIRECT")")" "(info)" ""
	printf "$ROW" "cluster PUBLISH vs SPUBLISH, Redis us/msg" "$(num "$PS_PUB_US")" "SPUBLISH $(num "$PS_SPUB_US") (3 nodes)" \
		"$(r2 "$(ratio "$PS_PUB_US" "$PS_SPUB_US")")" "(info)" ""
	printf "$ROW" "  us/msg per node: PUBLISH; SPUBLISH" "" "$(num "${PS_PUB_NODES// /}"); $(num "${PS_SPUB_NODES// /}")" "" "" ""
	if [ "$SKIP_FG" = 0 ]; then
		E_X=$((${CL_ERRS:-0} + ACK_ERRS))
		printf "$ROW" "failed requests, cluster and replica runs" "$E_X" "" "" "0" "$(verdict "$E_X" '==' 0)"
	fi
fi
if want auth || want tls; then auth_tls_summary; fi
if [ "$SKIP_FG" = 0 ]; then
	if [ -n "$XFG_DIED" ]; then
		printf "$ROW" "cluster/replica/auth/TLS fencegates up" no "$XFG_DIED" "" "yes" missed
	else
		printf "$ROW" "cluster/replica/auth/TLS fencegates up" yes "" "" "yes" met
	fi
fi
if [ "$SKIP_FG" = 0 ] && want base; then
	if [ -n "$FG_DIED" ]; then UP="no: died during $FG_DIED"; elif [ "$FG_OK" = 1 ]; then UP=yes; else UP="no: failed its smoke test"; fi
	if [ "$UP" = yes ]; then
		printf "$ROW" "fencegate up from start to end" yes "" "" "yes" met
	else
		printf "$ROW" "fencegate up from start to end" no "${UP#no: }" "" "yes" missed
	fi
	if [ "$UP" != yes ]; then
		say "fencegate measurements incomplete (see above)"
		exit 1
	fi
fi
if [ "$SKIP_FG" = 0 ] && [ -n "$XFG_DIED" ]; then
	say "cluster, replica, auth or TLS measurements incomplete: $XFG_DIED"
	exit 1
fi
