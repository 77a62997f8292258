"""The effect gate's state: what a run's gate knows, how it learns it, and the hold.

`GateState` is the base every part of `legato.effects.EffectGate` builds on. It owns:

- the gate's memory, which is only ever learnt from journal events (`observe`, the
  `GateRecord` projection, the epoch and fence reason of `CancelRequested`, the hook flags);
- the one way the gate writes: `_record` (write-ahead to the journal, then the stream),
  and the refusal records every part returns (`_refuse`, `_cancelled`);
- the hold: the current step's open asks (`StepState`), the event that is clear when none
  is open, what it reports to the tree of runs (`_update_clear`) and the wait itself
  (`_hold`).

It must not decide anything: whether a call is admitted, asked, deduplicated or settled
is decided in `legato.effects` (admission), `legato._gate_approvals` (asking a person)
and `legato._gate_outcomes` (outcomes). It imports nothing from the runtime or the
interfaces (the policy layer and below only).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from legato._effects_parts import GateTree, StepState, current_switches, parked_message
from legato._gate_record import GateRecord
from legato.approvals import ApprovalPolicy, Decision, canonical_json
from legato.budgets import Budget
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Compacted,
    ContextSliced,
    HookApplied,
    Journal,
    JournalEvent,
    ModelRequested,
    ModelResponded,
    Parked,
    RefusalReason,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    SpawnDecided,
    SpawnFinished,
    SpawnStarted,
    StateCommitted,
    StateLoaded,
    StateRejected,
    StepFinished,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
    ToolCallStarted,
    ToolOutcome,
    UserPrompt,
)
from legato.exceptions import RunParked
from legato.messages import ToolCallPart, ToolResultPart
from legato.security._hooks import Hook, HookContext, HookRunner

__all__ = ["Admitted", "GateState", "Refused", "effect_id", "refused_result"]


def effect_id(run_id: str, call: ToolCallPart) -> str:
    """The stable id of a call's effect: same run, call id, tool and arguments -> same id."""
    text = "\x00".join((run_id, call.id, call.name, canonical_json(call.arguments)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# -- admission results ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """The call may run, with `arguments` (edited ones, if an approver edited them)."""

    arguments: dict[str, Any]
    effect_id: str
    epoch: int
    pending_decision: asyncio.Task[Decision] | None = None
    """Only with `enforce_decisions` off (tests): the decision still being made."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """The call does not run; the model sees `result`."""

    reason: RefusalReason
    outcome: ToolOutcome
    result: ToolResultPart


def refused_result(call: ToolCallPart, reason: RefusalReason, message: str) -> Refused:
    """The refusal the model sees for `call` (its outcome: cancelled or refused)."""
    return Refused(
        reason=reason,
        outcome="cancelled" if reason == "cancelled" else "refused",
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=message, is_error=True
        ),
    )


class GateState:
    """What one run's gate knows and holds; the parts of `EffectGate` build on it."""

    def __init__(
        self,
        *,
        journal: Journal | None = None,
        record: Callable[[JournalEvent], object] | None = None,
        policy: ApprovalPolicy | None = None,
        budget: Budget | None = None,
        hooks: Sequence[Hook] = (),
        agent: str = "",
        stream: Callable[[JournalEvent], object] | None = None,
        tree: GateTree | None = None,
    ) -> None:
        """Make the gate of one run.

        Args:
            journal: The run's journal (a resumed run's gate learns its past from it).
            record: Appends an event to the journal *now* (write-ahead: an admission is
                journaled before its effect runs). Default: `journal.append`.
            policy: The approval policy (None: admit everything).
            budget: The budget model and tool calls draw from.
            hooks: Security hooks.
            agent: The agent's name, for hooks.
            stream: Also receives each event the gate records, for the run's stream
                (default: nowhere; the journal has it).
            tree: The hold shared with the other runs of a tree (a child gets its
                parent's; default: a tree of this run alone).
        """
        self._journal = journal if journal is not None else Journal()
        self._record_fn = record or self._record_standalone
        self.policy = policy
        self.budget = budget
        self.switches = current_switches()
        self.tree = tree if tree is not None else GateTree()
        """The hold this gate shares with the other runs of its tree."""
        self.sole_driver = False
        """The run's journal is written ahead to a store it has claimed: no other process
        drives it, so a decision this run claimed before a crash is its own to apply."""
        self.epoch = 0
        self.fenced: str | None = None
        """The reason the run was fenced, once it is."""
        self._stream = stream
        """Also gets the events the gate recorded, for the stream (the journal has them)."""
        self.ctx = HookContext(run_id="", agent=agent)
        self.hooks = HookRunner(hooks, self.ctx, self._record) if hooks else None
        self.record = GateRecord()
        """What the gate decided: a projection of the journal, and nothing else."""
        self._step = StepState()
        self._serial = asyncio.Lock()
        self._clear = asyncio.Event()
        self._clear.set()
        self._checked: frozenset[str] | None = None
        self._fallback: ApprovalPolicy | None = None
        """Used when a hook asks in a run without a policy (made on first need)."""
        remember = self.switches.project_decisions
        for event in self._journal:
            self.observe(event, remember=remember)

    # -- the journal -------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.ctx.run_id

    def _record_standalone(self, event: JournalEvent) -> None:
        self._journal.append(event)
        self.observe(event)

    def _record(self, event: JournalEvent) -> None:
        self._record_fn(event)
        if self._stream is not None:
            self._stream(event)

    def observe(self, event: JournalEvent, *, remember: bool = True) -> None:
        """Learn from a journal event (the driver calls this for every event it records).

        `remember=False` only for the `project_decisions` twin (see `GateRecord.apply`).
        """
        self.record.apply(event, remember=remember)
        match event:
            case RunStarted():
                self.ctx.run_id = event.run_id
            case CancelRequested():
                self.epoch = max(self.epoch, event.epoch)
                self.fenced = event.reason
            case HookApplied():
                self.ctx.flags.update(event.flags)
            case (
                ToolCallAdmitted()
                | ToolCallFinished()
                | ApprovalRequested()
                | ApprovalDecided()
                | UserPrompt()
                | ModelRequested()
                | ModelResponded()
                | ToolCallStarted()
                | StepFinished()
                | RunFinished()
                | RunFailed()
                | StateLoaded()
                | StateCommitted()
                | StateRejected()
                | SpawnStarted()
                | SpawnFinished()
                | ContextSliced()
                | SpawnDecided()
                | Compacted()
                | ToolCallRefused()
                | Parked()
                | RunResumed()
            ):
                pass  # in the record, or nothing the gate keeps
            case _:
                assert_never(event)
        if self.hooks is not None:
            self.hooks.on_event(event)

    # -- the hold ------------------------------------------------------------------------------------

    def _update_clear(self) -> None:
        state = self._step
        if not state.open or state.park is not None or self.fenced is not None:
            self._clear.set()
        else:
            self._clear.clear()
        tree = self.tree
        if state.park is not None and tree.park is None:
            tree.park = state.park
        if state.failed is not None and tree.failed is None:
            tree.failed = state.failed
        settled = state.park is not None or self.fenced is not None
        tree.report(self, frozenset() if settled else frozenset(state.open))

    async def _hold(self) -> str | None:
        """Wait while an ask is open in the step or the tree; a refusal if the call must not run."""
        tree = self.tree
        while True:
            if not self._clear.is_set():
                await self._clear.wait()
            elif tree.held_for(self) and self.fenced is None and self.switches.hold_tree:
                await tree.changed()
            else:
                break
        park = self._step.park or (tree.park if self.switches.hold_tree else None)
        if park is not None and self.fenced is None:
            raise RunParked(park, parked_message(park))
        failed = self._step.failed or (tree.failed if self.switches.hold_tree else None)
        if failed is not None and self.switches.hold_on_failure:
            return (
                f"Not run: it was held behind an approval that ended without a decision ({failed})."
            )
        return None

    # -- refusals -------------------------------------------------------------------------------------

    def _cancelled(self, call: ToolCallPart, eid: str) -> Refused:
        return self._refuse(
            call, eid, "cancelled", f"Not run: the run was cancelled ({self.fenced})."
        )

    def _refuse(self, call: ToolCallPart, eid: str, reason: RefusalReason, message: str) -> Refused:
        self._record_refusal(call, eid, reason, message)
        return refused_result(call, reason, message)

    def _record_refusal(
        self, call: ToolCallPart, eid: str, reason: RefusalReason, message: str
    ) -> None:
        self._record(
            ToolCallRefused(
                step=self._step.step,
                call_id=call.id,
                tool=call.name,
                effect_id=eid,
                reason=reason,
                message=message,
            )
        )
