#!/usr/bin/env python3
"""events_rss.py - what an idle Server-Sent Events reader of
/_fence/v1/events costs the gateway in memory.

    bench/events_rss.py [--bin PATH] [-n 2000] [--gateway-flag=--SETTING=V ...]

Starts a redis-server and a fencegate (the integration suite's, on free
loopback ports), reads the gateway's resident memory (VmRSS), opens N
streams that are all caught up (after the newest event) and waits until
the gateway counts N readers, reads VmRSS again; then appends one event,
waits until every stream has received it (each reader's buffer is made
and freed again) and reads VmRSS a third time. Prints the three figures
and the cost per reader. Everything it started is stopped by PID.
"""

import argparse
import os
import select
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import harness  # noqa: E402
from harness import Gateway, RedisServer, metric_value, wait_until  # noqa: E402


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build",
                                                  "gateway", "fencegate"))
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--gateway-flag", action="append", default=[],
                    help="a setting more for the gateway (repeatable)")
    a = ap.parse_args()
    harness.Config.bin = os.path.abspath(a.bin)
    redis = RedisServer().start()
    gw = None
    socks = []
    try:
        gw = Gateway(redis.port, 1, add_defaults=False)
        gw.flags = ["--listen", "127.0.0.1:%d" % gw.port, "--redis",
                    "127.0.0.1:%d" % redis.port] + a.gateway_flag
        gw.start()
        last = redis.command("XADD", "fg:{!ev}:s", "*", "k", "released",
                             "l", "bench/x").decode()
        time.sleep(0.5)
        base = rss_kib(gw.proc.pid)
        head = ("GET /_fence/v1/events?prefix=bench/ HTTP/1.1\r\n"
                "Host: x\r\nAccept: text/event-stream\r\n"
                "Last-Event-ID: %s\r\n\r\n" % last).encode()
        for _ in range(a.n):
            s = socket.create_connection(("127.0.0.1", gw.port))
            s.sendall(head)
            socks.append(s)
        if not wait_until(lambda: metric_value(gw, "fencegate_event_readers")
                          >= a.n, 60.0):
            raise RuntimeError("the gateway counts %r readers"
                               % metric_value(gw, "fencegate_event_readers"))
        time.sleep(1.0)
        idle = rss_kib(gw.proc.pid)
        redis.command("XADD", "fg:{!ev}:s", "*", "k", "granted", "l",
                      "bench/x", "t", "1")
        got = set()
        poll = select.poll()
        by_fd = {s.fileno(): s for s in socks}
        for fd in by_fd:
            poll.register(fd, select.POLLIN)
        deadline = time.monotonic() + 60.0
        while len(got) < a.n and time.monotonic() < deadline:
            for fd, _ in poll.poll(1000):
                if b'"kind":"granted"' in by_fd[fd].recv(65536):
                    got.add(fd)
                    poll.unregister(fd)
        time.sleep(1.0)
        after = rss_kib(gw.proc.pid)
        print("readers: %d (%d received the event)" % (a.n, len(got)))
        print("VmRSS before: %d KiB; %d idle streams: %d KiB; after one "
              "event to each: %d KiB" % (base, a.n, idle, after))
        print("per idle stream: %.1f KiB; after an event: %.1f KiB"
              % ((idle - base) / a.n, (after - base) / a.n))
    finally:
        for s in socks:
            s.close()
        if gw is not None:
            gw.stop()
        redis.stop()


if __name__ == "__main__":
    main()
