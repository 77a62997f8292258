"""`legato eval`: run a dataset against a model (resumable), and compare two reports.

```
legato eval cases.yaml --model anthropic:claude-sonnet-4-5 --json a.json
legato eval cases.yaml --model openai:gpt-5 --agent agent.yaml --json b.json
legato eval compare a.json b.json
legato eval legato.evals.injection:injection_suite --set defence=off --json off.json
legato eval cases.yaml -m openai:gpt-5 --store postgresql://localhost/evals
```

A target `module:attribute` names a `legato.evals.Suite` (a dataset that brings its own
agent per case and its evaluators), or a function returning one, called with the
`--set key=value` pairs as keyword arguments. `--store` takes a SQLite file or a
`postgresql://` DSN (the `postgres` extra).

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
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from legato.cli._common import DEFAULT_STORE, open_sqlite
from legato.cli._options import BaseUrlOption, ModelOption, ToolsOption
from legato.exceptions import ConfigurationError, LegatoError

if TYPE_CHECKING:
    from legato.evals import CaseResult, Comparison, Dataset, Suite
    from legato.store import PostgresStore, SQLiteStore

__all__ = ["eval_command"]


def _default_id(dataset: Dataset, model: str) -> str:
    raw = f"{dataset.name}-{model}-{dataset.digest[:8]}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)


def _open_store(target: str) -> SQLiteStore | PostgresStore:
    """A SQLite file, or the PostgreSQL database a `postgresql://` DSN names."""
    if target.startswith(("postgresql://", "postgres://")):
        from legato.store import PostgresStore

        return PostgresStore(target)
    return open_sqlite(target)


def _settings(pairs: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            msg = f"--set takes key=value, not {pair!r}"
            raise ConfigurationError(msg)
        found[key.strip()] = value
    return found


def _load_suite(target: str, settings: dict[str, str]) -> Suite:
    """The suite `module:attribute` names (a function is called with the settings)."""
    from legato.cli._common import load_object
    from legato.evals import Suite

    loaded: object = load_object(target)
    if not isinstance(loaded, Suite) and callable(loaded):
        try:
            loaded = loaded(**settings)
        except TypeError as exc:
            msg = f"{target}: {exc}"
            raise ConfigurationError(msg) from exc
    elif settings:
        msg = f"{target} is not a function: --set has nothing to pass to"
        raise ConfigurationError(msg)
    if not isinstance(loaded, Suite):
        msg = f"{target} is not a legato.evals.Suite (nor a function returning one)"
        raise ConfigurationError(msg)
    return loaded


def _is_suite(target: str) -> bool:
    return ":" in target and not Path(target).exists() and "://" not in target


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
    from legato.evals import rate_text

    p = "-" if diff.p_value is None else f"{diff.p_value:.3g}"
    before = rate_text(diff.pass_rate_before, diff.interval_before)
    after = rate_text(diff.pass_rate_after, diff.interval_after)
    summary = (
        f"pass rate {before} -> {after} (95% CI); "
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
            metavar="DATASET | module:suite | compare A.json B.json",
            help=(
                "A dataset (YAML, JSON or JSONL) or a suite (module:attribute) to run,"
                " or `compare` and two JSON reports."
            ),
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
        str,
        typer.Option(
            "--store",
            help="Where the runs' journals are kept: a SQLite file or a postgresql:// DSN.",
        ),
    ] = DEFAULT_STORE,
    settings: Annotated[
        list[str] | None,
        typer.Option("--set", help="key=value for a suite's function (repeatable)."),
    ] = None,
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
                targets[0],
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
                    settings=_settings(settings or []),
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
    settings: dict[str, str]
    fresh: bool
    json_out: Path | None
    html_out: Path | None


def _agent_and_dataset(
    target: str, options: _Options, console: Console
) -> tuple[Any, Dataset, tuple[Any, ...], dict[str, Any], str]:
    """(agent or factory, dataset, evaluators, metadata, default id) for a target."""
    from legato.cli._run import AgentRequest, build_agent
    from legato.evals import Dataset

    if _is_suite(target):
        if options.model is not None or options.agent_file is not None or options.tools:
            msg = "a suite brings its own agent: --model, --agent and --tools do not apply"
            raise ConfigurationError(msg)
        suite = _load_suite(target, options.settings)
        default = _default_id(suite.dataset, suite.name)
        return suite.agent, suite.dataset, suite.evaluators, dict(suite.metadata), default
    if options.settings:
        msg = "--set applies to a suite (module:attribute), not to a dataset file"
        raise ConfigurationError(msg)
    dataset = Dataset.from_file(Path(target))
    request = AgentRequest(
        model=options.model,
        base_url=options.base_url,
        tools=options.tools,
        agent_file=options.agent_file,
    )
    agent = build_agent(request, approver=None, console=console)
    return agent, dataset, (), {}, _default_id(dataset, agent.model.name)


async def _run(target: str, options: _Options, console: Console) -> int:
    from legato.budgets import Budget
    from legato.evals import evaluate, report_html, report_table

    agent, dataset, evaluators, metadata, default_id = _agent_and_dataset(target, options, console)
    budget = None
    if options.dollars is not None or options.model_calls is not None:
        budget = Budget(dollars=options.dollars, model_calls=options.model_calls)
    eval_id = options.eval_id or default_id
    store = _open_store(options.store)
    try:
        console.print(
            f"evaluation [bold]{escape(eval_id)}[/]: {len(dataset.cases)} cases x {options.repeats}",
            highlight=False,
        )
        report = await evaluate(
            agent,
            dataset,
            eval_id=eval_id,
            evaluators=evaluators,
            store=store,
            repeats=options.repeats,
            concurrency=options.concurrency,
            budget=budget,
            resume=not options.fresh,
            on_result=_progress(console),
            metadata=metadata,
        )
        console.print(report_table(report))
        if options.json_out is not None:
            report.save(options.json_out)
            console.print(f"report written to {escape(str(options.json_out))}", highlight=False)
        if options.html_out is not None:
            options.html_out.write_text(report_html(report, store=store), encoding="utf-8")
            console.print(
                f"HTML report written to {escape(str(options.html_out))}", highlight=False
            )
    finally:
        store.close()
    counts = report.counts
    bad = sum(counts[k] for k in ("failed", "unscored", "error", "budget", "invalid"))
    return 1 if bad else 0
