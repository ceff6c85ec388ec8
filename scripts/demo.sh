#!/usr/bin/env bash
# The demo: installs what fencegate needs, builds it, starts a local
# redis-server and fencegate on free loopback ports, and walks through a
# lock being taken, renewed, inspected and released with curl.
# Everything it started is stopped (by PID) when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
if [ ! -d build ]; then meson setup build --buildtype=release >/dev/null; fi
ninja -C build >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

rport=$(free_port); gport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_for redis-cli -p "$rport" ping

build/gateway/fencegate --listen "127.0.0.1:$gport" --redis "127.0.0.1:$rport" \
  --log-level warn 2>"$work/fencegate.log" &
pids+=($!)
api="http://127.0.0.1:$gport/_fence/v1"
wait_for curl -sf "$api/locks/_probe"

step() { printf '\n\033[1m# %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; echo; }
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

echo "fencegate on 127.0.0.1:$gport, redis on 127.0.0.1:$rport"

step "take lock orders/42 for 10 s"
grant=$(curl -s -X POST "$api/locks/orders/42" -d '{"ttl_ms":10000,"owner":"demo"}')
echo "$grant"
lease=$(echo "$grant" | field lease)
seq=$(echo "$grant" | field sequencer)

step "a second client tries it: refused while held"
show curl -s -X POST "$api/locks/orders/42" -d '{"wait_ms":0}'

step "renew the lease to 30 s"
show curl -s -X PATCH "$api/locks/orders/42" -d "{\"lease\":\"$lease\",\"ttl_ms\":30000}"

step "inspect it (no lease in the answer)"
show curl -s "$api/locks/orders/42"

step "check the sequencer, as storage would"
show curl -s -X POST "$api/check" -d "{\"sequencer\":\"$seq\"}"

step "release it"
show curl -s -o /dev/null -w '%{http_code}\n' -X DELETE -H "Fence-Lease: $lease" "$api/locks/orders/42"

step "the old sequencer is no longer valid"
show curl -s -X POST "$api/check" -d "{\"sequencer\":\"$seq\"}"

step "the next grant has a greater token"
show curl -s -X POST "$api/locks/orders/42" -d '{}'

if [ -t 0 ]; then
  printf '\nfencegate keeps running at http://127.0.0.1:%s — press Enter to stop.\n' "$gport"
  read -r _
fi
