"""Rebuild a run's result from its journal, without calling any model or tool."""

from __future__ import annotations

from typing import Any, overload

from pydantic import BaseModel
from typing_extensions import TypeVar

from legato.contracts import State
from legato.events import Journal, RunFailed
from legato.exceptions import JournalError
from legato.run._output import OutputSchema
from legato.run._result import RunResult, result_from_state
from legato.run._state import RunState

__all__ = ["replay"]

OutputT = TypeVar("OutputT")


@overload
def replay(
    journal: Journal | str, *, state_type: type[BaseModel] | None = None
) -> RunResult[str]: ...


@overload
def replay(
    journal: Journal | str,
    *,
    output_type: type[OutputT],
    state_type: type[BaseModel] | None = None,
) -> RunResult[OutputT]: ...


def replay(
    journal: Journal | str,
    *,
    output_type: type[Any] = str,
    state_type: type[BaseModel] | None = None,
) -> RunResult[Any]:
    """The result a finished run returned, rebuilt from its journal (or its JSONL text).

    `output_type` turns the journaled JSON output back into the agent's output type.
    The verified state is rebuilt from the journal's `StateLoaded` and `StateCommitted`
    events, typed by `state_type` when given (every key typed `Any` otherwise).
    Raises `JournalError` when the journal does not end in a finished run.
    """
    if isinstance(journal, str):
        journal = Journal.from_jsonl(journal)
    state = RunState.from_events(list(journal.events))
    if not state.finished:
        failed = state.failed
        reason = (
            f"it failed: {failed.error_type}: {failed.message}"
            if isinstance(failed, RunFailed)
            else "it has no RunFinished event"
        )
        msg = f"cannot replay run {state.run_id or '?'}: {reason}"
        raise JournalError(msg)
    output = OutputSchema.build(output_type).from_json(state.output)
    verified = (
        State.from_journal(state.state_loaded, state.state_commits, state_type)
        if state.state_loaded is not None
        else None
    )
    return result_from_state(state, output=output, journal=journal, state_value=verified)
