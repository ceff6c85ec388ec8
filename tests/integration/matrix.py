"""matrix.py - the suite's one matrix, as data.

Three axes can change what a test sees:

    build   plain | sanitized    the fencegate binary (and its fencectl):
            | thread             -Werror, AddressSanitizer + UBSan, or
                                 ThreadSanitizer (scripts/tsan.sh only)
    redis   single | cluster     what every environment's Redis is: one
                                 redis-server, or a Redis Cluster of three
                                 masters and three replicas
    origin  nginx | apache       the real store behind the gateway: nginx
                                 WebDAV, or Apache httpd mod_dav

A test class says which axes its outcome depends on (`axes`, a tuple of
axis names, inherited from harness.TestCase: build and redis), and each
test of it runs once for every combination of the values of those axes,
the other axes at their first value. A class that starts no Redis leaves
"redis" out, one that starts no fencegate leaves "build" out too; a
forwarding class that reaches a real store adds "origin" (on_origins()).
A test or class pinned to one value of an axis (pin(), or the older marks
harness.single_redis and harness.own_topology, which pin redis to single)
runs on that value only, and the reason is printed with the plan.

Two combinations are not run: the sanitized and the ThreadSanitizer
builds on a Redis Cluster (EXCLUDED). The sanitizers watch the gateway's own memory; what a cluster
adds to it is the cluster client (redirections, slot maps), which the
plain cluster pass and the unit tests of lockcore's cluster client cover.
Running every Redis-bound test a fourth time costs about a third more of
the suite's time.

Invariant: cells_for() names each combination once, in AXES order, and
never one of EXCLUDED; every test runs in at least one cell.
"""

import itertools

AXES = (
    ("build", ("plain", "sanitized", "thread")),
    ("redis", ("single", "cluster")),
    ("origin", ("nginx", "apache")),
)
AXIS_NAMES = tuple(a for a, _ in AXES)
DEFAULT = {a: vals[0] for a, vals in AXES}

# the timing slack (harness.slack) of each build: ThreadSanitizer runs the
# gateway several times slower, AddressSanitizer + UBSan about twice as slow
# (a lease-end abort's bounds tripped at slack 1.0 on a loaded machine)
SLOW = {"thread": 3.0, "sanitized": 2.0}

# combinations left out, with why (the module docstring says more)
EXCLUDED = (
    ({"build": "sanitized", "redis": "cluster"},
     "the sanitized build runs on one Redis: the cluster client is covered "
     "by the plain cluster pass and its unit tests"),
    ({"build": "thread", "redis": "cluster"},
     "the ThreadSanitizer build runs on one Redis: the gateway's threads "
     "and what they share do not change with the Redis kind"),
)

# what harness.TestCase declares: a fencegate against a Redis
GATEWAY_AND_REDIS = ("build", "redis")
GATEWAY_ONLY = ("build",)
NOTHING = ()


def cell_name(cell):
    """'plain/single/nginx': a cell's values in AXES order."""
    return "/".join(cell[a] for a in AXIS_NAMES)


def parse_cell(name):
    vals = name.split("/")
    if len(vals) != len(AXES):
        raise ValueError("a cell names %d values: %r" % (len(AXES), name))
    cell = {}
    for (axis, allowed), v in zip(AXES, vals):
        if v not in allowed:
            raise ValueError("%s is not a value of %s (%s)"
                             % (v, axis, ", ".join(allowed)))
        cell[axis] = v
    return cell


def excluded(cell):
    for rule, _ in EXCLUDED:
        if all(cell.get(a) == v for a, v in rule.items()):
            return True
    return False


def pin(reason, **values):
    """Marks a test method or a class: it runs only where each named axis
    has the given value (e.g. pin("starts its own Sentinel set",
    redis="single")). `reason` is printed with the plan."""
    for axis, v in values.items():
        if axis not in DEFAULT or v not in dict(AXES)[axis]:
            raise ValueError("pin: %s=%s is not in the matrix" % (axis, v))

    def mark(obj):
        pins = dict(getattr(obj, "matrix_pins", {}))
        pins.update(values)
        obj.matrix_pins = pins
        obj.matrix_pin_reason = reason
        return obj
    return mark


def on_origins(cls):
    """A forwarding class whose outcome depends on the real store: it runs
    against every origin of the matrix (nginx WebDAV, Apache mod_dav)."""
    if "origin" not in cls.axes:
        cls.axes = tuple(cls.axes) + ("origin",)
    return cls


def _pins(obj):
    pins = dict(getattr(obj, "matrix_pins", {}))
    # the older marks: one redis-server of its own, or a topology of its own
    if getattr(obj, "single_redis_reason", None) or \
            getattr(obj, "own_topology_reason", None):
        pins.setdefault("redis", "single")
    return pins


def pin_reason(obj):
    return getattr(obj, "matrix_pin_reason", None) or \
        getattr(obj, "single_redis_reason", None) or \
        getattr(obj, "own_topology_reason", None)


def test_pins(test):
    """The pins of one test: its class's, then its method's."""
    pins = _pins(type(test))
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    if method is not None:
        pins.update(_pins(method))
    return pins


def cells_for(axes, pins, allowed=None):
    """The cells a test with these axes and pins runs in: the product of
    its axes' values (pinned ones at their pin, the rest at DEFAULT), less
    EXCLUDED, less any cell not in `allowed` (a list of cells, None: all).
    A pinned test whose only cell is excluded still runs, on DEFAULT's
    value of the axis that excluded it: a test never falls out of the
    matrix."""
    choices = []
    for axis, vals in AXES:
        if axis in pins:
            choices.append((pins[axis],))
        elif axis in axes:
            choices.append(vals)
        else:
            choices.append((DEFAULT[axis],))
    out = []
    for combo in itertools.product(*choices):
        cell = dict(zip(AXIS_NAMES, combo))
        if excluded(cell):
            continue
        if allowed is not None and cell_name(cell) not in allowed:
            continue
        out.append(cell)
    return out


def all_cells():
    return [dict(zip(AXIS_NAMES, combo))
            for combo in itertools.product(*(v for _, v in AXES))
            if not excluded(dict(zip(AXIS_NAMES, combo)))]
