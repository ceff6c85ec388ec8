"""holder.py - a process holding a lock, for test_lease's SIGSTOP test:
it takes the lock, prints its sequencer, waits for a line on stdin, then
tries one write through its stamped session and says what happened.

    holder.py GATEWAYS NAME TTL
"""

import json
import sys

from fencegate import Client, LeaseLost


def main():
    gws, name, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
    c = Client(gws)
    lease = c.acquire(name, ttl=ttl)
    s = lease.requests_session()
    print(json.dumps({"sequencer": lease.sequencer, "token": lease.token}),
          flush=True)
    sys.stdin.readline()
    try:
        r = s.put(c.gateways[0] + "/" + name, data=b"late holder")
        print("sent %d" % r.status_code, flush=True)
    except LeaseLost:
        print("lost", flush=True)
    s.close()
    lease.release()
    c.close()


if __name__ == "__main__":
    main()
