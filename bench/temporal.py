"""What Temporal costs a legato run: N concurrent runs on 1 and 2 worker processes.

Run: `python bench/temporal.py [--runs N] [--steps N] [--delay S] [--calls K] [--parallel]
[--local none|model|model_and_tools]`.

Each run is a scripted agent (no provider): `--steps` model calls, each but the last
calling a tool that sleeps `--delay` seconds (`--calls` such calls in one response: one
process runs them concurrently, Temporal one activity after another, or, with
`--parallel`, concurrently in one `legato.tools` activity), then the answer. The same runs go
(1) in one process on a plain SQLite store (`asyncio.gather` of `agent.run`), then
(2) on Temporal with one worker process and (3) with two, all against one dev server
(the `temporal` binary next to this python, on 127.0.0.1, in memory). Reported: runs/s,
the p50/p99 of one step's latency (from one model call of a run to its next: the tool
call and the overheads in between), and Temporal's overhead per step against (1).

`--local` picks which units run as local activities (`ActivitySettings.local_activities`,
default `model_and_tools`; `none` is the path before local activities). The client starts
the runs one after another (each start is a server round trip) unless `--gather-starts`.

`--profile` runs each worker under cProfile and prints where its time went; with it or
not, the CPU seconds of the dev server, of the worker processes and of this process are
printed per Temporal round, which tells whether the workers (legato, the Temporal SDK) or
the server bound the throughput. `--workers 1` runs one worker count only.

Prints figures; asserts nothing.
"""

# The driver polls files and ports other processes create, and starts them with Popen.
# ruff: noqa: ASYNC110, ASYNC220, ASYNC240

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def build_agent(folder: Path, *, steps: int, delay: float, calls: int = 1) -> Any:
    """The benchmark's agent; its model logs `run step time` lines to `folder/steps.<pid>`."""
    from legato import Agent, tool
    from legato.models import ModelRequest
    from legato.store import SQLiteStore
    from legato.testing import FunctionModel, call, reply

    log = folder / f"steps.{os.getpid()}"

    @tool
    async def wait(n: int) -> int:
        """Wait a fixed delay.

        Args:
            n: The step.
        """
        await asyncio.sleep(delay)
        return n

    def answer(request: ModelRequest) -> Any:
        name = request.messages[0].text
        done = sum(1 for m in request.messages if m.role == "assistant")
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{name} {done} {time.time()}\n")
        if done + 1 >= steps:
            return "Done."
        return reply(*(call("wait", {"n": done}, id=f"w{done}-{k}") for k in range(calls)))

    store = SQLiteStore(folder / "runs.db")
    return Agent(FunctionModel(answer), tools=[wait], store=store, name="bench", max_steps=steps)


def step_latencies(folder: Path) -> list[float]:
    """Seconds between consecutive model calls of each run (from every process's log)."""
    calls: dict[str, list[tuple[int, float]]] = {}
    for path in folder.glob("steps.*"):
        for line in path.read_text(encoding="utf-8").splitlines():
            name, step, at = line.split()
            calls.setdefault(name, []).append((int(step), float(at)))
    gaps: list[float] = []
    for seen in calls.values():
        ordered = [at for _, at in sorted(seen)]
        gaps += [b - a for a, b in zip(ordered, ordered[1:], strict=False)]
    return gaps


def summary(label: str, runs: int, wall: float, gaps: list[float]) -> float:
    ordered = sorted(gaps)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"{label:<28} {runs / wall:7.1f} runs/s   step p50 {p50 * 1000:7.1f} ms"
        f"   p99 {p99 * 1000:7.1f} ms   ({runs} runs in {wall:.2f} s)"
    )
    return p50


async def plain(folder: Path, args: argparse.Namespace) -> float:
    agent = build_agent(folder, steps=args.steps, delay=args.delay, calls=args.calls)
    started = time.perf_counter()
    await asyncio.gather(*(agent.run(f"run{i}") for i in range(args.runs)))
    wall = time.perf_counter() - started
    return summary("SQLite, one process", args.runs, wall, step_latencies(folder))


