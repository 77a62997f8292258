"""Executing the tool calls of one model response.

Each call is resolved, validated, run (with its timeout) and turned into a result the model
sees. Nothing a tool does raises into the loop: unknown tools, bad arguments, exceptions
and timeouts all become error results (a child run that parks is the exception: the whole
tree parks with it). Calls of one response run concurrently, except
`sequential` tools, which run alone; results are reported in the order the model issued
the calls.

A call passes through separate stages: the contract's preconditions (with a verified
state, `legato.contracts`), then the effect gate's admission (`legato.effects`: approvals,
budget, cancellation fence, de-duplication), then the call (on a draft, with a contract),
then the gate's settlement, and — when its turn comes in the model's order — the
postconditions and the commit, which the gate's fence can still forbid.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from legato._values import value_class
from legato.contracts import StateSession
from legato.contracts._session import Pending, Refusal
from legato.events import (
    JournalEvent,
    StateCommitted,
    StateRejected,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutcome,
)
from legato.exceptions import RunParked, StateError, ToolArgumentsInvalid, ToolError
from legato.messages import ToolCallPart, ToolResultPart
from legato.run._scope import Scope
from legato.tools import RunContext, Tool, to_content
from legato.tools._isolation import timeout_from_first_line

if TYPE_CHECKING:
    from legato.effects import Admitted, EffectGate

__all__ = ["CallResult", "ToolExecutor"]


@value_class
class CallResult:
    """The result of one call and how it ended."""

    result: ToolResultPart
    outcome: ToolOutcome
    duration: float
    value: Any = None
    """What the tool returned (for its postconditions)."""
    exception: BaseException | None = None
    """What the tool raised, if it failed."""
    pending: Pending | None = None
    """The call's draft, waiting for its commit turn (tools with a contract)."""
    refusal: Refusal | None = None
    """The preconditions refused the call."""
    admitted: Admitted | None = None
    """The gate's admission (its epoch decides whether the result may still commit)."""


def _error(
    call: ToolCallPart,
    text: str,
    outcome: ToolOutcome,
    started: float,
    *,
    pending: Pending | None = None,
    exception: BaseException | None = None,
) -> CallResult:
    return CallResult(
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=text, is_error=True
        ),
        outcome=outcome,
        duration=time.perf_counter() - started,
        pending=pending,
        exception=exception,
    )


def _refused(call: ToolCallPart, refusal: Refusal, started: float) -> CallResult:
    """A call its preconditions refused: nothing ran."""
    return CallResult(
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=refusal.message, is_error=True
        ),
        outcome="rejected",
        duration=time.perf_counter() - started,
        refusal=refusal,
    )


