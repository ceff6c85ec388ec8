"""aio.py - the asyncio client, on httpx: the same calls as the sync
client, one renewer task per client, an asyncio.Event per lease.

    async with AsyncClient(gateways) as client:
        async with client.lock("app/a.txt", ttl=10) as lease:
            async with httpx.AsyncClient(auth=lease.httpx_auth()) as h:
                await h.put(url, content=b"hi")

Invariant: as in the sync client, a lease's end is the send time of the
last good answer plus its TTL (monotonic clock), max_hold counts from the
grant's arrival, no renewal call outlasts the earliest end the renewer
watches, and releases at max_hold run in tasks of their own; leaving an
`async with` releases the lease, also when the task was cancelled, and a
release begun is finished even if the task is cancelled again meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import types
import urllib.parse
from typing import (Any, AsyncIterator, Callable, Dict, List, Optional,
                    Sequence, Type, Union)

import httpx

from . import _core
from ._client_common import read_key
from ._core import Answer, now
from .errors import FenceError, LeaseLost, NotAcquired, TLSError


class AsyncLease:
    """One grant. `lost` is an asyncio.Event; `check()` raises LeaseLost."""

    def __init__(self, client: "AsyncClient", name: str,
                 grant: Dict[str, Any], sent: float, arrived: float,
                 max_hold: Optional[float],
                 on_lost: Optional[Callable[["AsyncLease"], None]],
                 raise_on_loss: bool) -> None:
        self.client = client
        self.name: str = name
        self.token: int = grant["token"]
        self.sequencer: str = grant["sequencer"]
        self.mode: str = grant["mode"]
        self.ttl_ms: int = grant["ttl_ms"]
        self._lease: str = grant["lease"]
        self.lost = asyncio.Event()
        self.reason: Optional[str] = None
        self.raise_on_loss = raise_on_loss
        self._on_lost = on_lost
        self.deadline = sent + self.ttl_ms / 1000.0
        self.next_renew = sent + _core.renewal_interval(self.ttl_ms)
        # the hold starts when the grant arrived, not when the wait began
        self.hold_end = None if max_hold is None else arrived + max_hold
        self._valid_from = sent
        self._backoff = 0.0
        self._last = ""
        self._released = False
        self._release_task: Optional["asyncio.Task[None]"] = None

    def __repr__(self) -> str:
        return "<AsyncLease %r token=%d %s%s>" % (
            self.name, self.token, self.mode,
            " lost" if self.lost.is_set() else "")

    @property
    def held(self) -> bool:
        return not self.lost.is_set() and not self._released and \
            now() < self.deadline

    def remaining(self) -> float:
        return max(0.0, self.deadline - now())

    def check(self) -> None:
        if not self.lost.is_set() and now() >= self.deadline:
            self._lose("the lease ran out before a renewal got through")
        if self.lost.is_set():
            raise LeaseLost("lease on lock '%s' lost: %s"
                            % (self.name, self.reason), code="lease_lost")
        if self._released:
            raise LeaseLost("lease on lock '%s' was released" % self.name,
                            code="lease_lost")

    def _lose(self, reason: str) -> None:
        if self.lost.is_set():
            return
        self.reason = reason
        self.lost.set()
        self.client._forget(self)
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                pass

    async def renew(self, ttl: Optional[float] = None,
                    value: Optional[str] = None) -> None:
        ttl_ms = self.ttl_ms if ttl is None else _core.ms(
            ttl, "ttl", _core.TTL_MIN_MS, _core.TTL_MAX_MS)
        self.check()
        a = await self.client._renew_call(self, ttl_ms, value)
        self.client._renewed(self, a, ttl_ms, raise_errors=True)
        if self.client._wake is not None:
            self.client._wake.set()

    async def proclaim(self, value: str) -> None:
        await self.renew(value=value)

    def _start_release(self) -> "asyncio.Task[None]":
        """The release's task, begun at the first call."""
        if self._release_task is None:
            self._released = True
            self.client._forget(self)
            self._release_task = asyncio.ensure_future(
                self.client._release(self))
        return self._release_task

    async def release(self) -> None:
        """Gives the lock back, once. Shielded: a cancellation of the
        caller does not stop a release begun."""
        await asyncio.shield(self._start_release())

    resign = release

    async def __aenter__(self) -> "AsyncLease":
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]],
                        ev: Optional[BaseException],
                        tb: Optional[types.TracebackType]) -> None:
        # a lease the body released itself has no end left to pass
        was_lost = self.lost.is_set() or (not self._released and
                                          now() >= self.deadline)
        try:
            await self.release()
        except asyncio.CancelledError:
            # cancelled again while releasing: the release goes on in its
            # own task; the cancellation is the caller's to see
            raise
        if et is None and self.raise_on_loss and (was_lost or
                                                  self.lost.is_set()):
            if not self.lost.is_set():
                self._lose("the lease ran out before a renewal got through")
            raise LeaseLost("lease on lock '%s' was lost while held: %s"
                            % (self.name, self.reason), code="lease_lost")

    def fencing_headers(self) -> Dict[str, str]:
        self.check()
        return {"Fencing-Token": self.sequencer}

    def httpx_auth(self, send_key: bool = False) -> Any:
        from .integrations import HttpxFence
        return HttpxFence([self], self.client.key if send_key else None)


