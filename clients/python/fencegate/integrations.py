"""integrations.py - a lease's sequencer stamped on the caller's own
requests: a requests auth hook, an httpx.Auth, and botocore credentials
whose session token is the sequencer (S3 mode, docs/s3.md).

Invariant: every stamp is preceded by the lease's check(), so a holder
whose lease ended gets LeaseLost before the request leaves, never a
request with a sequencer it knows to be dead. requests, httpx and boto3
are imported only when their hook is made.
"""

from __future__ import annotations

from typing import Any, Generator, List, Optional, Protocol, Sequence


class _Checked(Protocol):
    sequencer: str

    def check(self) -> None: ...


def _session_token(leases: Sequence[_Checked]) -> str:
    """What `fencectl lock --s3` puts in AWS_SESSION_TOKEN: the sequencer,
    or several comma-separated for a request spanning locks."""
    for ls in leases:
        ls.check()
    return ",".join(ls.sequencer for ls in leases)


def _stamp(headers: Any, leases: Sequence[_Checked],
           key: Optional[str]) -> None:
    if not leases:
        raise ValueError("no lease to stamp with")
    for ls in leases:
        ls.check()
    # one Fencing-Token: the path's lock; a second lease fences a COPY's
    # or MOVE's Destination
    headers["Fencing-Token"] = leases[0].sequencer
    if len(leases) > 1:
        headers["Destination-Fencing-Token"] = leases[1].sequencer
    if key is not None:
        headers["Fence-Authorization"] = "Bearer " + key


try:
    import requests.auth as _ra

    class RequestsFence(_ra.AuthBase):
        """requests auth: `session.auth = lease.requests_auth()`."""

        def __init__(self, leases: Sequence[_Checked],
                     key: Optional[str] = None) -> None:
            self.leases: List[_Checked] = list(leases)
            self.key = key

        def __call__(self, r: Any) -> Any:
            _stamp(r.headers, self.leases, self.key)
            return r
except ImportError:   # requests is an optional extra
    pass


try:
    import httpx as _httpx

    class HttpxFence(_httpx.Auth):
        """httpx auth: `httpx.Client(auth=lease.httpx_auth())`, or
        AsyncClient alike."""

        def __init__(self, leases: Sequence[_Checked],
                     key: Optional[str] = None) -> None:
            self.leases: List[_Checked] = list(leases)
            self.key = key

        def auth_flow(self, request: Any) -> Generator[Any, Any, None]:
            _stamp(request.headers, self.leases, self.key)
            yield request
except ImportError:   # httpx is an optional extra
    pass


try:
    from botocore.credentials import (Credentials as _BotoCredentials,
                                      CredentialProvider as _BotoProvider,
                                      ReadOnlyCredentials as _ReadOnly)

    class SequencerCredentials(_BotoCredentials):
        """botocore credentials whose session token is the current
        sequencer of the leases given: botocore signs each request with
        get_frozen_credentials(), which checks the leases first."""

        def __init__(self, access_key: str, secret_key: str,
                     leases: Sequence[_Checked]) -> None:
            super().__init__(access_key, secret_key, None,
                             method="fencegate-lease")
            self._leases: List[_Checked] = list(leases)

        @property
        def token(self) -> str:
            return _session_token(self._leases)

        @token.setter
        def token(self, v: Any) -> None:
            pass   # botocore's constructor sets it; the leases decide

        def get_frozen_credentials(self) -> Any:
            return _ReadOnly(self.access_key, self.secret_key,
                             _session_token(self._leases))

    class SequencerProvider(_BotoProvider):
        """A credential provider for botocore's chain, ahead of the
        environment's."""
        METHOD = "fencegate-lease"
        CANONICAL_NAME = "fencegate-lease"

        def __init__(self, creds: SequencerCredentials) -> None:
            super().__init__()
            self._creds = creds

        def load(self) -> SequencerCredentials:
            return self._creds

    def boto3_session(access_key: str, secret_key: str,
                      leases: Sequence[_Checked],
                      region_name: Optional[str] = None) -> Any:
        """A boto3.Session whose clients sign with access_key/secret_key
        and send the leases' sequencers as their session token."""
        import boto3
        import botocore.session
        bs = botocore.session.Session()
        resolver = bs.get_component("credential_provider")
        resolver.insert_before("env", SequencerProvider(
            SequencerCredentials(access_key, secret_key, leases)))
        return boto3.session.Session(botocore_session=bs,
                                     region_name=region_name)
except ImportError:   # boto3 is an optional extra
    pass
