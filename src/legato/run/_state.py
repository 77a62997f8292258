"""`RunState`: the projection of a journal that the loop decides from.

Applying the journal's events in order always yields the same state; that is what makes
replay and resume exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from legato.events import (
    JournalEvent,
    ModelRequested,
    ModelResponded,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    ToolCallFinished,
    ToolCallStarted,
    UserPrompt,
)
from legato.messages import JsonValue, Message, ToolCallPart, ToolResultPart, Usage

__all__ = ["RunState"]


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
    """Consecutive failed calls per tool name (reset by a success)."""
    output_failures: int = 0
    output: JsonValue = None
    finished: bool = False
    failed: RunFailed | None = None
    awaiting_model: bool = False
    """A `ModelRequested` has no `ModelResponded` yet."""

    @classmethod
    def from_events(cls, events: list[JournalEvent] | tuple[JournalEvent, ...]) -> RunState:
        """The state after applying `events` to an empty run."""
        state = cls()
        for event in events:
            state.apply(event)
        return state

    def apply(self, event: JournalEvent) -> None:
        """Advance the state by one event."""
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
            case ToolCallStarted():
                pass
            case ToolCallFinished():
                self._finish_call(event)
            case StepFinished():
                pass
            case RunFinished():
                self.finished = True
                self.output = event.output
            case RunFailed():
                self.failed = event
            case _:  # the effect gate's events do not change the conversation
                pass

    def _finish_call(self, event: ToolCallFinished) -> None:
        self.results[event.call.id] = event.result
        name = event.call.name
        if event.outcome in ("ok", "output", "skipped"):
            self.failures.pop(name, None)
        elif event.outcome not in ("cancelled", "refused"):
            self.failures[name] = self.failures.get(name, 0) + 1
        if all(c.id in self.results for c in self.pending_calls):
            parts = tuple(self.results[c.id] for c in self.pending_calls)
            self.messages.append(Message(role="tool", parts=parts))
            self.pending_calls = []
            self.results = {}

    @property
    def last_message(self) -> Message | None:
        """The newest message of the conversation."""
        return self.messages[-1] if self.messages else None
