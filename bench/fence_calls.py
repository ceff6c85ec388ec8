#!/usr/bin/env python3
"""Exact-count fencegate calls over concurrent keep-alive connections
(driven by bench/run.py, which reads Redis's INFO commandstats around each).

  acquire  N acquires of the distinct locks <prefix>0 .. <prefix>N-1, no wait;
           writes "<name> <lease> <sequencer>" per grant to --out.
  release  releases every lease listed in --in (lines as written above).
  put      N fenced PUTs of a --size-byte body: PUT /<name> with
           `Fencing-Token: <sequencer>`, for the locks listed in --in, each
           connection on its own lock (object) in turn.

Every request waits for its answer before its connection sends the next.
Prints RESULT_OK, RESULT_ERRORS, RESULT_SECS and RESULT_ERRSAMPLE lines.
"""
import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fence_waiters import API, connect  # noqa: E402


async def run(a):
    if a.mode == "acquire":
        jobs = ["%s%d" % (a.prefix, i) for i in range(a.n)]
    else:
        with open(a.inp) as f:
            jobs = [tuple(line.split()) for line in f if line.strip()]
        if not jobs:
            raise SystemExit("fence_calls.py: nothing in %s" % a.inp)
    conns = [await connect(a.host, a.port) for _ in range(a.conns)]
    ok = 0
    errors = 0
    sample = []
    granted = []
    nxt = 0
    total = a.n if a.mode == "put" else len(jobs)
    body = json.dumps({"ttl_ms": a.ttl_ms})
    blob = b"x" * a.size

    def note(what, st, b):
        nonlocal errors
        errors += 1
        if not sample:
            sample.append("%s -> %s %s" % (what, st, b[:200]))

    async def worker(ci, c):
        nonlocal ok, nxt
        while nxt < total:
            i = nxt
            nxt += 1
            if a.mode == "acquire":
                name = jobs[i]
                st, _, b, _ = await c.req("POST", API + name, body=body)
                if st == 200:
                    d = json.loads(b)
                    granted.append("%s %s %s" % (name, d["lease"], d["sequencer"]))
                    ok += 1
                else:
                    note("POST " + name, st, b)
            elif a.mode == "release":
                name, lease = jobs[i][0], jobs[i][1]
                st, _, b, _ = await c.req("DELETE", API + name, headers={"Fence-Lease": lease})
                if st == 204:
                    ok += 1
                else:
                    note("DELETE " + name, st, b)
            else:
                name, _, seq = jobs[ci % len(jobs)]
                st, _, b, _ = await c.req("PUT", "/" + name, headers={"Fencing-Token": seq},
                                          body=blob, ctype="application/octet-stream")
                if st in (200, 201, 204):
                    ok += 1
                else:
                    note("PUT /" + name, st, b)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    secs = time.perf_counter() - t0
    for c in conns:
        c.close()
    if a.mode == "acquire":
        with open(a.out, "w") as f:
            f.write("".join(g + "\n" for g in granted))
    print("RESULT_OK=%d" % ok)
    print("RESULT_ERRORS=%d" % errors)
    print("RESULT_SECS=%.3f" % secs)
    if sample:
        print("RESULT_ERRSAMPLE=%s" % sample[0].replace("\n", " "))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["acquire", "release", "put"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--conns", type=int, default=32)
    p.add_argument("--n", type=int, default=0, help="acquire, put: how many calls")
    p.add_argument("--prefix", default="fgcalls-", help="acquire: lock name prefix")
    p.add_argument("--ttl-ms", type=int, default=600000, help="acquire: ttl of each grant")
    p.add_argument("--out", help="acquire: grants file to write")
    p.add_argument("--in", dest="inp", help="release, put: grants file to read")
    p.add_argument("--size", type=int, default=1024, help="put: body bytes")
    a = p.parse_args()
    if a.mode == "acquire" and not a.out:
        p.error("acquire needs --out")
    if a.mode != "acquire" and not a.inp:
        p.error("%s needs --in" % a.mode)
    try:
        asyncio.run(run(a))
    except Exception as e:  # report, never hang the driver
        print("RESULT_FATAL=%s" % repr(e).replace("\n", " "))
        sys.exit(1)


if __name__ == "__main__":
    main()
