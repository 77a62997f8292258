"""`Recorder`: the one route every journal event of a run takes, and the stream it feeds.

In one order, for every event: written to the run's store (write-ahead), appended to the
journal and put on the run's `EventStream`, applied to the `RunState` projection, observed
by the effect gate (and any other observer). Nothing else appends to a run's journal, and
persistence is part of recording, never a consumer of the stream.

The stream is the one route from the run to its caller. Whoever records an event (the
loop, the gate, a tool through the run's scope, a canceller on another task) puts it on
the stream by recording it; events that are never journaled (model text deltas, tool
progress, a child's events) are put on it directly (`EventStream.put`). The caller takes
what is on it (`take`), so it sees the journal's events once each, in the journal's order,
each after it was stored; nothing is taken off the stream but by the caller, so a wait
that is cancelled loses nothing.

Durability points. Events that the resume contract stands on are committed to the store
before `record` returns, together with every event buffered before them, in one
transaction: an effect's admission (`ToolCallAdmitted`) is committed before the effect
starts, its outcome (`ToolCallFinished`, `StateCommitted`) before the run moves on, and
approvals, a run's claim by a resumer (`RunResumed`), spawns, model responses and the run's
end likewise. Other events (a model request, a step's end) wait in a small buffer for the
next durable one: after a crash they are lost together, and the journal's stored prefix is
always one the run really went through.

With no store the recorder appends in memory only, at the cost of one `None` check.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from legato.events import Journal, JournalEvent, RunEvent, RunStarted
from legato.exceptions import StoreError
from legato.run._state import RunState

if TYPE_CHECKING:
    from legato.store import SessionTurn

__all__ = ["DURABLE_KINDS", "EventStream", "JournalSink", "Recorder"]

DURABLE_KINDS: frozenset[str] = frozenset(
    {
        "tool_call_admitted",
        "tool_call_finished",
        "tool_call_refused",
        "approval_requested",
        "approval_decided",
        "cancel_requested",
        "state_committed",
        "state_rejected",
        "model_responded",
        "spawn_started",
        "spawn_finished",
        "run_resumed",
        "run_parked",
        "run_finished",
        "run_failed",
    }
)
"""Kinds of event committed to the store before `Recorder.record` returns."""

CLOSING_KINDS: frozenset[str] = frozenset(
    {
        "run_failed",
        "run_parked",
        "tool_call_finished",
        "tool_call_refused",
        "state_rejected",
        "cancel_requested",
        "spawn_finished",
    }
)
"""Durable kinds a run whose store failed still records, in memory only: they close what
was open (the run's end, the calls in flight). Any other durable event (an admission, a
decision) raises the store's error again: nothing new starts once writing has failed."""


@runtime_checkable
class JournalSink(Protocol):
    """Where a run's journal is written ahead (a `legato.store.RunStore` is one)."""

    def append_events(
        self,
        run_id: str,
        events: Sequence[JournalEvent],
        *,
        start: int,
        session: str | None = None,
        turn: SessionTurn | None = None,
    ) -> None:
        """Store events `start`, `start + 1`, ... of a run in one transaction.

        `turn` (given with the run's `RunFinished`) goes to its session in the same
        transaction. Raises `JournalConflict` when position `start` is already stored.
        """
        ...


class EventStream:
    """The events a run's caller has still to take, in the order they were put.

    Closed until the caller opens it (`open`): what was recorded before is the journal's
    past, which the caller gets from the journal. `wake` is set whenever an event is put.
    """

    __slots__ = ("_events", "_open", "_wake")

    def __init__(self) -> None:
        self._events: collections.deque[RunEvent] = collections.deque()
        self._open = False
        self._wake: asyncio.Event | None = None

    def open(self) -> None:
        """Start keeping events for the caller (from the journal's current end)."""
        self._open = True
        self._events.clear()

    def put(self, event: RunEvent) -> None:
        """Keep `event` for the caller (recorded events come through `Recorder.record`)."""
        if self._open:
            self._events.append(event)
            if self._wake is not None:
                self._wake.set()

    @property
    def wake(self) -> asyncio.Event:
        """Set when an event is put (whoever waits for the next event clears it).

        Made on first use: a run whose loop never waits on it (no tool running while
        events arrive) puts its events without setting anything.
        """
        if self._wake is None:
            self._wake = asyncio.Event()
        return self._wake

    def take(self) -> list[RunEvent]:
        """Every event put and not taken yet, oldest first."""
        if not self._events:
            return []
        events = list(self._events)
        self._events.clear()
        return events

    def __bool__(self) -> bool:
        return bool(self._events)


