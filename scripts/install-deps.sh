#!/usr/bin/env bash
# Installs the Debian packages fencegate builds, tests and demonstrates with.
# Only missing packages are installed; `apt-get update` runs first when any are.
set -euo pipefail

pkgs=(
  # build
  gcc libc6-dev meson ninja-build pkg-config python3
  libmicrohttpd-dev libhiredis-dev libssl-dev libjansson-dev libevent-dev
  libcurl4-openssl-dev libcmocka-dev uthash-dev libsystemd-dev
  # the answers of the gateway's own upstream client are read with it
  libhttp-parser-dev
  # S3 mode's DeleteObjects bodies
  libxml2-dev
  # the listener's TLS (libmicrohttpd's TLS is GnuTLS)
  libgnutls28-dev
  # run, test, demo
  redis-server redis-tools redis-sentinel curl nginx libnginx-mod-http-dav-ext
  # the TLS tests make their certificates and old-protocol clients with it
  openssl
  # a second WebDAV origin for the proxy tests: Apache httpd with mod_dav;
  # the WebDAV compliance suite run against each origin and through fencegate
  apache2 litmus
  # the clients of docs/clients.md, run by tests/integration/test_clients.py
  rclone
  # the Go client library (clients/go) builds and tests with Debian's Go
  golang-go
  # S3 mode: a real S3 store (radosgw on a one-OSD MemStore cluster,
  # tests/integration/rgw.py) and the S3 clients driven by s3clients.py
  ceph-mon ceph-osd radosgw ceph-common awscli python3-boto3 s3cmd
  # the Python client library (clients/python): its optional requests,
  # httpx (asyncio) and boto3 integrations, and the pip install test
  python3-requests python3-httpx python3-pip
  # systemd-analyze rates and verifies deploy/fencegate.service in the tests
  systemd
  # promtool checks the metrics exposition in the tests
  prometheus
  # the integration suite holds every lock API answer to docs/openapi.json
  python3-jsonschema
  # the status page is tested in a real headless Chromium, driven over its
  # DevTools websocket (tests/integration/browser.py), and in Firefox,
  # over WebDriver BiDi (tests/integration/firefox.py)
  chromium firefox-esr python3-websocket
  # fuzz harnesses (libFuzzer's runtime lives in libclang-rt-14-dev)
  clang libclang-rt-14-dev
)
if [ "${1:-}" = "--bench" ]; then
  # bench/run.py: etcd's lock API as a peer, the load generator, and perf
  # for its --profile
  pkgs+=(etcd-server wrk linux-perf)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
