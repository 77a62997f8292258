"""Adaptive spawning: the metrics the runtime measures and the policies that read them.

`measure` computes `ComplexityMetrics` from the conversation and the run's todo list.
A `SpawnPolicy` turns them into a `SpawnDecision`. `NeverSpawn` is the static baseline;
`ThresholdPolicy` says "spawn" when any metric crosses its threshold. Every decision is
journaled (`SpawnDecided`) with the metrics behind it; what a positive decision does is
the spawn toolset's business (see `SpawnToolset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from legato.events import ComplexityMetrics
from legato.messages import Message
from legato.spawn._slice import estimate_tokens

__all__ = [
    "NeverSpawn",
    "SpawnDecision",
    "SpawnPolicy",
    "ThresholdPolicy",
    "TodoItem",
    "TodoList",
    "measure",
]

_RESOURCE_KEYS = frozenset(
    {"path", "paths", "file", "files", "filename", "file_path", "key", "keys"}
)


@dataclass(slots=True, kw_only=True)
class TodoItem:
    """One entry of a run's todo list."""

    number: int
    text: str
    done: bool = False
    child: str | None = None
    """The child run working on it, when delegated."""


@dataclass(slots=True, kw_only=True)
class TodoList:
    """A run's todo list (the `todo` tool edits it)."""

    items: list[TodoItem] = field(default_factory=lambda: [])
    last_progress_step: int = 0
    """The step at which an item was last completed."""

    def add(self, texts: Sequence[str]) -> None:
        """Append items."""
        for text in texts:
            self.items.append(TodoItem(number=len(self.items) + 1, text=text))

    def complete(self, numbers: Sequence[int], *, step: int) -> list[int]:
        """Mark items done; returns the numbers that do not exist."""
        unknown: list[int] = []
        for n in numbers:
            if 1 <= n <= len(self.items):
                self.items[n - 1].done = True
                self.last_progress_step = step
            else:
                unknown.append(n)
        return unknown

    @property
    def pending(self) -> list[TodoItem]:
        """Items neither done nor delegated."""
        return [i for i in self.items if not i.done and i.child is None]

    def render(self) -> str:
        """The list as text for the model."""
        if not self.items:
            return "The todo list is empty."
        lines: list[str] = []
        for item in self.items:
            mark = "x" if item.done else (f"-> child {item.child}" if item.child else " ")
            lines.append(f"{item.number}. [{mark}] {item.text}")
        return "\n".join(lines)


def _consecutive_failures(messages: Sequence[Message]) -> int:
    count = 0
    for message in reversed(messages):
        if message.role != "tool":
            continue
        for result in reversed(message.tool_results):
            if not result.is_error:
                return count
            count += 1
    return count


def _resources(messages: Sequence[Message]) -> int:
    seen: set[str] = set()
    for message in messages:
        for call in message.tool_calls:
            args = call.arguments
            if not isinstance(args, dict):
                continue
            for key, value in args.items():
                if key not in _RESOURCE_KEYS:
                    continue
                values = value if isinstance(value, list) else [value]
                seen.update(str(v) for v in values if isinstance(v, str | int))
    return len(seen)


def measure(
    messages: Sequence[Message],
    *,
    step: int,
    todos: TodoList | None = None,
    context_window: int | None = None,
    current_failed: bool | None = None,
) -> ComplexityMetrics:
    """The complexity metrics of a run, from its conversation and todo list.

    `current_failed` tells how the tool call being observed ended (its result is not in
    the conversation yet): a failure extends the streak of failures, a success ends it.
    """
    text = sum(
        estimate_tokens(getattr(p, "text", "") or getattr(p, "raw_arguments", "") or "")
        for m in messages
        for p in m.parts
    )
    last_progress = todos.last_progress_step if todos else 0
    return ComplexityMetrics(
        step=step,
        context_tokens=text,
        context_window=context_window,
        pending_todos=len(todos.pending) if todos else 0,
        consecutive_failures=(
            0
            if current_failed is False
            else _consecutive_failures(messages) + (1 if current_failed else 0)
        ),
        resources_touched=_resources(messages),
        steps_without_progress=max(0, step - last_progress),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnDecision:
    """A policy's verdict."""

    spawn: bool
    reason: str


@runtime_checkable
class SpawnPolicy(Protocol):
    """Decides from a run's metrics whether work should be split into children."""

    @property
    def name(self) -> str:
        """A name for the journal."""
        ...

    @property
    def auto_spawn(self) -> bool:
        """On a positive decision, start children for pending todo items without asking."""
        ...

    def decide(self, metrics: ComplexityMetrics) -> SpawnDecision:
        """The decision for these metrics."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class NeverSpawn:
    """The static baseline: never split work (the spawn tool is not even offered)."""

    name: str = "never"
    auto_spawn: bool = False

    def decide(self, metrics: ComplexityMetrics) -> SpawnDecision:
        """Always no."""
        return SpawnDecision(spawn=False, reason="static policy")


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdPolicy:
    """Spawn when any metric reaches its threshold (None disables that metric)."""

    context_fill: float | None = 0.6
    pending_todos: int | None = 3
    consecutive_failures: int | None = 3
    resources_touched: int | None = 8
    steps_without_progress: int | None = 8
    auto_spawn: bool = False
    name: str = "threshold"

    def decide(self, metrics: ComplexityMetrics) -> SpawnDecision:
        """Yes when a threshold is reached; the reason names each one reached."""
        hits: list[str] = []
        fill = metrics.context_fill
        if self.context_fill is not None and fill is not None and fill >= self.context_fill:
            hits.append(f"context {fill:.0%} full (threshold {self.context_fill:.0%})")
        checks = (
            ("pending todos", metrics.pending_todos, self.pending_todos),
            ("consecutive tool failures", metrics.consecutive_failures, self.consecutive_failures),
            ("files/keys touched", metrics.resources_touched, self.resources_touched),
            ("steps without progress", metrics.steps_without_progress, self.steps_without_progress),
        )
        for label, value, threshold in checks:
            if threshold is not None and value >= threshold:
                hits.append(f"{label} {value} >= {threshold}")
        if hits:
            return SpawnDecision(spawn=True, reason="; ".join(hits))
        return SpawnDecision(spawn=False, reason="below every threshold")
