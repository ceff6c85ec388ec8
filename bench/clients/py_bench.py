#!/usr/bin/env python3
"""py_bench.py - the Python client library's loop against the same loop
written on http.client directly, single-threaded.

    py_bench.py --gateway URL --lock-prefix P --seconds S
                --mode lock|put --impl client|raw

mode lock: acquire + release of a fresh lock name (P + a counter), as
fast as it goes. mode put: one grant, then fenced PUTs of 1 KiB with its
sequencer (the library: the lease's check and stamp, its renewer
running). Prints one line `cycles_per_s=N`. bench/clients.py runs it.
"""

import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))

BODY = b"x" * 1024
TTL = 30.0


def lock_path(name):
    return "/_fence/v1/locks/" + urllib.parse.quote(name, safe="/~")


def raw_loop(gw, prefix, seconds, mode):
    u = urllib.parse.urlsplit(gw)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    hdr = {"Accept": "application/json", "Content-Type": "application/json"}

    def call(method, path, body=None, headers=hdr):
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read()

    acquire = json.dumps({"ttl_ms": int(TTL * 1000), "wait_ms": 0}).encode()
    n = 0
    if mode == "lock":
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            st, b = call("POST", lock_path("%s%d" % (prefix, n)), acquire)
            if st != 200:
                raise SystemExit("acquire: %d %r" % (st, b))
            g = json.loads(b)
            st, b = call("DELETE", lock_path("%s%d" % (prefix, n)), None,
                         {"Accept": "application/json",
                          "Fence-Lease": g["lease"]})
            if st != 204:
                raise SystemExit("release: %d %r" % (st, b))
            n += 1
        return n, time.monotonic() - t0
    name = prefix + "put"
    st, b = call("POST", lock_path(name), acquire)
    if st != 200:
        raise SystemExit("acquire: %d %r" % (st, b))
    g = json.loads(b)
    path = "/" + name
    put_h = {"Content-Type": "application/octet-stream",
             "Fencing-Token": g["sequencer"]}
    t0 = time.monotonic()
    end = t0 + seconds
    # the same renewal a holder owes, inline: at a third of the TTL
    renew_at = time.monotonic() + TTL / 3
    while time.monotonic() < end:
        st, b = call("PUT", path, BODY, put_h)
        if st not in (201, 204):
            raise SystemExit("put: %d %r" % (st, b))
        n += 1
        if time.monotonic() >= renew_at:
            call("PATCH", lock_path(name), json.dumps(
                {"lease": g["lease"], "ttl_ms": int(TTL * 1000)}).encode())
            renew_at = time.monotonic() + TTL / 3
    took = time.monotonic() - t0
    call("DELETE", lock_path(name), None, {"Fence-Lease": g["lease"]})
    return n, took


def client_loop(gw, prefix, seconds, mode):
    from fencegate import Client
    c = Client(gw)
    n = 0
    try:
        if mode == "lock":
            t0 = time.monotonic()
            end = t0 + seconds
            while time.monotonic() < end:
                with c.lock("%s%d" % (prefix, n), ttl=TTL):
                    pass
                n += 1
            return n, time.monotonic() - t0
        name = prefix + "put"
        u = urllib.parse.urlsplit(gw)
        h = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        with c.lock(name, ttl=TTL) as lease:
            path = "/" + name
            t0 = time.monotonic()
            end = t0 + seconds
            while time.monotonic() < end:
                headers = lease.fencing_headers()
                headers["Content-Type"] = "application/octet-stream"
                h.request("PUT", path, body=BODY, headers=headers)
                r = h.getresponse()
                r.read()
                if r.status not in (201, 204):
                    raise SystemExit("put: %d" % r.status)
                n += 1
            took = time.monotonic() - t0
        h.close()
        return n, took
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--lock-prefix", required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--mode", choices=("lock", "put"), default="lock")
    ap.add_argument("--impl", choices=("client", "raw"), default="client")
    a = ap.parse_args()
    loop = client_loop if a.impl == "client" else raw_loop
    # timed from the loop's first cycle to its last: not the set-up
    n, took = loop(a.gateway.rstrip("/"), a.lock_prefix, a.seconds, a.mode)
    print("cycles_per_s=%.1f" % (n / took if took > 0 else 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
