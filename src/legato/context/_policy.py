"""Compaction strategies and the per-agent `ContextPolicy` that chooses and triggers them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from legato.context._compact import (
    CompactionResult,
    Counter,
    Pinned,
    compose,
    elide_tool_results,
    keep_recent,
    select_recent,
    stitch,
)
from legato.context._pairing import is_summary
from legato.context._recall import recall_result_tool
from legato.context._tokens import CharCounter, TokenCounter, counter_for, message_text
from legato.exceptions import CompactionFailed, ConfigurationError, RunError
from legato.messages import JsonValue, Message
from legato.models import Model, ModelProfile, ModelRequest, complete
from legato.tools import Tool

__all__ = [
    "Chain",
    "CompactionRequest",
    "Compactor",
    "ContextPolicy",
    "ElideToolResults",
    "KeepRecent",
    "Summarize",
    "summarize",
]

SUMMARY_INSTRUCTIONS = (
    "You compress conversations. Summarize the transcript you are given so that the "
    "conversation can continue without it: keep every fact, number, name, decision, open "
    "question and result of a tool call that may matter later; drop chit-chat. Write plain "
    "sentences, no preamble."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRequest:
    """What a compactor is asked to do."""

    budget: int
    """Tokens the conversation's messages should fit in."""
    count: Counter
    """Tokens of one message."""
    pinned: Pinned
    """Messages that must survive (by index and value)."""
    model: Model | None = None
    """The model a summarizing compactor uses when it has none of its own."""
    meter: Callable[[Model], Model] | None = None
    """Wraps whichever model a compactor calls, so the run's budget reserves the call
    (`Budget.metered`); None outside a budgeted run."""
    pinned_state: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    """State entries copied verbatim into every summary (never summarized)."""


