#!/usr/bin/env python3
"""check-layers - the gateway's include graph points down only.

gateway/ is cut into folders by layer (docs/architecture.md). A source
may include a header of its own folder, of a lower layer, or the public
API (include/fencegate/); an include that points up, or sideways into
another folder of the same layer, is an error, and so is a project
include that does not name its folder, and so is a circle of includes
between the units of one folder (a .c and its .h are one unit). Run by meson at every build:
a violation fails the build with the file, the line and the two layers.

usage: check-layers.py GATEWAY_DIR [STAMP]
"""
import os
import re
import sys

# Bottom to top. Folders of one rank may not include each other.
LAYERS = [
    ("base",),                                 # pure code: no I/O of its own
    ("proc",),                                 # process-wide state, threads
    ("rt",),                                   # what a loop lends its services
    ("http",),                                 # the daemon, framing, answers
    ("fence", "upstream", "lockwait", "access"),  # services
    ("api", "proxy"),                          # a request's owners
    ("loop",),                                 # assembles one loop
    ("main",),                                 # start-up and stop order
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(rel):
    """The layer unit a file belongs to: its folder, or loop/main."""
    parts = rel.split("/")
    if len(parts) == 1:
        return os.path.splitext(parts[0])[0]
    return parts[0]


def target_of(inc):
    if inc.startswith("fencegate/"):
        return None  # the public API of the lock core: below every layer
    parts = inc.split("/")
    if len(parts) == 1:
        return os.path.splitext(inc)[0] if inc in ("loop.h",) else ""
    return parts[0]


def circles(edges):
    """The strongly connected sets of more than one unit (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop()
                on.discard(w)
                c.append(w)
                if w == v:
                    break
            if len(c) > 1:
                out.append(sorted(c))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    top = sys.argv[1]
    errors = []
    edges = {}
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, top)
            src = unit_of(rel)
            if src not in RANK:
                errors.append("%s: folder %r has no layer (scripts/check-layers.py)"
                              % (rel, src))
                continue
            with open(path, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    dst = target_of(m.group(1))
                    if dst is not None and dst != "":
                        unit = os.path.splitext(rel)[0]
                        to = os.path.splitext(m.group(1))[0]
                        if to != unit:
                            edges.setdefault(unit, set()).add(to)
                    if dst is None or dst == src:
                        continue
                    if dst == "":
                        errors.append('%s:%d: "%s" does not name its folder'
                                      % (rel, n, m.group(1)))
                    elif dst not in RANK:
                        errors.append('%s:%d: "%s" is in no layer'
                                      % (rel, n, m.group(1)))
                    elif RANK[dst] > RANK[src]:
                        errors.append('%s:%d: "%s" points up (%s above %s)'
                                      % (rel, n, m.group(1), dst, src))
                    elif RANK[dst] == RANK[src]:
                        errors.append('%s:%d: "%s" points sideways (%s beside %s)'
                                      % (rel, n, m.group(1), dst, src))
    for c in circles(edges):
        errors.append("a circle of includes: %s" % " -> ".join(c + c[:1]))
    for e in errors:
        print("layers: " + e, file=sys.stderr)
    if errors:
        return 1
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as fh:
            fh.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
