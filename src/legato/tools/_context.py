"""`RunContext`: what a tool may know about the run calling it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic

from typing_extensions import TypeVar

from legato.messages import Message, Usage
from legato.tools._contract import StateAccess

__all__ = ["RunContext"]

DepsT = TypeVar("DepsT", default=None)


@dataclass(frozen=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """Handed to a tool whose signature has a parameter typed `RunContext[...]`.

    The parameter is found by its type, never by its name, and never appears in the
    schema the model sees.
    """

    deps: DepsT
    """The dependencies passed to `agent.run(..., deps=...)`."""
    run_id: str
    """The id of the run making the call."""
    step: int = 0
    """The model step that issued the call (1 for the first model response)."""
    tool_call_id: str | None = None
    """The id of the call being executed."""
    tool_name: str | None = None
    messages: Sequence[Message] = field(default_factory=lambda: ())
    """The conversation so far, read-only."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the run so far."""
    retry: int = 0
    """How many times this tool has already failed in this run."""
    state: StateAccess | None = None
    """The run's verified state: a draft the tool may write when it has a contract, a
    read-only snapshot otherwise; None when the agent has no state."""
