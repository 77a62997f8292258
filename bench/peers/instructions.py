"""Instructions per run, counted by valgrind: the per-run figures without the machine's noise.

CPU time per run moves by up to 1.5x between two runs of the same script on a shared
machine; the number of instructions a client executes does not. This runs each framework's
adapter (`agents/fw_*.py`: the same agent, two model calls and one tool call) in a fresh
interpreter under `valgrind --tool=cachegrind`, twice: with `--runs` runs and with none (both
after the same warm-up), so the difference divided by `--runs` is what one run executes in
user space, interpreter and C extensions included. The mock server runs in this process,
outside valgrind, so only the client is counted. Needs valgrind (`apt-get install valgrind`).

    python bench/peers/instructions.py                       # raw SDK, send path, legato, floor
    python bench/peers/instructions.py --src OLD/src --src NEW/src --only legato   # A/B trees
    python bench/peers/instructions.py --modes async,sync --runs 200
    python bench/peers/instructions.py --only legato --src OLD/src --src NEW/src --timed 8

`--timed K` measures CPU time instead, without valgrind: K rounds, each running every framework
and tree once in turn, and prints the medians and the medians of the per-round ratios (to the
first tree, and to the raw SDK when it is among `--only`).

Instructions are not time: C code (pydantic-core, the `json` module) does more per
instruction than interpreted Python, so a ratio of instructions is not a ratio of CPU time.
It answers "did this change make the client do less", exactly, where timing cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ADAPTERS = {
    "floor": ("fw_floor", "Floor"),
    "raw": ("fw_raw", "Raw"),
    "sdk_send": ("fw_sdk_send", "SdkSend"),
    "legato": ("fw_legato", "Legato"),
    "legato_atool": ("fw_legato_atool", "LegatoAsyncTool"),
    "legato_loop": ("fw_legato_atool", "LegatoAsyncTool"),  # its model: `_instant_model`
    "legato_loop_def": ("fw_legato", "Legato"),  # the same with the `def` tool
}
"""Framework -> (agent module, adapter class). `legato_loop` is legato's loop alone: the
`async def` tool's agent on a model that answers at once in process (no HTTP, no provider);
`legato_loop_def` the same with the plain `def` tool (run on a thread)."""
WARMUP = 20


def _inner(name: str, mode: str, runs: int, url: str) -> None:
    """Run `runs` runs of one adapter after the warm-up (the process valgrind counts)."""
    sys.path[:0] = [str(HERE), str(HERE / "agents")]
    import importlib

    common: Any = importlib.import_module("_common")
    module, cls = ADAPTERS[name]
    adapter = getattr(importlib.import_module(module), cls)()
    common.Counter.prefix = f"i{os.getpid()}/"  # the server keys its counts by the run's tag
    streamed = mode.startswith("stream")
    instant = name.startswith("legato_loop")
    model = _instant_model() if instant else adapter.model(url, streamed=streamed)
    agent = adapter.agent(model)
    method = getattr(adapter, common.METHOD[mode])
    if mode in ("sync", "stream_sync"):
        for _ in range(WARMUP):
            method(agent, common.prompt())
        started = time.process_time()
        for _ in range(runs):
            method(agent, common.prompt())
        spent = time.process_time() - started
    else:

        async def main() -> float:
            for _ in range(WARMUP):
                await method(agent, common.prompt())
            started = time.process_time()
            for _ in range(runs):
                await method(agent, common.prompt())
            spent = time.process_time() - started
            await adapter.aclose(model)
            return spent

        spent = asyncio.run(main())
    print(f"CPU {spent / max(runs, 1) * 1e3:.4f}")  # ms per run (used by --timed)


def _instant_model() -> Any:
    """A legato model giving the mock server's two answers at once: the loop without a provider."""
    from mockserver import ANSWER

    from legato.messages import Message, ModelResponse, StopReason, TextPart, ToolCallPart, Usage
    from legato.models import ModelProfile, ResponseCompleted

    call = ToolCallPart.from_arguments(id="call_1", name="get_weather", arguments={"city": "Paris"})
    first = ModelResponse(
        message=Message(role="assistant", parts=(call,)),
        usage=Usage(input_tokens=60, output_tokens=12, requests=1),
        stop_reason=StopReason.TOOL_CALLS,
    )
    second = ModelResponse(
        message=Message(role="assistant", parts=(TextPart(text=ANSWER),)),
        usage=Usage(input_tokens=90, output_tokens=10, requests=1),
        stop_reason=StopReason.END_TURN,
    )

    class Instant:
        name = "bench:instant"
        profile = ModelProfile()

        async def stream(self, request: Any) -> Any:
            yield ResponseCompleted(
                response=first if request.messages[-1].role == "user" else second
            )

        async def aclose(self) -> None:
            return None

    return Instant()


