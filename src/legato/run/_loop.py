"""`RunDriver`: drives one run to its end and hands its stream to the caller.

Every event takes one route (`legato.run._recorder`): recorded (stored ahead, appended to
the journal and put on the run's stream, applied to the `RunState` projection, observed by
the gate), or, when it is never journaled (a text delta, a tool's progress, a child's
event), put on the stream as is. The driver yields what it takes off the stream, so the
caller sees the journal's events once each, in the journal's order, each after it was
stored. The parts of the loop (`_plan`, `_ask`, `_act`, `_close`) record and yield None
whenever the stream has something; the driver never yields an event itself.

The loop keeps no facts of its own outside the state, so a journal replayed through
`RunState` gives the same conversation and result.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Generic

from typing_extensions import TypeVar

from legato.events import (
    Compacted,
    Journal,
    JournalEvent,
    Parked,
    RunEvent,
    RunFailed,
    RunResumed,
    RunStarted,
    UserPrompt,
)
from legato.exceptions import RunParked, StoreError
from legato.messages import Message
from legato.run._close import close_cancelled, stop_owned
from legato.run._config import RunConfig, Unit, default_owner, owner_alive
from legato.run._core import RunCore
from legato.run._plan import next_unit, run_step, run_unit
from legato.run._result import RunResult, result_from_state

if TYPE_CHECKING:
    from legato.effects import EffectGate
    from legato.run._recorder import Recorder
    from legato.run._state import RunState

__all__ = ["RunConfig", "RunDriver", "Unit", "default_owner", "owner_alive"]

OutputT = TypeVar("OutputT", default=str)


class RunDriver(Generic[OutputT]):
    """Drives one run to its end; iterate `events()` to run it."""

    def __init__(
        self, config: RunConfig[OutputT], *, journal: Journal | None = None, saved: int = 0
    ) -> None:
        """A driver for a fresh run, or for the run whose past `journal` holds.

        `saved`: how many of `journal`'s events `config.store` holds already.
        """
        self._run: RunCore[OutputT] = RunCore(config, journal or Journal(), saved=saved)

    @property
    def config(self) -> RunConfig[OutputT]:
        """What the run was given."""
        return self._run.config

    @property
    def journal(self) -> Journal:
        """The run's journal."""
        return self._run.journal

    @property
    def state(self) -> RunState:
        """The run's state: the projection of its journal."""
        return self._run.state

    @property
    def recorder(self) -> Recorder:
        """The run's recorder (the one route of its events)."""
        return self._run.recorder

    @property
    def gate(self) -> EffectGate:
        """The run's effect gate."""
        return self._run.gate

    def start(
        self,
        prompt: str | Message | None,
        history: Sequence[Message],
        *,
        run_id: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Record the start of a fresh run (nothing is recorded for a resumed journal).

        `run_id`: the run's id (default: a fresh uuid4; a durable engine passes its own).
        `owner`: who drives it (default: host:pid).
        """
        run = self._run
        cfg = run.config
        run.record(
            RunStarted(
                run_id=run_id or uuid.uuid4().hex,
                agent=cfg.agent_name,
                model=cfg.model.name,
                instructions=cfg.instructions,
                history=tuple(history),
                owner=owner or default_owner(),
            )
        )
        if run.session is not None:
            run.record(run.session.state.loaded_event())
        if prompt is not None:
            message = Message.user(prompt) if isinstance(prompt, str) else prompt
            run.record(UserPrompt(message=message))

    def carry_over(self, carried: Compacted | None) -> None:
        """Start a session's run from the compacted view its previous run ended with.

        The view is recorded as a `Compacted` event (reason `carried_over`), so the journal
        shows exactly what the model saw, and no summary is computed twice.
        """
        if carried is None or carried.upto > len(self.state.messages):
            return
        self._run.record(replace(carried, reason="carried_over"))

    def resumed(self, owner: str | None = None) -> RunResumed:
        """Claim the run for this process before it continues (a resumed run's first event).

        With a store, the claim is committed at once: of two processes resuming the same
        stored run, the second gets `JournalConflict` here, before it runs anything. The
        model the rest of the run calls is recorded with it.
        """
        event = RunResumed(owner=owner or default_owner(), model=self._run.config.model.name)
        self._run.record(event)
        return event

    def flush(self) -> None:
        """Commit the journal events still buffered for the store."""
        self._run.recorder.flush()

    # -- the stream ----------------------------------------------------------------------------

    def open_stream(self) -> list[JournalEvent]:
        """Open the run's stream; returns the journal so far (what the stream does not repeat).

        From here on every event recorded or put is kept for the caller, who takes it with
        `pending_events` (the driver's own iterators take it as they go).
        """
        past = list(self.journal.events)
        self._run.recorder.stream.open()
        return past

    async def events(self) -> AsyncGenerator[RunEvent]:
        """Run until the run finishes or fails, yielding every event (the journal's past first)."""
        for event in self.open_stream():
            yield event
        async for event in self._drive(None):
            yield event

    def drive(self) -> AsyncGenerator[RunEvent]:
        """Run until the run finishes or fails, yielding the events recorded from now on.

        `events()` without the journal's past: call `open_stream` first (it returns the
        past). The caller that keeps the past itself saves a generator layer per event.
        """
        return self._drive(None)

    async def advance(self, unit: Unit) -> AsyncGenerator[RunEvent]:
        """Run one unit of the run (see `next_unit`), yielding its events.

        A unit ends the way a run does when it fails (`RunFailed`, the error raised) or
        parks (`Parked`, `RunParked` raised); a unit that finishes the run commits its
        session turn with `RunFinished`. This is how a durable engine drives a run one
        activity at a time.
        """
        self.open_stream()
        async for event in self._drive(unit):
            yield event

    def pending_events(self) -> list[RunEvent]:
        """Take the events on the stream the caller has not taken yet (see `open_stream`)."""
        return self._run.recorder.stream.take()

    async def _drive(self, once: Unit | None) -> AsyncGenerator[RunEvent]:
        """Run steps to the run's end (or the one unit `once`), yielding the stream's events.

        Records how the run stops when it parks or fails.
        """
        run = self._run
        take = run.recorder.stream.take
        try:
            while not (run.state.finished or run.state.failed):
                async for _ in run_step(run) if once is None else run_unit(run, once):
                    for event in take():
                        yield event
                for event in take():
                    yield event
                if once is not None:
                    break
        except RunParked as exc:
            await stop_owned(run, "parked")
            requests = exc.parked.requests
            run.record(Parked(request_ids=tuple(r.id for r in requests)))
            for event in take():
                yield event
            if exc.parked.run_id != run.state.run_id:
                # a child parked: this run parks with it, and resuming it resumes the child
                from legato.approvals import ParkedRun

                here = ParkedRun(run_id=run.state.run_id, journal=run.journal, requests=requests)
                raise RunParked(here, str(exc)) from None
            raise
        except asyncio.CancelledError:
            await run.scope.close("was cancelled")  # the canceller records the run's end
            raise
        except Exception as exc:
            await stop_owned(run, "failed")
            run.record(RunFailed(error_type=type(exc).__name__, message=str(exc)))
            for event in take():
                yield event
            raise
        finally:
            await run.scope.close()
            with contextlib.suppress(StoreError):  # kept in `recorder.broken`
                run.recorder.flush()

    # -- planning and ending -------------------------------------------------------------------

    def next_unit(self) -> Unit:
        """What the run does next, from its state alone (the plan of one step, per call).

        `model`: ask the model; `tool`: run the unfinished call `call_id`; `close`: end the
        step (the output tool's calls, failure limits, `StepFinished`, the answer); `done`:
        the run finished or failed.
        """
        return next_unit(self._run)

    def stopping(self, why: str) -> None:
        """Note why the run is about to stop (e.g. `was cancelled (...)`), before it does.

        Tasks it owns (sub-agents) that are cancelled as it stops can tell why.
        """
        scope = self._run.scope
        if scope.stopping is None:
            scope.stopping = why

    def close_cancelled(self, error: Exception) -> list[JournalEvent]:
        """Record how a cancelled run ends: its unfinished calls, then `RunFailed`."""
        return close_cancelled(self._run, error)

    def result(self) -> RunResult[OutputT]:
        """The result of a finished run."""
        run = self._run
        output = run.output
        if output is None:
            output = run.config.output.from_json(run.state.output)
        state = run.session.state if run.session is not None else None
        return result_from_state(run.state, output=output, journal=run.journal, state_value=state)
