"""The loop's one call into context management, made before each model request.

`ContextStep.prepare` returns the messages the model should see: the conversation, or
the view left by the run's latest `Compacted` event plus what came after it. When the
estimated request crosses the policy's trigger (or the provider said it was too long),
it compacts and returns the `Compacted` event for the loop to record.

`legato.context` is imported only when an agent has a context policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from legato.events import Compacted, JournalEvent, ModelResponded
from legato.messages import JsonValue, Message, ToolDefinition
from legato.models import Model

if TYPE_CHECKING:
    from legato.budgets import Budget
    from legato.context import ContextPolicy, TokenCounter

__all__ = ["ContextStep", "context_view"]


def context_view(
    events: Sequence[JournalEvent], messages: Sequence[Message]
) -> tuple[list[Message], list[int]]:
    """The messages the model sees after the latest compaction, and their conversation indexes."""
    for event in reversed(events):
        if isinstance(event, Compacted):
            kept = [
                m if m is not None else messages[s]
                for m, s in zip(event.messages, event.sources, strict=True)
            ]
            view = [*kept, *messages[event.upto :]]
            sources = [*event.sources, *range(event.upto, len(messages))]
            return view, sources
    return list(messages), list(range(len(messages)))


class ContextStep:
    """Applies an agent's `ContextPolicy` before each model call."""

    __slots__ = ("_budget", "_counter", "_counts", "_model", "_policy", "ratio")

    def __init__(
        self, policy: ContextPolicy | None, model: Model, *, budget: Budget | None = None
    ) -> None:
        self._policy = policy
        self._model = model
        self._budget = budget
        """The run's budget: a summary call is reserved in it like any other model call."""
        self._counter: TokenCounter | None = None
        self._counts: dict[int, tuple[Message, int]] = {}
        self.ratio = 1.0
        """Reported tokens per counted token, learned from the provider's usage."""

    def count(self, message: Message, counter: TokenCounter) -> int:
        """Tokens of one message, remembered per message object (messages are immutable)."""
        entry = self._counts.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1]
        from legato.context import count_message

        tokens = count_message(message, counter)
        self._counts[id(message)] = (message, tokens)
        return tokens

    @property
    def retries_overflow(self) -> bool:
        """Whether a context-length error should be met by compacting and retrying once."""
        return self._policy is not None and self._policy.retry_on_overflow

    def counter(self) -> TokenCounter | None:
        """The token counter in use (None without a policy)."""
        if self._policy is not None and self._counter is None:
            self._counter = self._policy.token_counter(self._model.profile)
        return self._counter

    def estimate(
        self,
        counter: TokenCounter,
        events: Sequence[JournalEvent],
        messages: Sequence[Message],
        view: Sequence[Message],
        overhead: int,
    ) -> int:
        """Input tokens of the next request: the last reported usage plus what came since.

        Provider-reported usage is the truth: when the latest response (after the latest
        compaction) reported its input tokens, the estimate is those plus its output plus
        an estimate of the messages appended after it. Otherwise every message is counted.
        Each report also calibrates `ratio` (reported / counted tokens of that request),
        which scales every count, so a rough counter converges on the provider's numbers.
        """
        calibrate = self._policy is None or self._policy.calibrate
        for event in reversed(events):
            if isinstance(event, Compacted):
                break
            if isinstance(event, ModelResponded) and event.response.usage.input_tokens > 0:
                usage = event.response.usage
                at = next(
                    (k for k in range(len(view) - 1, -1, -1) if view[k] is event.response.message),
                    None,
                )
                if at is None:
                    break
                if calibrate:
                    sent = overhead + sum(self.count(m, counter) for m in view[:at])
                    self.ratio = min(4.0, max(0.25, usage.input_tokens / max(sent, 1)))
                tail = sum(self.count(m, counter) for m in view[at + 1 :])
                return usage.input_tokens + usage.output_tokens + round(tail * self.ratio)
        return round((overhead + sum(self.count(m, counter) for m in view)) * self.ratio)

    async def prepare(
        self,
        events: Sequence[JournalEvent],
        messages: Sequence[Message],
        *,
        instructions: str | None,
        tools: Sequence[ToolDefinition],
        overflowed: bool = False,
        state_values: Mapping[str, JsonValue] | None = None,
    ) -> tuple[list[Message], Compacted | None]:
        """The messages to send, and the `Compacted` event to record if it compacted.

        `state_values` is the run's verified state; the policy's `pinned_state_keys` are
        taken from it.
        """
        view, sources = context_view(events, messages)
        policy, counter = self._policy, self.counter()
        if policy is None or counter is None:
            return view, None
        from legato.context import CompactionRequest, count_request, is_summary

        overhead = count_request([], counter, instructions=instructions, tools=tools)
        estimate = self.estimate(counter, events, messages, view, overhead)
        window = policy.window_for(self._model.profile)
        if not overflowed and (window is None or estimate <= policy.trigger * window):
            return view, None
        fixed = overhead * self.ratio  # instructions and tools: not compactable
        budget = policy.target * (window or estimate) - fixed
        if overflowed:
            budget = min(budget, (estimate - fixed) / 2)
        budget = int(budget / self.ratio)  # in the counter's units
        pin = policy.pin

        def pinned(index: int, message: Message) -> bool:
            return is_summary(message) or (pin is not None and pin(message))

        result = await policy.strategy.compact(
            view,
            CompactionRequest(
                budget=max(budget, 1),
                count=lambda m: self.count(m, counter),
                pinned=pinned,
                model=self._model,
                meter=self._budget.metered if self._budget is not None else None,
                pinned_state=_pinned_state(policy, state_values or {}),
            ),
        )
        if not result.changed:
            return view, None
        origins = tuple(sources[s] if s >= 0 else -1 for s in result.sources)
        event = Compacted(
            strategy=result.strategy,
            reason="context_length_exceeded" if overflowed else "threshold",
            upto=len(messages),
            messages=tuple(
                None if origin >= 0 and m is messages[origin] else m
                for m, origin in zip(result.messages, origins, strict=True)
            ),
            sources=origins,
            removed=tuple(sorted({sources[j] for j in result.removed if sources[j] >= 0})),
            elided=result.elided,
            summary=result.summary,
            tokens_before=estimate,
            tokens_after=round(
                (overhead + sum(self.count(m, counter) for m in result.messages)) * self.ratio
            ),
        )
        return list(result.messages), event


def _pinned_state(
    policy: ContextPolicy, state_values: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    pinned = dict(policy.pinned_state)
    pinned.update({k: state_values[k] for k in policy.pinned_state_keys if k in state_values})
    return pinned