@runtime_checkable
class Compactor(Protocol):
    """A compaction strategy."""

    @property
    def name(self) -> str:
        """Recorded in the `Compacted` event."""
        ...

    async def compact(
        self, messages: Sequence[Message], request: CompactionRequest
    ) -> CompactionResult:
        """A valid, smaller conversation (or the same one when nothing can go)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepRecent:
    """Keep the newest messages that fit; drop the oldest whole turns and tool rounds."""

    name: str = "keep_recent"

    async def compact(
        self, messages: Sequence[Message], request: CompactionRequest
    ) -> CompactionResult:
        """Run `keep_recent` at the request's budget."""
        return keep_recent(
            messages, budget=request.budget, count=request.count, pinned=request.pinned
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ElideToolResults:
    """Replace large results of older tool rounds by stubs the model can expand."""

    min_chars: int = 2000
    """Results at least this long are elided."""
    keep_last_rounds: int = 2
    """The newest tool rounds keep their results."""
    preview_chars: int = 200
    name: str = "elide_tool_results"

    async def compact(
        self, messages: Sequence[Message], request: CompactionRequest
    ) -> CompactionResult:
        """Run `elide_tool_results`."""
        return elide_tool_results(
            messages,
            keep_last_rounds=self.keep_last_rounds,
            min_chars=self.min_chars,
            preview_chars=self.preview_chars,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Summarize:
    """Summarize older messages with a model call; keep the newest ones verbatim.

    The summary is stored in the run's `Compacted` event, so a resumed or replayed run
    reuses it instead of calling the model again. Pinned messages and pinned state are
    never summarized: they stay verbatim.
    """

    model: Model | None = None
    """The summarizing model; None uses the agent's model."""
    keep_fraction: float = 0.6
    """Share of the budget kept for recent messages; the rest is for the summary."""
    instructions: str = SUMMARY_INSTRUCTIONS
    max_transcript_chars: int = 48_000
    """The transcript sent for summary is cut to its last this-many characters."""
    name: str = "summarize"

    async def compact(
        self, messages: Sequence[Message], request: CompactionRequest
    ) -> CompactionResult:
        """Summarize what a keep-recent window at `keep_fraction` of the budget would drop."""

        def keep(index: int, message: Message) -> bool:
            # an earlier summary is folded into the new one instead of piling up
            return not is_summary(message) and request.pinned(index, message)

        kept = select_recent(
            messages,
            budget=int(request.budget * self.keep_fraction),
            count=request.count,
            pinned=keep,
        )
        dropped = [m for i, m in enumerate(messages) if i not in kept]
        if not dropped:
            return CompactionResult.unchanged(messages, self.name)
        model = self.model or request.model
        if model is None:
            msg = "the Summarize strategy needs a model"
            raise ConfigurationError(msg)
        if request.meter is not None:
            model = request.meter(model)
        text = await summarize(
            model,
            dropped,
            instructions=self.instructions,
            max_chars=self.max_transcript_chars,
        )
        body = text
        if request.pinned_state:
            pinned = "\n".join(f"- {k}: {v!r}" for k, v in request.pinned_state.items())
            body += f"\nPinned state (verbatim):\n{pinned}"
        result = stitch(
            messages,
            kept,
            note_text=f"summary of {len(dropped)} earlier messages",
            note_body=body,
            strategy=self.name,
        )
        return CompactionResult(
            messages=result.messages,
            sources=result.sources,
            removed=result.removed,
            summary=text,
            strategy=self.name,
        )


async def summarize(
    model: Model,
    messages: Sequence[Message],
    *,
    instructions: str = SUMMARY_INSTRUCTIONS,
    max_chars: int = 48_000,
) -> str:
    """One model call that summarizes `messages`; `CompactionFailed` if it fails or is empty."""
    lines = [f"{m.role}: {message_text(m)[:4000]}" for m in messages]
    transcript = "\n".join(lines)[-max_chars:]
    request = ModelRequest(
        messages=(Message.user(f"Transcript to summarize:\n\n{transcript}"),),
        instructions=instructions,
    )
    try:
        response = await complete(model, request)
    except RunError:  # the run's own limits (a budget the call does not fit): not a failure
        raise
    except Exception as exc:
        msg = f"the summary call to {model.name} failed: {type(exc).__name__}: {exc}"
        raise CompactionFailed(msg) from exc
    text = response.message.text.strip()
    if not text:
        msg = f"the summary call to {model.name} returned no text"
        raise CompactionFailed(msg)
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Chain:
    """Apply strategies in order, stopping as soon as the conversation fits."""

    steps: tuple[Compactor, ...]
    name: str = "chain"

    async def compact(
        self, messages: Sequence[Message], request: CompactionRequest
    ) -> CompactionResult:
        """Each step runs on the previous step's output."""
        result = CompactionResult.unchanged(messages, self.name)
        for step in self.steps:
            if sum(request.count(m) for m in result.messages) <= request.budget:
                break
            result = compose(result, await step.compact(result.messages, request))
        return result


def _default_strategy() -> Compactor:
    return Chain(steps=(ElideToolResults(), KeepRecent()))


@dataclass(frozen=True, kw_only=True)
class ContextPolicy:
    """How an agent keeps its requests inside the model's context window.

    Before each model call the request is estimated; above `trigger` × window it is
    compacted down to about `target` × window with `strategy`. A provider's
    context-length error compacts and retries once. Each compaction is a `Compacted`
    event in the journal, which keeps the full history.
    """

    strategy: Compactor = field(default_factory=_default_strategy)
    trigger: float = 0.8
    """Compact when the estimated request exceeds this fraction of the window."""
    target: float = 0.5
    """Compact down to about this fraction of the window."""
    window: int | None = None
    """Context window in tokens; None takes `ModelProfile.context_window`."""
    pin: Callable[[Message], bool] | None = None
    """Messages for which this returns True are never dropped or summarized."""
    pinned_state: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    """State entries copied verbatim into summaries."""
    pinned_state_keys: tuple[str, ...] = ()
    """Keys of the run's verified state whose current values are copied verbatim into
    every summary (never summarized)."""
    counter: TokenCounter | None = None
    """How to count tokens; None picks by `ModelProfile.tokenizer`."""
    chars_per_token: float = 4.0
    """The estimate's ratio for models without a known tokenizer."""
    calibrate: bool = True
    """Scale counts by reported / counted tokens of the latest call (provider usage is truth)."""
    retry_on_overflow: bool = True
    """On `ContextLengthExceeded`, compact and retry the call once."""
    recall_tool: bool = True
    """Give the agent the `recall_result` tool to expand elided results."""

    def __post_init__(self) -> None:
        if not 0 < self.target < self.trigger <= 1:
            msg = (
                f"need 0 < target < trigger <= 1, got target={self.target}, trigger={self.trigger}"
            )
            raise ConfigurationError(msg)
        if self.window is not None and self.window <= 0:
            msg = "window must be a positive number of tokens"
            raise ConfigurationError(msg)

    def token_counter(self, profile: ModelProfile) -> TokenCounter:
        """The counter for a model with this profile."""
        if self.counter is not None:
            return self.counter
        if profile.tokenizer is None:
            return CharCounter(chars_per_token=self.chars_per_token)
        return counter_for(profile.tokenizer, chars_per_token=self.chars_per_token)

    def tools(self) -> list[Tool]:
        """Tools the agent gets with this policy."""
        return [recall_result_tool()] if self.recall_tool else []

    def window_for(self, profile: ModelProfile) -> int | None:
        """The window size in tokens, if known."""
        return self.window or profile.context_window
