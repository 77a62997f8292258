"""Demo section: the journal replayed. A stored run's journal is read back from SQLite,
printed event by event, and its result rebuilt without calling the model or any tool.

Run alone: `python examples/demo_replay.py` (it first makes a stored run with
`demo_durable.py`); `python examples/demo_replay.py DB RUN_ID` replays one of yours.
"""

from __future__ import annotations

import sys
from pathlib import Path

import legato
from legato.events import (
    ApprovalRequested,
    ModelResponded,
    RunResumed,
    ToolCallAdmitted,
    ToolCallFinished,
)
from legato.store import SQLiteStore


def describe(event: object) -> str:
    """One short line for a journal event."""
    if isinstance(event, ModelResponded):
        calls = [c.name for c in event.response.message.tool_calls]
        return f"the model answered {f'with calls {calls}' if calls else 'in text'}"
    if isinstance(event, ToolCallAdmitted):
        return f"{event.tool} admitted (effect {event.effect_id[:8]})"
    if isinstance(event, ToolCallFinished):
        return f"{event.call.name} -> {event.result.text}"
    if isinstance(event, ApprovalRequested):
        return f"approval asked for {event.call.name}"
    if isinstance(event, RunResumed):
        return "resumed here by another process"
    return ""


def replay_run(db: Path, run_id: str) -> legato.RunResult[str]:
    """Print the stored journal of `run_id` and rebuild its result from it."""
    journal = SQLiteStore(db).load_run(run_id)
    for number, event in enumerate(journal.events):
        kind = getattr(event, "kind", type(event).__name__)
        print(f"  {number:>3} {kind:<22} {describe(event)}".rstrip())
    result = legato.replay(journal)
    print(
        f"  replayed, nothing called: output {result.output!r}, {result.usage.requests} model calls"
    )
    return result


def main(argv: list[str] | None = None) -> legato.RunResult[str]:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2:
        return replay_run(Path(args[0]), args[1])
    import demo_durable

    stored = demo_durable.main()
    return replay_run(Path(str(stored["db"])), str(stored["run_id"]))


if __name__ == "__main__":
    main()
