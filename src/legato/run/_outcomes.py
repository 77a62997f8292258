"""Decisions the loop takes on a step's tool calls: output calls, failures, cancellation.

Pure functions of the run's configuration and state, kept out of `_loop.py` so the loop
stays readable in one sitting.
"""

from __future__ import annotations

from typing import Any

from legato.events import Journal, ModelResponded, ToolCallFinished, ToolCallStarted, ToolOutcome
from legato.exceptions import OutputRetriesExceeded, ToolRetriesExceeded
from legato.messages import ToolCallPart, ToolResultPart
from legato.run._output import OUTPUT_TOOL, OutputSchema, OutputValidationError
from legato.run._state import RunState
from legato.run._tools import CallResult
from legato.tools import Tool

__all__ = ["cancelled_calls", "check_failures", "output_calls", "result_of"]


def result_of(
    call: ToolCallPart, text: str, outcome: ToolOutcome, *, error: bool = False
) -> CallResult:
    """A result decided without running the call."""
    return CallResult(
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=text, is_error=error
        ),
        outcome=outcome,
        duration=0.0,
    )


def output_calls(
    output: OutputSchema[Any], calls: list[ToolCallPart], current: Any
) -> tuple[dict[str, CallResult], Any]:
    """Validate `final_result` calls; a valid one makes every other call `skipped`.

    Returns the decided results and the validated output (or `current` if none).
    """
    if output.is_text or output.mode != "tool":
        return {}, current
    special: dict[str, CallResult] = {}
    for call in calls:
        if call.name != OUTPUT_TOOL or current is not None:
            continue
        try:
            current = output.validate_arguments(call.arguments)
        except OutputValidationError as exc:
            special[call.id] = result_of(
                call,
                f"{exc.message}\nFix the output and call {OUTPUT_TOOL} again.",
                "invalid_arguments",
                error=True,
            )
        else:
            special[call.id] = result_of(call, "Final result received.", "output")
    if current is not None:
        for call in calls:
            if call.id not in special:
                special[call.id] = result_of(
                    call, "Not run: the final result was given in the same response.", "skipped"
                )
    return special, current


def check_failures(
    state: RunState,
    calls: list[ToolCallPart],
    *,
    tools: dict[str, Tool],
    output_retries: int,
    unknown_tool_retries: int,
) -> None:
    """Raise when a tool (or the output) failed in more consecutive turns than it may.

    Called once the step's calls have all finished, so the model has seen every result of
    a turn before its failures are counted: several failing calls of one tool in one
    response are one failing turn. The error quotes the tool's latest failed call.
    """
    for name in dict.fromkeys(call.name for call in calls):
        count = state.failures.get(name, 0)
        if not count:
            continue
        if name == OUTPUT_TOOL:
            limit = output_retries
        else:
            tool = tools.get(name)
            limit = tool.max_retries if tool is not None else unknown_tool_retries
        if count > limit:
            text = state.last_errors.get(name, "")
            if name == OUTPUT_TOOL:
                raise OutputRetriesExceeded(limit, text)
            raise ToolRetriesExceeded(name, limit, text)


def cancelled_calls(journal: Journal, reason: str) -> list[ToolCallFinished]:
    """`cancelled` finishes for calls of the last response that started and never finished."""
    events = journal.events
    first = max((i for i, e in enumerate(events) if isinstance(e, ModelResponded)), default=0)
    started: dict[str, ToolCallStarted] = {}
    for event in events[first:]:
        if isinstance(event, ToolCallStarted):
            started[event.call.id] = event
        elif isinstance(event, ToolCallFinished):
            started.pop(event.call.id, None)
    return [
        ToolCallFinished(
            step=s.step,
            call=s.call,
            result=ToolResultPart.text_result(
                call_id=s.call.id,
                name=s.call.name,
                text=f"Cancelled: {reason}. A result that arrives later is discarded.",
                is_error=True,
            ),
            outcome="cancelled",
        )
        for s in started.values()
    ]
