#!/usr/bin/env bash
# The demo's S3 part (scripts/demo.sh runs it as its last section; it also
# runs alone once build-release is built): a real S3 store, Ceph's radosgw,
# behind fencegate in S3 mode, driven by Debian's aws cli. It starts,
# from bash, the smallest Ceph cluster radosgw runs on (one ceph-mon, one
# ceph-osd on MemStore, radosgw on beast, `auth none`, loopback only, with
# the settings tests/integration/rgw.py proved fast), a redis-server and
# fencegate with `upstream-api s3`, and shows (1) a bucket made and an
# object written under `fencectl lock --s3`, (2) a write without a lock
# refused, (3) a client paused past its lease whose write is refused once
# another has written, and the access log's line for it.
# Every process it starts is started in the foreground of a background job,
# so that its PID is known, and stopped by that PID when it ends; nothing
# of a MemStore cluster outlives its processes.
# commands are shown as typed, their $VARIABLES unexpanded
# shellcheck disable=SC2016
set -euo pipefail
cd "$(dirname "$0")/.."

fg=$PWD/build-release/gateway/fencegate
fctl=$PWD/build-release/fencectl/fencectl
awscli=/usr/bin/aws     # Debian's, not another one earlier on PATH
for b in "$fg" "$fctl"; do
  [ -x "$b" ] || { echo "demo-s3: $b is not built (scripts/demo.sh builds it)" >&2; exit 1; }
