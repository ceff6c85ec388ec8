"""client.py - the sync client: leased locks with one renewer thread per
client, scoped use, election, inspect, list and break.

Invariant: while a lease is held (not lost, not released) the client's
renewer renews it a third of its TTL after the last good renewal was sent;
its end is the send time of the last good answer plus the TTL that answer
gave, and at that end, or at a definite loss (400/403/409/410), or at
max_hold (counted from the grant's arrival), `lost` is set at once. No
call of the renewer outlasts the earliest end it watches, and nothing
else blocks it: releases at max_hold run on their own threads. Leaving a
`with` scope releases the lease whatever ended it.
"""

from __future__ import annotations

import threading
import time
import types
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence,
                    Type, Union)

from . import _core
from ._core import Answer, now
from ._client_common import read_key
from ._http import Transport
from .errors import FenceError, LeaseLost, NotAcquired, Unavailable


class Lease:
    """One grant of a lock. `lost` (a threading.Event) is set the moment
    the lease is known to be gone; `check()` raises LeaseLost then.

    A Lease is a context manager too: leaving it releases the lock."""

    def __init__(self, client: "Client", name: str, grant: Dict[str, Any],
                 sent: float, arrived: float, max_hold: Optional[float],
                 on_lost: Optional[Callable[["Lease"], None]],
                 raise_on_loss: bool) -> None:
        self.client = client
        self.name: str = name
        self.token: int = grant["token"]
        self.sequencer: str = grant["sequencer"]
        self.mode: str = grant["mode"]
        self.ttl_ms: int = grant["ttl_ms"]
        self._lease: str = grant["lease"]
        self._path = _core.lock_path(name)
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.raise_on_loss = raise_on_loss
        self._on_lost = on_lost
        self._mu = threading.Lock()
        self.acquired_at = sent
        self.deadline = sent + self.ttl_ms / 1000.0
        self.next_renew = sent + _core.renewal_interval(self.ttl_ms)
        # the hold starts when the grant arrived: time spent waiting in
        # the queue is not held time
        self.hold_end = None if max_hold is None else arrived + max_hold
        self._valid_from = sent
        self._backoff = 0.0
        self._last = ""
        self._released = False
        self._release_done = threading.Event()

    def __repr__(self) -> str:
        # never the lease itself, nor the sequencer
        return "<Lease %r token=%d %s%s>" % (
            self.name, self.token, self.mode,
            " lost" if self.lost.is_set() else "")

    # -- the loss signal --------------------------------------------------

    @property
    def held(self) -> bool:
        return not self.lost.is_set() and not self._released and \
            now() < self.deadline

    def remaining(self) -> float:
        """Seconds until the lease's end as this client knows it."""
        return max(0.0, self.deadline - now())

    def check(self) -> None:
        """Raises LeaseLost unless the lease still holds the lock."""
        if not self.lost.is_set() and now() >= self.deadline:
            self._lose("the lease ran out before a renewal got through")
        if self.lost.is_set():
            raise LeaseLost("lease on lock '%s' lost: %s"
                            % (self.name, self.reason), code="lease_lost")
        if self._released:
            raise LeaseLost("lease on lock '%s' was released" % self.name,
                            code="lease_lost")

    def _lose(self, reason: str) -> None:
        with self._mu:
            if self.lost.is_set():
                return
            self.reason = reason
            self.lost.set()
        self.client._renewer.forget(self)
        cb = self._on_lost
        if cb is not None:
            try:
                cb(self)
            except Exception:   # a callback's failure is the caller's
                pass

    # -- calls on the lease ------------------------------------------------

    def renew(self, ttl: Optional[float] = None,
              value: Optional[str] = None) -> None:
        """Renews now (the renewer does this by itself); `value` replaces
        the lock's value (an election's proclaim)."""
        ttl_ms = self.ttl_ms if ttl is None else _core.ms(
            ttl, "ttl", _core.TTL_MIN_MS, _core.TTL_MAX_MS)
        self.check()
        a = self.client._renew_call(self, ttl_ms, value)
        self.client._renewed(self, a, ttl_ms, raise_errors=True)
        # a shorter TTL makes the next renewal due before the thread
        # would wake
        self.client._renewer.poke()

    def proclaim(self, value: str) -> None:
        """An election's leader announces a new value."""
        self.renew(value=value)

    def release(self) -> None:
        """Gives the lock back (once; later calls do nothing). Raises
        nothing for a lease already gone; `lost` tells."""
        with self._mu:
            first = not self._released
            self._released = True
        if not first:
            # another thread (the renewer at max_hold) is giving it back:
            # the caller returns once that is done
            self._release_done.wait(self.client.timeout * 3)
            return
        try:
            self.client._renewer.forget(self)
            self.client._release(self)
        except Exception:
            self._release_done.set()
            raise
        except BaseException:
            # interrupted mid-release (a second Ctrl-C): a thread of its
            # own finishes it, and the interpreter waits for that thread
            # at exit, so the lock is given back rather than left to run
            # out; it gets the client's timeout, not the lease's TTL,
            # so the process is not kept alive for long
            threading.Thread(target=self._release_quietly,
                             args=(now() + self.client.timeout,),
                             name="fencegate-release").start()
            raise
        self._release_done.set()

    def _release_quietly(self, end: Optional[float] = None) -> None:
        try:
            self.client._release(self, end=end)
        except Exception:   # nobody to tell: the lease runs out anyway
            pass
        finally:
            self._release_done.set()

    def _release_in_background(self) -> None:
        """The release at max_hold: on a thread of its own, so that the
        renewer goes on with the other leases meanwhile."""
        def run() -> None:
            try:
                self.release()
            except Exception:   # nobody to tell: the lease runs out anyway
                pass
        threading.Thread(target=run, name="fencegate-max-hold",
                         daemon=True).start()

    resign = release

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, et: Optional[Type[BaseException]],
                 ev: Optional[BaseException],
                 tb: Optional[types.TracebackType]) -> None:
        # a lease the body released itself has no end left to pass
        was_lost = self.lost.is_set() or (not self._released and
                                          now() >= self.deadline)
        self.release()
        if et is None and self.raise_on_loss and (was_lost or
                                                  self.lost.is_set()):
            if not self.lost.is_set():
                self._lose("the lease ran out before a renewal got through")
            raise LeaseLost("lease on lock '%s' was lost while held: %s"
                            % (self.name, self.reason), code="lease_lost")

    # -- fenced requests ---------------------------------------------------

    def fencing_headers(self) -> Dict[str, str]:
        """{"Fencing-Token": sequencer}, after check()."""
        self.check()
        return {"Fencing-Token": self.sequencer}

    def requests_auth(self, send_key: bool = False) -> Any:
        """A requests auth hook stamping this lease's sequencer."""
        from .integrations import RequestsFence
        return RequestsFence([self], self.client.key if send_key else None)

    def requests_session(self, send_key: bool = False) -> Any:
        """A requests.Session whose every request is stamped."""
        import requests
        s = requests.Session()
        s.auth = self.requests_auth(send_key)
        return s

    def httpx_auth(self, send_key: bool = False) -> Any:
        """An httpx.Auth stamping this lease's sequencer (sync and async
        httpx clients alike)."""
        from .integrations import HttpxFence
        return HttpxFence([self], self.client.key if send_key else None)

    def s3_credentials(self, access_key: str, secret_key: str) -> Any:
        """botocore credentials whose session token is the sequencer."""
        from .integrations import SequencerCredentials
        return SequencerCredentials(access_key, secret_key, [self])

    def boto3_session(self, access_key: str, secret_key: str,
                      region_name: Optional[str] = None) -> Any:
        """A boto3.Session signing with these credentials and the
        sequencer as its session token."""
        from .integrations import boto3_session
        return boto3_session(access_key, secret_key, [self], region_name)


