"""Render run events and journals for people, with rich."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    ChildEvent,
    Compacted,
    ContextSliced,
    HookApplied,
    Journal,
    ModelRequested,
    ModelResponded,
    Parked,
    RunEvent,
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
    TextDelta,
    ThinkingDelta,
    ToolCallAdmitted,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRefused,
    ToolCallStarted,
    ToolProgress,
    UserPrompt,
)

__all__ = ["render_event", "render_journal"]

_LIMIT = 300


def _short(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= _LIMIT else text[: _LIMIT - 1] + "…"


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def state_lines(event: StateLoaded | StateCommitted | StateRejected) -> list[str]:
    """Readable lines (rich markup) for a verified-state event: loads, commits, rejections."""
    match event:
        case StateLoaded():
            values = ", ".join(f"{k}={_json(v)}" for k, v in event.values.items())
            return [
                f"[blue]state v{event.version}[/] loaded ({escape(event.schema_name)}): "
                f"{escape(_short(values))}"
            ]
        case StateCommitted():
            who = escape(event.tool or "application")
            call = f" [dim]{escape(event.call_id)}[/]" if event.call_id else ""
            again = " [yellow](re-checked after a concurrent commit)[/]" if event.rechecked else ""
            lines = [f"[bold blue]✓ state v{event.version}[/] committed by {who}{call}{again}"]
            lines += [
                f"    {escape(c.key)}: {escape(_short(_json(c.old)))} → {escape(_short(_json(c.new)))}"
                for c in event.changes
            ]
            if event.checks:
                lines.append(f"    [dim]passed: {escape(_short('; '.join(event.checks)))}[/]")
            return lines
        case StateRejected():
            label = (
                "[bold red]✗ contract HALTED the run[/]"
                if event.halted
                else "[red]✗ contract rejected[/]"
            )
            what = f" ({escape(event.predicate)})" if event.predicate else ""
            lines = [
                f"{label} {escape(event.tool)} at {event.stage}{what}, state v{event.version}: "
                f"{escape(_short(event.message))}"
            ]
            if event.evidence:
                shown = ", ".join(f"{k}={_json(v)}" for k, v in event.evidence.items())
                lines.append(f"    [dim]evidence: {escape(_short(shown))}[/]")
            return lines


def _spawn_line(event: SpawnStarted | SpawnFinished | ContextSliced | SpawnDecided) -> str:
    """One line for a sub-agent event (empty for the ones not worth a line)."""
    match event:
        case SpawnStarted():
            again = " (resumed)" if event.resumed else ""
            return f"[blue]⑂ child {escape(event.lineage.run_id)}{again}:[/] {escape(_short(event.task))}"
        case SpawnFinished():
            style = {"ok": "blue", "parked": "yellow"}.get(event.outcome, "red")
            detail = event.error or json.dumps(event.output)
            return f"[{style}]⑂ child {escape(event.lineage.run_id)} \\[{event.outcome}][/] {escape(_short(detail))}"
        case ContextSliced():
            return f"[dim]slice for {escape(event.child_run_id)}: {len(event.entries)} items, {event.tokens_passed}/{event.tokens_available} tokens[/]"
        case SpawnDecided():
            return (
                f"[dim]spawn policy {escape(event.policy)}: {escape(event.reason)}[/]"
                if event.spawn
                else ""
            )


def progress_text(event: ToolProgress) -> str:
    """`crawl 40% (2/5): fetched b`: a tool call's progress on one line."""
    fraction = event.fraction
    amount = f"{event.progress:g}" if event.total is None else f"{event.progress:g}/{event.total:g}"
    if fraction is not None:
        amount = f"{fraction:.0%} ({amount})"
    text = f"{event.tool} {amount}"
    return f"{text}: {_short(event.message)}" if event.message else text


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
            line = f"approval {event.verdict} ({event.request_id})"
            if event.verdict == "edit":  # the call runs with these, not the model's
                return f"{line}: run with {_short(_json(event.arguments))}"
            return f"{line}: {_short(event.message)}" if event.message else line
        case CancelRequested():
            return f"cancel requested: {event.reason}"
        case Parked():
            return f"parked, waiting for {len(event.request_ids)} decision(s)"
        case HookApplied():
            return f"hook {event.hook} {event.action} at {event.point}: {_short(event.detail)}"
        case RunResumed():
            on = f" on {event.model}" if event.model else ""
            return f"resumed by {event.owner}{on}"
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
                f"[{style}]← {escape(event.call.name)} {escape('[' + event.outcome + ']')}[/] {text}",
                highlight=False,
            )
        case ToolProgress():
            console.print(f"[dim]  … {escape(progress_text(event))}[/]", highlight=False)
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
        case ChildEvent():
            inner = event.event
            if not isinstance(inner, TextDelta | ThinkingDelta | ToolCallDelta):
                console.print(
                    f"[blue]{'  ' * event.lineage.depth}\\[{escape(event.lineage.agent)}][/]",
                    end=" ",
                )
                render_event(console, inner)
        case _:
            for line in _extra_lines(event):
                console.print(line, highlight=False)


def _extra_lines(event: RunEvent) -> list[str]:
    """Lines for the events of the policy and spawn layers (verified state, sub-agents)."""
    match event:
        case StateCommitted() | StateRejected():
            return state_lines(event)
        case SpawnStarted() | SpawnFinished() | ContextSliced() | SpawnDecided():
            line = _spawn_line(event)
            return [line] if line else []
        case Compacted():
            return [
                f"[dim]context compacted ({event.strategy}): {event.tokens_before} → "
                f"{event.tokens_after} tokens[/]"
            ]
        case StateLoaded():
            return []
        case _:  # the effect gate's events (legato.effects)
            return [f"[yellow]{escape(gate_line(event))}[/]"]


def render_journal(console: Console, journal: Journal) -> None:
    """Print a journal, one line per event, with the step it belongs to."""
    for number, event in enumerate(journal, start=1):
        prefix = f"[dim]{number:>4}[/] "
        match event:
            case RunStarted():
                fork = (
                    f" [dim](forked from {event.forked_from} at event {event.fork_at})[/]"
                    if event.forked_from is not None
                    else ""
                )
                console.print(
                    f"{prefix}[bold]run {event.run_id}[/] agent={escape(event.agent)} "
                    f"model={escape(event.model)}{fork}"
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
                    f"{prefix}  [{style}]← {escape(event.call.name)} {escape('[' + event.outcome + ']')}[/] {escape(_short(event.result.text))}"
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
                _print_extra(console, prefix, event)


def _print_extra(console: Console, prefix: str, event: RunEvent) -> None:
    """A journal line for the events of the policy and spawn layers and of compaction."""
    match event:
        case StateLoaded() | StateCommitted() | StateRejected():
            first, *rest = state_lines(event)
            indent = "" if isinstance(event, StateLoaded) else "  "
            console.print(f"{prefix}{indent}{first}", highlight=False)
            for line in rest:
                console.print(f"     {indent}{line}", highlight=False)
        case SpawnStarted() | SpawnFinished() | ContextSliced() | SpawnDecided():
            line = _spawn_line(event)
            if line:
                console.print(f"{prefix}  {line}", highlight=False)
        case Compacted():
            console.print(
                f"{prefix}[dim]compacted ({event.strategy}, {event.reason}): removed "
                f"{len(event.removed)} messages, elided {len(event.elided)} results, "
                f"{event.tokens_before} → {event.tokens_after} tokens[/]"
            )
        case _:  # the effect gate's events (legato.effects)
            console.print(f"{prefix}  [yellow]{escape(gate_line(event))}[/]")
