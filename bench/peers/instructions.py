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
import subprocess
import sys
import tempfile
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
}
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
    model = adapter.model(url, streamed=streamed)
    agent = adapter.agent(model)
    method = getattr(adapter, common.METHOD[mode])
    if mode in ("sync", "stream_sync"):
        for _ in range(WARMUP + runs):
            method(agent, common.prompt())
        return

    async def main() -> None:
        for _ in range(WARMUP + runs):
            await method(agent, common.prompt())
        await adapter.aclose(model)

    asyncio.run(main())


def _count(name: str, mode: str, runs: int, url: str, src: str | None) -> int:
    """Instructions valgrind counted for one process of `_inner`."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
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
    options = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    names = options.only.split(",")
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        raise SystemExit(f"unknown frameworks {unknown}; known: {sorted(ADAPTERS)}")
    sys.path.insert(0, str(HERE))
    from mockserver import MockServer

    sources: list[str | None] = list(options.src or [str(ROOT / "src")])
    with MockServer() as server:
        print("| mode | framework | tree | instructions per run | ×raw |")
        print("|---|---|---|---|---|")
        for mode in options.modes.split(","):
            raw: int | None = None
            for name in names:
                trees = sources if name.startswith("legato") else [None]
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
