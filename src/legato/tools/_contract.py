"""What the tools layer knows of contracts and state: two small protocols and a plain value.

The contracts themselves (evaluation, outcomes, the versioned state) live in the policy
layer, `legato.contracts`, which implements these protocols. Tools only carry a contract
and hand a tool function the state view the run gives it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Conditions", "StateAccess", "ToolContract", "conditions"]

Predicate = Callable[..., object]
"""A precondition `(state, args)` or a postcondition `(old, new, args, result)`."""


@runtime_checkable
class ToolContract(Protocol):
    """A tool's pre- and postconditions over the run's state (`legato.contracts.Contract`)."""

    @property
    def requires(self) -> Sequence[Predicate]:
        """Preconditions: `(state, args)`; all must allow before the call runs."""
        ...

    @property
    def ensures(self) -> Sequence[Predicate]:
        """Postconditions: `(old, new, args, result)`; all must allow before the commit."""
        ...

    @property
    def reads(self) -> frozenset[str] | None:
        """The state keys the tool and its predicates read; None means any."""
        ...

    @property
    def writes(self) -> frozenset[str]:
        """The state keys the tool may change; writing any other key fails the call."""
        ...


@runtime_checkable
class StateAccess(Protocol):
    """The state as a tool sees it in `RunContext.state`: a draft or a read-only snapshot."""

    @property
    def version(self) -> int:
        """The committed version this view starts from."""
        ...

    def __getitem__(self, key: str) -> Any: ...

    def __setitem__(self, key: str, value: Any) -> None: ...

    def get(self, key: str, default: Any = None) -> Any:
        """The key's value (a private copy), or `default` when it is unset (None)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Conditions:
    """The contract `@tool(requires=..., ensures=...)` builds: plain data, checked by the run."""

    requires: tuple[Predicate, ...] = ()
    ensures: tuple[Predicate, ...] = ()
    reads: frozenset[str] | None = None
    writes: frozenset[str] = field(default_factory=lambda: frozenset[str]())


def _tuple(items: Predicate | Iterable[Predicate] | None) -> tuple[Predicate, ...]:
    if items is None:
        return ()
    if callable(items):
        return (items,)
    return tuple(items)


def conditions(
    *,
    requires: Predicate | Iterable[Predicate] | None = None,
    ensures: Predicate | Iterable[Predicate] | None = None,
    reads: Iterable[str] | None = None,
    writes: Iterable[str] | None = None,
) -> Conditions | None:
    """A `Conditions` value, or None when nothing was given."""
    if requires is None and ensures is None and reads is None and writes is None:
        return None
    return Conditions(
        requires=_tuple(requires),
        ensures=_tuple(ensures),
        reads=frozenset(reads) if reads is not None else None,
        writes=frozenset(writes or ()),
    )
