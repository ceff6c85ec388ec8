#!/usr/bin/env python3
"""Sequential lock cycles on one keep-alive connection (driven by
bench/run.py): N times, acquire <prefix><i % ring> (POST, expects 200), then
release it with its lease (DELETE, expects 204), each request waiting for
its answer. Times every acquire and every release (request written ->
answer read), so the latency is that of an unloaded gateway and Redis.

  acquire_latency.py --port P [--host H] [--n N] [--warmup W] [--prefix P]
                     [--ring R] [--ttl-ms T]

Prints RESULT_* lines: N, SECS, CPS (cycles per second), ACQ_P50_US,
ACQ_P99_US, ACQ_MEAN_US, REL_P50_US, REL_P99_US, ERRORS, ERRSAMPLE (the
first failed answer, if any).
"""
import argparse
import json
import socket
import sys
import time

API = "/_fence/v1/locks/"


class Conn:
    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.s = socket.create_connection((host, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def req(self, method, path, body=b"", headers=()):
        head = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % (self.host, self.port),
                "Content-Length: %d" % len(body)]
        head += ["%s: %s" % h for h in headers]
        self.s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        while b"\r\n\r\n" not in self.buf:
            self._more()
        end = self.buf.index(b"\r\n\r\n")
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
            elif k.strip().lower() == "transfer-encoding":
                raise SystemExit("acquire_latency.py: chunked answers are not expected")
        while len(self.buf) < end + 4 + length:
            self._more()
        out = self.buf[end + 4:end + 4 + length]
        self.buf = self.buf[end + 4 + length:]
        return status, out

    def _more(self):
        d = self.s.recv(65536)
        if not d:
            raise SystemExit("acquire_latency.py: connection closed by the gateway")
        self.buf += d


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return 0.0
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--prefix", default="fgl-")
    ap.add_argument("--ring", type=int, default=1024)
    ap.add_argument("--ttl-ms", type=int, default=30000)
    a = ap.parse_args()
    c = Conn(a.host, a.port)
    body = json.dumps({"ttl_ms": a.ttl_ms}).encode()
    hdr = (("Content-Type", "application/json"),)
    acq, rel = [], []
    errors = 0
    sample = ""
    t_start = 0.0
    for i in range(a.warmup + a.n):
        if i == a.warmup:
            t_start = time.perf_counter()
        name = "%s%d" % (a.prefix, i % a.ring)
        t0 = time.perf_counter()
        st, b = c.req("POST", API + name, body, hdr)
        t1 = time.perf_counter()
        if st != 200:
            errors += 1
            sample = sample or "acquire -> %d %s" % (st, b[:200].decode("utf-8", "replace"))
            continue
        lease = json.loads(b)["lease"]
        st, b = c.req("DELETE", API + name, b"", (("Fence-Lease", lease),))
        t2 = time.perf_counter()
        if st != 204:
            errors += 1
            sample = sample or "release -> %d %s" % (st, b[:200].decode("utf-8", "replace"))
            continue
        if i >= a.warmup:
            acq.append((t1 - t0) * 1e6)
            rel.append((t2 - t1) * 1e6)
    secs = time.perf_counter() - t_start
    print("RESULT_N=%d" % len(acq))
    print("RESULT_SECS=%.3f" % secs)
    print("RESULT_CPS=%.1f" % (len(acq) / secs if secs > 0 else 0))
    print("RESULT_ACQ_P50_US=%.0f" % pct(acq, 50))
    print("RESULT_ACQ_P99_US=%.0f" % pct(acq, 99))
    print("RESULT_ACQ_MEAN_US=%.0f" % (sum(acq) / len(acq) if acq else 0))
    print("RESULT_REL_P50_US=%.0f" % pct(rel, 50))
    print("RESULT_REL_P99_US=%.0f" % pct(rel, 99))
    print("RESULT_ERRORS=%d" % errors)
    print("RESULT_ERRSAMPLE=%s" % " ".join(sample.split()))


if __name__ == "__main__":
    sys.exit(main())
