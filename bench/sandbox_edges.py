"""What the workspace's edges cost per sandboxed command (issue 24).

The same command under bubblewrap, with each protection added in turn: the unix-socket
filter (a few more BPF instructions), the write layer (a supervisor process, a tmpfs and an
overlay, then applying the layer), and a quota (the workspace's size, measured before each
command). Then the cost of applying what a command wrote (1 MB and 10 MB).

Prints figures; asserts nothing (machines are noisy). Run: `python bench/sandbox_edges.py`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import legato.sandbox._runner as runner_module
from legato.sandbox import BubblewrapRunner, ProtectedPaths, Workspace

RUNS = 20


@contextmanager
def flags(*, layer: bool, unix_filter: bool) -> Generator[None]:
    saved = (runner_module._WRITE_LAYER, runner_module._UNIX_FILTER)  # pyright: ignore[reportPrivateUsage]
    runner_module._WRITE_LAYER = layer  # pyright: ignore[reportPrivateUsage]
    runner_module._UNIX_FILTER = unix_filter  # pyright: ignore[reportPrivateUsage]
    try:
        yield
    finally:
        runner_module._WRITE_LAYER, runner_module._UNIX_FILTER = saved  # pyright: ignore[reportPrivateUsage]


async def median_ms(runner: BubblewrapRunner, argv: list[str], after: str = "") -> float:
    samples: list[float] = []
    for _ in range(RUNS):
        start = time.perf_counter()
        result = await runner.run(argv)
        samples.append(time.perf_counter() - start)
        assert result.ok, result.render()
        if after:
            os.unlink(runner.workspace.root / after)  # noqa: PTH108
    return statistics.median(samples) * 1e3


def show(label: str, ms: float, base: float | None = None) -> None:
    extra = f"   (+{ms - base:6.1f} ms)" if base is not None else ""
    print(f"{label:<58} median {ms:7.1f} ms{extra}")


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legato-bench-edges-"))
    try:
        for i in range(1000):  # a small project: 1,000 files of 1 KiB in 10 directories
            d = root / f"d{i % 10}"
            d.mkdir(exist_ok=True)
            (d / f"f{i}.txt").write_bytes(b"x" * 1024)
        plain = BubblewrapRunner(Workspace(root, protected=ProtectedPaths.none()))
        default = BubblewrapRunner(Workspace(root))
        quota = BubblewrapRunner(Workspace(root, quota_bytes=1 << 30))
        await plain.run(["true"])  # the one-time probes
        await default.run(["true"])
        await quota.run(["true"])
        print(f"`true` under bubblewrap, {RUNS} runs each, workspace of 1,000 files")
        with flags(layer=False, unix_filter=False):
            base = await median_ms(plain, ["true"])
        show("before: read-write bind, set-id filter", base)
        with flags(layer=False, unix_filter=True):
            show("+ unix-socket filter", await median_ms(plain, ["true"]), base)
        show("+ write layer (the default)", await median_ms(default, ["true"]), base)
        show(
            "+ quota (the workspace's size measured first)", await median_ms(quota, ["true"]), base
        )
        samples: list[float] = []
        for _ in range(RUNS):
            start = time.perf_counter()
            quota.workspace.usage()
            samples.append(time.perf_counter() - start)
        show("  of which measuring the workspace (1,000 files)", statistics.median(samples) * 1e3)
        print("a command writing a file into the workspace")
        for size in (1, 10):
            argv = ["/bin/sh", "-c", f"head -c {size}000000 /dev/zero > out.bin"]
            with flags(layer=False, unix_filter=True):
                direct = await median_ms(plain, argv, after="out.bin")
            show(f"{size} MB, straight to the workspace", direct)
            show(f"{size} MB, through the layer", await median_ms(default, argv, "out.bin"), direct)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
