"""test_forwarding.py - the upstream's own address in what crosses the
gateway (contract v1.1.1, "Forwarded in the form the origin accepts"):
a Location or Content-Location that names the upstream (its base URL, the
base path included) reaches the client naming the address the client used,
as nginx's `proxy_redirect default` does; one that names the upstream
outside its base path is not relayed; every other value passes
unchanged; `proxy-redirect no` turns the rewriting off. The Destination
half (the upstream's absolute URI) is asserted where COPY and MOVE are
tested (test_proxy_forwarded.py)."""

import harness
from harness import TestCase
from origins import StandIn


def location_answer(req):
    """201 with the Location and Content-Location the request asks for
    (request headers X-Location, X-Content-Location)."""
    headers = []
    for ask, name in (("X-Location", "Location"),
                      ("X-Content-Location", "Content-Location")):
        v = req.header(ask)
        if v is not None:
            headers.append((name, v))
    return {"status": 201, "body": b"", "headers": headers}


class RedirectTests(TestCase):
    uses_shared_env = False

    def gateway(self, *flags):
        env = self.start_env(upstream=False)
        self.up = StandIn()
        self.up.on(respond=location_answer)
        self.up.start()
        self.addCleanup(self.up.stop)
        self.base = "http://127.0.0.1:%d/base" % self.up.port
        return self.start_gateway(env.redis.port, self.up.port,
                                  ("--upstream", self.base) + flags)

    def answer(self, gw, location, host=None, header="X-Location"):
        headers = [(header, location)]
        if host:
            headers.append(("Host", host))
        r = harness.http_request(gw.port, "GET", "/a/b.txt", headers=headers)
        self.assertEqual(r.status, 201, r)
        return r.header(header[2:])

    def test_location_naming_the_upstream_names_the_gateway(self):
        gw = self.gateway()
        me = "http://127.0.0.1:%d" % gw.port
        cases = {
            self.base + "/a/b.txt": me + "/a/b.txt",
            self.base + "/": me + "/",
            self.base: me + "/",
            self.base + "?x=1": me + "/?x=1",
            self.base + "/d/?x=1#f": me + "/d/?x=1#f",
            # scheme and authority without case, as URLs compare
            self.base.replace("http://", "HTTP://") + "/c": me + "/c",
            # a path on the upstream under its base: the same path here
            "/base/a/b.txt": "/a/b.txt",
        }
        for sent, want in cases.items():
            self.assertEqual(self.answer(gw, sent), want, sent)
            self.assertEqual(self.answer(gw, sent,
                                         header="X-Content-Location"),
                             want, "Content-Location " + sent)

    def test_location_naming_the_upstream_outside_its_base_is_not_relayed(self):
        # no address of the gateway reaches it: relayed, it would point
        # the client past the fence, at the storage itself
        gw = self.gateway()
        port = self.up.port
        for sent in ("http://127.0.0.1:%d/basement/x" % port,
                     "http://127.0.0.1:%d/other/x" % port,
                     "http://127.0.0.1:%d/Base/x" % port,
                     "http://127.0.0.1:%d/" % port,
                     "//127.0.0.1:%d/other/x" % port):
            for header in ("X-Location", "X-Content-Location"):
                self.assertIsNone(self.answer(gw, sent, header=header),
                                  "%s %s" % (header[2:], sent))

    def test_location_naming_anything_else_passes_unchanged(self):
        gw = self.gateway()
        port = self.up.port
        for sent in ("https://127.0.0.1:%d/base/x" % port,
                     "http://127.0.0.1:%d/base/x" % (port + 1),
                     "http://storage.example/base/x",
                     "/basement", "/other/x", "//127.0.0.1/base/x",
                     "relative/x", "x"):
            self.assertEqual(self.answer(gw, sent), sent, sent)

    def test_location_names_the_host_the_client_used(self):
        gw = self.gateway()
        self.assertEqual(self.answer(gw, self.base + "/z", host="files.example:8443"),
                         "http://files.example:8443/z")

    def test_proxy_redirect_no_passes_every_location_unchanged(self):
        gw = self.gateway("--proxy-redirect", "no")
        for sent in (self.base + "/a/b.txt", "/base/a/b.txt"):
            self.assertEqual(self.answer(gw, sent), sent)
            self.assertEqual(self.answer(gw, sent, header="X-Content-Location"),
                             sent)


def closing_answer(req):
    """200 with the request's method, path and body length, and the
    connection closed after it: each request through the gateway opens a
    new upstream socket."""
    body = ("%s %s %d" % (req["method"], req["path"],
                          len(req["body"]))).encode()
    return {"body": body, "ctype": None, "close": True}


class HostNameTests(TestCase):
    """An upstream named by a host name rather than an address: the name is
    resolved by libcurl (its resolver's sockets come and go beside the
    connections' own), and every request is answered through a socket of
    its own without losing a wake-up."""
    uses_shared_env = False

    def test_an_upstream_named_by_host_name_answers_every_request(self):
        env = self.start_env(upstream=False)
        up = StandIn()
        up.on(respond=closing_answer)
        up.start()
        self.addCleanup(up.stop)
        gw = self.start_gateway(env.redis.port, up.port,
                                ("--upstream", "http://localhost:%d" % up.port))
        for i in range(40):
            r = gw.request("GET", "/hn/%d" % i)
            self.assertEqual((r.status, r.body), (200, b"GET /hn/%d 0" % i), r)
        name = self.lock_name()
        g = self.acquire_ok(name, gw=gw)
        for i in range(20):
            r = gw.request("PUT", "/" + name, raw=b"x" * (i + 1),
                           headers={"Fencing-Token": g["sequencer"]})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b"PUT /%s %d" % (name.encode(), i + 1), r)
