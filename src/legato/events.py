"""The events of a run: the journal, and what `agent.stream()` yields.

A run is an append-only journal of the typed events defined here. Everything else is a
projection of it: the conversation, the usage, the result. The journal serializes to
JSON lines (`Journal.to_jsonl`) and loads back exactly (`Journal.from_jsonl`), so a run
can be inspected, replayed without calling any model or tool (`legato.run.replay`), or
continued.

`agent.stream()` yields the journal events as they are appended, interleaved with
events that are not journaled: the model's `TextDelta` / `ThinkingDelta` /
`ToolCallDelta` (the complete response is, in `ModelResponded`), the `ToolProgress` of
tool calls in flight (their results are, in `ToolCallFinished`), and a child run's
events wrapped in `ChildEvent` (the child's own journal has them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias, get_args

from typing_extensions import TypeIs

from legato._events._gate import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Compacted,
    HookApplied,
    Parked,
    RefusalReason,
    RunResumed,
    ToolCallAdmitted,
    ToolCallRefused,
)
from legato._events._spawn import (
    ComplexityMetrics,
    ContextSliced,
    Lineage,
    SliceEntry,
    SpawnDecided,
    SpawnFinished,
    SpawnOutcome,
    SpawnStarted,
)
from legato._events._state import StateChange, StateCommitted, StateLoaded, StateRejected
from legato._values import value_class

# the exceptions' file, not their package: the package re-exports `RunParked`, which carries
# a `legato._requests.ParkedRun`, which holds a `Journal` (docs/development.md, Layers)
from legato.exceptions._io import JournalError
from legato.messages import (
    TAGGED_BY_KIND,
    JsonValue,
    Message,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "JOURNAL_EVENT_TYPES",
    "ChildEvent",
    "ComplexityMetrics",
    "ContextSliced",
    "Lineage",
    "SliceEntry",
    "SpawnDecided",
    "SpawnFinished",
    "SpawnOutcome",
    "SpawnStarted",
    "AnyJournalEvent",
    "Compacted",
    "ApprovalDecided",
    "ApprovalRequested",
    "CancelRequested",
    "HookApplied",
    "Parked",
    "RefusalReason",
    "RunResumed",
    "ToolCallAdmitted",
    "ToolCallRefused",
    "Journal",
    "JournalEvent",
    "ModelRequested",
    "ModelResponded",
    "RunEvent",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StateChange",
    "StateCommitted",
    "StateLoaded",
    "StateRejected",
    "StepFinished",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolOutcome",
    "ToolProgress",
    "UserPrompt",
    "is_journal_event",
]


@value_class
class RunStarted:
    """The first event of every run."""

    run_id: str
    agent: str
    """The agent's name."""
    model: str
    """The model's `provider:model` name."""
    instructions: str | None = None
    history: tuple[Message, ...] = ()
    """Messages of earlier turns this run continues from."""
    owner: str | None = None
    """The process that runs it (host:pid), until another one resumes it (`RunResumed`)."""
    forked_from: str | None = None
    """The run this one was forked from (its first `fork_at` events are this one's)."""
    fork_at: int | None = None
    kind: Literal["run_started"] = "run_started"


@value_class
class UserPrompt:
    """A user message: the one that starts the turn, or a retry prompt from the run."""

    message: Message
    retry: bool = False
    """The run itself sent this because the model's answer was unusable (empty or invalid)."""
    kind: Literal["user_prompt"] = "user_prompt"


@value_class
class ModelRequested:
    """A model call is about to be made."""

    step: int
    """1 for the first model call of the run, 2 for the next, ..."""
    model: str
    kind: Literal["model_requested"] = "model_requested"


@value_class
class ModelResponded:
    """A model call completed."""

    step: int
    response: ModelResponse
    duration: float = 0.0
    """Seconds the call took."""
    kind: Literal["model_responded"] = "model_responded"


ToolOutcome: TypeAlias = Literal[
    "ok",
    "error",
    "invalid_arguments",
    "unknown_tool",
    "timeout",
    "cancelled",
    "skipped",
    "output",
    "rejected",
    "refused",
]
"""How a tool call ended. `output` marks the call that delivered the run's final result;
`skipped` marks calls not run because the final result arrived in the same response;
`rejected` marks calls a contract refused (not run, or their state changes discarded);
`refused` marks calls the effect gate did not admit (denied, rejected, held, duplicate)."""


@value_class
class ToolCallStarted:
    """A tool call's function is about to run."""

    step: int
    call: ToolCallPart
    kind: Literal["tool_call_started"] = "tool_call_started"


