"""Assemble a provider's stream of fragments into neutral events and one `ModelResponse`.

Every provider module feeds its wire chunks into a `ResponseAssembler`. The rules are the
ones real servers force on us (see shared/research/providers.md):

- tool calls are keyed by their index, and by id when the index is absent;
- a call's name is taken from the first chunk that has one; repeats of it are ignored
  (llama.cpp's server repeats the name in every chunk);
- an id that arrives late is attached to the call; an index reused with a *different*
  id starts a new call (index collision);
- empty deltas are accepted and dropped;
- text may come before, between and after calls; part order is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from legato.messages import (
    JsonValue,
    Message,
    ModelResponse,
    Part,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from legato.models._base import TextDelta, ThinkingDelta, ToolCallDelta

__all__ = ["ResponseAssembler"]


@dataclass(slots=True)
class _Text:
    chunks: list[str] = field(default_factory=lambda: [])


@dataclass(slots=True)
class _Thinking:
    chunks: list[str] = field(default_factory=lambda: [])
    signature: str | None = None
    redacted: bool = False


@dataclass(slots=True)
class _Call:
    position: int
    id: str | None = None
    name: str | None = None
    chunks: list[str] = field(default_factory=lambda: [])


_Open = _Text | _Thinking | _Call


def _check_text(value: object) -> None:
    if not isinstance(value, str):
        msg = f"expected text, got {type(value).__name__} {value!r:.60}"
        raise TypeError(msg)


class ResponseAssembler:
    """Collects fragments of one response; each `add_*` returns the event to emit, if any."""

    def __init__(self, *, provider: str | None = None, id_prefix: str = "call") -> None:
        self._provider = provider
        self._id_prefix = id_prefix
        self._parts: list[_Open] = []
        self._calls_by_key: dict[tuple[str, object], _Call] = {}
        self._calls: list[_Call] = []

    # -- text and thinking --------------------------------------------------------------------

    def add_text(self, text: str | None) -> TextDelta | None:
        """Append answer text; a new text part starts after any other part.

        Raises:
            TypeError: `text` is not a string (a payload of the wrong shape; providers turn
                this into `ResponseParseError` with the payload).
        """
        if not text:
            return None
        _check_text(text)
        last = self._parts[-1] if self._parts else None
        if not isinstance(last, _Text):
            last = _Text()
            self._parts.append(last)
        last.chunks.append(text)
        return TextDelta(text=text)

    def add_thinking(
        self, text: str | None = None, *, signature: str | None = None, redacted: bool = False
    ) -> ThinkingDelta | None:
        """Append reasoning text and/or its signature (`TypeError` if either is not a string)."""
        if text:
            _check_text(text)
        if signature is not None:
            _check_text(signature)
        last = self._parts[-1] if self._parts else None
        if not isinstance(last, _Thinking):
            if not text and signature is None and not redacted:
                return None
            last = _Thinking()
            self._parts.append(last)
        if signature is not None:
            last.signature = (last.signature or "") + signature
        if redacted:
            last.redacted = True
        if text:
            last.chunks.append(text)
            return ThinkingDelta(text=text)
        return None

    def close_part(self) -> None:
        """End the current text or thinking part (the provider signalled a block boundary)."""
        self._parts.append(_Text())

    # -- tool calls -----------------------------------------------------------------------------

    def add_tool_call(
        self,
        *,
        index: int | None = None,
        id: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
    ) -> ToolCallDelta | None:
        """Add a fragment of a tool call, identified by `index` and/or `id`."""
        call, started = self._find_call(index=index, id=id)
        if id and call.id is None:
            call.id = id
            self._calls_by_key[("id", id)] = call
        announce_name = None
        if name and call.name is None:
            call.name = name
            announce_name = name
        if arguments:
            call.chunks.append(arguments)
        if not (started or announce_name or arguments):
            return None
        return ToolCallDelta(
            index=call.position,
            id=call.id if started or announce_name else None,
            name=announce_name,
            arguments_delta=arguments or "",
        )

    def _find_call(self, *, index: int | None, id: str | None) -> tuple[_Call, bool]:
        key: tuple[str, object]
        if index is not None:
            key = ("index", index)
            existing = self._calls_by_key.get(key)
            if existing is not None and not (id and existing.id and existing.id != id):
                return existing, False
        elif id is not None:
            key = ("id", id)
            existing = self._calls_by_key.get(key)
            if existing is not None:
                return existing, False
        elif self._calls:
            return self._calls[-1], False
        else:
            key = ("index", 0)
        call = _Call(position=len(self._calls), id=id)
        self._calls.append(call)
        self._parts.append(call)
        self._calls_by_key[key] = call
        if id is not None:
            self._calls_by_key[("id", id)] = call
        return call, True

    def part_count(self) -> int:
        """How many parts the built message holds so far (its next part gets this index)."""
        return sum(1 for p in self._parts if not isinstance(p, _Text) or any(c for c in p.chunks))

    def has_content(self) -> bool:
        """Whether any text, reasoning or tool call arrived."""
        return any(
            (isinstance(p, _Text | _Thinking) and (p.chunks or getattr(p, "signature", None)))
            or isinstance(p, _Call)
            for p in self._parts
        )

    # -- the result -----------------------------------------------------------------------------

    def build(
        self,
        *,
        usage: Usage | None = None,
        stop_reason: StopReason | None = None,
        model_name: str = "",
        cost: float | None = None,
        provider_response_id: str | None = None,
        provider_details: dict[str, JsonValue] | None = None,
    ) -> ModelResponse:
        """The assembled response; the stop reason defaults from whether tools were called."""
        parts: list[Part] = []
        for open_part in self._parts:
            part = self._finish(open_part)
            if part is not None:
                parts.append(part)
        has_calls = any(isinstance(p, ToolCallPart) for p in parts)
        if stop_reason is None or (has_calls and stop_reason is StopReason.END_TURN):
            stop_reason = StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN
        details = dict(provider_details) if provider_details else None
        message = Message(role="assistant", parts=tuple(parts), provider_details=details)
        return ModelResponse(
            message=message,
            usage=usage or Usage(requests=1),
            stop_reason=stop_reason,
            model_name=model_name,
            cost=cost,
            provider_response_id=provider_response_id,
        )

    def _finish(self, part: _Open) -> Part | None:
        if isinstance(part, _Text):
            text = "".join(part.chunks)
            return TextPart(text=text) if text else None
        if isinstance(part, _Thinking):
            return ThinkingPart(
                text="".join(part.chunks),
                signature=part.signature,
                redacted=part.redacted,
                provider=self._provider,
            )
        call_id = part.id or f"{self._id_prefix}_{part.position}"
        return ToolCallPart.from_raw(
            id=call_id, name=part.name or "", raw_arguments="".join(part.chunks)
        )
