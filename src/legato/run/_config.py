"""What a run is given and how its progress is cut: `RunConfig`, `Unit`, the run's owner.

Values only: the parts of the loop (`_loop`, `_plan`, `_ask`, `_act`, `_close`) read them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from legato._values import value_class
from legato.contracts import State, StateOptions
from legato.models import Model, ModelSettings
from legato.run._output import OutputSchema
from legato.run._recorder import JournalSink
from legato.tools import ToolSource

if TYPE_CHECKING:
    from legato.approvals import ApprovalPolicy
    from legato.budgets import Budget
    from legato.context import ContextPolicy
    from legato.effects import EffectGate
    from legato.security import Hook
    from legato.store import SessionStore

__all__ = ["RunConfig", "Unit", "default_owner", "owner_alive"]

OutputT = TypeVar("OutputT", default=str)


@dataclass(frozen=True, kw_only=True)
class RunConfig(Generic[OutputT]):
    """Everything a run needs, resolved from the agent and the call."""

    agent_name: str
    model: Model
    instructions: str | None
    tool_sources: Sequence[ToolSource]
    output: OutputSchema[OutputT]
    settings: ModelSettings = field(default_factory=ModelSettings)
    max_steps: int = 50
    output_retries: int = 1
    unknown_tool_retries: int = 1
    tool_timeout: float | None = None
    deps: Any = None
    state: State[Any] | None = None
    """The verified state the run starts from (the run works on a fork of it)."""
    state_options: StateOptions | None = None
    context: ContextPolicy | None = None
    """When and how to compact the conversation sent to the model (None: never)."""
    approvals: ApprovalPolicy | None = None
    budget: Budget | None = None
    hooks: Sequence[Hook] = ()
    store: JournalSink | None = None
    """Where the journal is written ahead (a `legato.store.RunStore`; None: memory only).
    Children's journals go to the same store."""
    session: str | None = None
    """The stored conversation this run is a turn of."""
    sessions: SessionStore | None = None
    """Where that conversation is kept; it gets the run's messages when the run finishes."""
    carry_context: bool = True
    """Save the run's latest compacted view with its session turn, for the next run."""
    parent_gate: EffectGate | None = None
    """A child run's parent's gate: the child's shares its hold (see `legato.spawn`)."""


@value_class
class Unit:
    """One unit of a run's progress, as `RunDriver.next_unit` plans it."""

    kind: Literal["model", "tool", "tools", "close", "done"]
    """`tools` (never planned, asked for): all the step's unfinished calls, run
    concurrently under the gate as `agent.run` runs them, and the step's close."""
    step: int = 0
    """The step the unit belongs to."""
    call_id: str | None = None
    """The call a `tool` unit runs."""


def default_owner() -> str:
    """Who runs a run, as recorded in `RunStarted` and `RunResumed`: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process `owner` names is alive.

    None when it cannot be told: another host, or an owner in another form.
    """
    if owner is None:
        return None
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    if int(pid) == os.getpid():
        return False  # this process: the run is not being driven elsewhere
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