async def worker_main(
    address: str, queue: str, folder: Path, steps: int, delay: float, calls: int
) -> None:
    from temporalio.client import Client

    from legato.temporal import legato_worker

    client = await Client.connect(address)
    agent = build_agent(folder, steps=steps, delay=delay, calls=calls)
    profiler = None
    if os.environ.get("LEGATO_BENCH_PROFILE"):
        import cProfile

        profiler = cProfile.Profile()
    async with legato_worker(client, task_queue=queue, agents={"bench": agent}):
        (folder / f"ready.{os.getpid()}").touch()
        if profiler is not None:
            profiler.enable()
        while not await asyncio.to_thread((folder / "stop").exists):
            await asyncio.sleep(0.1)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(folder / f"profile.{os.getpid()}"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process and its reaped children (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def print_profile(folder: Path, limit: int = 18) -> None:
    """The workers' profiles merged, by own time and by the package the time is spent in."""
    import pstats

    paths = [str(p) for p in folder.glob("profile.*")]
    if not paths:
        return
    stats = pstats.Stats(*paths)
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = getattr(stats, "stats")  # noqa: B009
    total = sum(entry[2] for entry in raw.values())
    by_area: dict[str, float] = {}
    for (filename, _, _), entry in raw.items():
        area = _area(filename)
        by_area[area] = by_area.get(area, 0.0) + entry[2]
    print(f"{'':<28} worker profile: {total:.2f} s of own time in the Python code")
    for area, seconds in sorted(by_area.items(), key=lambda x: -x[1])[:10]:
        print(f"{'':<32} {seconds:6.2f} s  {100 * seconds / total:4.1f} %  {area}")
    rows = sorted(raw.items(), key=lambda x: -x[1][2])[:limit]
    for (filename, line, name), entry in rows:
        print(
            f"{'':<32} {entry[2]:6.2f} s own {entry[3]:6.2f} s cum  {_area(filename)} {name}:{line}"
        )


def _area(filename: str) -> str:
    for marker in ("/legato/", "/temporalio/", "/asyncio/", "/sqlite3/", "/pydantic"):
        if marker in filename:
            return marker.strip("/")
    return "builtins" if filename == "~" else Path(filename).name


async def on_temporal(folder: Path, address: str, workers: int, args: argparse.Namespace) -> float:
    from temporalio.client import Client

    from legato.temporal import ActivitySettings, TemporalRuns

    queue = f"bench-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if args.profile:
        env["LEGATO_BENCH_PROFILE"] = "1"
    command = [sys.executable, __file__, "--worker", address, queue, str(folder)]
    command += [str(args.steps), str(args.delay), str(args.calls)]
    procs = [subprocess.Popen(command, env=env) for _ in range(workers)]
    try:
        while len(list(folder.glob("ready.*"))) < workers:
            await asyncio.sleep(0.1)
        runs = TemporalRuns(await Client.connect(address), task_queue=queue)
        cpu_before = [cpu_seconds(p) for p in (args.server_pid, *(p.pid for p in procs))]
        me_before = time.process_time()
        started = time.perf_counter()
        settings = ActivitySettings(parallel_tools=args.parallel, local_activities=args.local)
        names = [f"run{i}" for i in range(args.runs)]
        if args.gather_starts:
            starts = (runs.start("bench", name, settings=settings) for name in names)
            ids = list(await asyncio.gather(*starts))
        else:  # one by one, as every figure before 2026-12-06 was measured
            ids = [await runs.start("bench", name, settings=settings) for name in names]
        starting = time.perf_counter() - started
        await asyncio.gather(*(runs.result(run_id) for run_id in ids))
        wall = time.perf_counter() - started
        cpu_after = [cpu_seconds(p) for p in (args.server_pid, *(p.pid for p in procs))]
        used = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
        print(
            f"{'':<28} CPU in {wall:.2f} s: dev server {used[0]:.2f} s, "
            f"worker(s) {sum(used[1:]):.2f} s, client {time.process_time() - me_before:.2f} s; "
            f"the client's starts took {starting:.2f} s"
        )
    finally:
        (folder / "stop").touch()
        for proc in procs:
            proc.wait(timeout=60)
    label = f"Temporal, {workers} worker process{'es' if workers > 1 else ''}"
    p50 = summary(label, args.runs, wall, step_latencies(folder))
    print_profile(folder)
    return p50


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def main(args: argparse.Namespace) -> None:
    binary = Path(sys.executable).parent / "temporal"
    port = free_port()
    server = subprocess.Popen(
        [str(binary), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
        + ["--headless", "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    args.server_pid = server.pid
    try:
        while not listening(port):
            await asyncio.sleep(0.1)
        print(
            f"{args.runs} concurrent runs, {args.steps} steps each, {args.calls} tool "
            f"call(s) per step, tool delay {args.delay * 1000:.0f} ms"
            + (", parallel_tools" if args.parallel else "")
            + f", local activities: {args.local}"
        )
        with tempfile.TemporaryDirectory() as a:
            base = await plain(Path(a), args)
        for workers in (int(w) for w in args.workers.split(",")):
            with tempfile.TemporaryDirectory() as b:
                p50 = await on_temporal(Path(b), address, workers, args)
            print(f"{'':<28} Temporal overhead per step (p50): {(p50 - base) * 1000:.1f} ms")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _, _, address, queue, folder, steps, delay, calls = sys.argv
        asyncio.run(worker_main(address, queue, Path(folder), int(steps), float(delay), int(calls)))
    else:
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--runs", type=int, default=20)
        parser.add_argument("--steps", type=int, default=5)
        parser.add_argument("--delay", type=float, default=0.05)
        parser.add_argument("--calls", type=int, default=1)
        parser.add_argument("--parallel", action="store_true")
        parser.add_argument(
            "--local", default="model_and_tools", choices=["none", "model", "model_and_tools"]
        )
        parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1 or 1,2")
        parser.add_argument("--profile", action="store_true", help="profile the workers")
        parser.add_argument(
            "--gather-starts", action="store_true", help="start the runs concurrently"
        )
        asyncio.run(main(parser.parse_args()))
