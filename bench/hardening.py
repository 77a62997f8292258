"""What the issue-13 protections cost: file version checks and contract argument copies.

1. File tools: one `read_file` then `write_file` of the same file (through `Tool.invoke`,
   as a run calls them), with version checks on (hash on read, lock + re-hash + hash on
   write) and off, for a 1 KiB and a 1 MiB file.
2. Contracts: one contracted call checked and committed (`StateSession.begin`, the tool
   body, `settle`) whose argument is a list of 10 or 1,000 records, with the private copy
   of the arguments on and off (`unsafe_switches(snapshot_args=False)`, test-only).

Run: python bench/hardening.py
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from legato import RunContext, tool
from legato.contracts import Snapshot, State, StateSession
from legato.contracts._session import Pending
from legato.effects import unsafe_switches
from legato.sandbox import Workspace
from legato.tools.builtin import FileToolOptions, workspace_tools


def best_of(runs: int, repeat: int, once: Callable[[], object]) -> float:
    """CPU microseconds of this process per call (worker threads included): the median of
    `runs` timings of `repeat` calls each. CPU time moves less than wall time on a shared
    machine."""
    times: list[float] = []
    for _ in range(runs):
        start = time.process_time()
        for _ in range(repeat):
            once()
        times.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(times)


def file_pair(root: Path, line: str, *, check: bool) -> float:
    """Microseconds for one read_file + write_file of `line` with checks on or off."""
    (root / "f.txt").write_text(line)
    options = FileToolOptions(check_versions=check)
    tools = workspace_tools(Workspace(root), commands=False, options=options)
    read, write = tools.get("read_file"), tools.get("write_file")
    assert read is not None
    assert write is not None
    ctx: RunContext[None] = RunContext(deps=None, run_id="bench")
    loop = asyncio.new_event_loop()

    def pair() -> None:
        loop.run_until_complete(read.invoke({"path": "f.txt"}, ctx))
        loop.run_until_complete(write.invoke({"path": "f.txt", "content": line}, ctx))

    try:
        return best_of(7, 20 if len(line) > 4096 else 200, pair)
    finally:
        loop.close()


def files(root: Path) -> None:
    print("file tools: read_file + write_file of one file (CPU us per pair, median of 7)")
    for size, label in ((1 << 10, "1 KiB"), (1 << 20, "1 MiB")):
        line = ("x" * 63 + "\n") * (size // 64)
        for check in (True, False):
            micros = file_pair(root, line, check=check)
            print(f"  {label:>6}  checks {'on ' if check else 'off'}  {micros:9.0f}")


class Cart(BaseModel):
    items: list[dict[str, Any]] = Field(default_factory=lambda: [])


def grew(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], result: Any) -> bool:
    """Every record asked for was added."""
    return len(new["items"]) == len(old["items"]) + len(args["add"])


@tool(writes=["items"], ensures=grew)
def add(ctx: RunContext[Any], add: list[dict[str, Any]]) -> str:
    """Add records."""
    assert ctx.state is not None
    ctx.state["items"] = add
    return "ok"


def checked_call(state: State[Any], args: dict[str, Any]) -> None:
    session = StateSession(state.fork())
    pending = session.begin(add, "c1", args)
    assert isinstance(pending, Pending)
    pending.draft["items"] = args["add"]
    settled = session.settle(pending, result="ok")
    assert settled.committed


def contracts() -> None:
    print("contracts: one checked call, begin + body + settle (CPU us per call, median of 7)")
    for n in (10, 1000):
        args = {"add": [{"sku": f"s{i}", "qty": i, "tags": ["a", "b"]} for i in range(n)]}
        state = State(Cart())
        for snapshot in (True, False):
            with unsafe_switches(snapshot_args=snapshot):
                micros = best_of(7, 50 if n > 100 else 500, lambda: checked_call(state, args))  # noqa: B023
            print(f"  {n:>5} records  copy {'on ' if snapshot else 'off'}  {micros:9.0f}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files(Path(tmp))
    contracts()


if __name__ == "__main__":
    main()
