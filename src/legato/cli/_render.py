"""Render run events and journals for people, with rich."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    HookApplied,
    Journal,
    ModelRequested,
    ModelResponded,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunStarted,
    StepFinished,
    TextDelta,
    ThinkingDelta,
    ToolCallAdmitted,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRefused,
    ToolCallStarted,
    UserPrompt,
)

__all__ = ["render_event", "render_journal"]

_LIMIT = 300


def _short(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= _LIMIT else text[: _LIMIT - 1] + "…"


def gate_line(event: RunEvent) -> str:
    """One line for an event of the effect gate (admission, approval, cancel, hook)."""
    match event:
        case ToolCallAdmitted():
            return f"admitted {event.tool} ({event.via}) effect {event.effect_id[:12]}"
        case ToolCallRefused():
            return f"refused {event.tool} [{event.reason}]: {_short(event.message)}"
        case ApprovalRequested():
            return f"approval requested for {event.call.name}: {event.rule}"
        case ApprovalDecided():
            return f"approval {event.verdict} ({event.request_id})"
        case CancelRequested():
            return f"cancel requested: {event.reason}"
        case RunParked():
            return f"parked, waiting for {len(event.request_ids)} decision(s)"
        case HookApplied():
            return f"hook {event.hook} {event.action} at {event.point}: {_short(event.detail)}"
        case _:
            return type(event).__name__


def render_event(console: Console, event: RunEvent) -> None:
    """Print one streamed event: deltas inline, the rest one line each."""
    match event:
        case TextDelta():
            console.print(escape(event.text), end="", highlight=False)
        case ThinkingDelta():
            console.print(f"[dim italic]{escape(event.text)}[/]", end="", highlight=False)
        case ToolCallDelta() | StepFinished() | ModelRequested():
            pass
        case ModelResponded():
            if event.response.message.text:
                console.print()
        case ToolCallStarted():
            args = escape(_short(event.call.raw_arguments))
            console.print(f"[cyan]→ {escape(event.call.name)}[/]({args})", highlight=False)
        case ToolCallFinished():
            style = "red" if event.result.is_error else "green"
            text = escape(_short(event.result.text))
            console.print(
                f"[{style}]← {escape(event.call.name)} [{event.outcome}][/] {text}", highlight=False
            )
        case RunFinished():
            cost = f", ${event.cost:.6f}" if event.cost is not None else ""
            u = event.usage
            console.print(
                f"[dim]done: {u.requests} model calls, {u.input_tokens} in / {u.output_tokens} out tokens{cost}[/]"
            )
        case RunFailed():
            console.print(
                f"[bold red]failed: {escape(event.error_type)}: {escape(event.message)}[/]"
            )
        case RunStarted() | UserPrompt():
            pass
        case _:  # the effect gate's events (legato.effects)
            console.print(f"[yellow]{escape(gate_line(event))}[/]", highlight=False)


def render_journal(console: Console, journal: Journal) -> None:
    """Print a journal, one line per event, with the step it belongs to."""
    for number, event in enumerate(journal, start=1):
        prefix = f"[dim]{number:>4}[/] "
        match event:
            case RunStarted():
                console.print(
                    f"{prefix}[bold]run {event.run_id}[/] agent={escape(event.agent)} model={escape(event.model)}"
                )
            case UserPrompt():
                label = "retry prompt" if event.retry else "user"
                console.print(f"{prefix}[yellow]{label}:[/] {escape(_short(event.message.text))}")
            case ModelRequested():
                console.print(f"{prefix}step {event.step}: request to {escape(event.model)}")
            case ModelResponded():
                message = event.response.message
                calls = ", ".join(c.name for c in message.tool_calls)
                summary = _short(message.text) or (f"calls {calls}" if calls else "(empty)")
                console.print(
                    f"{prefix}step {event.step}: [magenta]assistant:[/] {escape(summary)}"
                )
            case ToolCallStarted():
                console.print(
                    f"{prefix}  [cyan]→ {escape(event.call.name)}[/]({escape(_short(event.call.raw_arguments))})"
                )
            case ToolCallFinished():
                style = "red" if event.result.is_error else "green"
                console.print(
                    f"{prefix}  [{style}]← {escape(event.call.name)} [{event.outcome}][/] {escape(_short(event.result.text))}"
                )
            case StepFinished():
                pass
            case RunFinished():
                console.print(
                    f"{prefix}[bold green]finished:[/] {escape(_short(json.dumps(event.output)))}"
                )
            case RunFailed():
                console.print(
                    f"{prefix}[bold red]failed:[/] {escape(event.error_type)}: {escape(event.message)}"
                )
            case _:
                console.print(f"{prefix}  [yellow]{escape(gate_line(event))}[/]")
