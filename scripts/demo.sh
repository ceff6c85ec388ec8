#!/usr/bin/env bash
# The demo: installs what fencegate needs, builds it, starts a local
# redis-server, an nginx WebDAV store and fencegate in front of it on free
# loopback ports, and walks through (1) a lock being taken, renewed,
# inspected and released with curl, and (2) the story fencegate exists for:
# two clients, one paused past its lease, its stale write refused and the
# data intact, and what the audit log says of it; (3) fencectl running a
# command under a lock whose lease is lost; (4) the metrics of it all;
# (5) a gateway with an auth-file: a stranger refused, an operator breaking
# a stuck lock, and the stale write refused after it; (6) the Python
# client library: a scoped lock whose body never runs without the grant,
# and a lease lost, signalled before the next write; (7) S3 mode, with a
# real radosgw and the aws cli (scripts/demo-s3.sh).
# Everything it started is stopped (by PID) when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# its own release build, without the unit tests
if [ ! -d build-release ]; then meson setup build-release --buildtype=release -Dtests=false >/dev/null; fi
ninja -C build-release >/dev/null

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

rport=$(free_port); gport=$(free_port); sport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_for redis-cli -p "$rport" ping

store="$work/store"
mkdir -p "$store/data" "$store/tmp"
user=""; [ "$(id -u)" -eq 0 ] && user="user root;"
sed -e "s|@PREFIX@|$store|g" -e "s|@PORT@|$sport|g" -e "s|@USER@|$user|" \
    -e "s|@MODULE@|/usr/lib/nginx/modules/ngx_http_dav_ext_module.so|" \
    deploy/nginx-webdav.conf.in >"$store/nginx.conf"
nginx -c "$store/nginx.conf" -p "$store" 2>"$store/stderr.log" &
pids+=($!)
wait_for curl -s -o /dev/null "http://127.0.0.1:$sport/"

build-release/gateway/fencegate --listen "127.0.0.1:$gport" --redis "127.0.0.1:$rport" \
  --upstream "http://127.0.0.1:$sport" --log-level warn \
  --access-log "$work/access.log" 2>"$work/fencegate.log" &
pids+=($!)
gw="http://127.0.0.1:$gport"
api="$gw/_fence/v1"
wait_for curl -sf "$api/health"

step() { printf '\n\033[1m# %s\033[0m\n' "$*"; }
# A command as a shell would read it back: words that need it in single
# quotes, so that what is shown can be pasted (the gateway keeps running
# until the end when the demo runs in a terminal).
quoted() {
  local out="" a sq="'"
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then out+=" $a"
    else out+=" '${a//$sq/$sq\\$sq$sq}'"; fi
  done
  printf '%s' "${out# }"
}
show() { printf '$ %s\n' "$(quoted "$@")"; "$@"; echo; }
# show, and keep the output in the variable named first
capture() { local var=$1; shift; printf '$ %s\n' "$(quoted "$@")"; printf -v "$var" '%s' "$("$@")"; printf '%s\n' "${!var}"; }
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# Two tokens one above the other, digits aligned, and which is newer.
tokens() { # label1 token1 label2 token2
  printf '  %-10s %20s\n  %-10s %20s' "$1" "$2" "$3" "$4"
  if (( $4 > $2 )); then printf '   newer than %s (by %d)\n' "$1" $(( $4 - $2 ))
  elif (( $4 == $2 )); then printf '   the same grant\n'
  else printf '   older than %s\n' "$1"; fi
}

echo "fencegate on 127.0.0.1:$gport, redis on 127.0.0.1:$rport, WebDAV store on 127.0.0.1:$sport"
echo
echo "== 1. a lock: take, renew, inspect, release"

step "take lock orders/42 for 10 s"
capture grant curl -s -X POST "$api/locks/orders/42" -d '{"ttl_ms":10000,"owner":"demo"}'
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
capture next curl -s -X POST "$api/locks/orders/42" -d '{}'
tokens first "$(echo "$grant" | field token)" next "$(echo "$next" | field token)"

echo
echo "== 2. two clients, one paused: the storage is protected"