done
for b in "$awscli" /usr/bin/ceph-mon /usr/bin/ceph-osd /usr/bin/radosgw /usr/bin/radosgw-admin /usr/bin/monmaptool /usr/bin/ceph; do
  [ -x "$b" ] || { echo "demo-s3: $b is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

t_start=$SECONDS
work=$(mktemp -d)
pids=()
ceph_pids=()
cleanup() {
  # nothing of a MemStore cluster is worth a clean shutdown (radosgw's
  # alone takes seconds): SIGKILL; a paused client must not stay paused
  for p in "${ceph_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for p in "${ceph_pids[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# N distinct free loopback ports (held together while they are picked)
free_ports() { python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))' "$1"; }
wait_for() { for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

step() { printf '\n\033[1m# %s\033[0m\n' "$*"; }
quoted() {
  local out="" a sq="'"
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then out+=" $a"
    else out+=" '${a//$sq/$sq\\$sq$sq}'"; fi
  done
  printf '%s' "${out# }"
}
show() { printf '$ %s\n' "$(quoted "$@")"; "$@"; echo; }
# show, also when the command fails (a refusal is what is being shown):
# its status is printed after its output
show_rc() { local rc=0; printf '$ %s\n' "$(quoted "$@")"; "$@" 2>&1 || rc=$?; echo "(exit status $rc)"; }

# -- radosgw on a one-mon, one-OSD MemStore cluster --------------------------
ceph_dir="$work/ceph"
mkdir -p "$ceph_dir"/{log,run,rgw,mon.a,osd.0}
conf="$ceph_dir/ceph.conf"
read -r mon_port rgw_port rport gport < <(free_ports 4)
fsid=$(cat /proc/sys/kernel/random/uuid); osd_uuid=$(cat /proc/sys/kernel/random/uuid)
# `auth none` works only with v2 clients in crc mode and a v2 mon address
crc=(--ms-mon-client-mode crc --ms-client-mode crc)
cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
auth supported = none
ms bind ipv4 = true
ms bind ipv6 = false
public addr = 127.0.0.1
osd pool default size = 1
osd pool default min size = 1
# one placement group a pool, no autoscaling: nothing splits while it runs
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 536870912
osd data = $ceph_dir/osd.\$id
mon data = $ceph_dir/mon.\$id
run dir = $ceph_dir/run
admin socket = $ceph_dir/run/\$name.asok
log file = $ceph_dir/log/\$name.log
log to stderr = false
err to stderr = true
keyring = /dev/null
# a cluster that is not there fails at once, with its log
client mount timeout = 30
rados mon op timeout = 30
rados osd op timeout = 30
osd op num shards = 1
osd op num threads per shard = 2
ms async op threads = 2
mon osd report timeout = 900
osd heartbeat grace = 60
mgr initial modules =
# radosgw's first start makes a dozen map changes (its pools), each a
# paxos proposal: by default at most one a second
paxos propose interval = 0.01
paxos min wait = 0.001
mon tick interval = 1
[osd]
osd max object name len = 460
osd max object namespace len = 64
[client.rgw.x]
# without tcp_nodelay an answer with a body waits 40 ms on a delayed ACK
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw data = $ceph_dir/rgw
rgw dns name = localhost
rgw thread pool size = 16
rgw enable usage log = false
rgw enable ops log = false
rgw init timeout = 60
EOF

rgw_fail() { # what
  echo "demo-s3: radosgw could not start: $1" >&2
  local f n
  # radosgw's own words first, then the cluster's and the tools'
  for f in rgw.stderr log/client.rgw.x.log osd.stderr log/osd.0.log \
           mon.stderr log/mon.a.log osd-mkfs.stderr osd-new.stderr \
           mon-mkfs.stderr monmaptool.stderr radosgw-admin.stderr; do
    [ -s "$ceph_dir/$f" ] || continue
    n=6; case $f in *rgw*) n=15;; esac
    echo "--- tail of $f ---" >&2
    grep -v '^$' "$ceph_dir/$f" | tail -n "$n" >&2
  done
  exit 1
}
# a one-shot ceph tool, bounded, its output kept for rgw_fail
ceph_run() { # what timeout argv...
  local what=$1 t=$2; shift 2
  timeout "$t" "$@" </dev/null >"$ceph_dir/$what.stderr" 2>&1 || rgw_fail "$what failed (exit $?): $*"
}

echo "starting radosgw (one ceph-mon, one ceph-osd on MemStore, radosgw beast on 127.0.0.1:$rgw_port)..."
t_rgw=$SECONDS
ceph_run monmaptool 30 monmaptool --create --clobber --add a "v2:127.0.0.1:$mon_port" --fsid "$fsid" "$ceph_dir/monmap"
ceph_run mon-mkfs 30 ceph-mon -c "$conf" --mkfs -i a --monmap "$ceph_dir/monmap"
ceph-mon -c "$conf" -f -i a </dev/null >"$ceph_dir/mon.stderr" 2>&1 &
mon_pid=$!; ceph_pids+=("$mon_pid")
# the OSD's store is made while the mon forms its quorum (mkfs needs only
# the conf's fsid); `osd new` waits for the quorum itself
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" </dev/null >"$ceph_dir/osd-mkfs.stderr" 2>&1 &
mkfs_pid=$!
ceph_run osd-new 60 ceph -c "$conf" "${crc[@]}" osd new "$osd_uuid" 0
wait "$mkfs_pid" || rgw_fail "ceph-osd --mkfs failed"
ceph-osd -c "$conf" -f -i 0 </dev/null >"$ceph_dir/osd.stderr" 2>&1 &
osd_pid=$!; ceph_pids+=("$osd_pid")
radosgw -c "$conf" -f -n client.rgw.x "${crc[@]}" </dev/null >"$ceph_dir/rgw.stderr" 2>&1 &
rgw_pid=$!; ceph_pids+=("$rgw_pid")
# radosgw answers an anonymous GET / (its empty bucket list) once its
# pools exist and it serves; 60 s at most
up=""
for _ in $(seq 600); do
  for d in mon:$mon_pid osd:$osd_pid radosgw:$rgw_pid; do
    kill -0 "${d#*:}" 2>/dev/null || rgw_fail "${d%%:*} exited during startup"
  done
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$rgw_port/")" = 200 ]; then up=1; break; fi
  sleep 0.1
done
[ -n "$up" ] || rgw_fail "no answer on 127.0.0.1:$rgw_port within 60 s"
echo "radosgw answers after $((SECONDS - t_rgw)) s"

# the gateway's own user at the store: radosgw-admin makes its keys, which
# go straight to an owner-only file (never a command line)
umask 077
timeout 60 radosgw-admin -c "$conf" -n client.rgw.x --admin-socket '' "${crc[@]}" \
  user create --uid fencegate --display-name 'fencegate gateway' \
  </dev/null >"$ceph_dir/user.json" 2>"$ceph_dir/radosgw-admin.stderr" \
  || rgw_fail "radosgw-admin user create failed"
python3 - "$ceph_dir/user.json" "$work/store-key" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))["keys"][0]
open(sys.argv[2], "w").write("%s\n%s\n" % (k["access_key"], k["secret_key"]))
PY
rm -f "$ceph_dir/user.json"
echo "the gateway's own user at the store, made with radosgw-admin user create --uid fencegate: its keys in ./store-key"

# -- redis and fencegate in S3 mode ------------------------------------------
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_for redis-cli -p "$rport" ping

# the key the demo's aws cli signs with, issued by the gateway
"$fg" --new-s3-key demo >"$work/s3-credentials"
read -r demo_key demo_secret _ <"$work/s3-credentials"
cat >"$work/fencegate.conf" <<EOF
listen 127.0.0.1:$gport
redis 127.0.0.1:$rport
upstream http://127.0.0.1:$rgw_port
upstream-api s3
s3-credentials $work/s3-credentials
upstream-s3-credentials $work/store-key
s3-region us-east-1
route /{bucket}/ {bucket}
access-log $work/access.log
log-level warn
EOF
umask 022
"$fg" --config "$work/fencegate.conf" 2>"$work/fencegate.log" &
pids+=($!)
gw="http://127.0.0.1:$gport"
wait_for curl -sf "$gw/_fence/v1/health" || { echo "demo-s3: fencegate did not start:" >&2; tail "$work/fencegate.log" >&2; exit 1; }

