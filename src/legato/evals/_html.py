"""The HTML report: one self-contained file, failures first, each case's journal inside.

No script, no external stylesheet or font: the file opens anywhere, offline. Everything
from a case (inputs, outputs, tool arguments, reasons) is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING

from legato.evals._report import rate_text
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    Journal,
    JournalEvent,
    ModelResponded,
    RunFailed,
    RunFinished,
    StateRejected,
    ToolCallFinished,
    ToolCallRefused,
    UserPrompt,
)

if TYPE_CHECKING:
    from legato.evals._results import CaseResult, EvalReport
    from legato.store import RunStore

__all__ = ["report_html"]

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.4em; } table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3em .6em; border-bottom: 1px solid #ddd; vertical-align: top; }
.fail { color: #b00020; font-weight: 600; } .pass { color: #1b7f3b; font-weight: 600; }
.other { color: #a15c00; font-weight: 600; } details { margin: .2em 0; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .5em; margin: .3em 0; }
.event { font-family: ui-monospace, monospace; font-size: 12px; }
"""


def _verdict(result: CaseResult) -> tuple[str, str]:
    if result.status != "ok":
        return result.status, "other"
    if result.passed is None:
        return "unscored", "other"
    return ("pass", "pass") if result.passed else ("fail", "fail")


def _event_line(event: JournalEvent) -> str | None:
    """One line for an event a reader of the report cares about (None: left out)."""
    if isinstance(event, UserPrompt):
        return f"user: {event.message.text}"
    if isinstance(event, ModelResponded):
        text = event.response.message.text
        usage = event.response.usage
        return (
            f"model (step {event.step}, {usage.input_tokens}+{usage.output_tokens} tokens): {text}"
        )
    if isinstance(event, ToolCallFinished):
        arguments = json.dumps(event.call.arguments, ensure_ascii=False)
        return f"tool {event.call.name}({arguments}) -> {event.outcome}: {event.result.text}"
    if isinstance(event, ToolCallRefused):
        return f"refused {event.tool} ({event.reason}): {event.message}"
    if isinstance(event, ApprovalRequested):
        return f"approval asked for {event.call.name} (rule {event.rule})"
    if isinstance(event, ApprovalDecided):
        return f"approval {event.verdict} for call {event.call_id}"
    if isinstance(event, StateRejected):
        return f"contract rejected {event.tool} ({event.stage}): {event.message}"
    if isinstance(event, RunFinished):
        return f"finished: {json.dumps(event.output, ensure_ascii=False)}"
    if isinstance(event, RunFailed):
        return f"failed: {event.error_type}: {event.message}"
    return None


def _journal_block(journal: Journal | None) -> str:
    if journal is None:
        return "<p>(journal not available)</p>"
    lines = [line for line in (_event_line(e) for e in journal) if line is not None]
    body = "".join(f'<div class="event">{escape(line)}</div>' for line in lines)
    return f"<details><summary>journal ({len(journal)} events)</summary>{body}</details>"


def _row(result: CaseResult, journal: Journal | None) -> str:
    label, css = _verdict(result)
    reasons = [f"{s.name}: {s.reason}" for s in result.scores if s.passed is not True]
    if result.error:
        reasons.insert(0, result.error)
    why = "".join(f"<div>{escape(r)}</div>" for r in reasons)
    output = (
        result.output
        if isinstance(result.output, str)
        else json.dumps(result.output, ensure_ascii=False, indent=1)
    )
    cost = "-" if result.cost is None else f"${result.cost:.4f}"
    return (
        f'<tr class="case" data-case="{escape(result.case_id)}" data-verdict="{label}">'
        f"<td>{escape(result.case_id)}</td><td>{result.repeat}</td>"
        f'<td class="{css}">{label}</td><td>{why}</td>'
        f"<td><pre>{escape(output)}</pre>{_journal_block(journal)}</td>"
        f"<td>{result.tokens}</td><td>{cost}</td></tr>"
    )


def report_html(report: EvalReport, /, *, store: RunStore | None = None) -> str:
    """The report as one HTML page, failures first; with `store`, each case's journal too."""
    journals: Mapping[str, Journal] = {}
    if store is not None:
        journals = {
            r.run_id: store.load_run(r.run_id)
            for r in report.results
            if r.run_id is not None and store.run_info(r.run_id) is not None
        }
    counts = report.counts
    rate = rate_text(report.pass_rate, report.pass_rate_interval)
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    rows = "".join(
        _row(r, journals.get(r.run_id) if r.run_id else None) for r in report.failures_first()
    )
    invalid = "".join(
        f'<tr class="case" data-verdict="invalid"><td>{escape(i.id or f"#{i.position}")}</td>'
        f'<td>-</td><td class="other">invalid</td><td>{escape(i.reason)}</td>'
        f"<td></td><td>-</td><td>-</td></tr>"
        for i in report.invalid
    )
    title = escape(f"evaluation {report.eval_id}")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
        f"<title>{title}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{title}</h1>"
        f'<p id="summary">dataset {escape(report.dataset)} · agent {escape(report.agent)} · '
        f"model {escape(report.model)} · pass rate {escape(rate)} (95% CI) · ${report.cost:.4f} · "
        f"{escape(summary)}</p>"
        "<table><thead><tr><th>case</th><th>repeat</th><th>result</th><th>why</th>"
        "<th>output and journal</th><th>tokens</th><th>cost</th></tr></thead>"
        f"<tbody>{rows}{invalid}</tbody></table></body></html>\n"
    )
