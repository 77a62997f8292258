"""Children a run started, and waiting for them (`wait_children`'s modes and its report)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from legato.exceptions import ChildFailed
from legato.spawn._child import ChildOutcome, PreparedChild

__all__ = ["Child", "WaitMode", "collect", "wait_for"]

WaitMode = Literal["all", "first", "any"]
"""`all` children, the `first` to end, or `any` one that succeeds."""


@dataclass(kw_only=True)
class Child:
    """A child a run started: how it was prepared, its task, and its outcome once known."""

    prepared: PreparedChild
    task: asyncio.Task[ChildOutcome] | None = None
    outcome: ChildOutcome | None = None


async def collect(child: Child) -> ChildOutcome:
    """The child's outcome, waiting for it if it is still running."""
    if child.outcome is not None:
        return child.outcome
    assert child.task is not None
    return await child.task


async def wait_for(targets: list[Child], mode: WaitMode, max_wait: float | None) -> str:
    """Wait as `mode` says (at most `max_wait` seconds); a report for the model."""
    pending = {c.task for c in targets if c.outcome is None and c.task is not None}
    ended = [c for c in targets if c.outcome is not None]
    loop = asyncio.get_running_loop()
    deadline = None if max_wait is None else loop.time() + max_wait
    while pending:
        if mode == "first" and ended:
            break
        if mode == "any" and any(c.outcome is not None and c.outcome.ok for c in ended):
            break
        left = None if deadline is None else max(0.0, deadline - loop.time())
        done, pending = await asyncio.wait(
            pending, timeout=left, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            break
        ended = [c for c in targets if c.outcome is not None or (c.task in done)]
        for c in targets:
            if c.task in done and c.outcome is None:
                c.outcome = c.task.result()
    finished = [c for c in targets if c.outcome is not None]
    running = [c.prepared.lineage.run_id for c in targets if c.outcome is None]
    return _report(finished, running, mode)


def _report(finished: list[Child], running: list[str], mode: WaitMode) -> str:
    outcomes = [c.outcome for c in finished if c.outcome is not None]
    if mode == "any":
        ok = [o for o in outcomes if o.ok]
        if ok:
            return f"child {ok[0].lineage.run_id}: {ok[0].text}"
    elif mode == "first" and outcomes:
        first = outcomes[0]
        if not first.ok:
            raise ChildFailed(first.lineage.run_id, first.error or first.outcome)
        return f"child {first.lineage.run_id}: {first.text}"
    if outcomes and not running and all(not o.ok for o in outcomes):
        reasons = "; ".join(f"{o.lineage.run_id}: {o.error or o.outcome}" for o in outcomes)
        raise ChildFailed(",".join(o.lineage.run_id for o in outcomes), reasons)
    lines = [
        f"child {o.lineage.run_id}: {o.text}"
        if o.ok
        else f"child {o.lineage.run_id} FAILED: {o.error or o.outcome}"
        for o in outcomes
    ]
    if running:
        lines.append(f"still running: {', '.join(running)}")
    return "\n".join(lines)