@value_class
class ToolCallFinished:
    """A tool call ended; `result` is what the model will see.

    Finished events of one response are appended in the order the model issued the
    calls, whatever order they completed in.
    """

    step: int
    call: ToolCallPart
    result: ToolResultPart
    outcome: ToolOutcome = "ok"
    duration: float = 0.0
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@value_class
class ToolProgress:
    """A tool call in flight reported how far it got (stream-only: never journaled).

    A tool reports with `RunContext.report_progress`; an MCP tool's progress
    notifications arrive the same way. For one call, every `ToolProgress` comes after its
    `ToolCallStarted` and before its `ToolCallFinished`. Updates are coalesced to at
    most one event per call every 0.1 seconds (the newest update wins; the last one
    before the call ends is always streamed). Replaying or resuming a run never needs
    them: the call's result is in `ToolCallFinished`.
    """

    run_id: str
    """The run whose tool call reports (a child run's id inside a `ChildEvent`)."""
    step: int
    """The model step that issued the call."""
    call_id: str
    """The tool call's id, as in its `ToolCallStarted`."""
    tool: str
    """The tool's name."""
    progress: float
    """How far the call got, in units of its choosing (MCP: increases with each update)."""
    total: float | None = None
    """The value `progress` reaches when done, when the tool knows it."""
    message: str | None = None
    """What the tool is doing now, for people."""
    kind: Literal["tool_progress"] = "tool_progress"

    @property
    def fraction(self) -> float | None:
        """`progress / total` (e.g. 0.4 for 40%), when the total is known and positive."""
        if self.total is None or self.total <= 0:
            return None
        return self.progress / self.total


@value_class
class StepFinished:
    """A model step and the tool calls it asked for are complete."""

    step: int
    kind: Literal["step_finished"] = "step_finished"


@value_class
class RunFinished:
    """The run produced its final output."""

    output: JsonValue
    """The output in JSON form (a string for text output)."""
    usage: Usage
    cost: float | None = None
    kind: Literal["run_finished"] = "run_finished"


@value_class
class ChildEvent:
    """An event of a child run, forwarded into its parent's stream (not journaled there).

    The child's own journal has the event; the parent's journal records only the
    child's start and end.
    """

    lineage: Lineage
    event: RunEvent
    kind: Literal["child_event"] = "child_event"


@value_class
class RunFailed:
    """The run stopped with an error."""

    error_type: str
    """The exception's class name, e.g. `MaxStepsExceeded`."""
    message: str
    kind: Literal["run_failed"] = "run_failed"


AnyJournalEvent: TypeAlias = (
    RunStarted
    | UserPrompt
    | ModelRequested
    | ModelResponded
    | ToolCallStarted
    | ToolCallFinished
    | StepFinished
    | RunFinished
    | RunFailed
    | StateLoaded
    | StateCommitted
    | StateRejected
    | SpawnStarted
    | SpawnFinished
    | ContextSliced
    | SpawnDecided
    | Compacted
    | ToolCallAdmitted
    | ToolCallRefused
    | ApprovalRequested
    | ApprovalDecided
    | CancelRequested
    | Parked
    | RunResumed
    | HookApplied
)
"""Any event that is recorded in a journal (the plain union)."""

JournalEvent: TypeAlias = Annotated[AnyJournalEvent, TAGGED_BY_KIND]
"""Any event that is recorded in a journal, tagged by `kind` for JSON."""

RunEvent: TypeAlias = (
    AnyJournalEvent | TextDelta | ThinkingDelta | ToolCallDelta | ToolProgress | ChildEvent
)
"""Anything `agent.stream()` yields."""


JOURNAL_EVENT_TYPES: tuple[type, ...] = get_args(AnyJournalEvent)
"""The classes of the events that are journaled (the others are stream-only: deltas,
tool progress, child events)."""


def is_journal_event(event: RunEvent) -> TypeIs[AnyJournalEvent]:
    """Whether a streamed event is one the journal records."""
    return isinstance(event, JOURNAL_EVENT_TYPES)


@cache
def _event_adapter() -> TypeAdapter[JournalEvent]:
    from pydantic import TypeAdapter

    return TypeAdapter(JournalEvent)


class Journal:
    """The append-only record of one run."""

    __slots__ = ("_events",)

    def __init__(self, events: Iterable[JournalEvent] = ()) -> None:
        self._events: list[JournalEvent] = list(events)

    def append(self, event: JournalEvent) -> None:
        """Record one more event."""
        self._events.append(event)

    @property
    def events(self) -> Sequence[JournalEvent]:
        """The events so far, oldest first (a read-only view)."""
        return tuple(self._events)

    @property
    def run_id(self) -> str | None:
        """The run's id, from its `RunStarted` event."""
        first = self._events[0] if self._events else None
        return first.run_id if isinstance(first, RunStarted) else None

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[JournalEvent]:
        return iter(self._events)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Journal) and self._events == other._events

    __hash__ = None  # type: ignore[assignment] # mutable container: not hashable

    def to_jsonl(self) -> str:
        """One JSON object per line, one line per event."""
        adapter = _event_adapter()
        return "".join(adapter.dump_json(e).decode() + "\n" for e in self._events)

    @classmethod
    def from_jsonl(cls, text: str) -> Journal:
        """Load a journal written by `to_jsonl`; a bad line raises `JournalError` naming it."""
        from pydantic import ValidationError

        adapter = _event_adapter()
        events: list[JournalEvent] = []
        # lines end at "\n" only: JSON leaves other line breaks (U+2028, U+0085, ...) unescaped
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                events.append(adapter.validate_json(line))
            except ValidationError as exc:
                msg = f"journal line {number} is not a valid event: {exc.errors()[0]['msg']}"
                raise JournalError(msg) from exc
        return cls(events)
