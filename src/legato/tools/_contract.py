"""What the tools layer knows of contracts and state: two small protocols and a plain value.

The contracts themselves (evaluation, outcomes, the versioned state) live in the policy
layer, `legato.contracts`, which implements these protocols. Tools only carry a contract
and hand a tool function the state view the run gives it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol, TypeVar, runtime_checkable

from legato._values import value_class
from legato.exceptions import ToolDefinitionError

__all__ = [
    "Conditions",
    "Postcondition",
    "Precondition",
    "StateAccess",
    "ToolContract",
    "check_writes",
    "conditions",
]

Precondition = Callable[[Any, Mapping[str, Any]], object]
"""A check before the call, over `(state, args)`."""
Postcondition = Callable[[Any, Any, Mapping[str, Any], Any], object]
"""A check after the call, over `(old, new, args, result)`."""
Predicate = Callable[..., object]
"""A precondition or a postcondition."""


@runtime_checkable
class ToolContract(Protocol):
    """A tool's pre- and postconditions over the run's state (`legato.contracts.Contract`)."""

    @property
    def requires(self) -> Sequence[Precondition]:
        """Preconditions: `(state, args)`; all must allow before the call runs."""
        ...

    @property
    def ensures(self) -> Sequence[Postcondition]:
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


@value_class
class Conditions:
    """The contract `@tool(requires=..., ensures=...)` builds: plain data, checked by the run."""

    requires: tuple[Precondition, ...] = ()
    ensures: tuple[Postcondition, ...] = ()
    reads: frozenset[str] | None = None
    writes: frozenset[str] = field(default_factory=lambda: frozenset[str]())
    unchecked_writes: bool = False
    """Commit writes without a postcondition (an explicit opt-in; see `check_writes`)."""


P = TypeVar("P", Precondition, Postcondition)


def _tuple(items: P | Iterable[P] | None) -> tuple[P, ...]:
    if items is None:
        return ()
    if callable(items):
        return (items,)
    return tuple(items)


def conditions(
    *,
    requires: Precondition | Iterable[Precondition] | None = None,
    ensures: Postcondition | Iterable[Postcondition] | None = None,
    reads: Iterable[str] | None = None,
    writes: Iterable[str] | None = None,
    unchecked_writes: bool = False,
) -> Conditions | None:
    """A `Conditions` value, or None when nothing was given.

    Raises:
        ToolDefinitionError: `writes` without `ensures` or `unchecked_writes=True`.
    """
    if (
        requires is None
        and ensures is None
        and reads is None
        and writes is None
        and not unchecked_writes
    ):
        return None
    spec = Conditions(
        requires=_tuple(requires),
        ensures=_tuple(ensures),
        reads=frozenset(reads) if reads is not None else None,
        writes=frozenset(writes or ()),
        unchecked_writes=unchecked_writes,
    )
    check_writes(spec)
    return spec


def check_writes(spec: ToolContract, *, tool: str | None = None) -> None:
    """Refuse a contract that writes state keys with nothing to check the written values.

    Without a postcondition any value of the right type would be committed as verified
    (a balance of -1,000,000); such a tool must say `unchecked_writes=True`.

    Raises:
        ToolDefinitionError: writes without ensures and without `unchecked_writes=True`.
    """
    unchecked = bool(getattr(spec, "unchecked_writes", False))
    writes = sorted(spec.writes)
    whose = f"tool {tool!r}: " if tool else ""
    if writes and not spec.ensures and not unchecked:
        msg = (
            f"{whose}writes={writes} without ensures=: nothing would check the values it "
            "commits. Add a postcondition (e.g. ensures=at_least(...)), or pass "
            "unchecked_writes=True to commit any value of the declared type"
        )
        raise ToolDefinitionError(msg)
    if unchecked and not writes:
        msg = f"{whose}unchecked_writes=True without writes=: the tool writes nothing"
        raise ToolDefinitionError(msg)
