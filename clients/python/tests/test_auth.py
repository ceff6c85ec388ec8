"""test_auth.py - bearer keys and client certificates on the TLS gateway
with an auth-file, and the typed errors it answers."""

import ssl

from fencegate import Client, Forbidden, TLSError, Unauthorized

from .fgenv import Case, store_get, unique, var


class TestAuth(Case):
    def setUp(self):
        super().setUp()
        self.gw = var("FG_TEST_AUTH_GATEWAY")
        self.ca = var("FG_TEST_CA")

    def test_bearer_key(self):
        c = self.client([self.gw], key=var("FG_TEST_KEY"), ca=self.ca)
        name = unique()
        with c.lock(name, ttl=5) as lease:
            self.assertTrue(c.inspect(name)["held"])
            # proxied writes there need no key (proxy-auth off)
            with lease.requests_session() as s:
                r = s.put(self.gw + "/" + name, data=b"over tls",
                          verify=self.ca)
                self.assertIn(r.status_code, (201, 204), r.text)
        self.assertEqual(store_get(name), (200, b"over tls"))

    def test_send_key_stamps_fence_authorization(self):
        import requests
        key = var("FG_TEST_KEY")
        c = self.client([self.gw], key=key, ca=self.ca)
        name = unique()
        with c.lock(name, ttl=5) as lease:
            req = requests.Request("PUT", self.gw + "/" + name,
                                   data=b"k").prepare()
            lease.requests_auth(send_key=True)(req)
            self.assertEqual(req.headers["Fencing-Token"], lease.sequencer)
            self.assertEqual(req.headers["Fence-Authorization"],
                             "Bearer " + key)
            with requests.Session() as s:
                r = s.send(req, verify=self.ca, timeout=30)
            self.assertIn(r.status_code, (201, 204), r.text)
            # without send_key, the key stays home
            req = requests.Request("PUT", self.gw + "/" + name).prepare()
            lease.requests_auth()(req)
            self.assertNotIn("Fence-Authorization", req.headers)
        self.assertEqual(store_get(name), (200, b"k"))

    def test_key_from_a_file(self):
        path = var("FG_TEST_TMP") + "/app.key"
        with open(path, "w") as f:
            f.write(var("FG_TEST_KEY") + "\n")
        c = self.client([self.gw], key_file=path, ca=self.ca)
        self.assertFalse(c.inspect(unique())["held"])

    def test_client_certificate(self):
        c = self.client([self.gw], ca=self.ca,
                        cert=var("FG_TEST_CLIENT_CERT"),
                        cert_key=var("FG_TEST_CLIENT_KEY"))
        name = unique()
        with c.lock(name, ttl=5):
            self.assertTrue(c.inspect(name)["held"])

    def test_other_principal_is_forbidden(self):
        c = self.client([self.gw], key=var("FG_TEST_OTHER_KEY"), ca=self.ca)
        with self.assertRaises(Forbidden) as cm:
            c.acquire(unique(), ttl=5)
        self.assertEqual(cm.exception.status, 403)
        self.assertEqual(cm.exception.code, "forbidden")
        # its own prefix is fine
        with c.lock(unique("other/"), ttl=5):
            pass

    def test_no_key_is_unauthorized(self):
        c = self.client([self.gw], ca=self.ca)
        with self.assertRaises(Unauthorized) as cm:
            c.inspect(unique())
        self.assertEqual(cm.exception.status, 401)

    def test_an_unknown_ca_fails_tls(self):
        ctx = ssl.create_default_context()   # the system's CAs only
        c = self.client([self.gw], key=var("FG_TEST_KEY"), ssl_context=ctx)
        with self.assertRaises(TLSError):
            c.inspect(unique())

    def test_a_tls_failure_moves_on_to_the_next_gateway(self):
        # the system's CAs do not verify the first gateway: that is this
        # gateway's failure, and the plain second one takes the calls
        plain = var("FG_TEST_GATEWAYS").split(",")[1]
        ctx = ssl.create_default_context()
        c = self.client([self.gw, plain], ssl_context=ctx)
        name = unique()
        with c.lock(name, ttl=1.5) as lease:
            self.assertEqual(c.gateway, plain)
            self.assertFalse(lease.lost.wait(3))
            self.assertTrue(c.inspect(name)["held"])
        # every gateway failing TLS is a TLSError
        c2 = self.client([self.gw, self.gw.replace("127.0.0.1",
                                                   "localhost")],
                         ssl_context=ctx)
        with self.assertRaises(TLSError):
            c2.inspect(unique())

    def test_the_key_never_shows(self):
        key = var("FG_TEST_KEY")
        c = Client([self.gw], key=key, ca=self.ca)
        try:
            lease = c.acquire(unique(), ttl=5)
            for text in (repr(c), repr(lease), str(lease.__dict__.get(
                    "reason"))):
                self.assertNotIn(key, text)
            self.assertNotIn(lease._lease, repr(lease))
            lease.release()
        finally:
            c.close()