class ToolExecutor:
    """Runs calls against a fixed set of tools."""

    __slots__ = ("_default_timeout", "_gate", "_state", "_tools")

    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        default_timeout: float | None = None,
        state: StateSession | None = None,
        gate: EffectGate | None = None,
    ) -> None:
        self._tools = tools
        self._default_timeout = default_timeout
        self._state = state
        if gate is None:
            from legato.effects import EffectGate

            gate = EffectGate()
        self._gate = gate

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools calls may use, by name."""
        return dict(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool of that name, if the run has it."""
        return self._tools.get(name)

    async def run_call(self, call: ToolCallPart, ctx: RunContext[Any]) -> CallResult:
        """Run one call; every failure becomes an error result."""
        started = time.perf_counter()
        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(sorted(self._tools)) or "none"
            text = f"unknown tool {call.name!r}; the tools you can call are: {available}"
            return _error(call, text, "unknown_tool", started)
        try:
            kwargs = tool.validate(call.arguments)
        except ToolArgumentsInvalid as exc:
            return _error(
                call,
                f"{exc}\nFix the arguments and call the tool again.",
                "invalid_arguments",
                started,
            )
        # -- stage: contract preconditions (before any admission) --------------------------
        pending: Pending | None = None
        if self._state is not None:
            checked = self._contract_stage(tool, call, kwargs)
            if isinstance(checked, Refusal):
                return _refused(call, checked, started)
            pending = checked
            ctx = replace(
                ctx, state=pending.draft if pending else self._state.snapshot_for(tool.name)
            )
        # -- stage: the effect gate, the one admission point (legato.effects) -------------------
        from legato.effects import Refused

        admission = await self._gate.admit(call, tool, kwargs)
        if isinstance(admission, Refused):  # nothing runs; a contract's draft is discarded
            return CallResult(
                result=admission.result,
                outcome=admission.outcome,
                duration=time.perf_counter() - started,
            )
        if admission.effect_id:
            ctx = replace(ctx, idempotency_key=admission.effect_id)
        if pending is not None and self._state is not None and admission.arguments != kwargs:
            # an approver or a hook changed the arguments: check the call that will run
            rechecked = self._state.begin(tool, call.id, admission.arguments)
            if isinstance(rechecked, Refusal):
                return _refused(call, rechecked, started)
            pending, ctx = rechecked, replace(ctx, state=rechecked.draft)
        done = await self._invoke(call, tool, admission.arguments, ctx, started, pending)
        result, outcome = await self._gate.settle(admission, done.result, done.outcome)
        if outcome == "cancelled":  # fenced: the late result and its draft are discarded
            return replace(done, result=result, outcome=outcome, pending=None)
        return replace(done, result=result, outcome=outcome, admitted=admission)

    async def _invoke(
        self,
        call: ToolCallPart,
        tool: Tool,
        kwargs: dict[str, Any],
        ctx: RunContext[Any],
        started: float,
        pending: Pending | None,
    ) -> CallResult:
        """Run the function (on the draft, when it has a contract), within its timeout."""
        timeout = tool.timeout if tool.timeout is not None else self._default_timeout
        try:
            async with asyncio.timeout(timeout) as clock:
                with timeout_from_first_line(clock, timeout):  # isolated: from its first line
                    value = await tool.invoke(kwargs, ctx)
        except TimeoutError as exc:
            text = (
                f"tool {call.name!r} timed out after {timeout:g} seconds"
                if timeout is not None
                else f"TimeoutError: {exc}"
            )
            return _error(call, text, "timeout", started, pending=pending, exception=exc)
        except ToolError as exc:
            return _error(call, str(exc), "error", started, pending=pending, exception=exc)
        except RunParked:
            raise  # a child run parked: the whole tree waits for the decision
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            return _error(call, text, "error", started, pending=pending, exception=exc)
        return CallResult(
            result=ToolResultPart(call_id=call.id, name=call.name, content=to_content(value)),
            outcome="ok",
            duration=time.perf_counter() - started,
            value=value,
            pending=pending,
        )

    def _contract_stage(
        self, tool: Tool, call: ToolCallPart, kwargs: Mapping[str, Any]
    ) -> Pending | Refusal | None:
        """Preconditions of a tool with a contract: a draft to run on, or a refusal."""
        if self._state is None or tool.contract is None:
            return None
        return self._state.begin(tool, call.id, kwargs)

    def _report(
        self, call: ToolCallPart, step: int, done: CallResult
    ) -> tuple[list[ToolCallFinished | StateCommitted | StateRejected], StateError | None]:
        """A finished call's events: its commit or rejection, then its finish.

        Also returns the contract's halt, to raise after the events are out.
        """
        state_event, done, halt = self._settle(done)
        finished = ToolCallFinished(
            step=step,
            call=call,
            result=done.result,
            outcome=done.outcome,
            duration=done.duration,
        )
        events: list[ToolCallFinished | StateCommitted | StateRejected] = [finished]
        if state_event is not None:
            events.insert(0, state_event)
        return events, halt

    def _settle(
        self, done: CallResult
    ) -> tuple[StateCommitted | StateRejected | None, CallResult, StateError | None]:
        """Commit or discard a finished call's draft (called in the model's order)."""
        if done.refusal is not None:
            return done.refusal.event, done, done.refusal.halt
        if done.pending is None or self._state is None:
            return None, done, None
        if done.admitted is not None and not self._gate.may_commit(done.admitted):
            text = "Cancelled: the run was cancelled while this call ran; its result was discarded."
            fenced = ToolResultPart.text_result(
                call_id=done.result.call_id, name=done.result.name, text=text, is_error=True
            )
            return None, replace(done, result=fenced, outcome="cancelled", pending=None), None
        settled = self._state.settle(done.pending, result=done.value, error=done.exception)
        if settled.error is not None:
            call = done.result
            done = replace(
                done,
                result=ToolResultPart.text_result(
                    call_id=call.call_id, name=call.name, text=settled.error, is_error=True
                ),
                outcome="rejected",
            )
        return settled.event, done, settled.halt

    async def run_calls(
        self,
        calls: Sequence[ToolCallPart],
        *,
        step: int,
        context: Callable[[ToolCallPart], RunContext[Any]],
        scope: Scope,
        record: Callable[[JournalEvent], JournalEvent],
        special: Mapping[str, CallResult] | None = None,
    ) -> AsyncIterator[None]:
        """Run the calls; record each start, then each finish in the model's order.

        With a verified state, each finish is preceded by its commit or rejection event.
        Recording puts an event on the run's stream; this yields (None) after each, and
        whenever the gate or the tools (through the run's scope: a sub-agent's stream, an
        approval request, a call's progress) put events on it while the calls run, so the
        loop hands them to its caller at once.

        `special` holds results decided without running anything (the output tool,
        skipped calls); they are reported in their place in the order.
        """
        from legato.effects import reap

        special = special or {}
        tasks: dict[str, asyncio.Task[CallResult]] = {}
        position = {call.id: index for index, call in enumerate(calls)}
        reported = 0
        await self._gate.begin_step(step, [c for c in calls if c.id not in special], self._tools)
        try:
            for group, sequential in _groups(calls, self._tools, special):
                if sequential and tasks:
                    async for _ in scope.wait(tasks.values()):
                        yield
                if sequential and self._state is not None:
                    # commit point: a sequential call sees every earlier call committed
                    upto = position[group[0].id]
                    async for _ in self._finish(
                        calls[reported:upto], step, tasks, special, scope, record
                    ):
                        yield
                    reported = upto
                for call in group:
                    record(ToolCallStarted(step=step, call=call))
                    yield
                    tasks[call.id] = asyncio.create_task(self._flight(call, context(call), scope))
                if sequential:
                    async for _ in scope.wait([tasks[group[0].id]]):
                        yield
            async for _ in self._finish(calls[reported:], step, tasks, special, scope, record):
                yield
        finally:
            await reap(tasks.values())

    async def _flight(self, call: ToolCallPart, ctx: RunContext[Any], scope: Scope) -> CallResult:
        """Run a call within its progress window (see `Scope.open_call`).

        The window closes before the result is returned, so the call's progress is queued
        before its finish; a cancelled call's held update is dropped.
        """
        scope.open_call(call.id)
        returned = False
        try:
            done = await self.run_call(call, ctx)
            returned = True
            return done
        finally:
            scope.close_call(call.id, flush=returned)

    async def _finish(
        self,
        calls: Sequence[ToolCallPart],
        step: int,
        tasks: Mapping[str, asyncio.Task[CallResult]],
        special: Mapping[str, CallResult],
        scope: Scope,
        record: Callable[[JournalEvent], JournalEvent],
    ) -> AsyncIterator[None]:
        """Wait for each call in order and record it; a contract's halt is raised after."""
        for call in calls:
            done = special.get(call.id)
            if done is None:
                async for _ in scope.wait([tasks[call.id]]):
                    yield
                done = tasks[call.id].result()
            events, halt = self._report(call, step, done)
            for event in events:
                record(event)
                yield
            if halt is not None:
                raise halt


def _groups(
    calls: Sequence[ToolCallPart], tools: Mapping[str, Tool], special: Mapping[str, CallResult]
) -> list[tuple[list[ToolCallPart], bool]]:
    """Split calls into groups that start together, each flagged `sequential`.

    A sequential tool's call is a group of its own: it starts after every earlier call has
    finished, and later calls start after it has finished.
    """
    groups: list[tuple[list[ToolCallPart], bool]] = [([], False)]
    for call in calls:
        if call.id in special:
            continue
        tool = tools.get(call.name)
        if tool is not None and tool.sequential:
            groups.append(([call], True))
            groups.append(([], False))
        else:
            groups[-1][0].append(call)
    return [g for g in groups if g[0]]
