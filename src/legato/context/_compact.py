"""Compaction as pure functions: `list[Message]` in, a smaller valid `list[Message]` out.

Every function here keeps a conversation valid for every provider: a tool call and all
its results (parallel calls included) are kept or dropped together, system messages and
pinned messages stay, the latest user message stays, and the output starts with a user
message and never puts two user or two assistant messages side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from legato.context._pairing import NOTE_PREFIX, note
from legato.messages import Message, Part, TextPart, ToolResultPart

__all__ = [
    "ELIDED_PREFIX",
    "CompactionResult",
    "compose",
    "elide_tool_results",
    "keep_recent",
    "select_recent",
    "stitch",
    "units",
]

ELIDED_PREFIX = f"{NOTE_PREFIX}result elided"
"""How the stub of an elided tool result starts."""

Counter = Callable[[Message], int]
Pinned = Callable[[int, Message], bool]


def _never(index: int, message: Message) -> bool:
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """The output of a compaction and what it did to the input."""

    messages: tuple[Message, ...]
    sources: tuple[int, ...]
    """For each output message, the input index it stands for (-1 for an inserted note)."""
    removed: tuple[int, ...] = ()
    """Input indexes that are not in the output (dropped or summarized)."""
    elided: tuple[str, ...] = ()
    """Call ids whose results were replaced by a stub."""
    summary: str | None = None
    strategy: str = "none"

    @property
    def changed(self) -> bool:
        """Whether the compaction removed or elided anything."""
        return bool(self.removed or self.elided)

    @classmethod
    def unchanged(cls, messages: Sequence[Message], strategy: str = "none") -> CompactionResult:
        """The identity compaction."""
        return cls(messages=tuple(messages), sources=tuple(range(len(messages))), strategy=strategy)


def units(messages: Sequence[Message]) -> list[range]:
    """Split into the smallest pieces that may be dropped alone.

    An assistant message with tool calls and the tool messages after it form one unit
    (so parallel calls stay with all their results); every other message is a unit.
    """
    out: list[range] = []
    i, n = 0, len(messages)
    while i < n:
        j = i + 1
        if messages[i].role == "assistant" and messages[i].tool_calls:
            while j < n and messages[j].role == "tool":
                j += 1
        out.append(range(i, j))
        i = j
    return out


def select_recent(
    messages: Sequence[Message], *, budget: int, count: Counter, pinned: Pinned = _never
) -> set[int]:
    """The indexes a keep-recent window keeps within `budget` tokens.

    System messages, pinned messages (with their whole unit) and the latest user
    message are always kept; then the newest units, walking back until one does not fit.
    """
    pieces = units(messages)
    last_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), -1
    )
    protected: list[range] = []
    rest: list[range] = []
    for u in pieces:
        keep = any(
            messages[i].role == "system" or i == last_user or pinned(i, messages[i]) for i in u
        )
        (protected if keep else rest).append(u)
    kept = {i for u in protected for i in u}
    total = sum(count(messages[i]) for i in kept) + count(note("omitted"))
    for u in reversed(rest):
        cost = sum(count(messages[i]) for i in u)
        if total + cost > budget:
            break
        total += cost
        kept.update(u)
    return kept


def stitch(
    messages: Sequence[Message],
    kept: set[int],
    *,
    note_text: str,
    strategy: str,
    note_body: str = "",
) -> CompactionResult:
    """Keep the indexes in `kept`, put a note where the first gap is, and fix the seams."""
    removed = tuple(i for i in range(len(messages)) if i not in kept)
    if not removed:
        return CompactionResult.unchanged(messages, strategy)
    out: list[Message] = []
    sources: list[int] = []
    noted = False
    for i, m in enumerate(messages):
        if i not in kept:
            if not noted and m.role != "system":
                out.append(note(note_text, note_body))
                sources.append(-1)
                noted = True
            continue
        out.append(m)
        sources.append(i)
    fixed, fixed_sources = _normalize(out, sources)
    return CompactionResult(
        messages=tuple(fixed), sources=tuple(fixed_sources), removed=removed, strategy=strategy
    )


def _normalize(messages: list[Message], sources: list[int]) -> tuple[list[Message], list[int]]:
    """Merge adjacent user messages, separate adjacent assistant ones, open with the user."""
    out: list[Message] = []
    src: list[int] = []
    for m, s in zip(messages, sources, strict=True):
        prev = out[-1] if out else None
        if prev is not None and prev.role == m.role == "user":
            out[-1] = replace(prev, parts=prev.parts + m.parts)
            src[-1] = s if s >= 0 else src[-1]
            continue
        if prev is not None and prev.role == m.role == "assistant":
            out.append(note("earlier messages omitted"))
            src.append(-1)
        out.append(m)
        src.append(s)
    first = next((k for k, m in enumerate(out) if m.role != "system"), None)
    if first is not None and out[first].role != "user":
        out.insert(first, note("earlier messages omitted"))
        src.insert(first, -1)
    return out, src


def keep_recent(
    messages: Sequence[Message], *, budget: int, count: Counter, pinned: Pinned = _never
) -> CompactionResult:
    """Drop the oldest units until the conversation fits `budget` tokens (see `select_recent`)."""
    kept = select_recent(messages, budget=budget, count=count, pinned=pinned)
    dropped = len(messages) - len(kept)
    return stitch(
        messages,
        kept,
        note_text=f"{dropped} earlier messages were removed to fit the context window",
        strategy="keep_recent",
    )


def elide_tool_results(
    messages: Sequence[Message],
    *,
    keep_last_rounds: int = 2,
    min_chars: int = 2000,
    preview_chars: int = 200,
) -> CompactionResult:
    """Replace large results of older tool rounds by a short stub naming a handle.

    The handle is the call id; the `recall_result` tool fetches the full result back.
    The newest `keep_last_rounds` rounds are left alone.
    """
    rounds = [u for u in units(messages) if len(u) > 1]
    recent = rounds[-keep_last_rounds:] if keep_last_rounds > 0 else []
    protected = {i for u in recent for i in u}
    out: list[Message] = []
    elided: list[str] = []
    for i, m in enumerate(messages):
        if m.role != "tool" or i in protected:
            out.append(m)
            continue
        parts: list[Part] = []
        for p in m.parts:
            if isinstance(p, ToolResultPart) and _elidable(p, min_chars):
                parts.append(_stub(p, preview_chars))
                elided.append(p.call_id)
            else:
                parts.append(p)
        out.append(replace(m, parts=tuple(parts)) if parts != list(m.parts) else m)
    if not elided:
        return CompactionResult.unchanged(messages, "elide_tool_results")
    return CompactionResult(
        messages=tuple(out),
        sources=tuple(range(len(messages))),
        elided=tuple(elided),
        strategy="elide_tool_results",
    )


def _elidable(result: ToolResultPart, min_chars: int) -> bool:
    text = result.text
    if text.startswith(ELIDED_PREFIX):
        return False
    return len(text) >= min_chars or len(result.content) > sum(
        1 for c in result.content if isinstance(c, TextPart)
    )


def _stub(result: ToolResultPart, preview_chars: int) -> ToolResultPart:
    text = result.text
    preview = text[:preview_chars].replace("\n", " ")
    stub = (
        f"{ELIDED_PREFIX} ({len(text)} characters). It began: {preview!r}. "
        f'Call recall_result with handle "{result.call_id}" to read all of it.]'
    )
    return ToolResultPart(
        call_id=result.call_id,
        name=result.name,
        content=(TextPart(text=stub),),
        is_error=result.is_error,
    )


def compose(first: CompactionResult, second: CompactionResult) -> CompactionResult:
    """`second` (computed on `first.messages`) expressed against `first`'s input."""
    if not second.changed:
        return first
    if not first.changed:
        return second
    sources = tuple(first.sources[s] if s >= 0 else -1 for s in second.sources)
    removed = set(first.removed) | {
        first.sources[j] for j in second.removed if first.sources[j] >= 0
    }
    return CompactionResult(
        messages=second.messages,
        sources=sources,
        removed=tuple(sorted(removed)),
        elided=first.elided + second.elided,
        summary=second.summary or first.summary,
        strategy=f"{first.strategy}+{second.strategy}",
    )