def _count(name: str, mode: str, runs: int, url: str, src: str | None) -> int:
    """Instructions valgrind counted for one process of `_inner`."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONHASHSEED"] = "0"  # the same dict and set layouts in every process
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log"
        command = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
        command += ["--cachegrind-out-file=/dev/null", f"--log-file={log}"]
        command += [sys.executable, __file__, "--inner", name, mode, str(runs), url]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        text = log.read_text() if log.exists() else ""
    if done.returncode != 0:
        msg = f"{name} {mode} failed (exit {done.returncode}): {done.stderr[-2000:]}"
        raise SystemExit(msg)
    found = re.search(r"I\s+refs:\s+([\d,]+)", text)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's log for {name} {mode}")
    return int(found.group(1).replace(",", ""))


def _timed(name: str, mode: str, runs: int, url: str, src: str | None) -> float:
    """CPU ms per run of one `_inner` process, without valgrind."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, __file__, "--inner", name, mode, str(runs), url]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"^CPU ([\d.]+)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{name} {mode} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return float(found.group(1))


def _print_timed(
    rounds: int, names: list[str], modes: list[str], runs: int, url: str, sources: list[str | None]
) -> None:
    """K rounds; each runs every framework (and every tree) once, in turn, in fresh processes.

    Every ratio is the median of per-round ratios: both sides of a ratio ran minutes apart at
    most, so a slow stretch of the machine moves both.
    """
    print(
        "| mode | framework | tree | CPU ms per run (median) | ×first tree (paired) | ×raw (paired) |"
    )
    print("|---|---|---|---|---|---|")
    for mode in modes:
        cells = [(name, src) for name in names for src in (sources if _is_legato(name) else [None])]
        figures: dict[tuple[str, str | None], list[float]] = {cell: [] for cell in cells}
        for _ in range(rounds):
            for cell in cells:
                figures[cell].append(_timed(cell[0], mode, runs, url, cell[1]))
        raw = figures.get(("raw", None))
        for name, src in cells:
            mine = figures[name, src]
            first = figures[name, sources[0] if _is_legato(name) else None]
            by_tree = _paired(first, mine) if src not in (None, sources[0]) else "–"
            by_raw = _paired(raw, mine) if raw is not None and name != "raw" else "–"
            median = statistics.median(mine)
            row = f"| {mode} | {name} | {src or '–'} | {median:.3f} | {by_tree} | {by_raw} |"
            print(row, flush=True)


def _is_legato(name: str) -> bool:
    return name.startswith("legato")


def _paired(base: list[float], other: list[float]) -> str:
    """The median of `other / base` per round, with the range."""
    ratios = sorted(b / a for a, b in zip(base, other, strict=True))
    return f"{statistics.median(ratios):.3f} ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def main() -> None:
    """Parse the options, count, print one table row per framework and tree."""
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        _inner(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="floor,raw,sdk_send,legato")
    parser.add_argument("--modes", default="async,sync")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--src", action="append", help="legato source tree (repeat to compare)")
    parser.add_argument("--timed", type=int, default=0, help="CPU time, K interleaved rounds")
    options = parser.parse_args()
    if not options.timed and shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    names = options.only.split(",")
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        raise SystemExit(f"unknown frameworks {unknown}; known: {sorted(ADAPTERS)}")
    sys.path.insert(0, str(HERE))
    from mockserver import MockServer

    sources: list[str | None] = list(options.src or [str(ROOT / "src")])
    # legato's price cache, private to this command and written before anything is counted:
    # a process that found no cache would load the price table (about 200 M instructions),
    # and another process (a test run) writing the shared one would decide which does.
    cache = tempfile.TemporaryDirectory(prefix="legato-instructions-")
    os.environ["XDG_CACHE_HOME"] = cache.name
    with cache, MockServer() as server:
        if any(name.startswith("legato") and name != "legato_loop" for name in names):
            _timed("legato", "async", 1, server.url, sources[0])
        if options.timed:
            modes = options.modes.split(",")
            _print_timed(options.timed, names, modes, options.runs, server.url, sources)
            return
        print("| mode | framework | tree | instructions per run | ×raw |")
        print("|---|---|---|---|---|")
        for mode in options.modes.split(","):
            raw: int | None = None
            for name in names:
                trees = sources if _is_legato(name) else [None]
                for src in trees:
                    empty = _count(name, mode, 0, server.url, src)
                    full = _count(name, mode, options.runs, server.url, src)
                    per_run = (full - empty) // options.runs
                    if name == "raw":
                        raw = per_run
                    ratio = f"{per_run / raw:.3f}×" if raw else "–"
                    where = src or "–"
                    print(f"| {mode} | {name} | {where} | {per_run:,} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
