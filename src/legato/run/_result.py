"""`RunResult`: what a finished run returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from legato._values import value_class
from legato.events import Journal
from legato.messages import Message, Usage

if TYPE_CHECKING:
    from legato.contracts import State
    from legato.run._state import RunState

__all__ = ["RunResult", "result_from_state"]

OutputT = TypeVar("OutputT", default=str)


@value_class
class RunResult(Generic[OutputT]):
    """The outcome of a run: its output, the conversation, what it cost, and its journal."""

    output: OutputT
    """The final answer: text, or an instance of the agent's `output_type`."""
    messages: list[Message]
    """The whole conversation, history included; pass it as `message_history` to continue."""
    new_message_index: int
    """Where this run's messages start in `messages`."""
    usage: Usage
    cost: float | None
    """US dollars, when the provider's prices are known."""
    journal: Journal
    run_id: str
    state: State[Any] | None = None
    """The verified state at the end of the run (None when the agent has no state); pass it
    as `state=` to the next run to continue from it."""

    def new_messages(self) -> list[Message]:
        """Only the messages this run added (its prompt, the answers, the tool results)."""
        return self.messages[self.new_message_index :]


T = TypeVar("T")


def result_from_state(
    state: RunState, *, output: T, journal: Journal, state_value: State[Any] | None = None
) -> RunResult[T]:
    """Build the result of a finished run from its state."""
    return RunResult(
        output=output,
        messages=list(state.messages),
        new_message_index=state.new_message_index,
        usage=state.usage,
        cost=state.cost,
        journal=journal,
        run_id=state.run_id,
        state=state_value,
    )