class Recorder:
    """Records one run's events: store, journal and stream, state, observers (in that order)."""

    __slots__ = (
        "_buffer",
        "_observers",
        "_write_ahead",
        "broken",
        "journal",
        "saved",
        "session",
        "sink",
        "state",
        "stream",
        "turn",
    )

    def __init__(
        self,
        journal: Journal,
        state: RunState,
        *,
        sink: JournalSink | None = None,
        session: str | None = None,
        saved: int = 0,
    ) -> None:
        """Record into `journal` and `state`.

        Args:
            journal: The run's journal (a resumed run's holds its past).
            state: The projection every event is applied to.
            sink: The store the journal is written ahead to (None: memory only).
            session: The session the run belongs to, stored with the run.
            saved: How many events of `journal` the sink already holds.
        """
        self.journal = journal
        self.state = state
        self.sink = sink
        self.session = session
        self.saved = saved
        """Events of the journal the store holds."""
        self.turn: SessionTurn | None = None
        """The session turn to commit with the run's end (set just before `RunFinished`)."""
        self.broken: StoreError | None = None
        """The store error that stopped writing (nothing more is written once set)."""
        self.stream = EventStream()
        """Where every recorded event goes for the caller (see `EventStream`)."""
        self._buffer: list[JournalEvent] = []
        self._observers: list[Callable[[JournalEvent], object]] = []
        self._write_ahead = True
        if sink is not None:
            from legato._effects_parts import current_switches

            self._write_ahead = current_switches().write_ahead

    def observe(self, observer: Callable[[JournalEvent], object]) -> None:
        """Call `observer` with every event recorded from now on, after the state applied it."""
        self._observers.append(observer)

    def record(self, event: JournalEvent) -> JournalEvent:
        """Record `event`; raises the store's error (the event is then not recorded at all)."""
        if self.sink is not None:
            if isinstance(event, RunStarted):  # refused now, not at the first flush
                from legato.store import check_names

                check_names(
                    ("run id", event.run_id),
                    ("agent name", event.agent),
                    ("model name", event.model),
                    ("session name", self.session),
                )
            if self.broken is None:
                self._write(event)
            elif event.kind in DURABLE_KINDS and event.kind not in CLOSING_KINDS:
                raise self.broken
        self.journal.append(event)
        self.stream.put(event)
        self.state.apply(event)
        for observer in self._observers:
            observer(event)
        return event

    def _write(self, event: JournalEvent) -> None:
        if not self._write_ahead:  # test twin: stored one event late, like a stream consumer
            self.flush()
            self._buffer.append(event)
            return
        self._buffer.append(event)
        if event.kind in DURABLE_KINDS:
            self.flush()

    def flush(self) -> None:
        """Commit what is buffered (the run's end calls this; durable events do it themselves)."""
        if self.sink is None or not self._buffer or self.broken is not None:
            return
        events, self._buffer = self._buffer, []
        run_id = self.state.run_id
        try:
            if self.turn is not None and events[-1].kind == "run_finished":
                turn, self.turn = self.turn, None
                self.sink.append_events(
                    run_id, events, start=self.saved, session=self.session, turn=turn
                )
            else:
                self.sink.append_events(run_id, events, start=self.saved, session=self.session)
        except StoreError as exc:
            self.broken = exc
            raise
        self.saved += len(events)