step "client A takes lock docs/report.txt for 2 s and writes through fencegate"
capture a curl -s -X POST "$api/locks/docs/report.txt" -d '{"ttl_ms":2000}'
a_seq=$(echo "$a" | field sequencer)
show curl -s -w '%{http_code}\n' -X PUT -H "Fencing-Token: $a_seq" --data-binary 'draft by A' "$gw/docs/report.txt"

step "A prepares its next write, and is paused (SIGSTOP) before sending it — a GC pause"
a_put=(curl -s -w ' %{http_code}\n' -X PUT -H "Fencing-Token: $a_seq" --data-binary 'stale write by A' "$gw/docs/report.txt")
printf '$ %s\n' "$(quoted "${a_put[@]}")"
( sleep 0.3; "${a_put[@]}" >"$work/a.out" ) &
a_pid=$!
kill -STOP "$a_pid"
echo "A (pid $a_pid) is stopped; its lease runs out while it sleeps"
sleep 2.5

step "client B takes the lock (a newer token) and writes"
capture b curl -s -X POST "$api/locks/docs/report.txt" -d '{"ttl_ms":10000}'
b_seq=$(echo "$b" | field sequencer)
tokens A "$(echo "$a" | field token)" B "$(echo "$b" | field token)"
show curl -s -w '%{http_code}\n' -X PUT -H "Fencing-Token: $b_seq" --data-binary 'final by B' "$gw/docs/report.txt"

step "A wakes up (SIGCONT) and sends its stale write"
kill -CONT "$a_pid"
wait "$a_pid" || true
cat "$work/a.out"
echo "refused: A's token is older than the current one (B's)"

step "the storage holds B's data"
show curl -s "$gw/docs/report.txt"

step "and the storage never saw A's stale write (its access log, this file's lines):"
show grep -F ' /docs/report.txt ' "$store/access.log"

step "fencegate's audit log: every write to docs/report.txt, with its token and decision"
python3 - "$work/access.log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    l = json.loads(line)
    if l["path"] == "/docs/report.txt" and l["method"] == "PUT":
        print("%s %s %s -> %s  decision=%s token=%s%s upstream=%s" % (
            l["time"], l["method"], l["path"], l["status"], l["decision"],
            l["token"], " current=%s" % l["current"] if "current" in l else "",
            l["upstream_status"]))
PY

echo
echo "== 3. fencectl: a command under a lock, and a lease that is lost"
export FENCEGATE_URL="$gw"
step "fencectl lock jobs/nightly --ttl 2s -- <a job that runs for a minute>"
build-release/fencectl/fencectl lock jobs/nightly --ttl 2s --kill-after 2s -- \
  sh -c 'echo "job: running under token $FENCE_TOKEN"; trap "echo job: SIGTERM, stopping; exit 143" TERM; sleep 60 & wait' \
  2>&1 &
ctl=$!
sleep 1.5
step "the lock is wiped from Redis (an operator's FLUSHALL, a failover to a replica that never had it)"
show redis-cli -p "$rport" --no-auth-warning del 'fg:{jobs/nightly}:s'
rc=0; wait "$ctl" || rc=$?
echo "fencectl exited with status $rc (the lease was lost: the job was stopped)"

echo
echo "== 4. the metrics (Prometheus text at $api/metrics)"
curl -s "$api/metrics" | grep -E '^fencegate_(lock_grants_total|lock_expiries_total|fence_admitted_total|fence_refused_total\{reason="stale_token"\}|upstream_responses_total\{class="2xx"\}|redis_up)'

echo
echo "== 5. who may: a stranger refused, an operator breaking a stuck lock"
aport=$(free_port)
# `--new-key NAME` prints a key and its auth-file line (the key's SHA-256)
ci_new=$(build-release/gateway/fencegate --new-key ci)
ops_new=$(build-release/gateway/fencegate --new-key ops)
ci_key=$(echo "$ci_new" | sed -n 1p); ops_key=$(echo "$ops_new" | sed -n 1p)
{
  echo "$ci_new" | sed -n 2p | awk '{ print $1, $2, "lock:jobs/ observe:*" }'
  echo "$ops_new" | sed -n 2p | awk '{ print $1, $2, "admin:* metrics" }'
} >"$work/auth"
# keys stay in files (fencectl --key-file, curl -H @FILE): never on a
# command line, where ps would show them
printf %s "$ci_key" >"$work/ci.key"; printf %s "$ops_key" >"$work/ops.key"
printf 'Authorization: Bearer %s\n' "$ci_key" >"$work/ci.hdr"
build-release/gateway/fencegate --listen "127.0.0.1:$aport" --redis "127.0.0.1:$rport" \
  --upstream "http://127.0.0.1:$sport" --log-level warn --auth-file "$work/auth" \
  2>"$work/fencegate-auth.log" &
