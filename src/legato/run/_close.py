"""Closing: a step's end, the run's answer, and the run's end (finished or cancelled).

Owns what is recorded when something ends: `StepFinished`; the validation of a text answer
(a retry prompt, or the output); the tasks the run still owns, stopped before its end is
recorded (a sub-agent's `SpawnFinished` lands ahead of it); `RunFinished` with the run's
session turn (in one transaction when one store keeps both); and the end of a cancelled
run (its unfinished calls, then `RunFailed`). Generators yield (None) after each event
recorded, so the caller sees it at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from legato.events import Compacted, JournalEvent, RunFailed, RunFinished, StepFinished, UserPrompt
from legato.exceptions import OutputRetriesExceeded, UnexpectedModelBehavior
from legato.messages import Message
from legato.run._core import RunCore
from legato.run._outcomes import cancelled_calls
from legato.run._output import OUTPUT_TOOL, OutputValidationError

if TYPE_CHECKING:
    from legato.store import SessionTurn

__all__ = ["answer", "close_cancelled", "close_step", "finish", "stop_owned"]


async def answer(run: RunCore[Any], message: Message) -> AsyncIterator[None]:
    """Take the model's text answer: the run's output, or a retry prompt when it is not valid."""
    cfg = run.config
    text = message.text
    try:
        if cfg.output.mode == "tool" and not cfg.output.is_text:
            msg = f"Give your final answer by calling the {OUTPUT_TOOL} tool."
            raise OutputValidationError(msg)
        if not text.strip() and cfg.output.is_text:
            msg = "Your response was empty. Please answer."
            raise OutputValidationError(msg)
        run.output = cfg.output.validate_text(text)
    except OutputValidationError as exc:
        if run.state.output_failures >= cfg.output_retries:
            if not text.strip():
                msg = f"the model returned an empty response {run.state.output_failures + 1} times"
                raise UnexpectedModelBehavior(msg) from exc
            raise OutputRetriesExceeded(cfg.output_retries, exc.message) from exc
        run.record(UserPrompt(message=Message.user(exc.message), retry=True))
        yield
        return
    async for _ in close_step(run, run.state.step, output=True):
        yield


async def close_step(run: RunCore[Any], step: int, *, output: bool) -> AsyncIterator[None]:
    """Record the step's end; when it gave the output, stop what the run owns and finish."""
    run.record(StepFinished(step=step))
    yield
    if output:
        await stop_owned(run, "finished")
        yield
        finish(run, run.output)
        yield


async def stop_owned(run: RunCore[Any], why: str) -> None:
    """Cancel what the run still owns (background children), before its end is recorded.

    What they record as they stop (a child's `SpawnFinished`) goes into the journal and
    onto the stream now, ahead of the run's own end.
    """
    await run.scope.close(why)


def session_turn(run: RunCore[Any]) -> SessionTurn | None:
    """The run's new messages as one turn of its session (None: no session)."""
    cfg, state = run.config, run.state
    if cfg.session is None or cfg.sessions is None:
        return None
    from legato.store import SessionTurn

    latest = next((e for e in reversed(run.journal.events) if isinstance(e, Compacted)), None)
    return SessionTurn(
        session=cfg.session,
        messages=tuple(state.messages[state.new_message_index :]),
        context=latest if cfg.carry_context else None,
    )


def finish(run: RunCore[Any], output: Any) -> RunFinished:
    """Record the run's end, with its session turn.

    When one store keeps both, the turn is committed in the transaction of the run's
    `RunFinished` (a crash cannot separate them); else it is written right after.
    """
    from legato._effects_parts import current_switches

    cfg, state = run.config, run.state
    turn = session_turn(run)
    atomic = turn is not None and cfg.sessions is cfg.store and current_switches().atomic_turn
    if atomic:
        run.recorder.turn = turn
    event = RunFinished(output=cfg.output.to_json(output), usage=state.usage, cost=state.cost)
    try:
        run.record(event)
    finally:
        run.recorder.turn = None
    if turn is not None and not atomic and cfg.sessions is not None:
        cfg.sessions.append_turn(
            turn.session, turn.messages, run_id=state.run_id, context=turn.context
        )
    return event


def close_cancelled(run: RunCore[Any], error: Exception) -> list[JournalEvent]:
    """Record how a cancelled run ends: its unfinished calls, then `RunFailed`."""
    events: list[JournalEvent] = [run.record(e) for e in cancelled_calls(run.journal, str(error))]
    events.append(run.record(RunFailed(error_type=type(error).__name__, message=str(error))))
    return events
