"""Running one child run: its journal, its stream into the parent, its limits, its resume.

A child is a full legato run (`RunDriver`) with its own journal, stored event by event in a
`JournalStore`. Its events reach the parent's stream as `ChildEvent`s tagged with its
`Lineage` (a grandchild's events pass through unchanged, already tagged deeper). The
parent's journal records `SpawnStarted` and, however the child ends (cancelled with its
parent, or parked, included), one `SpawnFinished`. A child found in the store is resumed from its
journal, or, when it had finished, its result is read back without running anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Generator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from legato._effects_parts import current_switches
from legato.budgets import Budget, BudgetLimits, nested_budget
from legato.events import (
    ChildEvent,
    ContextSliced,
    Journal,
    Lineage,
    RunEvent,
    RunFailed,
    RunStarted,
    SpawnFinished,
    SpawnOutcome,
    SpawnStarted,
    UserPrompt,
    is_journal_event,
)
from legato.exceptions import ConfigurationError, RunParked
from legato.messages import JsonValue, Usage
from legato.run import RunConfig, RunDriver, RunState
from legato.run._scope import Scope
from legato.spawn._store import ChildRecord, JournalStore, StoredJournals
from legato.tools import RunContext

if TYPE_CHECKING:
    from legato.effects import EffectGate

__all__ = [
    "ChildOutcome",
    "DeferredChild",
    "PreparedChild",
    "child_budget",
    "child_journals",
    "current_lineage",
    "defer_children",
    "deferred_children",
    "execute_child",
    "inherit_gate",
    "parent_gate",
    "outcome_from_journal",
    "prepare_child",
    "tree_steps",
    "tree_usage",
]

logger = logging.getLogger("legato.spawn")

_LINEAGE: ContextVar[Lineage | None] = ContextVar("legato_spawn_lineage", default=None)

Emit = Callable[[RunEvent], None]

_DEFERRED: ContextVar[tuple[int, list[DeferredChild]] | None] = ContextVar(
    "legato_spawn_deferred", default=None
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeferredChild:
    """A child run another driver runs (a durable engine's child workflow), not this task.

    `agent` is the child's `legato.Agent`; `share` what its budget may spend (the finite
    amounts its budget had left when it was prepared, the parent's included), by resource.
    """

    lineage: Lineage
    agent: Any
    share: tuple[tuple[str, float], ...] = ()


@contextlib.contextmanager
def defer_children(lineage: Lineage | None = None) -> Generator[list[DeferredChild]]:
    """Within this block, a child of the run driven here is prepared, not run.

    For a durable engine that runs each sub-agent in a driver of its own: the child's
    journal start is stored and linked, the parent records `SpawnStarted`, and the parent
    stops as if parked (`RunParked`, no requests); the list yielded names the child. Calling
    the tool again once the child's journal ends reads its outcome back. `lineage`: the
    run driven here is itself a child (its depth counts against `max_depth`). Children of
    children that run in this task (a `spawn` child's own agent tools) run here as usual.
    """
    deferred: list[DeferredChild] = []
    token = _DEFERRED.set((0 if lineage is None else lineage.depth, deferred))
    placed = _LINEAGE.set(lineage) if lineage is not None else None
    try:
        yield deferred
    finally:
        if placed is not None:
            _LINEAGE.reset(placed)
        _DEFERRED.reset(token)


def deferred_children() -> list[DeferredChild] | None:
    """Where a child of the calling run is named when deferred (None: it runs here)."""
    deferring = _DEFERRED.get()
    if deferring is None or deferring[0] != current_depth():
        return None
    return deferring[1]


def current_lineage() -> Lineage | None:
    """The lineage of the child run the current task belongs to (None in a root run)."""
    return _LINEAGE.get()


def current_depth() -> int:
    """0 in a root run, 1 in its children, ..."""
    lineage = _LINEAGE.get()
    return 0 if lineage is None else lineage.depth


def child_budget(own: Budget | BudgetLimits | None, ctx: RunContext[Any]) -> Budget | None:
    """The budget a child run started by the calling run spends from.

    The parent run's budget (`ctx.budget`), or, when the child has a budget of its own as
    well, a budget that draws from both (`legato.budgets.nested_budget`): every model and
    tool call of the child, and of its own children, is reserved in the parent's budget
    before it happens, so the whole tree cannot spend more than the parent may.
    """
    parent = ctx.budget
    if parent is not None and not isinstance(parent, Budget):
        msg = (
            f"a child run can only draw from a legato.budgets.Budget, "
            f"not {type(parent).__name__} (RunContext.budget)"
        )
        raise ConfigurationError(msg)
    if not current_switches().tree_budget:
        parent = None
    return nested_budget(own, parent)


def parent_gate(ctx: RunContext[Any]) -> EffectGate | None:
    """The effect gate of the run calling a tool (None outside a run)."""
    scope = ctx.scope
    return scope.gate if isinstance(scope, Scope) else None


def child_journals(
    explicit: JournalStore | None, ctx: RunContext[Any], fallback: JournalStore
) -> JournalStore:
    """Where a child of the calling run keeps its journal.

    The store given explicitly; else the parent run's own store (a child's journal sits
    beside its parent's, so the tree resumes after a crash); else `fallback` (in memory).
    """
    if explicit is not None:
        return explicit
    scope = ctx.scope
    store = scope.store if isinstance(scope, Scope) else None
    if isinstance(store, JournalStore):
        return store
    if store is not None and hasattr(store, "load_run") and hasattr(store, "run_info"):
        return StoredJournals(store)  # pyright: ignore[reportArgumentType]
    return fallback


def inherit_gate(
    config: RunConfig[Any], ctx: RunContext[Any], *, own_policy: bool = False
) -> RunConfig[Any]:
    """A child's configuration under its parent's gate: policy nested, hooks first, one hold.

    The child gets the stricter of its own approval policy and its parent's for every call,
    with requests going to the parent's handler and store; the parent's security hooks run
    before the child's own (redaction, injection screening); an ask open anywhere in the
    tree holds side-effecting calls in all of it. Its budget is handled by `child_budget`.

    `own_policy=True` is the explicit opt-out: the child runs under its own approval policy
    only, which may be wider than its parent's; each such child is logged as a warning.
    Hooks and the hold are inherited all the same.
    """
    parent = parent_gate(ctx)
    if parent is None or not current_switches().inherit_gate:
        return config
    from legato.approvals import ApprovalPolicy

    approvals = ApprovalPolicy.for_child(parent.policy, config.approvals)
    if own_policy:
        approvals = config.approvals
        logger.warning(
            "child run of %r (agent %r) runs under its own approval policy, not its parent's "
            "(own_policy=True)",
            ctx.run_id,
            config.agent_name,
        )
    hooks = parent.hooks.hooks if parent.hooks is not None else ()
    return replace(
        config,
        approvals=approvals,
        hooks=(*hooks, *config.hooks),
        parent_gate=parent,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOutcome:
    """How a child run ended, and what it produced."""

    lineage: Lineage
    outcome: SpawnOutcome
    output: JsonValue = None
    error: str | None = None
    usage: Usage = Usage()
    steps: int = 0
    tree_steps: int = 0
    """The child's steps and its descendants' (what its step share was charged)."""
    from_journal: bool = False

    @property
    def ok(self) -> bool:
        """The child finished with an output."""
        return self.outcome == "ok"

    @property
    def text(self) -> str:
        """The output as text for the parent model (JSON for structured output)."""
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, ensure_ascii=False)

    def finished_event(self) -> SpawnFinished:
        """The parent's journal record of this end."""
        return SpawnFinished(
            lineage=self.lineage,
            outcome=self.outcome,
            output=self.output,
            error=self.error,
            usage=self.usage,
            steps=self.steps,
            tree_steps=self.tree_steps,
            from_journal=self.from_journal,
        )


_FAILED_OUTCOMES: dict[str, SpawnOutcome] = {
    "ChildTimeout": "timeout",
    "BudgetExceeded": "budget",
    "RunCancelled": "cancelled",
}


def _last_finishes(journal: Journal) -> list[SpawnFinished]:
    """Each child's last `SpawnFinished` (a resumed child is recorded again when it ends)."""
    last: dict[str, SpawnFinished] = {}
    for event in journal:
        if isinstance(event, SpawnFinished):
            last[event.lineage.run_id] = event
    return list(last.values())


def tree_usage(journal: Journal) -> Usage:
    """A run's usage plus that of all its descendants (their `SpawnFinished` records).

    A child recorded more than once (it was resumed, or read back after a resume) counts
    once, with its last record.
    """
    usage = RunState.from_events(list(journal.events)).usage
    for event in _last_finishes(journal):
        usage = usage + event.usage
    return usage


def tree_steps(journal: Journal) -> int:
    """A run's model steps plus those of all its descendants."""
    steps = RunState.from_events(list(journal.events)).step
    for event in _last_finishes(journal):
        steps += event.tree_steps if event.tree_steps is not None else event.steps
    return steps


def outcome_from_journal(lineage: Lineage, journal: Journal) -> ChildOutcome | None:
    """The outcome recorded in a child's journal, or None while the child is unfinished."""
    state = RunState.from_events(list(journal.events))
    if state.finished:
        return ChildOutcome(
            lineage=lineage,
            outcome="ok",
            output=state.output,
            usage=tree_usage(journal),
            steps=state.step,
            tree_steps=tree_steps(journal),
            from_journal=True,
        )
    if state.failed is not None:
        return ChildOutcome(
            lineage=lineage,
            outcome=_FAILED_OUTCOMES.get(state.failed.error_type, "error"),
            error=f"{state.failed.error_type}: {state.failed.message}",
            usage=tree_usage(journal),
            steps=state.step,
            tree_steps=tree_steps(journal),
            from_journal=True,
        )
    return None


@dataclass(kw_only=True)
class PreparedChild:
    """A child ready to run: a fresh or resumed journal, or an outcome read from the store."""

    record: ChildRecord
    journal: Journal
    resumed: bool = False
    finished: ChildOutcome | None = None

    @property
    def lineage(self) -> Lineage:
        """The child's place in the tree."""
        return self.record.lineage


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStart:
    """The first events of a fresh child, built only when the child is not in the store."""

    started: RunStarted
    prompt: UserPrompt
    sliced: ContextSliced | None = None


def _started_event(record: ChildRecord, *, resumed: bool) -> SpawnStarted:
    return SpawnStarted(
        lineage=record.lineage,
        task=record.task,
        tools=record.tools,
        skills=record.skills,
        max_steps=record.max_steps,
        max_tokens=record.max_tokens,
        background=record.background,
        resumed=resumed,
    )


async def prepare_child(
    record: ChildRecord,
    *,
    store: JournalStore,
    emit: Emit,
    make_start: Callable[[], ChildStart],
) -> PreparedChild:
    """Find the child in the store (resume or read back) or record a fresh start."""
    run_id = record.lineage.run_id
    journal = await store.load(run_id)
    if journal is not None:
        emit(_started_event(record, resumed=True))
        done = outcome_from_journal(record.lineage, journal)
        if done is not None:
            emit(done.finished_event())
        return PreparedChild(record=record, journal=journal, resumed=True, finished=done)
    start = make_start()
    if start.sliced is not None:
        emit(start.sliced)
    journal = Journal([start.started, start.prompt])
    # the child's run exists in the store before its parent's journal links it
    store.append_events(run_id, journal.events, start=0)
    await store.link(record)
    emit(_started_event(record, resumed=False))
    return PreparedChild(record=record, journal=journal)


class _Relay:
    """Takes a child run's events and forwards those the parent has not seen.

    The child's recorder has stored each event already, and its gate reserved each model
    call in its budget (its share); a resumed child's events before this process ran it
    are in the parent's stream already.
    """

    __slots__ = ("_emit", "_skip", "driver", "seen")

    def __init__(self, prepared: PreparedChild, driver: RunDriver[Any], *, emit: Emit) -> None:
        self.driver = driver
        self._emit = emit
        self._skip = len(prepared.journal) if prepared.resumed else 0
        self.seen = 0

    def take(self, event: RunEvent) -> None:
        """Forward one event of the child."""
        if is_journal_event(event):
            self.seen += 1
            if self.seen <= self._skip:
                return
        self._emit(event)

    def rest(self) -> None:
        """What the child's run recorded as it stopped but never yielded (its children's ends)."""
        for event in self.driver.journal.events[self.seen :]:
            self.take(event)


async def execute_child(
    prepared: PreparedChild,
    *,
    config: RunConfig[Any],
    store: JournalStore,
    emit: Emit,
    time_limit: float | None = None,
    stopping: Callable[[], str | None] | None = None,
) -> ChildOutcome:
    """Run (or resume) the child to its end; every failure becomes an outcome, not a raise.

    Each model call the child makes is reserved in its budget (`config.budget`, its share)
    before it is made; a call the budget cannot pay for ends the child (outcome `budget`). Cancellation (the parent stopping) still propagates, after the
    child's own children were stopped and a `SpawnFinished` with outcome `cancelled` was
    emitted; `stopping` tells why the parent stopped. The child's journal is left open.
    A child that parks (an approval nobody has given yet) parks its parent: a
    `SpawnFinished` with outcome `parked` is emitted, `RunParked` propagates, and resuming
    the parent resumes the child where it stopped.
    """
    if prepared.finished is not None:
        return prepared.finished
    lineage = prepared.lineage
    token = _LINEAGE.set(lineage)
    # the child writes its journal ahead to `store` like any run (it holds the prefix)
    driver = RunDriver(
        replace(config, store=store), journal=prepared.journal, saved=len(prepared.journal)
    )
    if prepared.resumed:
        driver.resumed()

    def forward(event: RunEvent) -> None:
        emit(event if isinstance(event, ChildEvent) else ChildEvent(lineage=lineage, event=event))

    relay = _Relay(prepared, driver, emit=forward)
    failure: tuple[SpawnOutcome, str, str] | None = None
    try:
        async with asyncio.timeout(time_limit):
            async with contextlib.aclosing(driver.events()) as events:
                async for event in events:
                    relay.take(event)
    except TimeoutError:
        failure = ("timeout", "ChildTimeout", f"did not finish within {time_limit or 0:g} seconds")
    except asyncio.CancelledError:
        if current_switches().finish_children:
            relay.rest()
            why = (stopping() if stopping is not None else None) or "stopped"
            message = f"the parent run {why} while the child was still running"
            ended = _outcome(prepared, driver, "cancelled", error=f"RunCancelled: {message}")
            emit(ended.finished_event())
        raise
    except RunParked as parked:
        relay.rest()
        if current_switches().park_parent:
            if current_switches().finish_children:  # the parent's journal says where it stopped
                emit(
                    _outcome(
                        prepared, driver, "parked", error=f"RunParked: {parked}"
                    ).finished_event()
                )
            raise
        failure = ("error", "RunParked", "the child is waiting for an approval")
    except Exception as exc:
        error_type = type(exc).__name__
        failure = (_FAILED_OUTCOMES.get(error_type, "error"), error_type, str(exc))
    finally:
        _LINEAGE.reset(token)
    if failure is None:
        outcome = _outcome(prepared, driver, "ok")
    else:
        relay.rest()
        kind, error_type, message = failure
        if driver.state.failed is None:
            relay.take(driver.recorder.record(RunFailed(error_type=error_type, message=message)))
        outcome = _outcome(prepared, driver, kind, error=f"{error_type}: {message}")
    emit(outcome.finished_event())
    return outcome


def _outcome(
    prepared: PreparedChild, driver: RunDriver[Any], kind: SpawnOutcome, *, error: str | None = None
) -> ChildOutcome:
    state = driver.state
    return ChildOutcome(
        lineage=prepared.lineage,
        outcome=kind,
        output=state.output if kind == "ok" else None,
        error=error,
        usage=tree_usage(prepared.journal),
        steps=state.step,
        tree_steps=tree_steps(prepared.journal),
    )
