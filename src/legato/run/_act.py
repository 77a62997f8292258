"""Running a step's tool calls: the output tool's calls decided, the rest run, the step closed.

Owns the step between the model's answer and the next model call: which calls the output
tool decides without running anything (`_outcomes.output_calls`), the `RunContext` each
call gets, running the calls (concurrently, under the gate; `_tools.ToolExecutor`), the
failure limits once every call is in, and the step's close. Yields (None) whenever the
run's stream has events for the caller.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from legato.exceptions import ToolDefinitionError
from legato.messages import ToolCallPart
from legato.run._ask import load_tools
from legato.run._close import close_step
from legato.run._core import RunCore
from legato.run._outcomes import check_failures, output_calls
from legato.run._tools import ToolExecutor
from legato.tools import RunContext

__all__ = ["run_tools"]


async def _executor(run: RunCore[Any]) -> ToolExecutor:
    if run.executor is None:  # a resumed run continues with tool calls: list its tools first
        await load_tools(run)
        if run.executor is None:  # pragma: no cover - load_tools always sets it
            msg = "no tools were loaded"
            raise ToolDefinitionError(msg)
    return run.executor


async def run_tools(
    run: RunCore[Any], calls: list[ToolCallPart], *, close: bool = True
) -> AsyncIterator[None]:
    """Run `calls` of the current step; with `close`, check the step's failures and close it.

    Without `close`, one call of the step runs (a durable engine's unit) and the step goes on.
    """
    cfg, state = run.config, run.state
    step = state.step
    step_calls = list(state.pending_calls)  # all of the response's: some ran before a resume
    executor = await _executor(run)
    special, run.output = output_calls(cfg.output, calls, run.output)
    messages = tuple(state.messages)

    def context(call: ToolCallPart) -> RunContext[Any]:
        return RunContext(
            deps=cfg.deps,
            run_id=state.run_id,
            step=step,
            tool_call_id=call.id,
            tool_name=call.name,
            messages=messages,
            usage=state.usage,
            retry=state.failures.get(call.name, 0),
            scope=run.scope,
            journal=run.journal,
            budget=cfg.budget,
            model=cfg.model,
        )

    async for _ in executor.run_calls(
        calls, step=step, context=context, scope=run.scope, record=run.record, special=special
    ):
        yield
    if not close:
        return
    check_failures(
        state,
        step_calls,
        tools=executor.tools,
        output_retries=cfg.output_retries,
        unknown_tool_retries=cfg.unknown_tool_retries,
    )
    if run.session is not None:
        run.session.check_rejections(state.contract_rejections, state.last_rejection)
    async for _ in close_step(run, step, output=run.output is not None):
        yield
