"""The events of sub-agents (legato.spawn): where a child sits, its start and end, its slice.

Public through `legato.events`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal, TypeAlias

from legato._values import value_class
from legato.messages import (
    JsonValue,
    Usage,
)

__all__ = [
    "ComplexityMetrics",
    "ContextSliced",
    "Lineage",
    "SliceEntry",
    "SpawnDecided",
    "SpawnFinished",
    "SpawnOutcome",
    "SpawnStarted",
]


@value_class
class Lineage:
    """Where a child run sits in the tree of runs."""

    run_id: str
    """The child's run id."""
    parent_run_id: str
    parent_step: int
    parent_call_id: str | None
    """The parent's tool call that started the child."""
    agent: str
    depth: int = 1
    """1 for a child of the root run, 2 for a grandchild, ..."""


@value_class
class SpawnStarted:
    """This run started a child run (or resumed one from the child's journal)."""

    lineage: Lineage
    task: str
    """The task the child was given."""
    tools: tuple[str, ...] = ()
    """The tools granted to the child (a subset of this run's)."""
    skills: tuple[str, ...] = ()
    """The skills granted to the child."""
    max_steps: int | None = None
    """The child's step allowance (its share of this run's budget)."""
    max_tokens: int | None = None
    """The child's token allowance, when one was set."""
    background: bool = False
    """The parent did not wait for the child in the call that started it."""
    resumed: bool = False
    """The child continues from its journal instead of starting afresh."""
    kind: Literal["spawn_started"] = "spawn_started"


SpawnOutcome: TypeAlias = Literal["ok", "error", "timeout", "budget", "cancelled", "parked"]
"""How a child run ended: `budget` means its budget share could not pay for its next model
call; `cancelled` means this run stopped (finished, failed, parked or was cancelled) while
the child was still running; `parked` means the child stopped for an approval decision
(its journal ends with `Parked`), which parks this run too. A cancelled or parked child's
own journal is left where it stopped, so resuming this run resumes the child, and its
next `SpawnFinished` supersedes this one."""


@value_class
class SpawnFinished:
    """A child run of this run ended."""

    lineage: Lineage
    outcome: SpawnOutcome
    output: JsonValue = None
    """The child's final output in JSON form, when it finished."""
    error: str | None = None
    """Why the child did not finish, when it did not."""
    usage: Usage = field(default_factory=Usage)
    """The child's usage including its own children's (the whole subtree)."""
    steps: int = 0
    """The child's own model steps."""
    tree_steps: int | None = None
    """Model steps of the child and all its descendants: what its step share was charged
    (None in journals written before this field; read `steps` then)."""
    from_journal: bool = False
    """The result was read from the child's finished journal; nothing was re-run."""
    kind: Literal["spawn_finished"] = "spawn_finished"


@value_class
class SliceEntry:
    """One item of a parent's context handed to a child, and why."""

    id: str
    """The item: `m3` (message 3), `call:<id>` (a tool call with its result), `memory:<id>`,
    `state:<key>`."""
    tokens: int
    score: float
    reasons: tuple[str, ...] = ()


@value_class
class ContextSliced:
    """The slice of this run's context that a child received."""

    child_run_id: str
    mode: Literal["selective", "full"]
    entries: tuple[SliceEntry, ...]
    """What was passed, in the order the child sees it."""
    tokens_passed: int
    tokens_available: int
    """Tokens of everything that could have been passed (the full copy)."""
    token_budget: int | None = None
    dropped: tuple[str, ...] = ()
    """Relevant items left out because the budget was spent."""
    kind: Literal["context_sliced"] = "context_sliced"


@value_class
class ComplexityMetrics:
    """What the runtime measured about a run, for spawn policies."""

    step: int = 0
    context_tokens: int = 0
    """Estimated tokens of the conversation so far."""
    context_window: int | None = None
    pending_todos: int = 0
    consecutive_failures: int = 0
    """Tool calls that failed in a row, most recent last."""
    resources_touched: int = 0
    """Distinct files and state keys named in tool call arguments."""
    steps_without_progress: int = 0
    """Steps since a todo item was last completed (or since the start)."""

    @property
    def context_fill(self) -> float | None:
        """Context tokens in use as a fraction of the window, when the window is known."""
        if not self.context_window:
            return None
        return self.context_tokens / self.context_window


@value_class
class SpawnDecided:
    """A spawn policy looked at the run's metrics and decided."""

    policy: str
    spawn: bool
    reason: str
    metrics: ComplexityMetrics
    kind: Literal["spawn_decided"] = "spawn_decided"
