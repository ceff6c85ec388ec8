"""_http.py - the sync client's transport: http.client over the list of
gateways, one kept-alive connection per gateway and thread.

Invariant: a call goes to the gateway that last answered; on no answer, a
5xx or a failed TLS handshake it goes on to the next one, at most once
round the list, and the gateway that answered becomes the one asked
first. Every wait is bounded by the call's timeout, and under a deadline
each gateway gets only its share of the time left. TLSError is raised
only when every gateway failed TLS.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from ._core import (MAX_ANSWER_BYTES, Answer, attempt_timeout, now,
                    tls_failure, transient)
from .errors import TLSError

# a kept-alive connection the gateway closed while idle fails like this
# before any byte of an answer: the request was not read, so it is sent
# again once on a new connection
_STALE = (http.client.RemoteDisconnected, ConnectionResetError,
          BrokenPipeError, http.client.CannotSendRequest,
          http.client.BadStatusLine)


class Transport:
    def __init__(self, gateways: List[str],
                 ssl_context: Optional[ssl.SSLContext],
                 timeout: float) -> None:
        self.gateways = gateways
        self.ssl_context = ssl_context
        self.timeout = timeout
        self._current = 0
        self._mu = threading.Lock()
        self._local = threading.local()
        self._all: List[Dict[int, http.client.HTTPConnection]] = []
        self._parsed = [urllib.parse.urlsplit(g) for g in gateways]

    @property
    def current(self) -> str:
        return self.gateways[self._current]

    def _conns(self) -> Dict[int, http.client.HTTPConnection]:
        c = getattr(self._local, "conns", None)
        if c is None:
            c = self._local.conns = {}
            with self._mu:
                self._all.append(c)
        return c

    def _conn(self, i: int, timeout: float
              ) -> Tuple[http.client.HTTPConnection, bool]:
        conns = self._conns()
        c = conns.get(i)
        if c is not None:
            if c.timeout != timeout:
                c.timeout = timeout
                if c.sock is not None:
                    c.sock.settimeout(timeout)
            return c, True
        u = self._parsed[i]
        if u.scheme == "https":
            c = http.client.HTTPSConnection(u.hostname or "", u.port or 443,
                                            timeout=timeout,
                                            context=self.ssl_context)
        else:
            c = http.client.HTTPConnection(u.hostname or "", u.port or 80,
                                           timeout=timeout)
        conns[i] = c
        return c, False

    def _drop(self, i: int) -> None:
        c = self._conns().pop(i, None)
        if c is not None:
            c.close()

    def close(self) -> None:
        """Closes every thread's idle connections (call it once nothing
        else uses the client)."""
        with self._mu:
            every = list(self._all)
        for conns in every:
            for i in list(conns):
                c = conns.pop(i, None)
                if c is not None:
                    c.close()

    def _once(self, i: int, method: str, path: str, body: Optional[bytes],
              headers: Dict[str, str], timeout: float) -> Answer:
        base = self._parsed[i].path.rstrip("/")
        url = base + path
        for attempt in (0, 1):
            c, reused = self._conn(i, timeout)
            sent = now()
            try:
                c.request(method, url, body=body, headers=headers)
                r = c.getresponse()
                raw = r.read(MAX_ANSWER_BYTES + 1)
                if len(raw) > MAX_ANSWER_BYTES:
                    self._drop(i)
                    return Answer(0, None, sent, self.gateways[i],
                                  ValueError("an answer over %d bytes"
                                             % MAX_ANSWER_BYTES))
                if r.will_close or not r.isclosed():
                    self._drop(i)
            except _STALE as e:
                self._drop(i)
                if reused and attempt == 0:
                    continue
                return Answer(0, None, sent, self.gateways[i], e)
            except ssl.SSLError as e:
                # this gateway's certificate or handshake: another gateway
                # may do; the error keeps the type alone
                self._drop(i)
                return Answer(0, None, sent, self.gateways[i],
                              TLSError("TLS with the gateway failed: %s"
                                       % type(e).__name__), tls=True)
            except (OSError, http.client.HTTPException) as e:
                self._drop(i)
                return Answer(0, None, sent, self.gateways[i], e)
            except BaseException:
                # an interrupt mid-call: the connection is in an unknown
                # state; closing it makes the gateway drop what it held
                self._drop(i)
                raise
            try:
                j = json.loads(raw) if raw else None
            except ValueError:
                j = None
            return Answer(r.status, j, sent, self.gateways[i], raw=raw)
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, body: Any = None,
             headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = None,
             deadline: Optional[float] = None) -> Answer:
        """One call, tried on each gateway in turn until one answers with
        something other than a 5xx. The answer of the last one tried is
        returned whatever it is. No attempt runs past `deadline`
        (monotonic), when given, and each gets its share of the time left.
        Raises TLSError when every gateway failed TLS."""
        data = None
        h = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        t = self.timeout if timeout is None else timeout
        with self._mu:
            start = self._current
        n = len(self.gateways)
        a: Optional[Answer] = None
        tls_failed = 0
        for k in range(n):
            i = (start + k) % n
            tk = attempt_timeout(t, deadline, n - k)
            if tk <= 0.001:
                break
            a = self._once(i, method, path, data, h, tk)
            if a.tls:
                tls_failed += 1
                continue
            if not transient(a.status):
                with self._mu:
                    self._current = i
                return a
        if a is None:
            return Answer(0, None, now(), self.gateways[start],
                          TimeoutError("the lease ended first"))
        if tls_failed == n:
            raise tls_failure(a, n)
        # nobody answered well: the next call starts one further on
        with self._mu:
            self._current = (start + 1) % n
        return a
