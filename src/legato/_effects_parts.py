"""Small pieces the effect gate and the runtime share, kept apart from `legato.effects`.

It owns the test-only protection switches (`Switches`, `unsafe_switches`, read by the
gate, budgets, contracts, the run loop and sub-agents through `current_switches`), the
gate's internal per-step records (`Plan`, `Cleared`, `StepState`, `LedgerEntry`), the
hold shared by a tree of runs (`GateTree`), small helpers of approvals (`expired`,
`decision_of`, `parked_message`) and `reap` (cancel and await a run's tasks).

It must not decide or record anything (the gate's parts do: `legato.effects`,
`legato._gate_state`, `_gate_approvals`, `_gate_outcomes`) and imports only the policy
layer's values and below. Public names are re-exported by `legato.effects`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Generator, Iterable
from contextvars import ContextVar
from typing import Any, Literal

from legato._values import value_class
from legato.approvals import Action, ApprovalRequest, Approve, Decision, Edit, ParkedRun, Reject
from legato.events import ApprovalDecided, ToolOutcome
from legato.messages import JsonValue, ToolCallPart, ToolResultPart

__all__ = [
    "Cleared",
    "LedgerEntry",
    "Plan",
    "StepState",
    "Switches",
    "current_switches",
    "decision_of",
    "expired",
    "parked_message",
    "reap",
    "unsafe_switches",
]


# -- test-only switches -------------------------------------------------------------------------


@value_class
class Switches:
    """The runtime's protections (the gate's and the sub-agents'); all on.

    Tests turn one off to show the failure it prevents.
    """

    hold_run_wide: bool = True
    """Hold side-effecting calls while any approval of the run is pending."""
    enforce_decisions: bool = True
    """Wait for the decision before running an asked call."""
    dedup: bool = True
    """Reuse the recorded result of an effect that already ran."""
    fence: bool = True
    """Admit nothing after cancel; discard late results."""
    reap_tasks: bool = True
    """Cancel and await a run's tool tasks when the run stops."""
    reserve_worst_case: bool = True
    """Check a call's worst case against what a budget has left before the call (off: the
    naive check, which refuses a call only once a limit is already reached, so the call
    that crosses it is made; calls are not fitted to what is left either)."""
    rebuild_shares: bool = True
    """Rebuild a resumed run's children's budget shares from its journal."""
    finish_children: bool = True
    """Record a `SpawnFinished` for a child that stopped with its parent: cancelled
    because its parent stopped, or parked (which parks its parent)."""
    tree_budget: bool = True
    """Run children (spawned, or agents as tools) on their parent run's budget."""
    write_ahead: bool = True
    """Commit an event the resume contract stands on (an admission, an outcome) to the
    store before recording returns; off: each event is stored when the next is recorded."""
    refuse_live: bool = True
    """Refuse to resume a run whose last owner is a live process."""
    hold_tree: bool = True
    """An open ask anywhere in a tree of runs holds side-effecting calls everywhere in it."""
    inherit_gate: bool = True
    """A child run gets its parent's approval policy (nested) and security hooks."""
    park_parent: bool = True
    """A child that parks parks its parent (off: the parent sees a failed child)."""
    resume_claim: bool = True
    """A resumed run first claims its journal's next position (`RunResumed`)."""
    decide_once: bool = True
    """A decision sent to a Temporal run's workflow is written to the approvals store (the
    conditional write every door goes through) before the update returns; off: it is
    written after the wait, and a decision another door stored first is silently kept."""
    project_decisions: bool = True
    """A gate built on a journal (a resumed or forked run) re-applies the refusals and
    rejections it holds (off: they lived only in the memory of the process that made
    them, so a call held behind a rejection may run after a resume)."""
    hold_on_failure: bool = True
    """An ask that ends without a decision (its handler raised, its decision was claimed by
    another resumer) refuses the side-effecting calls it held instead of releasing them."""
    snapshot_args: bool = True
    """Show contracts a private copy of the arguments as admitted (`legato.contracts`)."""
    cap_output: bool = True
    """Send the output cap a budget reserved when the request sets no `max_tokens`."""
    meter_side_calls: bool = True
    """Reserve a run's model calls outside its loop (compaction summaries) in its budget."""
    atomic_turn: bool = True
    """Commit a finished run's session turn in the transaction of its `RunFinished` (off:
    in a transaction of its own after it, as a crash between the two loses the turn)."""


_SAFE = Switches()
_SWITCHES: ContextVar[Switches | None] = ContextVar("legato_effect_switches", default=None)


def current_switches() -> Switches:
    return _SWITCHES.get() or _SAFE


