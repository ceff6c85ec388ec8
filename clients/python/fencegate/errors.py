"""errors.py - one exception class per error code of the lock API and of
the fencing proxy (docs/api.md, "Error codes").

Invariant: every failure the library raises is a FenceError whose `code`
is the gateway's stable snake_case code (or one of the library's own:
`lease_lost`, `not_acquired`, `unavailable`), and no message it builds
ever holds a lease, a key or a sequencer.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type


class FenceError(Exception):
    """Base of every error. `status` is the HTTP status (0 when no answer
    came), `code` the error code, `body` the JSON error body if any."""

    code: str = "error"

    def __init__(self, message: str = "", *, status: int = 0,
                 code: Optional[str] = None,
                 body: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code
        self.body: Dict[str, Any] = dict(body or {})

    def __str__(self) -> str:
        if self.status:
            return "%s (%d %s)" % (self.message, self.status, self.code)
        return "%s (%s)" % (self.message, self.code)


class BadRequest(FenceError):
    """400/413/431: the call itself is invalid (bad_request, bad_lock_name,
    bad_path, bad_destination, malformed_token, payload_too_large)."""
    code = "bad_request"


class NotAcquired(FenceError):
    """The lock was not granted within the wait (409 lock_held, 429
    too_many_waiters)."""
    code = "not_acquired"

    @property
    def retry_after(self) -> Optional[float]:
        """Seconds of lock-delay left, when lock-delay alone refused."""
        v = self.body.get("retry_after_ms")
        return v / 1000.0 if isinstance(v, int) else None


class LeaseLost(FenceError):
    """The lease no longer holds the lock: 410 lease_expired, a renewal
    that could not get through before the lease's end, a break, max_hold."""
    code = "lease_lost"


class Unauthorized(FenceError):
    """401 unauthenticated: no known key or certificate."""
    code = "unauthenticated"


class Forbidden(FenceError):
    """403 forbidden: the principal lacks the right (or the lease is
    another principal's)."""
    code = "forbidden"


class WriteRefused(FenceError):
    """Base of the fencing proxy's refusals of a write."""


class StaleToken(WriteRefused):
    """409 stale_token: a newer grant exists, or this grant ended."""
    code = "stale_token"

    @property
    def token(self) -> Optional[int]:
        return self.body.get("token")

    @property
    def current(self) -> Optional[int]:
        return self.body.get("current")


class TokenRequired(WriteRefused):
    """428 token_required: a write without the sequencer it needs."""
    code = "token_required"


class ForgedToken(WriteRefused):
    """403 forged_token."""
    code = "forged_token"


class WrongLock(WriteRefused):
    """403 wrong_lock: the sequencer is another lock's."""
    code = "wrong_lock"


class WrongMode(WriteRefused):
    """403 wrong_mode: a shared grant cannot write."""
    code = "wrong_mode"


class SubtreeUnguarded(WriteRefused):
    """403 subtree_unguarded."""
    code = "subtree_unguarded"


class TooManyFailures(FenceError):
    """429 too_many_failures: too many unknown keys from this address."""
    code = "too_many_failures"


class Unavailable(FenceError):
    """No gateway answered, or every one answered 5xx
    (lock_store_unavailable, shutting_down, upstream_unavailable, ...)."""
    code = "unavailable"


class TLSError(FenceError):
    """The TLS handshake failed (certificate not verified, refused)."""
    code = "tls"


_BY_CODE: Dict[str, Type[FenceError]] = {
    "bad_request": BadRequest, "bad_lock_name": BadRequest,
    "bad_path": BadRequest, "bad_destination": BadRequest,
    "malformed_token": BadRequest, "payload_too_large": BadRequest,
    "lock_held": NotAcquired, "too_many_waiters": NotAcquired,
    "lease_expired": LeaseLost,
    "unauthenticated": Unauthorized,
    "forbidden": Forbidden,
    "stale_token": StaleToken, "token_required": TokenRequired,
    "forged_token": ForgedToken, "wrong_lock": WrongLock,
    "wrong_mode": WrongMode, "subtree_unguarded": SubtreeUnguarded,
    "too_many_failures": TooManyFailures,
}


def error_for(status: int, body: Any, what: str = "") -> FenceError:
    """The exception for an error answer (status, parsed JSON body or raw
    bytes). `what` names the call, for the message."""
    if isinstance(body, (bytes, bytearray)):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    if not isinstance(body, dict):
        body = {}
    code = body.get("error") if isinstance(body.get("error"), str) else None
    msg = body.get("message") if isinstance(body.get("message"), str) else ""
    text = "%s: %s" % (what, msg) if what and msg else (what or msg or
                                                        "HTTP %d" % status)
    cls = _BY_CODE.get(code or "")
    if cls is None:
        if status >= 500:
            cls = Unavailable
        elif status == 401:
            cls = Unauthorized
        elif status == 403:
            cls = Forbidden
        elif status in (400, 413, 431):
            cls = BadRequest
        else:
            cls = FenceError
    return cls(text, status=status, code=code or cls.code, body=body)


def raise_for_response(status: int, body: Any, what: str = "") -> None:
    """Raises the typed error of a proxied answer (e.g. a requests or
    httpx response's status and content) unless it is a 1xx-3xx."""
    if status >= 400:
        raise error_for(status, body, what)
