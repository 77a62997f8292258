"""Executing the tool calls of one model response.

Each call is resolved, validated, run (with its timeout) and turned into a result the model
sees. Nothing a tool does raises into the loop: unknown tools, bad arguments, exceptions
and timeouts all become error results. Calls of one response run concurrently, except
`sequential` tools, which run alone; results are reported in the order the model issued
the calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from legato.events import JournalEvent, ToolCallFinished, ToolCallStarted, ToolOutcome
from legato.exceptions import ToolArgumentsInvalid, ToolError
from legato.messages import ToolCallPart, ToolResultPart
from legato.tools import RunContext, Tool, to_content

if TYPE_CHECKING:
    from legato.effects import EffectGate

__all__ = ["CallResult", "ToolExecutor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallResult:
    """The result of one call and how it ended."""

    result: ToolResultPart
    outcome: ToolOutcome
    duration: float


def _error(call: ToolCallPart, text: str, outcome: ToolOutcome, started: float) -> CallResult:
    return CallResult(
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=text, is_error=True
        ),
        outcome=outcome,
        duration=time.perf_counter() - started,
    )


class ToolExecutor:
    """Runs calls against a fixed set of tools."""

    __slots__ = ("_default_timeout", "_gate", "_tools")

    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        default_timeout: float | None = None,
        gate: EffectGate | None = None,
    ) -> None:
        self._tools = tools
        self._default_timeout = default_timeout
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
        # -- effect gate: the one admission point (legato.effects) --
        from legato.effects import Refused

        admission = await self._gate.admit(call, tool, kwargs)
        if isinstance(admission, Refused):
            return CallResult(
                result=admission.result,
                outcome=admission.outcome,
                duration=time.perf_counter() - started,
            )
        done = await self._invoke(call, tool, admission.arguments, ctx, started)
        result, outcome = await self._gate.settle(admission, done.result, done.outcome)
        return CallResult(result=result, outcome=outcome, duration=done.duration)

    async def _invoke(
        self,
        call: ToolCallPart,
        tool: Tool,
        kwargs: dict[str, Any],
        ctx: RunContext[Any],
        started: float,
    ) -> CallResult:
        timeout = tool.timeout if tool.timeout is not None else self._default_timeout
        try:
            async with asyncio.timeout(timeout):
                value = await tool.invoke(kwargs, ctx)
        except TimeoutError:
            return _error(
                call, f"tool {call.name!r} timed out after {timeout:g} seconds", "timeout", started
            )
        except ToolError as exc:
            return _error(call, str(exc), "error", started)
        except Exception as exc:
            return _error(call, f"{type(exc).__name__}: {exc}", "error", started)
        return CallResult(
            result=ToolResultPart(call_id=call.id, name=call.name, content=to_content(value)),
            outcome="ok",
            duration=time.perf_counter() - started,
        )

    async def run_calls(
        self,
        calls: Sequence[ToolCallPart],
        *,
        step: int,
        context: Callable[[ToolCallPart], RunContext[Any]],
        special: Mapping[str, CallResult] | None = None,
    ) -> AsyncIterator[ToolCallStarted | ToolCallFinished | JournalEvent]:
        """Run the calls; yield each start, then each finish in the model's order.

        `special` holds results decided without running anything (the output tool,
        skipped calls); they are reported in their place in the order. The effect gate's
        events (admissions, approvals) are yielded as they happen; they are journaled
        already, the starts and finishes are not.
        """
        special = special or {}
        tasks: dict[str, asyncio.Task[CallResult]] = {}
        await self._gate.begin_step(step, [c for c in calls if c.id not in special], self._tools)
        try:
            for group, sequential in _groups(calls, self._tools, special):
                if sequential and tasks:
                    await asyncio.wait(list(tasks.values()))
                for call in group:
                    yield ToolCallStarted(step=step, call=call)
                    tasks[call.id] = asyncio.create_task(self.run_call(call, context(call)))
                if sequential:
                    await asyncio.wait([tasks[group[0].id]])
            for call in calls:
                done = special.get(call.id)
                if done is None:
                    async for event in self._gate.until_done(tasks[call.id]):
                        yield event
                    done = tasks[call.id].result()
                yield ToolCallFinished(
                    step=step,
                    call=call,
                    result=done.result,
                    outcome=done.outcome,
                    duration=done.duration,
                )
        finally:
            from legato.effects import reap

            await reap(tasks.values())


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
