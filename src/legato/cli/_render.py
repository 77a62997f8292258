"""Render run events and journals for people, with rich."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from legato.events import (
    Compacted,
    Journal,
    ModelRequested,
    ModelResponded,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    UserPrompt,
)

__all__ = ["render_event", "render_journal"]

_LIMIT = 300


def _short(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= _LIMIT else text[: _LIMIT - 1] + "…"


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
        case Compacted():
            console.print(
                f"[dim]context compacted ({event.strategy}): {event.tokens_before} → {event.tokens_after} tokens[/]"
            )


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
            case Compacted():
                console.print(
                    f"{prefix}[dim]compacted ({event.strategy}, {event.reason}): removed "
                    f"{len(event.removed)} messages, elided {len(event.elided)} results, "
                    f"{event.tokens_before} → {event.tokens_after} tokens[/]"
                )
