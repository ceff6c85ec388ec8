"""_core.py - what the sync and the asyncio clients share: lock URLs,
request bodies, how an answer is classified, the retry and renewal
arithmetic.

Invariant: a lease's deadlines come from the gateway's answers alone, each
counted from the moment its request was sent on the monotonic clock; the
wall clock is never read.
"""

from __future__ import annotations

import ssl
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from .errors import FenceError, TLSError, Unavailable, error_for

API = "/_fence/v1"
WAIT_MAX_MS = 300_000          # the gateway's bound on one wait_ms
TTL_MIN_MS = 100
TTL_MAX_MS = 3_600_000
RENEW_MIN_INTERVAL = 0.05
BACKOFF_MIN = 0.25
BACKOFF_MAX = 5.0
DEFAULT_TIMEOUT = 10.0         # one call's bound, beyond any wait_ms
# the least one gateway is given of a call bounded by a deadline: below it
# even a healthy gateway could not answer
ATTEMPT_MIN = 0.1
# the largest lock API answer read (a list page of 1000 locks with their
# holders and waiters stays well below it)
MAX_ANSWER_BYTES = 16 << 20

now = time.monotonic


def lock_path(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError("a lock name is a non-empty string")
    return API + "/locks/" + urllib.parse.quote(name, safe="/~")


def ms(seconds: Optional[float], what: str, lo: int, hi: int) -> int:
    if seconds is None:
        raise ValueError("%s is needed" % what)
    v = int(round(seconds * 1000))
    if not lo <= v <= hi:
        raise ValueError("%s must be %g-%g seconds" % (what, lo / 1000,
                                                       hi / 1000))
    return v


def parse_gateways(gateways: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(gateways, str):
        gateways = gateways.split(",")
    out = [g.strip().rstrip("/") for g in gateways if g.strip()]
    if not out:
        raise ValueError("at least one gateway URL is needed")
    for g in out:
        u = urllib.parse.urlsplit(g)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("a gateway is an http:// or https:// URL")
    return out


def make_ssl_context(ca: Optional[str] = None, cert: Optional[str] = None,
                     cert_key: Optional[str] = None,
                     context: Optional[ssl.SSLContext] = None
                     ) -> Optional[ssl.SSLContext]:
    """An SSLContext verifying the gateway against `ca` (else the system's
    CAs) and presenting the client certificate `cert`/`cert_key`."""
    if context is not None:
        return context
    if ca is None and cert is None:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    if cert is not None:
        ctx.load_cert_chain(cert, cert_key)
    return ctx


def acquire_body(ttl_ms: int, wait_ms: int, shared: bool,
                 owner: Optional[str], value: Optional[str],
                 lock_delay_ms: Optional[int]) -> Dict[str, Any]:
    b: Dict[str, Any] = {"ttl_ms": ttl_ms, "wait_ms": wait_ms}
    if shared:
        b["mode"] = "shared"
    if owner is not None:
        b["owner"] = owner
    if value is not None:
        b["value"] = value
    if lock_delay_ms is not None:
        b["lock_delay_ms"] = lock_delay_ms
    return b


def transient(status: int) -> bool:
    """An answer worth asking again (another gateway, or later)."""
    return status >= 500 or status == 0


def definite_loss(status: int) -> bool:
    """A renewal answer that says the lease is gone for good: asking again
    cannot change it. The same set as the Go and C clients; a 404 (a proxy
    routing the lock API elsewhere) is asked again like any other answer
    outside it."""
    return status in (400, 403, 409, 410)


def attempt_timeout(timeout: float, deadline: Optional[float],
                    left_to_try: int) -> float:
    """How long one gateway is given of a call: `timeout`, and with a
    deadline an even share of what is left among the gateways still to
    try (never under ATTEMPT_MIN, never past the deadline), so that one
    gateway that accepts and never answers leaves the others time.
    0 or less: no time is left."""
    if deadline is None:
        return timeout
    left = deadline - now()
    if left <= 0.001:
        return 0.0
    share = max(ATTEMPT_MIN, left / max(1, left_to_try))
    return min(timeout, share, left)


def redact_url(url: str) -> str:
    """A gateway URL as shown: without any user:password in it."""
    u = urllib.parse.urlsplit(url)
    if "@" not in u.netloc:
        return url
    return urllib.parse.urlunsplit(
        (u.scheme, u.netloc.rpartition("@")[2], u.path, u.query,
         u.fragment))


def next_backoff(b: float) -> float:
    return BACKOFF_MIN if b < BACKOFF_MIN else min(b * 2, BACKOFF_MAX)


def grant_lease(j: Any) -> Optional[str]:
    """The lease string of a 200 to acquire, if there is one, whether or
    not the rest of the grant can be read: a grant that cannot be used is
    given back with it."""
    if isinstance(j, dict):
        v = j.get("lease")
        if isinstance(v, str) and v:
            return v
    return None


def grant_fields(j: Any) -> Dict[str, Any]:
    """The grant of an acquire's 200, checked."""
    if not isinstance(j, dict):
        raise FenceError("the gateway's answer to acquire is not a grant")
    for k, t in (("lease", str), ("token", int), ("sequencer", str),
                 ("ttl_ms", int), ("mode", str)):
        if not isinstance(j.get(k), t):
            raise FenceError("the gateway's answer to acquire is not a "
                             "grant")
    return j


class Answer:
    """One answer: its status, JSON body (or None), when its request was
    sent and when it arrived (monotonic seconds: it is made as it
    arrives). status 0: no answer (`error` says why; `tls` when the TLS
    handshake with that gateway failed)."""

    __slots__ = ("status", "json", "sent", "arrived", "error", "gateway",
                 "raw", "tls")

    def __init__(self, status: int, body: Any, sent: float,
                 gateway: str = "", error: Optional[BaseException] = None,
                 raw: bytes = b"", tls: bool = False) -> None:
        self.status = status
        self.json = body
        self.sent = sent
        self.arrived = now()
        self.error = error
        self.gateway = gateway
        self.raw = raw
        self.tls = tls

    @property
    def code(self) -> Optional[str]:
        if isinstance(self.json, dict):
            c = self.json.get("error")
            return c if isinstance(c, str) else None
        return None

    def failure(self, what: str) -> FenceError:
        if self.status == 0:
            return Unavailable("%s: no gateway answered (%s)"
                               % (what, describe(self.error)))
        return error_for(self.status, self.json, what)


def tls_failure(last: Answer, n: int) -> TLSError:
    """The error of a call every one of whose n gateways failed TLS."""
    msg = last.error.message if isinstance(last.error, TLSError) else \
        "TLS with the gateway failed"
    if n > 1:
        msg = "TLS failed with each of the %d gateways; the last: %s" % (
            n, msg)
    return TLSError(msg)


def describe(e: Optional[BaseException]) -> str:
    """An exception as shown in a message: its type and text, which never
    hold a request's headers."""
    if e is None:
        return "no answer"
    t = str(e) or type(e).__name__
    return t if len(t) < 200 else t[:200]


def renewal_interval(ttl_ms: int) -> float:
    return max(ttl_ms / 3000.0, RENEW_MIN_INTERVAL)


def headers_for(key: Optional[str], lease: Optional[str] = None,
                extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    h = {"Accept": "application/json"}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    if lease is not None:
        h["Fence-Lease"] = lease
    if extra:
        h.update(extra)
    return h
