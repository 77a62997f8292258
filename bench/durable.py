"""What durable runs cost: write-ahead admissions, journal throughput, resuming a long run.

Run: `python bench/durable.py [--postgres] [--admissions N] [--steps N] [--trials N]`.

1. One durable admission: `Recorder.record(ToolCallAdmitted(...))` with a store as its sink,
   the commit included (median, p95, p99, max, mean over `--admissions` calls), and its outcome
   (`ToolCallFinished`) likewise; the same with the journal in memory for reference. Then
   whole runs: a scripted agent making one irreversible call per step, with a SQLite store
   and without, alternating; and the smallest run (one tool call, two model calls).
2. Journal append throughput (events/s) for the store: batched as the recorder batches
   (one transaction per durable event), one event per transaction, all in one.
3. Resume time of a long run (`--steps`, default 1,000, one tool call per step): the run
   is built in a child process that dies (`os._exit`) at its next model call, as a crash
   would leave it; each trial then times `agent.resume(run_id)` on a fresh copy of that
   store up to the resumed run's first model call (load, rebuild the state, claim).
4. What a store costs the run of bench/provider_overhead.py (two model calls over HTTP to
   its wire simulator, one tool call): no store, SQLite, PostgreSQL with `--postgres`.

SQLite figures are for the store's own settings (WAL, `synchronous=NORMAL`: a commit
survives the process being killed; a power loss may take the last ones back) and, for the
admission, also `synchronous=FULL` (every commit synced to disk). With `--postgres`, a
throwaway cluster is started in a temporary folder (listening on 127.0.0.1 only, default
durability settings: `fsync` and `synchronous_commit` on) and deleted at the end.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import secrets
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path

from legato import Agent, tool
from legato.events import (
    Journal,
    JournalEvent,
    RunStarted,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallStarted,
)
from legato.messages import ToolCallPart, ToolResultPart, Usage
from legato.models import ModelRequest
from legato.run._recorder import JournalSink, Recorder
from legato.run._state import RunState
from legato.store import PostgresStore, SQLiteStore
from legato.testing import FunctionModel, call, reply

USAGE = Usage(input_tokens=100, output_tokens=10, requests=1)


@tool(side_effects="irreversible")
async def ship(order: str) -> str:
    """Ship an order (an irreversible effect; here it only answers).

    Args:
        order: Which order.
    """
    return f"shipped {order}"


# -- statistics --------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def spread(values: list[float], fmt: Callable[[float], str] = us) -> str:
    return f"median {fmt(statistics.median(values))}, p95 {fmt(pct(values, 0.95))}"


def tail(values: list[float]) -> str:
    return (
        f"p99 {us(pct(values, 0.99))}, max {us(max(values))}, mean {us(statistics.fmean(values))}"
    )


# -- 1. one durable admission ------------------------------------------------------------------


def admissions(sink: JournalSink | None, n: int) -> tuple[list[float], list[float]]:
    """Seconds per `record(ToolCallAdmitted)` and per `record(ToolCallFinished)`, n of each.

    As in a run, the call's `ToolCallStarted` is buffered first and goes out with the
    admission's commit.
    """
    run_id = f"bench-{secrets.token_hex(6)}"
    recorder = Recorder(Journal(), RunState(), sink=sink)
    recorder.record(RunStarted(run_id=run_id, agent="bench", model="function:bench"))
    admit: list[float] = []
    finish: list[float] = []
    clock = time.perf_counter
    for i in range(n):
        part = ToolCallPart.from_arguments(id=f"c{i}", name="ship", arguments={"order": f"o{i}"})
        recorder.record(ToolCallStarted(step=i + 1, call=part))
        event = ToolCallAdmitted(
            step=i + 1, call_id=part.id, tool="ship", effect_id=secrets.token_hex(16), epoch=0
        )
        started = clock()
        recorder.record(event)
        admitted = clock()
        result = ToolResultPart.text_result(call_id=part.id, name="ship", text=f"shipped o{i}")
        recorder.record(ToolCallFinished(step=i + 1, call=part, result=result))
        finished = clock()
        admit.append(admitted - started)
        finish.append(finished - admitted)
    return admit, finish


def step_model(steps: int, *, then: Callable[[], object] | None = None) -> FunctionModel:
    """One `ship` call per step for `steps` steps, then `then()` (default: the answer)."""
    answers = [reply(call("ship", {"order": f"o{i}"}), usage=USAGE) for i in range(steps)]

    def respond(request: ModelRequest) -> object:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < steps:
            return answers[done]
        return then() if then is not None else reply("done", usage=USAGE)

    return FunctionModel(respond, chunk_size=1 << 20)  # type: ignore[arg-type] # returns ModelResponse


Runs = dict[str, list[float]]


async def whole_runs(folder: Path, steps: int, rounds: int) -> tuple[Runs, Runs]:
    """Wall and CPU seconds per run of `steps` irreversible calls: no store, SQLite (alternating)."""
    store = SQLiteStore(folder / "runs.db")
    bare: Runs = {"wall": [], "cpu": []}
    stored: Runs = {"wall": [], "cpu": []}
    for i in range(rounds + 1):
        for with_store in (False, True) if i % 2 else (True, False):
            agent = Agent(
                step_model(steps),
                tools=[ship],
                store=store if with_store else None,
                max_steps=steps + 1,
            )
            started, cpu = time.perf_counter(), time.process_time()
            await agent.run("ship them")
            took, cpu = time.perf_counter() - started, time.process_time() - cpu
            if i:  # the first round warms up
                (stored if with_store else bare)["wall"].append(took)
                (stored if with_store else bare)["cpu"].append(cpu)
    store.close()
    return bare, stored


# -- 2. journal append throughput --------------------------------------------------------------


def sample_journal(steps: int) -> list[JournalEvent]:
    agent = Agent(step_model(steps), tools=[ship], max_steps=steps + 1)
    return list(agent.run_sync("ship them").journal.events)


def renamed(events: list[JournalEvent]) -> tuple[str, list[JournalEvent]]:
    """The run's events under a new run id."""
    first = events[0]
    assert isinstance(first, RunStarted)
    run_id = f"bench-{secrets.token_hex(6)}"
    return run_id, [replace(first, run_id=run_id), *events[1:]]


