"""The events of a run's typed state (legato.contracts): loaded, committed, rejected.

Public through `legato.events`.
"""

from __future__ import annotations

from typing import Literal

from legato._values import value_class
from legato.messages import (
    JsonValue,
)

__all__ = [
    "StateChange",
    "StateCommitted",
    "StateLoaded",
    "StateRejected",
]


@value_class
class StateChange:
    """One key's change in a commit, as JSON values."""

    key: str
    old: JsonValue
    new: JsonValue


@value_class
class StateLoaded:
    """The run's verified state at its start (see `legato.contracts`)."""

    version: int
    values: dict[str, JsonValue]
    """Every declared key's value, as JSON."""
    schema_name: str = "State"
    """The name of the state's declared type."""
    kind: Literal["state_loaded"] = "state_loaded"


@value_class
class StateCommitted:
    """A verified change of the state: one new version, from one tool call (or the application)."""

    version: int
    """The version this commit created."""
    changes: tuple[StateChange, ...]
    tool: str | None = None
    """The tool whose call made the change; None for `State.commit` by application code."""
    call_id: str | None = None
    checks: tuple[str, ...] = ()
    """The predicates that passed before the commit, preconditions first."""
    rechecked: bool = False
    """An earlier commit of the same step changed keys this call reads; the checks ran again."""
    kind: Literal["state_committed"] = "state_committed"


@value_class
class StateRejected:
    """A contract refused a call (`pre`), its result (`post`, `recheck`) or its writes (`write`)."""

    tool: str
    call_id: str | None
    stage: Literal["pre", "post", "recheck", "write"]
    predicate: str | None
    """The predicate that decided, when one did."""
    message: str
    """What the model is told."""
    evidence: dict[str, JsonValue]
    """The values the predicate looked at: state keys, and arguments as `args.<name>`."""
    version: int
    """The state version the check ran against (nothing was committed)."""
    halted: bool = False
    """The contract stopped the run (`Halt`) instead of rejecting the call."""
    kind: Literal["state_rejected"] = "state_rejected"
