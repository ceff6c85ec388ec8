#!/usr/bin/env python3
"""subscribe_count.py PORT KIND CHANNEL OUTFILE: one subscriber on the
Redis at 127.0.0.1:PORT (KIND subscribe or ssubscribe) that reads and drops
every message, and on SIGTERM writes the number of messages it received to
OUTFILE. Prints "ready" on stdout once the subscription is confirmed."""
import signal
import socket
import sys

port, kind, chan, out = int(sys.argv[1]), sys.argv[2].lower(), sys.argv[3], sys.argv[4]
if kind not in ("subscribe", "ssubscribe"):
    sys.exit("subscribe_count.py: KIND is subscribe or ssubscribe")
pat = b"\r\n$%d\r\n%s\r\n" % (len(kind) - 2, (kind[:-9] + "message").encode())
count = 0


def stop(*_):
    with open(out, "w") as f:
        f.write("%d\n" % count)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
s = socket.create_connection(("127.0.0.1", port))
c = chan.encode()
s.sendall(b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(kind), kind.encode(), len(c), c))
ack = b""
while ack.count(b"\r\n") < 6:  # *3, $N kind, $N channel, :1
    d = s.recv(4096)
    if not d:
        sys.exit("subscribe_count.py: connection closed before the subscription was confirmed")
    ack += d
print("ready", flush=True)
tail = b""
keep = len(pat) - 1
while True:
    d = s.recv(65536)
    if not d:
        stop()
    buf = tail + d
    count += buf.count(pat)
    tail = buf[-keep:]