def throughput(store: JournalSink, events: list[JournalEvent]) -> dict[str, float]:
    """Events per second appended to `store`, three ways."""
    rates: dict[str, float] = {}
    _, batch = renamed(events)
    recorder = Recorder(Journal(), RunState(), sink=store)
    started = time.perf_counter()
    for event in batch:
        recorder.record(event)
    recorder.flush()
    rates["as the recorder writes (one commit per durable event)"] = len(batch) / (
        time.perf_counter() - started
    )
    run_id, batch = renamed(events)
    started = time.perf_counter()
    for i, event in enumerate(batch):
        store.append_events(run_id, [event], start=i)
    rates["one event per commit"] = len(batch) / (time.perf_counter() - started)
    run_id, batch = renamed(events)
    started = time.perf_counter()
    store.append_events(run_id, batch, start=0)
    rates["all in one commit"] = len(batch) / (time.perf_counter() - started)
    return rates


# -- 3. resuming a long run --------------------------------------------------------------------


def build_crashed_run(target: str, steps: int) -> None:
    """In a child process: run `steps` steps against `target`'s store, then die mid-run."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(
        [sys.executable, __file__, "--build-run", target, str(steps)], check=True, env=env
    )


def _build_run(target: str, steps: int) -> None:
    store = open_store(target)

    def crash() -> object:
        os._exit(0)  # no cleanup, no flush: what SIGKILL leaves

    agent = Agent(step_model(steps, then=crash), tools=[ship], store=store, max_steps=steps + 10)
    agent.run_sync("ship them")


def open_store(target: str) -> SQLiteStore | PostgresStore:
    return PostgresStore(target) if target.startswith("postgresql://") else SQLiteStore(target)


Timed = dict[str, tuple[float, float]]
"""Figures as (wall seconds, CPU seconds)."""


async def resume_once(store: SQLiteStore | PostgresStore, steps: int) -> tuple[Timed, int]:
    """One resume of the store's only run, to its first model call, and the resume's parts."""
    run_id = store.list_runs(limit=1)[0].run_id
    first_call: list[float] = []

    def respond(request: ModelRequest) -> object:
        first_call.extend((time.perf_counter(), time.process_time()))
        return reply("done", usage=USAGE)

    model = FunctionModel(respond)  # type: ignore[arg-type] # returns ModelResponse
    agent = Agent(model, tools=[ship], store=store, max_steps=steps + 10)
    started, cpu = time.perf_counter(), time.process_time()
    result = await agent.resume(run_id)
    assert result.output == "done"
    figures: Timed = {
        "resume to the first model call": (first_call[0] - started, first_call[1] - cpu)
    }
    # its parts, measured again on the same store after the resume
    events: list[JournalEvent] = []
    parts: list[tuple[str, Callable[[], object]]] = [
        ("load the journal from the store", lambda: events.extend(store.load_run(run_id))),
        ("rebuild the run's state from it", lambda: RunState.from_events(events)),
    ]
    try:  # a private helper of `Agent.resume`, measured while it exists
        from legato.agent import _same_prefix  # pyright: ignore[reportPrivateUsage]
    except ImportError:
        pass
    else:
        parts.append(("compare it with the stored copy", lambda: _same_prefix(events, events)))
    for label, part in parts:
        started, cpu = time.perf_counter(), time.process_time()
        part()
        figures[label] = (time.perf_counter() - started, time.process_time() - cpu)
    return figures, len(events)


async def resumes(
    copies: Iterator[SQLiteStore | PostgresStore], steps: int
) -> tuple[dict[str, list[tuple[float, float]]], int]:
    figures: dict[str, list[tuple[float, float]]] = {}
    events = 0
    for i, store in enumerate(copies):
        once, events = await resume_once(store, steps)
        store.close()
        if i == 0:  # warms up (the first resume in a process imports the policy layer)
            continue
        for key, value in once.items():
            figures.setdefault(key, []).append(value)
    return figures, events


def sqlite_copies(base: Path, folder: Path, trials: int) -> Iterator[SQLiteStore]:
    SQLiteStore(base).close()  # checkpoints the crashed writer's WAL into the file
    for i in range(trials):
        copy = folder / f"resume-{i}.db"
        shutil.copyfile(base, copy)
        yield SQLiteStore(copy)


# -- 4. the provider bench's run, with a store ------------------------------------------------


@contextlib.contextmanager
def simulator() -> Generator[str]:
    """bench/provider_overhead.py's wire simulator, in its own process; yields its URL."""
    script = Path(__file__).with_name("provider_overhead.py")
    server = subprocess.Popen(
        [sys.executable, str(script), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


async def provider_runs(
    url: str, stores: dict[str, SQLiteStore | PostgresStore | None], rounds: int
) -> dict[str, Runs]:
    """bench/provider_overhead.py's async run (two model calls over HTTP, one tool call),
    with each of `stores` in turn, round after round."""
    from provider_overhead import PROMPT, get_weather  # bench/ is this script's folder

    from legato.models._provider import ProviderSettings
    from legato.models.openai_chat import OpenAIChatModel
    from legato.models.retry import RetryPolicy

    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    model = OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-bench", settings=settings)
    agents = {k: Agent(model, tools=[get_weather], store=v) for k, v in stores.items()}
    figures: dict[str, Runs] = {k: {"wall": [], "cpu": []} for k in stores}
    for i in range(rounds + 10):
        order = list(agents.items())
        for label, agent in order if i % 2 else reversed(order):
            started, cpu = time.perf_counter(), time.process_time()
            await agent.run(PROMPT)
            if i >= 10:  # the first rounds warm up
                figures[label]["wall"].append(time.perf_counter() - started)
                figures[label]["cpu"].append(time.process_time() - cpu)
    await model.aclose()
    return figures


def report_provider(figures: dict[str, Runs]) -> None:
    base = figures["no store"]
    for label, runs in figures.items():
        w, c = statistics.median(runs["wall"]), statistics.median(runs["cpu"])
        bw, bc = statistics.median(base["wall"]), statistics.median(base["cpu"])
        print(f"  {label:<34} wall {ms(w)} ({w / bw:.2f}x)   client CPU {ms(c)} ({c / bc:.2f}x)")


# -- PostgreSQL: a throwaway cluster -----------------------------------------------------------


class Cluster:
    """A PostgreSQL cluster in a temporary folder, on 127.0.0.1 and a free port."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="legato-bench-pg-"))
        self.data = self.root / "data"
        self.password = secrets.token_hex(12)
        self.port = 0

    def _cmd(self, *argv: str) -> list[str]:
        if os.geteuid() == 0:  # the server refuses to run as root
            return ["runuser", "-u", "postgres", "--", *argv]
        return list(argv)

    def start(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        self.root.chmod(0o700)
        subprocess.run(
            self._cmd(
                str(self.bindir / "initdb"),
                *("-D", str(self.data), "-U", "legato", f"--pwfile={pwfile}"),
                *("--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8"),
                "--locale=C",
            ),
            check=True,
            capture_output=True,
        )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root}"
        subprocess.run(
            self._cmd(
                str(self.bindir / "pg_ctl"),
                *("-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60"),
                *("-o", options, "start"),
            ),
            check=True,
            capture_output=True,
        )

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://legato:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def sql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type] # our own fixed statements

    def copies(self, base: str, trials: int) -> Iterator[PostgresStore]:
        import psycopg

        for i in range(trials):
            for attempt in range(50):  # the crashed writer's backend may still be closing
                try:
                    self.sql(f"CREATE DATABASE resume_{i} TEMPLATE {base}")
                    break
                except psycopg.errors.ObjectInUse:
                    if attempt == 49:
                        raise
                    time.sleep(0.1)
            yield PostgresStore(self.dsn(f"resume_{i}"))

    def stop(self) -> None:
        subprocess.run(
            self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def pg_bindir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


@contextlib.contextmanager
def postgres() -> Generator[Cluster | None]:
    bindir = pg_bindir()
    if bindir is None:
        print("PostgreSQL: no server binaries (pg_ctl) found; skipped")
        yield None
        return
    cluster = Cluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


# -- main --------------------------------------------------------------------------------------


def report_admissions(label: str, admit: list[float], finish: list[float]) -> None:
    print(f"  {label:<34} admission {spread(admit)}; outcome {spread(finish)}")
    print(f"  {'':<34} admission {tail(admit)}")


async def main(args: argparse.Namespace) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {platform.python_version()} · {os.cpu_count()} cores · "
        f"sqlite {sqlite3.sqlite_version} · load average {load}"
    )
    folder = Path(tempfile.mkdtemp(prefix="legato-bench-durable-"))
    n = args.admissions
    try:
        print(f"\n1. one durable admission: Recorder.record, {n:,} calls each, commit included")
        report_admissions("journal in memory (no store)", *admissions(None, n))
        store = SQLiteStore(folder / "admit.db")
        admissions(store, 200)  # warm up
        report_admissions("SQLite (WAL, synchronous=NORMAL)", *admissions(store, n))
        shared = store.db._shared  # pyright: ignore[reportPrivateUsage]  # the file's connection
        shared.conn.execute("PRAGMA synchronous=FULL")
        report_admissions("SQLite (WAL, synchronous=FULL)", *admissions(store, n))
        store.close()

        steps, rounds = 50, args.rounds
        print(
            f"  whole run, {steps} steps of one irreversible call ({rounds} alternating rounds;"
            " 3 commits per step: response, admission, outcome):"
        )
        report_runs(*await whole_runs(folder, steps, rounds), steps)
        print(f"  smallest run (one tool call, two model calls; {rounds * 10} alternating rounds):")
        report_runs(*await whole_runs(folder, 1, rounds * 10), 1)

        events = sample_journal(200)
        print(f"\n2. journal append throughput ({len(events):,} events of a 200-step run)")
        store = SQLiteStore(folder / "append.db")
        for label, rate in throughput(store, events).items():
            print(f"  SQLite, {label:<52} {rate:>10,.0f} events/s")
        store.close()

        print(f"\n3. resume a {args.steps:,}-step run ({args.trials} trials, each on a fresh copy)")
        base = folder / "crashed.db"
        started = time.perf_counter()
        build_crashed_run(str(base), args.steps)
        print(f"  (building it took {time.perf_counter() - started:.1f} s)")
        report_resumes(
            "SQLite", await resumes(sqlite_copies(base, folder, args.trials + 1), args.steps)
        )

        cluster = None
        with contextlib.ExitStack() as stack:
            if args.postgres:
                cluster = stack.enter_context(postgres())
            if cluster is not None:
                await bench_postgres(cluster, args, events)
            stores: dict[str, SQLiteStore | PostgresStore | None] = {
                "no store": None,
                "SQLite store": stack.enter_context(
                    contextlib.closing(SQLiteStore(folder / "provider.db"))
                ),
            }
            if cluster is not None:
                cluster.sql("CREATE DATABASE provider")
                stores["PostgreSQL store"] = stack.enter_context(
                    contextlib.closing(PostgresStore(cluster.dsn("provider")))
                )
            rounds = args.rounds * 10
            print(
                f"\n4. the run of bench/provider_overhead.py (async, two model calls over HTTP to"
                f" the wire simulator, one tool call), {rounds} rounds, medians"
            )
            with simulator() as url:
                report_provider(await provider_runs(url, stores, rounds))
            print("  issue 17's target: SQLite store <= 1.2x no store")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def bench_postgres(
    cluster: Cluster, args: argparse.Namespace, events: list[JournalEvent]
) -> None:
    print(f"\nPostgreSQL {cluster.bindir.parent.name} (fsync on, synchronous_commit on, 127.0.0.1)")
    cluster.sql("CREATE DATABASE bench")
    store = PostgresStore(cluster.dsn("bench"))
    admissions(store, 200)
    report_admissions("1. PostgreSQL", *admissions(store, args.admissions))
    store.close()
    cluster.sql("CREATE DATABASE bench_async")
    cluster.sql("ALTER DATABASE bench_async SET synchronous_commit = off")
    store = PostgresStore(cluster.dsn("bench_async"))
    admissions(store, 200)
    report_admissions("   synchronous_commit = off", *admissions(store, args.admissions))
    store.close()
    store = PostgresStore(cluster.dsn("bench"))
    print("2. journal append throughput")
    for label, rate in throughput(store, events).items():
        print(f"  PostgreSQL, {label:<52} {rate:>10,.0f} events/s")
    store.close()
    print(f"3. resume a {args.steps:,}-step run ({args.trials} trials, each on a fresh copy)")
    cluster.sql("CREATE DATABASE crashed")
    build_crashed_run(cluster.dsn("crashed"), args.steps)
    report_resumes(
        "PostgreSQL", await resumes(cluster.copies("crashed", args.trials + 1), args.steps)
    )


def report_runs(bare: Runs, stored: Runs, steps: int) -> None:
    for what in ("wall", "cpu"):
        b, s = statistics.median(bare[what]), statistics.median(stored[what])
        print(
            f"    {what:<4} median: no store {ms(b)}, SQLite store {ms(s)}: {s / b:.2f}x, "
            f"{us((s - b) / steps)} more per step"
        )


def report_resumes(label: str, found: tuple[dict[str, list[tuple[float, float]]], int]) -> None:
    figures, events = found
    print(f"  {label}: {events:,} stored events (wall, then CPU time of this process)")
    for key, values in figures.items():
        wall, cpu = [v[0] for v in values], [v[1] for v in values]
        print(f"    {key:<34} {spread(wall, ms)}; CPU {spread(cpu, ms)}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--postgres", action="store_true", help="also a throwaway PostgreSQL")
    parser.add_argument("--admissions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=20, help="whole-run rounds")
    parser.add_argument("--steps", type=int, default=1000, help="steps of the resumed run")
    parser.add_argument("--trials", type=int, default=7, help="resume trials")
    parser.add_argument("--build-run", nargs=2, metavar=("TARGET", "STEPS"), help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.build_run:
        _build_run(arguments.build_run[0], int(arguments.build_run[1]))
    else:
        asyncio.run(main(arguments))
