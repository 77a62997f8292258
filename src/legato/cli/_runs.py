"""`legato runs`: stored runs from a terminal (list, show, approve, reject, resume, fork).

Every command takes `--store`: a SQLite file (default `.legato/legato.db`) or a
`postgresql://` DSN. Approving and rejecting go through the store's approval table, so a
run parked by one process is decided here and resumed here or anywhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
from collections.abc import Generator
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from legato.approvals import (
    ApprovalRequest,
    Approve,
    Decision,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
)
from legato.cli._common import DEFAULT_STORE, open_sqlite
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    Journal,
    RunResumed,
    RunStarted,
    SpawnStarted,
)
from legato.exceptions import ConfigurationError, LegatoError

runs_app = typer.Typer(no_args_is_help=True, help="Stored runs: list, show, decide, resume, fork.")

StoreOption = Annotated[
    str,
    typer.Option("--store", "-s", help="A SQLite file or a postgresql:// DSN."),
]


def open_store(target: str) -> Any:
    """The run store at `target` (SQLite path or PostgreSQL DSN)."""
    if target.startswith(("postgresql://", "postgres://")):
        from legato.store import PostgresStore

        return PostgresStore(target)
    return open_sqlite(target)


def resolve_run(store: Any, prefix: str) -> str:
    """The id of the one stored run whose id starts with `prefix` (a whole id works too).

    `ConfigurationError` when no run matches, or when several do (the message lists them).
    """
    if not prefix:
        msg = "an empty run id"
        raise ConfigurationError(msg)
    if store.run_info(prefix) is not None:
        return prefix
    matches = sorted(
        {i.run_id for i in store.list_runs(limit=1_000_000) if i.run_id.startswith(prefix)}
    )
    if not matches:
        msg = f"no stored run with an id starting {prefix!r} (see `legato runs list`)"
        raise ConfigurationError(msg)
    if len(matches) > 1:
        shown = ", ".join(matches[:10]) + (", ..." if len(matches) > 10 else "")
        msg = f"{prefix!r} is the start of {len(matches)} run ids: {shown}; give more of it"
        raise ConfigurationError(msg)
    return matches[0]


def shown_status(store: Any, info: Any) -> str:
    """The status to show: a fork nothing has resumed yet is `forked`, not `running`."""
    if info.status != "running":
        return str(info.status)
    try:
        journal: Journal = store.load_run(info.run_id)
    except LegatoError:
        return str(info.status)
    first = journal.events[0] if journal.events else None
    if (
        isinstance(first, RunStarted)
        and first.forked_from is not None
        and not any(isinstance(e, RunResumed) for e in journal)
    ):
        return "forked (not resumed)"
    return str(info.status)


@contextlib.contextmanager
def _opened(target: str) -> Generator[Any]:
    """The store at `target`, closed when the command is done with it.

    A SQLite file's handle shares the process's one connection to that file with every
    other legato object on it (an agent's store, its approvals), so the command never opens
    a second connection beside theirs.
    """
    store = open_store(target)
    try:
        yield store
    finally:
        store.close()


def _approvals(store: Any) -> SQLiteApprovalStore | PostgresApprovalStore:
    from legato.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return SQLiteApprovalStore(store)
    return PostgresApprovalStore(store)


def _fail(console: Console, exc: Exception) -> typer.Exit:
    console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
    return typer.Exit(1)


def _tree(store: Any, run_id: str) -> list[str]:
    """The run and its descendants (from their `SpawnStarted` links), parents first."""
    order = [run_id]
    for current in order:
        try:
            journal: Journal = store.load_run(current)
        except LegatoError:
            continue
        for event in journal:
            child = event.lineage.run_id if isinstance(event, SpawnStarted) else None
            if child is not None and child not in order:
                order.append(child)
    return order


async def _pending(store: Any, run_id: str) -> list[ApprovalRequest]:
    """Requests of the run's tree its journals show undecided, that the store still holds."""
    approvals = _approvals(store)
    found: list[ApprovalRequest] = []
    for member in _tree(store, run_id):
        journal: Journal = store.load_run(member)
        requested = [e.request_id for e in journal if isinstance(e, ApprovalRequested)]
        decided = {e.request_id for e in journal if isinstance(e, ApprovalDecided)}
        for request_id in requested:
            if request_id in decided:
                continue
            request = await approvals.get(request_id)
            if request is not None and await approvals.decision(request_id) is None:
                found.append(request)
    return found


@runs_app.command("list")
def list_runs(
    store: StoreOption = DEFAULT_STORE,
    status: Annotated[
        str | None, typer.Option(help="Only runs with this status (running, parked, ...).")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List stored runs, newest first."""
    console = Console()
    try:
        with _opened(store) as opened:
            infos = [(i, shown_status(opened, i)) for i in opened.list_runs(limit=limit)]
    except LegatoError as exc:
        raise _fail(console, exc) from None
    infos = [(i, s) for i, s in infos if status is None or status in (i.status, s.split()[0])]
    if as_json:
        for info, shown in infos:
            typer.echo(
                json.dumps(
                    {
                        "run_id": info.run_id,
                        "agent": info.agent,
                        "model": info.model,
                        "session": info.session,
                        "status": shown,
                        "events": info.events,
                        "created_at": info.created_at,
                    }
                )
            )
        return
    table = Table("run", "agent", "model", "status", "events", "created")
    table.columns[0].no_wrap = True  # an id is copied whole, never cut or folded
    table.columns[0].min_width = max((len(i.run_id) for i, _ in infos), default=3)
    for info, shown in infos:
        created = datetime.datetime.fromtimestamp(info.created_at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(info.run_id, info.agent, info.model, shown, str(info.events), created)
    console.print(table)


@runs_app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="The run's id, or the start of it.")],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Print a stored run's journal and the approvals it waits on."""
    from legato.cli._render import render_journal

    console = Console()
    try:
        with _opened(store) as opened:
            run_id = resolve_run(opened, run_id)
            info = opened.run_info(run_id)
            assert info is not None  # resolve_run found it
            console.print(
                f"[bold]{info.run_id}[/] {escape(info.agent)} {escape(info.model)} "
                f"[bold]{escape(shown_status(opened, info))}[/]",
                highlight=False,
            )
            render_journal(console, opened.load_run(run_id))
            for request in asyncio.run(_pending(opened, run_id)):
                args = json.dumps(request.arguments, ensure_ascii=False)
                console.print(
                    f"[yellow]waiting:[/] request {request.id} (run {request.run_id}) "
                    f"{escape(request.tool)}({escape(args)}): {escape(request.rule)}"
                )
    except LegatoError as exc:
        raise _fail(console, exc) from None


def _decide(target: str, store: str, decision: Decision, console: Console) -> None:
    try:
        with _opened(store) as opened:
            approvals = _approvals(opened)

            async def decide() -> list[ApprovalRequest]:
                single = await approvals.get(target)
                if single is not None:
                    requests = [single]
                else:
                    try:
                        run_id = resolve_run(opened, target)
                    except ConfigurationError as exc:
                        if "run ids" in str(exc):
                            raise  # an ambiguous prefix: the message lists the candidates
                        msg = f"{target!r} is neither an approval request nor a stored run"
                        raise ConfigurationError(msg) from None
                    requests = await _pending(opened, run_id)
                for request in requests:
                    await approvals.decide(request.id, request.token, decision)
                return requests

            decided = asyncio.run(decide())
    except LegatoError as exc:
        raise _fail(console, exc) from None
    if not decided:
        console.print("nothing to decide: no pending approval request")
        raise typer.Exit(1)
    for request in decided:
        console.print(
            f"{decision.verdict}: {request.id} {escape(request.tool)} (run {request.run_id})"
        )


TemporalOption = Annotated[
    str | None,
    typer.Option(
        "--temporal",
        help="A Temporal frontend (host:port): decide the run's workflow through its update.",
    ),
]


def _decide_temporal(run_id: str, address: str, decision: Decision, console: Console) -> None:
    """Decide every request a run's Temporal workflow waits on (one update each)."""
    from temporalio.client import Client
    from temporalio.service import RPCError

    from legato.temporal import TemporalRuns

    async def decide() -> list[str]:
        runs = TemporalRuns(await Client.connect(address), task_queue="")
        requests = await runs.open_requests(run_id)
        verdict = "approve" if isinstance(decision, Approve) else "reject"
        for request_id in requests:
            await runs.decide(run_id, request_id, verdict, message=decision.message or None)
        return requests

    try:
        decided = asyncio.run(decide())
    except (LegatoError, RPCError, RuntimeError) as exc:
        raise _fail(console, exc) from None
    if not decided:
        console.print("nothing to decide: the run's workflow waits on no approval request")
        raise typer.Exit(1)
    for request_id in decided:
        console.print(f"{decision.verdict}: {request_id} (run {run_id}, through Temporal)")


@runs_app.command("approve")
def approve(
    target: Annotated[
        str,
        typer.Argument(help="A request id, or a run id or its start (all the run's requests)."),
    ],
    store: StoreOption = DEFAULT_STORE,
    message: Annotated[str | None, typer.Option(help="A note for the journal.")] = None,
    temporal: TemporalOption = None,
) -> None:
    """Approve a pending request (or every pending request of a run's tree).

    With `--temporal`, TARGET is the run id of a run on Temporal.
    """
    if temporal is not None:
        _decide_temporal(target, temporal, Approve(message=message or ""), Console())
        return
    _decide(target, store, Approve(message=message or ""), Console())


@runs_app.command("reject")
def reject(
    target: Annotated[
        str,
        typer.Argument(help="A request id, or a run id or its start (all the run's requests)."),
    ],
    store: StoreOption = DEFAULT_STORE,
    message: Annotated[
        str | None, typer.Option(help="What the model is told (e.g. 'it ran', 'not now').")
    ] = None,
    temporal: TemporalOption = None,
) -> None:
    """Reject a pending request (or every pending request of a run's tree).

    With `--temporal`, TARGET is the run id of a run on Temporal.
    """
    decision = Reject(message=message or Reject().message)
    if temporal is not None:
        _decide_temporal(target, temporal, decision, Console())
        return
    _decide(target, store, decision, Console())


@runs_app.command("resume")
def resume(
    run_id: Annotated[str, typer.Argument(help="The run's id, or the start of it.")],
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="The agent that runs it, as module:object.")
    ],
    store: StoreOption = DEFAULT_STORE,
    takeover: Annotated[
        bool, typer.Option(help="The process that drove it is known to be gone (another host).")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Continue on this 'provider:model' instead of the agent's."
        ),
    ] = None,
) -> None:
    """Continue a parked or interrupted run with its agent; prints the answer."""
    from legato.agent import Agent
    from legato.cli._common import load_object
    from legato.exceptions import RunParked

    console = Console()
    try:
        loaded: object = load_object(agent)
        if not isinstance(loaded, Agent):
            msg = f"{agent!r} is not a legato Agent"
            raise ConfigurationError(msg)
        runner = cast("Agent[Any]", loaded)
        with _opened(store) as opened:
            runner.store = opened  # a SQLite file: the same connection as the agent's own
            result = runner.resume_sync(resolve_run(opened, run_id), takeover=takeover, model=model)
    except RunParked as parked:
        console.print(f"[yellow]parked again:[/] {escape(str(parked))}")
        raise typer.Exit(2) from None
    except LegatoError as exc:
        raise _fail(console, exc) from None
    output = result.output
    typer.echo(output if isinstance(output, str) else json.dumps(output, default=str))


@runs_app.command("fork")
def fork(
    run_id: Annotated[str, typer.Argument(help="The run's id, or the start of it.")],
    at: Annotated[int, typer.Option("--at", help="Keep events 1..AT (see `runs show`).")],
    store: StoreOption = DEFAULT_STORE,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the new id.")] = False,
) -> None:
    """Fork a stored run at an event into a new run (nothing in the prefix runs again)."""
    from legato.run import fork_stored

    console = Console(highlight=False)
    try:
        with _opened(store) as opened:
            run_id = resolve_run(opened, run_id)
            new_id = fork_stored(opened, run_id, at)
    except LegatoError as exc:
        raise _fail(console, exc) from None
    if quiet:
        typer.echo(new_id)
        return
    console.print(
        f"forked run {run_id} at event {at} into [bold]{new_id}[/] (not resumed yet)",
        soft_wrap=True,
    )
    console.print(
        f"continue it with: legato runs resume {new_id} --agent MODULE:OBJECT"
        + (f" --store {store}" if store != DEFAULT_STORE else ""),
        markup=False,
        soft_wrap=True,
    )
