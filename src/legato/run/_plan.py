"""Planning: what the run does next, decided from its state alone, and which part does it.

A step is: ask the model (`_ask`), run the calls it made (`_act`), close (`_close`). The
plan reads only the `RunState` projection, so a run resumed from its journal (or driven one
unit at a time by a durable engine) continues exactly where it stopped: calls that
finished are not run again, and a unit asked for twice runs once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from legato.messages import ToolCallPart
from legato.run._act import run_tools
from legato.run._ask import ask_model
from legato.run._close import answer
from legato.run._config import Unit
from legato.run._core import RunCore
from legato.run._outcomes import output_calls

__all__ = ["next_unit", "run_step", "run_unit", "runnable"]


def next_unit(run: RunCore[Any]) -> Unit:
    """What the run does next (the plan of one step, per call); see `RunDriver.next_unit`."""
    state = run.state
    if state.finished or state.failed:
        return Unit(kind="done")
    last = state.last_message
    if last is None or last.role != "assistant":
        return Unit(kind="model", step=state.step + 1)
    calls = runnable(run)
    if calls:
        return Unit(kind="tool", step=state.step, call_id=calls[0].id)
    return Unit(kind="close", step=state.step)


def runnable(run: RunCore[Any]) -> list[ToolCallPart]:
    """The latest response's calls still to run (not finished, not the output tool's)."""
    state = run.state
    calls = [c for c in state.pending_calls if c.id not in state.results]
    special, _ = output_calls(run.config.output, calls, run.output)
    return [c for c in calls if c.id not in special]


def run_step(run: RunCore[Any]) -> AsyncIterator[None]:
    """The rest of the current step (its calls and close, or its answer), or the next step's model call."""
    state = run.state
    last = state.last_message
    if last is not None and last.role == "assistant":
        if state.pending_calls:
            # on resume, calls that already finished are not run again
            return run_tools(run, [c for c in state.pending_calls if c.id not in state.results])
        return answer(run, last)
    return ask_model(run)


async def run_unit(run: RunCore[Any], unit: Unit) -> AsyncIterator[None]:
    """Run `unit` if it is still the plan (a retried unit that was done runs nothing)."""
    planned = next_unit(run)
    if unit.kind == "tools":
        if planned.kind != "tool" or planned.step != unit.step:
            return
    elif planned != unit:
        return
    work: AsyncIterator[None]
    if unit.kind == "model":
        work = ask_model(run)
    elif unit.kind == "tool" and runnable(run)[1:]:
        call = next(c for c in run.state.pending_calls if c.id == unit.call_id)
        work = run_tools(run, [call], close=False)
    else:  # a step's last call closes the step, as `run_step` does; so does `close`
        work = run_step(run)
    async for _ in work:
        yield