@contextlib.contextmanager
def unsafe_switches(**off: bool) -> Generator[Switches]:
    """TEST ONLY: run with some protections switched off (`unsafe_switches(dedup=False)`).

    Exists so the test suite can show that each protection is what prevents its failure.
    """
    switches = Switches(**off)
    token = _SWITCHES.set(switches)
    try:
        yield switches
    finally:
        _SWITCHES.reset(token)


# Internal records are plain slotted classes: cheaper to define than dataclasses at import.


class Plan:
    __slots__ = ("action", "arguments", "blocked", "modified", "rule")

    def __init__(self, *, action: Action, rule: str, arguments: JsonValue) -> None:
        self.action: Action = action
        self.rule = rule
        self.arguments: JsonValue = arguments
        self.modified = False
        self.blocked: str | None = None


class Cleared:
    """A call cleared to run (pending the fence re-check)."""

    __slots__ = ("arguments", "edited", "pending", "via")

    def __init__(
        self,
        *,
        arguments: dict[str, Any],
        via: Literal["policy", "approval", "edit"] = "policy",
        edited: JsonValue = None,
        pending: asyncio.Task[Decision] | None = None,
    ) -> None:
        self.arguments = arguments
        self.via: Literal["policy", "approval", "edit"] = via
        self.edited: JsonValue = edited
        self.pending = pending


class LedgerEntry:
    """What the gate knows about one admitted effect."""

    __slots__ = ("call_id", "done", "finished", "outcome", "result")

    def __init__(self, *, call_id: str) -> None:
        self.call_id = call_id
        self.finished = False
        self.outcome: ToolOutcome = "ok"
        self.result: ToolResultPart | None = None
        self.done: asyncio.Event | None = None


class GateTree:
    """The hold shared by the gates of a tree of runs (a run and its children, recursively).

    Each gate reports the asks it has open; a side-effecting call in any run of the tree is
    held while another run of the tree has one open, and when one of them parks or ends its
    ask without a decision, the held calls park or are refused with it.
    """

    __slots__ = ("_changed", "_open", "failed", "park")

    def __init__(self) -> None:
        self._open: dict[int, frozenset[str]] = {}
        self._changed = asyncio.Event()
        self.park: ParkedRun | None = None
        self.failed: str | None = None

    def report(self, gate: object, open_calls: frozenset[str]) -> None:
        """`gate`'s open asks now (empty: none)."""
        key = id(gate)
        if self._open.get(key, frozenset()) == open_calls:
            return
        if open_calls:
            self._open[key] = open_calls
        else:
            self._open.pop(key, None)
        self._changed.set()
        self._changed = asyncio.Event()

    def held_for(self, gate: object) -> bool:
        """Whether another run of the tree has an ask open."""
        key = id(gate)
        return any(k != key for k in self._open)

    async def changed(self) -> None:
        """Wait until some gate of the tree reports."""
        await self._changed.wait()


class StepState:
    __slots__ = ("calls", "failed", "open", "park", "plans", "step")

    def __init__(self, *, step: int = 0) -> None:
        self.step = step
        self.plans: dict[str, Plan] = {}
        self.calls: dict[str, ToolCallPart] = {}
        self.open: set[str] = set()
        """Calls of this step with an `ask` not decided yet (its rejections are in the
        gate's `GateRecord`, a projection of the journal)."""
        self.park: ParkedRun | None = None
        self.failed: str | None = None
        """Why an ask of this step ended without a decision (its handler raised, its
        decision was claimed elsewhere): the side-effecting calls it held never run."""


def expired(request: ApprovalRequest) -> bool:
    return request.expires_at is not None and time.time() > request.expires_at


def decision_of(event: ApprovalDecided) -> Decision:
    match event.verdict:
        case "approve":
            return Approve(message=event.message)
        case "reject":
            return Reject(message=event.message or Reject().message)
        case "edit":
            arguments = event.arguments if isinstance(event.arguments, dict) else {}
            return Edit(arguments=arguments, message=event.message)


def parked_message(park: ParkedRun) -> str:
    tools = ", ".join(r.tool for r in park.requests)
    return f"run {park.run_id} is waiting for {len(park.requests)} approval decision(s): {tools}"


async def reap(tasks: Iterable[asyncio.Task[Any]], *, grace: float = 10.0) -> None:
    """Cancel unfinished tasks and wait for them to end (up to `grace` seconds).

    A task that ignores cancellation longer than `grace` is abandoned; the fence keeps
    its result from being applied.
    """
    tasks = list(tasks)
    pending = [t for t in tasks if not t.done()]
    if pending and current_switches().reap_tasks:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=grace)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved, so no "exception was never retrieved" warning