class AsyncClient:
    """The asyncio client: gateways tried in turn, key or TLS as in the
    sync Client."""

    def __init__(self, gateways: Union[str, Sequence[str]], *,
                 key: Optional[str] = None, key_file: Optional[str] = None,
                 ca: Optional[str] = None, cert: Optional[str] = None,
                 cert_key: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 timeout: float = _core.DEFAULT_TIMEOUT,
                 owner: Optional[str] = None) -> None:
        self.gateways = _core.parse_gateways(gateways)
        self.key = read_key(key, key_file)
        self.ssl_context = _core.make_ssl_context(ca, cert, cert_key,
                                                  ssl_context)
        self.timeout = timeout
        self.owner = owner
        self._current = 0
        verify: Union[bool, ssl.SSLContext] = True
        if self.ssl_context is not None:
            verify = self.ssl_context
        elif not any(g.startswith("https:") for g in self.gateways):
            verify = False   # plain http: no CA bundle to load
        self._http = httpx.AsyncClient(verify=verify, timeout=timeout,
                                       trust_env=False)
        self._leases: List[AsyncLease] = []
        self._task: Optional["asyncio.Task[None]"] = None
        self._wake: Optional[asyncio.Event] = None
        self._paused = False

    def __repr__(self) -> str:
        # a user:password in a URL is never shown
        return "<fencegate.aio.AsyncClient %s>" % ",".join(
            _core.redact_url(g) for g in self.gateways)

    @property
    def gateway(self) -> str:
        return self.gateways[self._current]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- transport -------------------------------------------------------

    async def _once(self, i: int, method: str, path: str,
                    body: Optional[bytes], headers: Dict[str, str],
                    timeout: float) -> Answer:
        sent = now()
        try:
            async with self._http.stream(
                    method, self.gateways[i] + path, content=body,
                    headers=headers, timeout=timeout) as r:
                parts = []
                size = 0
                async for chunk in r.aiter_bytes():
                    size += len(chunk)
                    if size > _core.MAX_ANSWER_BYTES:
                        return Answer(0, None, sent, self.gateways[i],
                                      ValueError("an answer over %d bytes"
                                                 % _core.MAX_ANSWER_BYTES))
                    parts.append(chunk)
                raw = b"".join(parts)
        except httpx.ConnectError as e:
            if isinstance(e.__context__, ssl.SSLError) or \
                    "SSL" in str(e) or "certificate" in str(e):
                # this gateway's certificate or handshake: another
                # gateway may do
                return Answer(0, None, sent, self.gateways[i],
                              TLSError("TLS with the gateway failed"),
                              tls=True)
            return Answer(0, None, sent, self.gateways[i], e)
        except ssl.SSLError:
            # httpx lets some handshake failures through unwrapped
            return Answer(0, None, sent, self.gateways[i],
                          TLSError("TLS with the gateway failed"), tls=True)
        except httpx.TransportError as e:
            return Answer(0, None, sent, self.gateways[i], e)
        try:
            j = json.loads(raw) if raw else None
        except ValueError:
            j = None
        return Answer(r.status_code, j, sent, self.gateways[i], raw=raw)

    async def _call(self, method: str, path: str, body: Any = None,
                    lease: Optional[str] = None,
                    extra: Optional[Dict[str, str]] = None,
                    timeout: Optional[float] = None,
                    deadline: Optional[float] = None) -> Answer:
        data = None
        h = _core.headers_for(self.key, lease, extra)
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        t = self.timeout if timeout is None else timeout
        start = self._current
        n = len(self.gateways)
        a: Optional[Answer] = None
        tls_failed = 0
        for k in range(n):
            i = (start + k) % n
            # under a deadline each gateway gets its share of the time
            # left: one that accepts and never answers leaves the next
            # one time to answer
            tk = _core.attempt_timeout(t, deadline, n - k)
            if tk <= 0.001:
                break
            a = await self._once(i, method, path, data, h, tk)
            if a.tls:
                tls_failed += 1
                continue
            if not _core.transient(a.status):
                self._current = i
                return a
        if a is None:
            return Answer(0, None, now(), self.gateways[start],
                          TimeoutError("the lease ended first"))
        if tls_failed == n:
            raise _core.tls_failure(a, n)
        self._current = (start + 1) % n
        return a

    # -- acquire -----------------------------------------------------------

    async def acquire(self, name: str, *, ttl: float = 30.0,
                      wait: Optional[float] = 0.0, shared: bool = False,
                      owner: Optional[str] = None,
                      value: Optional[str] = None,
                      lock_delay: Optional[float] = None,
                      max_hold: Optional[float] = None,
                      on_lost: Optional[Callable[[AsyncLease], None]] = None,
                      raise_on_loss: bool = True) -> AsyncLease:
        ttl_ms = _core.ms(ttl, "ttl", _core.TTL_MIN_MS, _core.TTL_MAX_MS)
        ld = None if lock_delay is None else _core.ms(
            lock_delay, "lock_delay", 0, _core.TTL_MAX_MS)
        if wait is not None and wait < 0:
            raise ValueError("wait must be 0 or more seconds, or None")
        if max_hold is not None and max_hold <= 0:
            raise ValueError("max_hold must be above 0 seconds")
        path = _core.lock_path(name)
        deadline = None if wait is None else now() + wait
        backoff = 0.0
        while True:
            left = _core.WAIT_MAX_MS / 1000.0 if deadline is None else \
                max(0.0, deadline - now())
            chunk = min(_core.WAIT_MAX_MS, int(left * 1000))
            body = _core.acquire_body(ttl_ms, chunk, shared,
                                      owner if owner is not None
                                      else self.owner, value, ld)
            a = await self._call("POST", path, body,
                                 timeout=self.timeout + chunk / 1000.0)
            if a.status == 200:
                ls = await self._granted(name, a, max_hold, on_lost,
                                         raise_on_loss)
                if ls is not None:
                    return ls
                # given back: asked again within the wait, as any answer
                # that did not get through
                a = Answer(0, None, now(), error=RuntimeError(
                    "the grant could not be confirmed"))
            t = now()
            over = wait == 0 or (deadline is not None and t >= deadline)
            if a.status == 409 and a.code == "lock_held":
                if over:
                    raise NotAcquired(
                        "lock '%s' was not granted%s" % (
                            name, "" if not wait else
                            " within %gs" % wait),
                        status=409, code="lock_held",
                        body=a.json if isinstance(a.json, dict) else None)
                backoff = _core.next_backoff(backoff) \
                    if t - a.sent + 0.05 < chunk / 1000.0 else 0.0
            elif _core.transient(a.status) or a.status == 429 and \
                    a.code == "too_many_waiters":
                if over:
                    e = a.failure("acquire '%s'" % name)
                    if a.status == 429:
                        raise NotAcquired(e.message, status=429,
                                          code="too_many_waiters")
                    raise e
                backoff = _core.next_backoff(backoff)
            else:
                raise a.failure("acquire '%s'" % name)
            if backoff:
                b = backoff if deadline is None else \
                    min(backoff, max(0.0, deadline - now()))
                await asyncio.sleep(b)

    async def _granted(self, name: str, a: Answer,
                       max_hold: Optional[float],
                       on_lost: Optional[Callable[[AsyncLease], None]],
                       raise_on_loss: bool) -> Optional[AsyncLease]:
        """The lease of a 200, or None when it was given back (a late
        grant whose confirmation failed). No error is ever built from the
        grant's body: it holds the lease and the sequencer."""
        path = _core.lock_path(name)
        lease = _core.grant_lease(a.json)
        try:
            g = _core.grant_fields(a.json)
        except FenceError:
            # a grant that cannot be read is still a grant: given back
            if lease is not None:
                await asyncio.shield(self._call("DELETE", path,
                                                lease=lease))
            raise
        try:
            ls = AsyncLease(self, name, g, a.sent, a.arrived, max_hold,
                            on_lost, raise_on_loss)
            if now() - a.sent > ls.ttl_ms / 3000.0:
                # the answer took long: its lease may be mostly spent, so
                # it is renewed at once and timed from that renewal
                r = await self._renew_call(ls, ls.ttl_ms, None)
                if r.status != 200:
                    if r.status != 410:
                        await asyncio.shield(self._call(
                            "DELETE", path, lease=g["lease"]))
                    return None
                self._renewed(ls, r, ls.ttl_ms)
            self._add(ls)
            return ls
        except BaseException:
            # an interrupt between the grant and its caller: give it back
            await asyncio.shield(self._call("DELETE", path,
                                            lease=g["lease"]))
            raise

    def lock(self, name: str, **kw: Any) -> "_AsyncScope":
        """`async with client.lock(name, ...) as lease:`"""
        return _AsyncScope(self, name, kw)

    async def campaign(self, name: str, value: str, *, ttl: float = 30.0,
                       wait: Optional[float] = None,
                       **kw: Any) -> AsyncLease:
        return await self.acquire(name, ttl=ttl, wait=wait, value=value,
                                  **kw)

    # -- the renewer task --------------------------------------------------

    def _add(self, ls: AsyncLease) -> None:
        self._leases.append(ls)
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        self._wake.set()

    def _forget(self, ls: AsyncLease) -> None:
        if ls in self._leases:
            self._leases.remove(ls)
        if self._wake is not None:
            self._wake.set()

    def _pause_renewals(self, paused: bool) -> None:
        """Test hook: send no renewal while paused; deadlines still count."""
        self._paused = paused
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            t = now()
            wake = t + 60.0
            work = False
            for ls in list(self._leases):
                # one lease's failure never stops the others' renewals
                # and loss signals
                if ls.hold_end is not None and t >= ls.hold_end:
                    try:
                        ls._lose("held longer than max_hold")
                        # its own task: the others are renewed meanwhile
                        ls._start_release().add_done_callback(_quiet)
                    except Exception:
                        self._forget(ls)
                    work = True
                elif t >= ls.deadline:
                    try:
                        ls._lose("no renewal succeeded within its %gs "
                                 "lease%s" % (ls.ttl_ms / 1000.0,
                                              "; last error: " + ls._last
                                              if ls._last else ""))
                    except Exception:
                        self._forget(ls)
                    work = True
                elif not self._paused and t >= ls.next_renew:
                    work = True
                    bound = self._bound()
                    if now() >= bound:
                        # an end or max_hold came: acted on first
                        continue
                    try:
                        a = await self._renew_call(ls, ls.ttl_ms, None,
                                                   deadline=bound)
                        self._renewed(ls, a, ls.ttl_ms)
                    except Exception as e:
                        ls._last = _core.describe(e)
                        ls.next_renew = now() + _core.BACKOFF_MIN
                    work = True
                else:
                    wake = min(wake, ls.deadline)
                    if ls.hold_end is not None:
                        wake = min(wake, ls.hold_end)
                    if not self._paused:
                        wake = min(wake, ls.next_renew)
            if work:
                continue
            self._wake.clear()
            # a timer rather than wait_for: a cancellation then reaches
            # this task at once
            h = asyncio.get_running_loop().call_later(
                max(0.0, wake - now()), self._wake.set)
            try:
                await self._wake.wait()
            finally:
                h.cancel()

    def _bound(self) -> float:
        """The earliest end or max_hold among the leases watched: a
        renewal call that ran past it would hold back that lease's loss
        signal or its release."""
        b = float("inf")
        for ls in self._leases:
            b = min(b, ls.deadline)
            if ls.hold_end is not None:
                b = min(b, ls.hold_end)
        return b

    async def _renew_call(self, ls: AsyncLease, ttl_ms: int,
                          value: Optional[str],
                          deadline: Optional[float] = None) -> Answer:
        body: Dict[str, Any] = {"lease": ls._lease, "ttl_ms": ttl_ms}
        if value is not None:
            body["value"] = value
        end = ls.deadline if deadline is None else min(deadline,
                                                       ls.deadline)
        return await self._call("PATCH", _core.lock_path(ls.name), body,
                                deadline=end)

    def _renewed(self, ls: AsyncLease, a: Answer, ttl_ms: int,
                 raise_errors: bool = False) -> None:
        if ls._released and not raise_errors:
            return   # a renewal that crossed the release
        if a.status == 200:
            ttl = a.json.get("ttl_ms") if isinstance(a.json, dict) else None
            if isinstance(ttl, int) and ttl > 0:
                ttl_ms = ttl
            if a.sent >= ls._valid_from:
                ls._valid_from = a.sent
                ls.ttl_ms = ttl_ms
                ls.deadline = a.sent + ttl_ms / 1000.0
                ls.next_renew = a.sent + _core.renewal_interval(ttl_ms)
            ls._backoff = 0.0
            ls._last = ""
            return
        if _core.definite_loss(a.status):
            ls._lose("renew answered %d %s" % (a.status, a.code or ""))
            if raise_errors:
                raise a.failure("renew '%s'" % ls.name)
            return
        ls._last = _core.describe(a.error) if a.status == 0 else \
            "HTTP %d %s" % (a.status, a.code or "")
        ls._backoff = _core.next_backoff(ls._backoff)
        ls.next_renew = now() + min(ls._backoff,
                                    _core.renewal_interval(ls.ttl_ms))
        if raise_errors:
            raise a.failure("renew '%s'" % ls.name)

    async def _release(self, ls: AsyncLease) -> None:
        path = _core.lock_path(ls.name)
        backoff = 0.0
        end = max(ls.deadline, now() + self.timeout)
        while True:
            a = await self._call("DELETE", path, lease=ls._lease,
                                 deadline=end)
            if a.status == 204:
                return
            if a.status == 410:
                ls._lose("the lease had ended when it was released")
                return
            if not _core.transient(a.status) or now() >= end:
                if not ls.lost.is_set() and now() >= ls.deadline:
                    ls._lose("the lease ran out before a renewal got "
                             "through")
                return
            backoff = _core.next_backoff(backoff)
            await asyncio.sleep(max(0.0, min(backoff, end - now())))

    # -- the rest of the API -----------------------------------------------

    def _ok(self, a: Answer, what: str) -> Dict[str, Any]:
        if 200 <= a.status < 300:
            return a.json if isinstance(a.json, dict) else {}
        raise a.failure(what)

    async def inspect(self, name: str) -> Dict[str, Any]:
        return self._ok(await self._call("GET", _core.lock_path(name)),
                        "inspect '%s'" % name)

    async def observe(self, name: str, *, wait: float,
                      after: Optional[int] = None) -> Dict[str, Any]:
        w = _core.ms(wait, "wait", 0, _core.WAIT_MAX_MS)
        q = "?wait_ms=%d" % w
        if after is not None:
            q += "&after=%d" % int(after)
        return self._ok(await self._call(
            "GET", _core.lock_path(name) + q,
            timeout=self.timeout + w / 1000.0), "observe '%s'" % name)

    async def leader(self, name: str) -> Optional[str]:
        st = await self.inspect(name)
        return st.get("value") if st.get("held") else None

    async def ls(self, prefix: str = "", limit: int = 100
                 ) -> AsyncIterator[Dict[str, Any]]:
        cursor: Optional[str] = None
        while True:
            q = {"prefix": prefix, "limit": str(limit)}
            if cursor is not None:
                q["cursor"] = cursor
            page = self._ok(await self._call(
                "GET", _core.API + "/locks?" + urllib.parse.urlencode(q)),
                "list '%s'" % prefix)
            for e in page.get("locks", []):
                yield e
            cursor = page.get("cursor")
            if not cursor:
                return

    async def break_lock(self, name: str, token: int) -> None:
        self._ok(await self._call("DELETE", _core.lock_path(name),
                                  extra={"Fence-Break": str(int(token))}),
                 "break '%s'" % name)


def _quiet(t: "asyncio.Task[None]") -> None:
    # a release at max_hold has nobody to tell of its failure (the lease
    # runs out anyway): its exception is taken so it is not reported
    if not t.cancelled():
        t.exception()


class _AsyncScope:
    def __init__(self, client: AsyncClient, name: str, kw: Dict[str, Any]):
        self.client = client
        self.name = name
        self.kw = kw
        self.lease: Optional[AsyncLease] = None

    async def __aenter__(self) -> AsyncLease:
        self.lease = await self.client.acquire(self.name, **self.kw)
        return self.lease

    async def __aexit__(self, et: Optional[Type[BaseException]],
                        ev: Optional[BaseException],
                        tb: Optional[types.TracebackType]) -> None:
        if self.lease is not None:
            await self.lease.__aexit__(et, ev, tb)
