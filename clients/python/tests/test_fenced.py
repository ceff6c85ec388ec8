"""test_fenced.py - the sequencer stamped on the caller's own requests
(a requests Session, an httpx client), as the store sees the result."""

import httpx
import requests

from fencegate import LeaseLost, StaleToken, TokenRequired, error_for
from fencegate import raise_for_response

from .fgenv import Case, store_get, unique


class TestStamping(Case):
    def test_requests_session_put_is_stored(self):
        c = self.client()
        name = unique()
        url = self.gws[0] + "/" + name
        with c.lock(name, ttl=10) as lease:
            with lease.requests_session() as s:
                r = s.put(url, data=b"via requests")
                self.assertIn(r.status_code, (201, 204), r.text)
                # the same session after the lease: refused before sending
                lease.release()
                with self.assertRaises(LeaseLost):
                    s.put(url, data=b"after release")
        self.assertEqual(store_get(name), (200, b"via requests"))

    def test_requests_auth_on_a_plain_call(self):
        c = self.client()
        name = unique()
        url = self.gws[1] + "/" + name
        with c.lock(name, ttl=10) as lease:
            r = requests.put(url, data=b"one call",
                             auth=lease.requests_auth(), timeout=30)
            self.assertIn(r.status_code, (201, 204), r.text)
        self.assertEqual(store_get(name), (200, b"one call"))

    def test_httpx_client_put_is_stored(self):
        c = self.client()
        name = unique()
        url = self.gws[0] + "/" + name
        with c.lock(name, ttl=10) as lease:
            with httpx.Client(auth=lease.httpx_auth(), timeout=30) as h:
                r = h.put(url, content=b"via httpx")
                self.assertIn(r.status_code, (201, 204), r.text)
        self.assertEqual(store_get(name), (200, b"via httpx"))

    def test_unstamped_and_stale_writes_are_typed(self):
        c = self.client()
        name = unique()
        url = self.gws[0] + "/" + name
        r = requests.put(url, data=b"no token", timeout=30)
        self.assertEqual(r.status_code, 428)
        with self.assertRaises(TokenRequired):
            raise_for_response(r.status_code, r.content)
        with c.lock(name, ttl=10) as first:
            old = first.sequencer
        with c.lock(name, ttl=10):
            r = requests.put(url, data=b"stale",
                             headers={"Fencing-Token": old}, timeout=30)
            e = error_for(r.status_code, r.content)
            self.assertIsInstance(e, StaleToken)
            self.assertEqual(e.token, first.token)
        self.assertEqual(store_get(name)[0], 404)
