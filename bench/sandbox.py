"""Sandbox overhead: one command under bubblewrap vs on the host, and Workspace file reads.

Prints figures; asserts nothing (machines are noisy). Run: `python bench/sandbox.py`.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from legato.sandbox import Workspace, sandbox_runner


async def timed(fn: Callable[[], Awaitable[object]], n: int) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - start)
    return out


def show(label: str, samples: list[float], unit: float = 1e3, suffix: str = "ms") -> None:
    median = statistics.median(samples) * unit
    p90 = sorted(samples)[int(len(samples) * 0.9)] * unit
    print(f"{label:<44} median {median:8.3f} {suffix}   p90 {p90:8.3f} {suffix}")


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legato-bench-"))
    (root / "file.txt").write_text("x" * 4096)
    ws = Workspace(root)
    bwrap = sandbox_runner(ws, "bwrap")
    host = sandbox_runner(ws, "none")
    await bwrap.run(["true"])  # the one-time probe
    show("`true` under bubblewrap", await timed(lambda: bwrap.run(["true"]), 40))
    show("`true` on the host (sandbox='none')", await timed(lambda: host.run(["true"]), 40))

    def ws_read() -> bytes:
        return ws.read_bytes("file.txt")

    def plain_read() -> bytes:
        return (root / "file.txt").read_bytes()

    for label, fn in [
        ("Workspace.read_bytes (4 KiB)", ws_read),
        ("Path.read_bytes (4 KiB)", plain_read),
    ]:
        samples: list[float] = []
        for _ in range(2000):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        show(label, samples, unit=1e6, suffix="us")


if __name__ == "__main__":
    asyncio.run(main())
