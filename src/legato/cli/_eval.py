"""`legato eval`: run a dataset against a model (resumable), and compare two reports.

```
legato eval cases.yaml --model anthropic:claude-sonnet-4-5 --json a.json
legato eval cases.yaml --model openai:gpt-5 --agent agent.yaml --json b.json
legato eval compare a.json b.json
```

Running the same command again resumes the evaluation: its id (`--id`, default the
dataset's name, the model and the dataset's digest) names the runs in the store, and
finished ones are not run or paid for again. `--fresh` runs every case anew.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from legato.cli._common import DEFAULT_STORE, open_sqlite
from legato.cli._options import BaseUrlOption, ModelOption, ToolsOption
from legato.exceptions import ConfigurationError, LegatoError

if TYPE_CHECKING:
    from legato.evals import CaseResult, Comparison, Dataset

__all__ = ["eval_command"]


def _default_id(dataset: Dataset, model: str) -> str:
    raw = f"{dataset.name}-{model}-{dataset.digest[:8]}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)


def _progress(console: Console) -> Callable[[CaseResult], None]:
    def show(result: CaseResult) -> None:
        if result.status != "ok":
            mark = f"[yellow]{result.status}[/]"
        else:
            mark = {True: "[green]pass[/]", False: "[red]fail[/]", None: "[yellow]unscored[/]"}[
                result.passed
            ]
        note = " (stored)" if result.reused else ""
        console.print(f"{mark} {escape(result.case_id)} #{result.repeat}{note}", highlight=False)

    return show


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _comparison_summary(diff: Comparison) -> str:
    rate = _rate
    p = "-" if diff.p_value is None else f"{diff.p_value:.3g}"
    summary = (
        f"pass rate {rate(diff.pass_rate_before)} -> {rate(diff.pass_rate_after)}; "
        f"{len(diff.regressions)} regressions, {len(diff.improvements)} improvements; "
        f"McNemar p = {p}"
    )
    if not diff.same_dataset:
        summary += "; the datasets differ"
    return summary


def _comparison_table(diff: Comparison) -> Table:
    rate = _rate
    table = Table(title=f"{escape(diff.before)} -> {escape(diff.after)}")
    for column in ("case", "before", "after", "change"):
        table.add_column(column)
    style = {"regression": "[red]regression[/]", "improvement": "[green]improvement[/]"}
    for change in sorted(diff.changes, key=lambda c: c.kind != "regression"):
        table.add_row(
            escape(change.case_id),
            rate(change.before),
            rate(change.after),
            style.get(change.kind, change.kind),
        )
    return table


def _compare(paths: list[str], console: Console) -> int:
    from legato.evals import EvalReport, compare

    if len(paths) != 2:
        msg = "compare takes two reports: legato eval compare A.json B.json"
        raise ConfigurationError(msg)
    diff = compare(EvalReport.load(paths[0]), EvalReport.load(paths[1]))
    if diff.changes:
        console.print(_comparison_table(diff))
    console.print(_comparison_summary(diff), highlight=False)
    return 0


def eval_command(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="DATASET | compare A.json B.json",
            help="A dataset (YAML, JSON or JSONL) to run, or `compare` and two JSON reports.",
        ),
    ],
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    tools: ToolsOption = None,
    agent_file: Annotated[
        Path | None,
        typer.Option("--agent", "-a", help="An agent file (YAML) to evaluate.", dir_okay=False),
    ] = None,
    eval_id: Annotated[
        str | None,
        typer.Option("--id", help="The evaluation's id (default: dataset, model and digest)."),
    ] = None,
    repeats: Annotated[int, typer.Option(help="Runs per case.")] = 1,
    concurrency: Annotated[int, typer.Option(help="Runs in flight at once.")] = 4,
    dollars: Annotated[
        float | None, typer.Option(help="US dollars the whole evaluation may spend.")
    ] = None,
    model_calls: Annotated[
        int | None, typer.Option(help="Model calls the whole evaluation may make.")
    ] = None,
    store: Annotated[
        str, typer.Option("--store", help="The SQLite file the runs' journals are kept in.")
    ] = DEFAULT_STORE,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Run every case anew instead of resuming.")
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the report (JSON) here.")
    ] = None,
    html_out: Annotated[
        Path | None,
        typer.Option("--html", help="Write the report as one HTML file, with each journal."),
    ] = None,
) -> None:
    """Evaluate an agent on a dataset (resumable), or compare two reports.

    Exits 1 when a case failed, was not scored, or could not run.
    """
    console = Console()
    try:
        if targets and targets[0] == "compare":
            raise typer.Exit(_compare(targets[1:], console))
        if len(targets) != 1:
            msg = "one dataset file (or: legato eval compare A.json B.json)"
            raise ConfigurationError(msg)
        code = asyncio.run(
            _run(
                Path(targets[0]),
                _Options(
                    model=model,
                    base_url=base_url,
                    tools=tools or [],
                    agent_file=agent_file,
                    eval_id=eval_id,
                    repeats=repeats,
                    concurrency=concurrency,
                    dollars=dollars,
                    model_calls=model_calls,
                    store=store,
                    fresh=fresh,
                    json_out=json_out,
                    html_out=html_out,
                ),
                console,
            )
        )
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    model: str | None
    base_url: str | None
    tools: list[str]
    agent_file: Path | None
    eval_id: str | None
    repeats: int
    concurrency: int
    dollars: float | None
    model_calls: int | None
    store: str
    fresh: bool
    json_out: Path | None
    html_out: Path | None


async def _run(dataset_path: Path, options: _Options, console: Console) -> int:
    from legato.budgets import Budget
    from legato.cli._run import AgentRequest, build_agent
    from legato.evals import Dataset, evaluate, report_html, report_table

    dataset = Dataset.from_file(dataset_path)
    request = AgentRequest(
        model=options.model,
        base_url=options.base_url,
        tools=options.tools,
        agent_file=options.agent_file,
    )
    agent = build_agent(request, approver=None, console=console)
    budget = None
    if options.dollars is not None or options.model_calls is not None:
        budget = Budget(dollars=options.dollars, model_calls=options.model_calls)
    eval_id = options.eval_id or _default_id(dataset, agent.model.name)
    store = open_sqlite(options.store)
    console.print(
        f"evaluation [bold]{escape(eval_id)}[/]: {len(dataset.cases)} cases x {options.repeats}",
        highlight=False,
    )
    report = await evaluate(
        agent,
        dataset,
        eval_id=eval_id,
        store=store,
        repeats=options.repeats,
        concurrency=options.concurrency,
        budget=budget,
        resume=not options.fresh,
        on_result=_progress(console),
    )
    console.print(report_table(report))
    if options.json_out is not None:
        report.save(options.json_out)
        console.print(f"report written to {escape(str(options.json_out))}", highlight=False)
    if options.html_out is not None:
        options.html_out.write_text(report_html(report, store=store), encoding="utf-8")
        console.print(f"HTML report written to {escape(str(options.html_out))}", highlight=False)
    counts = report.counts
    bad = sum(counts[k] for k in ("failed", "unscored", "error", "budget", "invalid"))
    return 1 if bad else 0
