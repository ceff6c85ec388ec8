"""fgenv.py - what every test reads of the environment tests/clients/env.py
starts (the FG_TEST_* variables), and small utilities: unique lock names,
bounded waits on a condition, the control endpoint, reading the store
directly and writing through a gateway without the library.

Invariant: a variable that is missing fails the test (it is never a
skip), and every wait here is bounded.
"""

import http.client
import json
import os
import time
import unittest
import urllib.parse
import urllib.request
import uuid

# generous on a loaded machine
SLACK = float(os.environ.get("FG_TEST_SLACK", "1"))


def var(name):
    v = os.environ.get(name)
    if not v:
        raise AssertionError("%s is not set: run the tests under "
                             "tests/clients/run.py" % name)
    return v


def gateways():
    return var("FG_TEST_GATEWAYS").split(",")


def unique(prefix="app/", ext=".txt"):
    return prefix + uuid.uuid4().hex + ext


def wait_until(cond, timeout, what):
    """Polls cond until true, at most timeout * SLACK seconds."""
    end = time.monotonic() + timeout * SLACK
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def _request(url, method, body=None, headers=None, timeout=30):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request(method, u.path + ("?" + u.query if u.query else ""),
                  body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, data
    finally:
        c.close()


def control(action):
    """POST to the environment's control (e.g. "redis/stall?ms=500")."""
    st, data = _request(var("FG_TEST_CONTROL") + "/" + action, "POST",
                        b"", timeout=120)
    if st != 200:
        raise AssertionError("control %s: %d %r" % (action, st, data))


def store_get(name):
    """What nginx itself holds at /name: (status, bytes)."""
    return _request(var("FG_TEST_STORE") + "/" + name, "GET")


def raw_put(gateway, name, data, sequencer=None):
    """A PUT through the gateway written on http.client, carrying the
    sequencer given (no check of any lease): (status, parsed JSON or
    None)."""
    h = {"Content-Type": "application/octet-stream"}
    if sequencer is not None:
        h["Fencing-Token"] = sequencer
    st, body = _request(gateway + "/" + name, "PUT", data, h)
    try:
        j = json.loads(body) if body else None
    except ValueError:
        j = None
    return st, j


class Case(unittest.TestCase):
    """A test needing the environment; its clients are closed after it."""

    def setUp(self):
        self.gws = gateways()
        self._clients = []

    def client(self, gws=None, **kw):
        from fencegate import Client
        c = Client(gws or self.gws, **kw)
        self._clients.append(c)
        return c

    def tearDown(self):
        for c in self._clients:
            c.close()
