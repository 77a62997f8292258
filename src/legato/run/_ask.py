"""Asking the model: list the run's tools, build the request, stream the answer, record it.

Owns one model call of a step: the tool list (and the `ToolExecutor` the step's calls run
on), compaction of the conversation when it would not fit (and one retry when the provider
says it did not), the gate's reservation and hooks around the call, and the two events a
call leaves in the journal (`ModelRequested`, `ModelResponded`; `Compacted` before them
when the view changed). The answer's text deltas are put on the run's stream as they
arrive. Each function yields (None) whenever the stream has events for the caller.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from legato.contracts import StateSession
from legato.contracts._session import merge_tools
from legato.events import ModelRequested, ModelResponded
from legato.exceptions import (
    ContextLengthExceeded,
    MaxStepsExceeded,
    StreamInterrupted,
    ToolDefinitionError,
)
from legato.messages import ModelResponse
from legato.models import ModelRequest, ResponseCompleted
from legato.run._core import RunCore
from legato.run._output import OUTPUT_TOOL
from legato.run._tools import ToolExecutor
from legato.tools import Tool

__all__ = ["ask_model", "load_tools"]


async def load_tools(run: RunCore[Any]) -> dict[str, Tool]:
    """List the run's tools (once per model call), bind them to the gate, make the executor."""
    cfg = run.config
    tools: dict[str, Tool] = {}
    for source in cfg.tool_sources:
        for t in await source.list_tools():
            if t.name in tools or t.name == OUTPUT_TOOL and not cfg.output.is_text:
                msg = f"two tools are named {t.name!r} (the second comes from {source.name!r})"
                raise ToolDefinitionError(msg)
            tools[t.name] = t
    tools = {t.name: t for t in merge_tools(list(tools.values()), run.session)}
    run.gate.bind(tools)
    run.executor = ToolExecutor(
        tools, default_timeout=cfg.tool_timeout, state=run.session, gate=run.gate
    )
    return tools


async def ask_model(run: RunCore[Any]) -> AsyncIterator[None]:
    """One model call of the next step; asked again, compacted, when the context overflowed."""
    try:
        async for _ in _request(run):
            yield
    except ContextLengthExceeded:
        if not run.context.retries_overflow:
            raise
        async for _ in _request(run, overflowed=True):
            yield


async def _request(run: RunCore[Any], *, overflowed: bool = False) -> AsyncIterator[None]:
    cfg, state, record = run.config, run.state, run.record
    if state.step >= cfg.max_steps and not overflowed:
        raise MaxStepsExceeded(cfg.max_steps)
    tools = await load_tools(run)
    definitions = [t.definition for t in tools.values()]
    output_tool = cfg.output.tool_definition()
    if output_tool is not None:
        definitions.append(output_tool)
    # context management: compact the conversation if the request would not fit
    messages, compacted = await run.context.prepare(
        run.journal.events,
        state.messages,
        instructions=state.instructions,
        tools=definitions,
        overflowed=overflowed,
        state_values=state.state_values,
    )
    if compacted is not None:
        record(compacted)
        yield
    request = ModelRequest(
        messages=tuple(messages),
        instructions=StateSession.instructions(run.session, state.instructions),
        tools=tuple(definitions),
        tool_choice="required"
        if output_tool is not None and cfg.model.profile.tool_choice_required
        else "auto",
        settings=cfg.settings,
        output=cfg.output.native_spec(),
    )
    step = state.step if overflowed else state.step + 1
    request, reservation = await run.gate.before_model(request, cfg.model)
    record(ModelRequested(step=step, model=cfg.model.name))
    yield
    started = time.perf_counter()
    response: ModelResponse | None = None
    scope = run.scope
    answer = cfg.model.stream(request)
    try:
        # while the run owns tasks (sub-agents at work), their events interleave with the
        # model's; otherwise (no tool runs during the call, so none can start) it is read
        # directly
        async for item in scope.interleave(answer) if scope.owns_tasks else answer:
            if isinstance(item, ResponseCompleted):
                response = item.response
                continue
            if item is not None:
                scope.publish(item)  # a delta: stream-only
            yield
    finally:
        if response is None and reservation is not None:
            reservation.release()
    if response is None:
        msg = f"{cfg.model.name}: the stream ended without a complete response"
        raise StreamInterrupted(msg)
    if response.usage.requests == 0:
        response = replace(response, usage=replace(response.usage, requests=1))
    response = await run.gate.after_model(response, reservation)
    record(ModelResponded(step=step, response=response, duration=time.perf_counter() - started))
    yield
