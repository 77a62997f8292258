"""`RunState`: the projection of a journal that the loop decides from.

Applying the journal's events in order always yields the same state; that is what makes
replay and resume exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Compacted,
    ContextSliced,
    HookApplied,
    JournalEvent,
    ModelRequested,
    ModelResponded,
    Parked,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    SpawnDecided,
    SpawnFinished,
    SpawnStarted,
    StateCommitted,
    StateLoaded,
    StateRejected,
    StepFinished,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
    ToolCallStarted,
    UserPrompt,
)
from legato.messages import JsonValue, Message, ToolCallPart, ToolResultPart, Usage

__all__ = ["RunState"]


_UNCHANGED = (
    ToolCallAdmitted,
    ToolCallRefused,
    ApprovalRequested,
    ApprovalDecided,
    CancelRequested,
    Parked,
    RunResumed,
    HookApplied,
    ToolCallStarted,
    StepFinished,
    SpawnStarted,
    SpawnFinished,
    ContextSliced,
    SpawnDecided,
    Compacted,
)
"""Events that leave the conversation as it was: the gate's records, a resumer's claim,
sub-agent records, a compaction (the model's view is in the event)."""


@dataclass(slots=True)
class RunState:
    """What a run knows after the events applied so far."""

    run_id: str = ""
    instructions: str | None = None
    messages: list[Message] = field(default_factory=lambda: [])
    new_message_index: int = 0
    """Where this run's own messages start in `messages` (after the history)."""
    step: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    pending_calls: list[ToolCallPart] = field(default_factory=lambda: [])
    """Calls of the latest response that have not finished yet, in model order."""
    results: dict[str, ToolResultPart] = field(default_factory=lambda: {})
    failures: dict[str, int] = field(default_factory=lambda: {})
    """Consecutive failing turns per tool name: a model response in which a call of the
    tool failed counts once, however many of its calls failed; a response whose calls of
    the tool all succeeded resets the count."""
    last_errors: dict[str, str] = field(default_factory=lambda: {})
    """The text of each tool's latest failed call (what `ToolRetriesExceeded` quotes)."""
    turn_failed: dict[str, bool] = field(default_factory=lambda: {})
    """Per tool with a finished call in the current response: whether one of them failed."""
    output_failures: int = 0
    output: JsonValue = None
    finished: bool = False
    failed: RunFailed | None = None
    awaiting_model: bool = False
    """A `ModelRequested` has no `ModelResponded` yet."""
    state_loaded: StateLoaded | None = None
    """The verified state the run started from (see `legato.contracts`)."""
    state_commits: list[StateCommitted] = field(default_factory=lambda: [])
    state_values: dict[str, JsonValue] = field(default_factory=lambda: {})
    """The verified state's current values, as JSON."""
    state_version: int = 0
    contract_rejections: int = 0
    """Calls or results the contracts rejected in this run."""
    last_rejection: str = ""

    @classmethod
    def from_events(cls, events: list[JournalEvent] | tuple[JournalEvent, ...]) -> RunState:
        """The state after applying `events` to an empty run."""
        state = cls()
        for event in events:
            state.apply(event)
        return state

    def apply(self, event: JournalEvent) -> None:
        """Advance the state by one event."""
        if isinstance(event, _UNCHANGED):
            return  # the gate's records, claims, sub-agent records: the conversation is as it was
        match event:
            case RunStarted():
                self.run_id = event.run_id
                self.instructions = event.instructions
                self.messages = list(event.history)
                self.new_message_index = len(self.messages)
            case UserPrompt():
                self.messages.append(event.message)
                if event.retry:
                    self.output_failures += 1
            case ModelRequested():
                self.step = event.step
                self.awaiting_model = True
            case ModelResponded():
                self.awaiting_model = False
                response = event.response
                self.messages.append(response.message)
                self.usage = self.usage + response.usage
                if response.cost is not None:
                    self.cost = (self.cost or 0.0) + response.cost
                self.pending_calls = response.message.tool_calls
                self.results = {}
            case ToolCallFinished():
                self._finish_call(event)
            case RunFinished():
                self.finished = True
                self.output = event.output
            case RunFailed():
                self.failed = event
            case StateLoaded() | StateCommitted() | StateRejected():
                self._apply_state(event)
            case _:
                assert_never(event)

    def _apply_state(self, event: StateLoaded | StateCommitted | StateRejected) -> None:
        match event:
            case StateLoaded():
                self.state_loaded = event
                self.state_values = dict(event.values)
                self.state_version = event.version
                self.state_commits = []
            case StateCommitted():
                self.state_commits.append(event)
                self.state_values.update({c.key: c.new for c in event.changes})
                self.state_version = event.version
            case StateRejected():
                self.contract_rejections += 1
                self.last_rejection = f"{event.tool}: {event.message}"

    def _finish_call(self, event: ToolCallFinished) -> None:
        self.results[event.call.id] = event.result
        name = event.call.name
        if event.outcome in ("ok", "output", "skipped"):
            self.turn_failed.setdefault(name, False)
        elif event.outcome not in ("cancelled", "refused"):
            self.turn_failed[name] = True
            self.last_errors[name] = event.result.text
        if all(c.id in self.results for c in self.pending_calls):
            parts = tuple(self.results[c.id] for c in self.pending_calls)
            self.messages.append(Message(role="tool", parts=parts))
            self.pending_calls = []
            self.results = {}
            self._end_turn()

    def _end_turn(self) -> None:
        """Count the response's failures once per tool (see `failures`)."""
        for name, failed in self.turn_failed.items():
            if failed:
                self.failures[name] = self.failures.get(name, 0) + 1
            else:
                self.failures.pop(name, None)
        self.turn_failed = {}

    @property
    def last_message(self) -> Message | None:
        """The newest message of the conversation."""
        return self.messages[-1] if self.messages else None