# `aws` below is Debian's aws cli pointed at the gateway, with a config of
# its own (path-style addressing), no ~/.aws, the demo key in its
# environment and no retries (a refusal shows once)
mkdir -p "$work/bin"
printf '#!/bin/sh\nexec %s --endpoint-url %s --no-cli-pager "$@"\n' "$awscli" "$gw" >"$work/bin/aws"
chmod 755 "$work/bin/aws"
printf '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n' >"$work/aws-config"
export PATH="$work/bin:$PATH" AWS_CONFIG_FILE="$work/aws-config" \
  AWS_SHARED_CREDENTIALS_FILE="$work/no-credentials" \
  AWS_ACCESS_KEY_ID="$demo_key" AWS_SECRET_ACCESS_KEY="$demo_secret" \
  AWS_EC2_METADATA_DISABLED=true AWS_MAX_ATTEMPTS=1 AWS_PAGER=
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE
export FENCEGATE_URL="$gw"
fencectl() { "$fctl" "$@"; }

echo "fencegate (S3 mode) on 127.0.0.1:$gport in front of radosgw on 127.0.0.1:$rgw_port, redis on 127.0.0.1:$rport"
echo "its configuration (the two credentials files are owner-only):"
sed -e "s|$work/|./|" -e 's/^/  /' "$work/fencegate.conf"
echo "aws: $awscli --endpoint-url $gw, AWS_CONFIG_FILE with 's3 = addressing_style = path',"
echo "     the key of \`fencegate --new-s3-key demo\` ($demo_key) in its environment"
echo "fencectl: build-release/fencectl/fencectl, FENCEGATE_URL=$gw"

cd "$work"
bucket=reports
printf 'draft by A\n' >draft.txt; printf 'stale write by A\n' >a.txt; printf 'final by B\n' >b.txt

step "make the bucket and write an object, each under the bucket's lock (route /{bucket}/ {bucket})"
show fencectl lock "$bucket" --s3 -- aws s3 mb "s3://$bucket"
show fencectl lock "$bucket" --s3 -- aws s3 cp --no-progress draft.txt "s3://$bucket/report.txt"

step "aws cli without a lock: refused"
show_rc aws s3 cp --no-progress a.txt "s3://$bucket/report.txt"

step "client A takes the lock for 2 s, and is paused (SIGSTOP) before its aws s3 cp"
printf '$ eval "$(fencectl acquire %s --ttl 2s)"\n' "$bucket"
eval "$("$fctl" acquire "$bucket" --ttl 2s)"
a_seq=$FENCE_SEQUENCER; a_token=$FENCE_TOKEN
unset FENCE_LOCK FENCE_LEASE FENCE_TOKEN FENCE_SEQUENCER
a_cmd=(env AWS_SESSION_TOKEN="$a_seq" aws s3 cp --no-progress a.txt "s3://$bucket/report.txt")
printf '$ AWS_SESSION_TOKEN=$FENCE_SEQUENCER aws s3 cp --no-progress a.txt s3://%s/report.txt\n' "$bucket"
( sleep 0.3; rc=0; "${a_cmd[@]}" >a.out 2>&1 || rc=$?; echo "(exit status $rc)" >>a.out ) &
a_pid=$!; pids+=("$a_pid")
kill -STOP "$a_pid"
echo "A (pid $a_pid, token $a_token) is stopped; its lease runs out while it sleeps"
sleep 2.5

step "client B takes the lock (a newer token) and writes"
show fencectl lock "$bucket" --s3 -- sh -c 'echo "B holds token $FENCE_TOKEN"; aws s3 cp --no-progress b.txt s3://reports/report.txt'

step "A wakes up (SIGCONT) and sends its write: refused, its token is older than B's"
kill -CONT "$a_pid"
wait "$a_pid" || true
cat a.out

step "the store holds B's object"
show aws s3 cp "s3://$bucket/report.txt" -

step "fencegate's access log: the refusal of A's write, which never reached the store (upstream_status null)"
python3 - "$work/access.log" <<'PY2'
import json, sys
for line in open(sys.argv[1]):
    l = json.loads(line)
    if l.get("decision") == "stale_token":
        print("%s %s %s -> %s  principal=%s lock=%s decision=%s token=%s current=%s upstream_status=%s" % (
            l["time"], l["method"], l["path"], l["status"], l["principal"],
            l["lock"], l["decision"], l["token"], l["current"],
            json.dumps(l["upstream_status"])))
PY2

echo
echo "(the S3 part took $((SECONDS - t_start)) s, radosgw's start included)"