pids+=($!)
agw="http://127.0.0.1:$aport"
wait_for curl -sf "$agw/_fence/v1/health"
echo "a second fencegate on 127.0.0.1:$aport with an auth-file (ci: lock:jobs/, ops: admin:*):"
cat "$work/auth"

step "a stranger (no key) tries to take jobs/deploy"
show curl -s -X POST "$agw/_fence/v1/locks/jobs/deploy" -d '{}'

step "ci takes jobs/deploy for an hour, writes, and then hangs"
capture c curl -s -X POST -H @"$work/ci.hdr" "$agw/_fence/v1/locks/jobs/deploy" -d '{"ttl_ms":3600000}'
c_seq=$(echo "$c" | field sequencer)
show curl -s -w '%{http_code}\n' -X PUT -H "Fencing-Token: $c_seq" --data-binary 'v1 by ci' "$agw/jobs/deploy"

step "ci has no admin: right, so it cannot break a lock, not even its own"
show curl -s -X DELETE -H @"$work/ci.hdr" -H "Fence-Break: $(echo "$c" | field token)" "$agw/_fence/v1/locks/jobs/deploy"

step "the operator breaks the stuck lock: fencectl break jobs/deploy"
show build-release/fencectl/fencectl --gateway "$agw" --key-file "$work/ops.key" break jobs/deploy

step "ci wakes up and sends its write with the broken grant's sequencer: refused"
show curl -s -X PUT -H "Fencing-Token: $c_seq" --data-binary 'stale v2 by ci' "$agw/jobs/deploy"
echo "(token and current are the same: that grant was broken, so its own token no longer writes)"

step "the storage still holds v1"
show curl -s "$agw/jobs/deploy"

echo
echo "== 6. from application code: the Python client library (clients/python)"
step "a job holds reports/q4.txt in a with-block: its writes carry the sequencer; a second job is refused the lock, and its body never runs"
PYTHONPATH=clients/python /usr/bin/python3 - "$gw" "$rport" <<'PY'
import subprocess, sys, urllib.request
from fencegate import Client, LeaseLost, NotAcquired

gw, rport = sys.argv[1], sys.argv[2]
client = Client(gw)
with client.lock("reports/q4.txt", ttl=3) as lease:
    print("job 1 holds reports/q4.txt, token", lease.token)
    put = urllib.request.Request(gw + "/reports/q4.txt", data=b"q4 by job 1\n",
                                 method="PUT", headers=lease.fencing_headers())
    print("job 1: PUT /reports/q4.txt ->", urllib.request.urlopen(put).status)
    other = Client(gw)
    try:
        with other.lock("reports/q4.txt", ttl=3, wait=0.5):
            print("job 2: this line never runs")
    except NotAcquired as e:
        print("job 2: NotAcquired (%s); its body did not run" % e.code)
    finally:
        other.close()

print()
print("# job 3 holds reports/q5.txt; the lock is wiped from Redis meanwhile")
with client.lock("reports/q5.txt", ttl=2, raise_on_loss=False) as lease:
    subprocess.run(["redis-cli", "-p", rport, "--no-auth-warning", "del",
                    "fg:{reports/q5.txt}:s"], check=True,
                   stdout=subprocess.DEVNULL)
    lease.lost.wait(5)          # set by the renewer at its next renewal
    print("job 3: lease.lost is set:", lease.reason)
    try:
        lease.check()           # what a job calls before each write
    except LeaseLost:
        print("job 3: lease.check() raises LeaseLost: its next write is never sent")
client.close()
PY

echo
echo "== 7. an S3 object store behind the fence"
scripts/demo-s3.sh

echo
if [ -t 0 ]; then
  printf 'fencegate keeps running at http://127.0.0.1:%s — press Enter to stop.\n' "$gport"
  read -r _
fi
echo "Next: README.md, \"Install by hand\", sets up a gateway of your own; docs/api.md has every call, docs/operations.md the logs, metrics and incident runbook."
