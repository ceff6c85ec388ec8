"""fencegate - a client of fencegate's lock API: leased locks with fencing
tokens, renewed in the background, stamped on the caller's own requests.

    from fencegate import Client
    with Client("http://127.0.0.1:8080").lock("app/a.txt", ttl=10) as lease:
        session = lease.requests_session()
        session.put("http://127.0.0.1:8080/app/a.txt", data=b"hi")

The sync client needs the standard library only; `fencegate.aio` needs
httpx; the requests, httpx and boto3 hooks need those packages.
"""

from .client import Client, Lease
from .errors import (BadRequest, FenceError, ForgedToken, Forbidden,
                     LeaseLost, NotAcquired, StaleToken, SubtreeUnguarded,
                     TLSError, TokenRequired, TooManyFailures, Unauthorized,
                     Unavailable, WriteRefused, WrongLock, WrongMode,
                     error_for, raise_for_response)

__version__ = "0.1.0"

__all__ = [
    "Client", "Lease", "FenceError", "BadRequest", "NotAcquired",
    "LeaseLost", "Unauthorized", "Forbidden", "WriteRefused", "StaleToken",
    "TokenRequired", "ForgedToken", "WrongLock", "WrongMode",
    "SubtreeUnguarded", "TooManyFailures", "Unavailable", "TLSError",
    "error_for", "raise_for_response",
]
