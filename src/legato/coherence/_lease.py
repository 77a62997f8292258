"""Leases with monotonic fencing tokens: a claim on a resource for a long edit.

A lease is granted for a time to one holder and carries a fencing token, a number that only
ever grows. A write to a leased resource must present the token of the lease now in force;
a token that has expired, or been superseded by a newer lease, is refused, so a holder that
stalled past its lease cannot overwrite the work of the next holder.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from legato.exceptions import LeaseRefused

__all__ = ["Lease", "LeaseTable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A claim on one resource until `expires_at`."""

    resource: str
    holder: str
    token: int
    """The fencing token: larger than every token granted before it."""
    expires_at: float


class LeaseTable:
    """Grants leases and checks fencing tokens; `clock` is injectable for tests."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, enforce: bool = True
    ) -> None:
        self._clock = clock
        self._tokens = itertools.count(1)
        self._leases: dict[str, Lease] = {}
        self._highest: dict[str, int] = {}
        self.enforce = enforce

    def acquire(self, resource: str, holder: str, *, ttl: float) -> Lease:
        """A new lease, unless another holder's lease is still in force."""
        now = self._clock()
        current = self._leases.get(resource)
        if current is not None and current.expires_at > now and current.holder != holder:
            msg = (
                f"{resource!r} is leased by {current.holder} for {current.expires_at - now:.1f} "
                "more seconds; wait or work on something else"
            )
            raise LeaseRefused(resource, msg)
        lease = Lease(
            resource=resource, holder=holder, token=next(self._tokens), expires_at=now + ttl
        )
        self._leases[resource] = lease
        return lease

    def release(self, lease: Lease) -> None:
        """End a lease early (only the lease in force can be released)."""
        if self._leases.get(lease.resource) == lease:
            del self._leases[lease.resource]

    def current(self, resource: str) -> Lease | None:
        """The lease in force on `resource`, if any."""
        lease = self._leases.get(resource)
        if lease is None or lease.expires_at <= self._clock():
            return None
        return lease

    def check(self, resource: str, token: int | None) -> None:
        """Raise `LeaseRefused` unless a write with `token` may go ahead now."""
        if not self.enforce:
            return
        if token is None:
            active = self.current(resource)
            if active is not None:
                msg = f"{resource!r} is leased by {active.holder}; a write needs that lease's fencing token"
                raise LeaseRefused(resource, msg)
            return
        granted = self._leases.get(resource)
        if token < self._highest.get(resource, 0) or granted is None or granted.token != token:
            msg = f"fencing token {token} for {resource!r} is not the lease in force (superseded or released); claim it again"
            raise LeaseRefused(resource, msg)
        if granted.expires_at <= self._clock():
            msg = (
                f"the lease with fencing token {token} on {resource!r} has expired; claim it again"
            )
            raise LeaseRefused(resource, msg)
        self._highest[resource] = token