class _Renewer:
    """The client's one renewal thread."""

    def __init__(self, client: "Client") -> None:
        self.client = client
        self.cond = threading.Condition()
        self.leases: List[Lease] = []
        self.thread: Optional[threading.Thread] = None
        self.stopped = False
        self._paused = False
        self.wake_at = 0.0        # when the thread wakes by itself next
        # with no lease, the thread still wakes this often: a new lease
        # like the last one is then due after that wake-up, and adding it
        # wakes nobody (a short hold costs no thread switch)
        self.idle_wait = 60.0

    def add(self, lease: Lease) -> None:
        with self.cond:
            self.leases.append(lease)
            if self.thread is None or not self.thread.is_alive():
                self.stopped = False
                self.thread = threading.Thread(
                    target=self._run, name="fencegate-renewer", daemon=True)
                self.thread.start()
            first = lease.next_renew if lease.hold_end is None else \
                min(lease.next_renew, lease.hold_end)
            self.idle_wait = max(_core.RENEW_MIN_INTERVAL,
                                 min(60.0, first - now()))
            # woken only when this lease is due before the thread would
            # wake anyway: a short hold costs the thread nothing
            if first < self.wake_at:
                self.cond.notify_all()

    def forget(self, lease: Lease) -> None:
        # no wake-up: the thread finds the lease gone when it looks
        with self.cond:
            try:
                self.leases.remove(lease)
            except ValueError:
                pass

    def poke(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def pause(self) -> None:
        """Test hook: send no renewal until resume(), as when none can get
        through. Deadlines are still watched."""
        with self.cond:
            self._paused = True
            self.cond.notify_all()

    def resume(self) -> None:
        with self.cond:
            self._paused = False
            self.cond.notify_all()

    def bound(self) -> float:
        """The earliest end or max_hold among the leases watched: a
        renewal call that ran past it would hold back that lease's loss
        signal or its release."""
        with self.cond:
            b = float("inf")
            for ls in self.leases:
                b = min(b, ls.deadline)
                if ls.hold_end is not None:
                    b = min(b, ls.hold_end)
            return b

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self.cond:
                if self.stopped:
                    return
                t = now()
                ends: List[Lease] = []
                holds: List[Lease] = []
                due: List[Lease] = []
                wake = t + (60.0 if self.leases else self.idle_wait)
                for ls in self.leases:
                    if ls.hold_end is not None and t >= ls.hold_end:
                        holds.append(ls)
                    elif t >= ls.deadline:
                        ends.append(ls)
                    elif not self._paused and t >= ls.next_renew:
                        due.append(ls)
                    else:
                        wake = min(wake, ls.deadline)
                        if ls.hold_end is not None:
                            wake = min(wake, ls.hold_end)
                        if not self._paused:
                            wake = min(wake, ls.next_renew)
                if not (ends or holds or due):
                    self.wake_at = wake
                    self.cond.wait(max(0.0, wake - t))
                    self.wake_at = 0.0
                    continue
            # one lease's failure never stops the others' renewals and
            # loss signals: the thread must go on
            for ls in ends:
                try:
                    ls._lose("no renewal succeeded within its %gs lease%s"
                             % (ls.ttl_ms / 1000.0,
                                self.client._last_error(ls)))
                except Exception:
                    self.forget(ls)
            for ls in holds:
                try:
                    ls._lose("held longer than max_hold")
                    ls._release_in_background()
                except Exception:
                    self.forget(ls)
            # the earliest end first; once an end or max_hold comes, the
            # round stops so that it is acted on at its time
            due.sort(key=lambda ls: ls.deadline)
            for ls in due:
                if ls.lost.is_set() or ls._released:
                    continue
                bound = self.bound()
                if now() >= bound:
                    break
                try:
                    a = self.client._renew_call(ls, ls.ttl_ms, None,
                                                deadline=bound)
                    self.client._renewed(ls, a, ls.ttl_ms)
                except Exception as e:
                    ls._last = _core.describe(e)
                    ls.next_renew = now() + _core.BACKOFF_MIN


class Client:
    """A client of one or more gateways (tried in turn; the one that
    answered is asked first next time).

    key / key_file: bearer key (`Authorization: Bearer` on the lock API).
    ca, cert, cert_key / ssl_context: TLS (the CA that signed the
    gateway's certificate, a client certificate and its key)."""

    def __init__(self, gateways: Union[str, Sequence[str]], *,
                 key: Optional[str] = None, key_file: Optional[str] = None,
                 ca: Optional[str] = None, cert: Optional[str] = None,
                 cert_key: Optional[str] = None,
                 ssl_context: Any = None,
                 timeout: float = _core.DEFAULT_TIMEOUT,
                 owner: Optional[str] = None) -> None:
        self.gateways = _core.parse_gateways(gateways)
        self.key = read_key(key, key_file)
        self.ssl_context = _core.make_ssl_context(ca, cert, cert_key,
                                                  ssl_context)
        self.timeout = timeout
        self.owner = owner
        self._t = Transport(self.gateways, self.ssl_context, timeout)
        self._renewer = _Renewer(self)

    def __repr__(self) -> str:
        # a user:password in a URL is never shown
        return "<fencegate.Client %s>" % ",".join(
            _core.redact_url(g) for g in self.gateways)

    @property
    def gateway(self) -> str:
        """The gateway asked first: the last one that answered."""
        return self._t.current

    def close(self) -> None:
        """Stops the renewer (held leases are not released: do that
        first) and closes this thread's connections."""
        self._renewer.stop()
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any = None,
              lease: Optional[str] = None,
              extra: Optional[Dict[str, str]] = None,
              timeout: Optional[float] = None,
              deadline: Optional[float] = None) -> Answer:
        return self._t.call(method, path, body,
                            _core.headers_for(self.key, lease, extra),
                            timeout=timeout, deadline=deadline)

    # -- acquire -----------------------------------------------------------

    def acquire(self, name: str, *, ttl: float = 30.0,
                wait: Optional[float] = 0.0, shared: bool = False,
                owner: Optional[str] = None, value: Optional[str] = None,
                lock_delay: Optional[float] = None,
                max_hold: Optional[float] = None,
                on_lost: Optional[Callable[[Lease], None]] = None,
                raise_on_loss: bool = True) -> Lease:
        """Takes the lock, waiting up to `wait` seconds (0: try once; None:
        as long as it takes). Raises NotAcquired when not granted."""
        ttl_ms = _core.ms(ttl, "ttl", _core.TTL_MIN_MS, _core.TTL_MAX_MS)
        ld = None if lock_delay is None else _core.ms(
            lock_delay, "lock_delay", 0, _core.TTL_MAX_MS)
        if wait is not None and wait < 0:
            raise ValueError("wait must be 0 or more seconds, or None")
        if max_hold is not None and max_hold <= 0:
            raise ValueError("max_hold must be above 0 seconds")
        path = _core.lock_path(name)
        start = now()
        deadline = None if wait is None else start + wait
        backoff = 0.0
        while True:
            left = _core.WAIT_MAX_MS / 1000.0 if deadline is None else \
                max(0.0, deadline - now())
            chunk = min(_core.WAIT_MAX_MS, int(left * 1000))
            body = _core.acquire_body(ttl_ms, chunk, shared,
                                      owner if owner is not None
                                      else self.owner, value, ld)
            a = self._call("POST", path, body,
                           timeout=self.timeout + chunk / 1000.0)
            if a.status == 200:
                ls = self._granted(name, a, max_hold, on_lost,
                                   raise_on_loss)
                if ls is not None:
                    return ls
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
                # a wait that ended early (it should not): no spinning
                backoff = _core.next_backoff(backoff) \
                    if t - a.sent + 0.05 < chunk / 1000.0 else 0.0
            elif _core.transient(a.status) or (a.status == 429 and
                                               a.code == "too_many_waiters"):
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
                time.sleep(b)

    def _granted(self, name: str, a: Answer, max_hold: Optional[float],
                 on_lost: Optional[Callable[[Lease], None]],
                 raise_on_loss: bool) -> Optional[Lease]:
        lease = _core.grant_lease(a.json)
        try:
            g = _core.grant_fields(a.json)
        except FenceError:
            # a grant that cannot be read is still a grant: it is given
            # back with its lease, if it has one, before the error
            if lease is not None:
                self._call("DELETE", _core.lock_path(name), lease=lease)
            raise
        ls: Optional[Lease] = None
        try:
            ls = Lease(self, name, g, a.sent, a.arrived, max_hold, on_lost,
                       raise_on_loss)
            if now() - a.sent > ls.ttl_ms / 3000.0:
                # the answer took long: its lease may be mostly spent, so
                # it is renewed at once and timed from that renewal
                r = self._renew_call(ls, ls.ttl_ms, None)
                if r.status != 200:
                    if r.status != 410:
                        self._call("DELETE", _core.lock_path(name),
                                   lease=ls._lease)
                    return None
                self._renewed(ls, r, ls.ttl_ms)
            self._renewer.add(ls)
            return ls
        except BaseException:
            # an interrupt between the grant and its caller: give it back
            self._call("DELETE", _core.lock_path(name), lease=g["lease"])
            raise

    def lock(self, name: str, **kw: Any) -> "_Scope":
        """`with client.lock(name, ttl=..., wait=...) as lease:` takes the
        lock on entry (NotAcquired: the body never runs) and releases it
        on exit, raising LeaseLost if it was lost meanwhile (unless
        raise_on_loss=False). Takes acquire()'s arguments."""
        return _Scope(self, name, kw)

    # -- renewal and release -------------------------------------------

    def _renew_call(self, ls: Lease, ttl_ms: int,
                    value: Optional[str],
                    deadline: Optional[float] = None) -> Answer:
        body: Dict[str, Any] = {"lease": ls._lease, "ttl_ms": ttl_ms}
        if value is not None:
            body["value"] = value
        end = ls.deadline if deadline is None else min(deadline,
                                                       ls.deadline)
        return self._call("PATCH", ls._path, body, deadline=end)

    def _renewed(self, ls: Lease, a: Answer, ttl_ms: int,
                 raise_errors: bool = False) -> None:
        if ls._released and not raise_errors:
            # a renewal that crossed the release: its answer (a 410 once
            # the release got there first) says nothing of the hold
            return
        if a.status == 200:
            ttl = a.json.get("ttl_ms") if isinstance(a.json, dict) else None
            if isinstance(ttl, int) and ttl > 0:
                ttl_ms = ttl
            with ls._mu:
                # answers may cross: only a later send moves the end
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

    def _last_error(self, ls: Lease) -> str:
        last = ls._last
        return "; last error: " + last if last else ""

    def _release(self, ls: Lease, end: Optional[float] = None) -> None:
        """Gives the lease back, asking again until its end (or `end`)."""
        path = ls._path
        backoff = 0.0
        # after the lease's end there is nothing to give back, but one
        # try is made: the gateway's clock is the one that counts
        if end is None:
            end = max(ls.deadline, now() + self.timeout)
        while True:
            a = self._call("DELETE", path, lease=ls._lease, deadline=end)
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
            time.sleep(max(0.0, min(backoff, end - now())))

    # -- the rest of the API -----------------------------------------------

    def _ok(self, a: Answer, what: str) -> Dict[str, Any]:
        if 200 <= a.status < 300:
            return a.json if isinstance(a.json, dict) else {}
        raise a.failure(what)

    def inspect(self, name: str) -> Dict[str, Any]:
        """The lock's state (held, mode, token, holders, waiters, ttl_ms,
        delay_ms, value, owner)."""
        return self._ok(self._call("GET", _core.lock_path(name)),
                        "inspect '%s'" % name)

    def observe(self, name: str, *, wait: float,
                after: Optional[int] = None) -> Dict[str, Any]:
        """Inspect that waits up to `wait` seconds for a change of held or
        token (with `after`: until the lock is not held under it)."""
        w = _core.ms(wait, "wait", 0, _core.WAIT_MAX_MS)
        q = "?wait_ms=%d" % w
        if after is not None:
            q += "&after=%d" % int(after)
        return self._ok(self._call("GET", _core.lock_path(name) + q,
                                   timeout=self.timeout + w / 1000.0),
                        "observe '%s'" % name)

    def leader(self, name: str) -> Optional[str]:
        """The value of an election's lock while held, else None."""
        st = self.inspect(name)
        return st.get("value") if st.get("held") else None

    def campaign(self, name: str, value: str, *, ttl: float = 30.0,
                 wait: Optional[float] = None, **kw: Any) -> Lease:
        """Stands for election: a blocking acquire carrying `value`."""
        return self.acquire(name, ttl=ttl, wait=wait, value=value, **kw)

    def elect(self, name: str, value: str, **kw: Any) -> "_Scope":
        """`with client.elect(name, value) as lease:` leads for the scope;
        leaving it resigns."""
        kw.setdefault("wait", None)
        return _Scope(self, name, dict(kw, value=value))

    def ls(self, prefix: str = "", limit: int = 100
           ) -> Iterator[Dict[str, Any]]:
        """Every lock held, waited for or in lock-delay whose name starts
        with prefix, following the listing's cursor."""
        import urllib.parse
        cursor: Optional[str] = None
        while True:
            q = {"prefix": prefix, "limit": str(limit)}
            if cursor is not None:
                q["cursor"] = cursor
            page = self._ok(self._call(
                "GET", _core.API + "/locks?" + urllib.parse.urlencode(q)),
                "list '%s'" % prefix)
            for e in page.get("locks", []):
                yield e
            cursor = page.get("cursor")
            if not cursor:
                return

    def break_lock(self, name: str, token: int) -> None:
        """Ends the grant with this token, whoever holds it (admin)."""
        self._ok(self._call("DELETE", _core.lock_path(name),
                            extra={"Fence-Break": str(int(token))}),
                 "break '%s'" % name)

    def check_sequencer(self, sequencer: str) -> Dict[str, Any]:
        return self._ok(self._call("POST", _core.API + "/check",
                                   {"sequencer": sequencer}), "check")

    def health(self) -> Dict[str, Any]:
        a = self._call("GET", _core.API + "/health")
        if a.status in (200, 503) and isinstance(a.json, dict):
            return a.json
        raise a.failure("health")


class _Scope:
    """What `with client.lock(...)` enters: acquires on entry, releases
    on exit."""

    def __init__(self, client: Client, name: str, kw: Dict[str, Any]):
        self.client = client
        self.name = name
        self.kw = kw
        self.lease: Optional[Lease] = None

    def __enter__(self) -> Lease:
        self.lease = self.client.acquire(self.name, **self.kw)
        return self.lease

    def __exit__(self, et: Optional[Type[BaseException]],
                 ev: Optional[BaseException],
                 tb: Optional[types.TracebackType]) -> None:
        if self.lease is not None:
            self.lease.__exit__(et, ev, tb)
