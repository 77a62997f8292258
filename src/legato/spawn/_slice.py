"""Memory slicing: the part of a parent's context that a child needs for its task.

The parent's conversation is cut into items that can be handed over whole: a text message,
or a tool call together with its result (a pair is never split). Memory items and state
keys come in as items too, from any `ContextSource`. Each item is scored against the
child's task:

- **term overlap**: the share of the task's content words the item contains;
- **explicit references**: ids, file names and quoted names in the task that the item
  mentions (a strong signal);
- **granted tools**: results of tools the child is granted (what it would read itself).

Items that score are taken best first until the token budget is spent, then put back in
their original order. `full` mode passes everything, for comparison. The choice, with
each item's score and reasons, is recorded as a `ContextSliced` journal event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from legato.events import ContextSliced, SliceEntry
from legato.messages import JsonValue, Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "ContextSource",
    "MemorySource",
    "SliceItem",
    "SliceMode",
    "SliceResult",
    "StateSource",
    "estimate_tokens",
    "items_from_messages",
    "select_slice",
]

SliceMode: TypeAlias = Literal["selective", "full"]
"""`selective`: the relevant items within a token budget; `full`: everything."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")
_REFERENCE = re.compile(
    r"""(?x)
    (?:[\w.-]*/)*[\w-]+\.[A-Za-z][\w]{0,7}\b     # file names and paths: auth/config.py
    | \b[A-Za-z]+[-_]?\d[\w-]*                   # ids with digits: INV-2041, task_7
    | \#\d+                                      # issue numbers: #123
    | `[^`]{2,60}`                               # `quoted names`
    """
)
_STOP = frozenset(
    """a an and are as at be by do does for from has have how in into is it its of on or
    that the their then there these this to was were what when where which who will with
    you your please make sure also use using need needs should must can could would each
    all any some task tasks about after before than them they our out over under up""".split()
)


_MIN_BEFORE_BOOST = 0.3
_COMMON = 0.25
"""A task word found in more than this share of the items does not discriminate: ignored."""


def estimate_tokens(text: str) -> int:
    """Tokens of a text, estimated at four characters a token (at least one)."""
    return max(1, len(text) // 4)


def _stem(word: str) -> str:
    """A light suffix strip so that `invoices`/`invoice` and `rounding`/`round` meet."""
    if word.endswith(("ches", "shes", "xes", "sses")) and len(word) > 5:
        return word[:-2]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _terms(text: str) -> set[str]:
    """Content words, stemmed; identifiers also give their parts (`reset_email`: reset, email)."""
    words: set[str] = set()
    for word in _WORD.findall(text):
        lowered = word.lower()
        parts = [lowered, *lowered.split("_")] if "_" in lowered else [lowered]
        words.update(_stem(p) for p in parts if len(p) > 2 and p not in _STOP)
    return words


def _references(text: str) -> set[str]:
    return {m.group(0).strip("`") for m in _REFERENCE.finditer(text)}


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceItem:
    """A piece of context that is handed over whole."""

    id: str
    kind: Literal["message", "tool_pair", "memory", "state"]
    text: str
    """What is scored (and, for memory and state items, what the child is shown)."""
    messages: tuple[Message, ...] = ()
    """For message items and tool pairs: the messages passed as they are."""
    tool: str | None = None
    """For tool pairs: the tool's name."""
    order: int = 0
    """Position in the parent's context; the slice keeps this order."""

    @property
    def tokens(self) -> int:
        """Estimated tokens of the item."""
        return estimate_tokens(self.text)


@runtime_checkable
class ContextSource(Protocol):
    """Memory items or state keys offered for slicing (the memory and state stores plug in)."""

    def slice_items(self) -> Sequence[SliceItem]:
        """The items this source can hand to a child."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSource:
    """State keys as slice items (a snapshot of a mapping)."""

    state: dict[str, JsonValue]

    def slice_items(self) -> Sequence[SliceItem]:
        """One item per key."""
        return [
            SliceItem(id=f"state:{key}", kind="state", text=f"{key} = {json.dumps(value)}")
            for key, value in self.state.items()
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySource:
    """Memory items (id and text) as slice items."""

    items: dict[str, str]

    def slice_items(self) -> Sequence[SliceItem]:
        """One item per memory."""
        return [
            SliceItem(id=f"memory:{key}", kind="memory", text=text)
            for key, text in self.items.items()
        ]


def _call_text(call: ToolCallPart, result: ToolResultPart) -> str:
    return f"{call.name}({call.raw_arguments}) -> {result.text}"


def items_from_messages(messages: Sequence[Message]) -> list[SliceItem]:
    """Cut a conversation into items: text messages and tool call/result pairs.

    System messages are left out, and so are calls that have no result yet (the call that
    is spawning the child, for one).
    """
    results: dict[str, ToolResultPart] = {
        r.call_id: r for m in messages if m.role == "tool" for r in m.tool_results
    }
    items: list[SliceItem] = []
    for index, message in enumerate(messages):
        if message.role in ("user", "assistant") and message.text.strip():
            text_only = Message(
                role=message.role, parts=tuple(p for p in message.parts if isinstance(p, TextPart))
            )
            items.append(
                SliceItem(
                    id=f"m{index}",
                    kind="message",
                    text=message.text,
                    messages=(text_only,),
                    order=len(items),
                )
            )
        for call in message.tool_calls if message.role == "assistant" else ():
            result = results.get(call.id)
            if result is None:
                continue
            items.append(
                SliceItem(
                    id=f"call:{call.id}",
                    kind="tool_pair",
                    text=_call_text(call, result),
                    messages=(
                        Message(role="assistant", parts=(call,)),
                        Message(role="tool", parts=(result,)),
                    ),
                    tool=call.name,
                    order=len(items),
                )
            )
    return items


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceResult:
    """The chosen items, the messages that carry them, and the journal record."""

    items: tuple[SliceItem, ...]
    history: tuple[Message, ...]
    """Messages the child starts from (its `message_history`)."""
    event: ContextSliced
    scores: dict[str, float] = field(default_factory=lambda: {})


def _score(
    item: SliceItem, terms: set[str], refs: set[str], granted: frozenset[str]
) -> tuple[float, list[str]]:
    reasons: list[str] = []
    score = 0.0
    if terms:
        shared = terms & _terms(item.text)
        if shared:
            score += len(shared) / len(terms)
            reasons.append("terms: " + ", ".join(sorted(shared)[:6]))
    lowered = item.text.lower()
    mentioned = sorted(r for r in refs if r.lower() in lowered)
    if mentioned:
        score += 2.0 * len(mentioned)
        reasons.append("mentions: " + ", ".join(mentioned[:6]))
    if item.tool is not None and item.tool in granted and score >= _MIN_BEFORE_BOOST:
        score += 0.25
        reasons.append(f"read by granted tool {item.tool}")
    return score, reasons


def _discriminating(terms: set[str], items: Sequence[SliceItem]) -> set[str]:
    """The task's words without those common to most of the context (they match anything)."""
    if len(items) < 8:
        return terms
    vocabularies = [_terms(i.text) for i in items]
    limit = _COMMON * len(items)
    return {t for t in terms if sum(t in v for v in vocabularies) <= limit}


def _history(items: Iterable[SliceItem], full: Sequence[Message] | None) -> tuple[Message, ...]:
    """The messages for the chosen items; notes (text, memory, state) open the history."""
    if full is not None:
        return tuple(full)
    chosen = list(items)
    notes = [i for i in chosen if i.kind != "tool_pair"]
    pairs = [m for i in chosen if i.kind == "tool_pair" for m in i.messages]
    if not chosen:
        return ()
    lines = ["Context handed over by the parent run (the parts relevant to your task):"]
    for item in notes:
        speaker = item.messages[0].role if item.messages else item.kind
        lines.append(f"- [{item.id}, {speaker}] {item.text}")
    if pairs:
        lines.append("Relevant tool calls of the parent and their results follow.")
    return (Message.user("\n".join(lines)), *pairs)


def select_slice(
    task: str,
    *,
    child_run_id: str,
    messages: Sequence[Message],
    sources: Sequence[ContextSource] = (),
    granted_tools: Iterable[str] = (),
    token_budget: int | None = 2000,
    mode: SliceMode = "selective",
    min_score: float = 0.3,
) -> SliceResult:
    """Choose what of the parent's context a child receives for `task`."""
    items = items_from_messages(messages)
    for source in sources:
        for extra in source.slice_items():
            items.append(
                SliceItem(
                    id=extra.id,
                    kind=extra.kind,
                    text=extra.text,
                    messages=extra.messages,
                    tool=extra.tool,
                    order=len(items),
                )
            )
    available = sum(i.tokens for i in items)
    if mode == "full":
        entries = tuple(
            SliceEntry(id=i.id, tokens=i.tokens, score=1.0, reasons=("full copy",)) for i in items
        )
        return SliceResult(
            items=tuple(items),
            history=_full_history(messages, items),
            event=ContextSliced(
                child_run_id=child_run_id,
                mode="full",
                entries=entries,
                tokens_passed=available,
                tokens_available=available,
                token_budget=None,
            ),
        )
    terms, refs, granted = _terms(task), _references(task), frozenset(granted_tools)
    terms = _discriminating(terms, items)
    scored: list[tuple[float, SliceItem, list[str]]] = []
    for item in items:
        score, reasons = _score(item, terms, refs, granted)
        if score >= min_score:
            scored.append((score, item, reasons))
    scored.sort(key=lambda s: (-s[0], -s[1].order))
    chosen: list[tuple[float, SliceItem, list[str]]] = []
    dropped: list[str] = []
    spent = 0
    for score, item, reasons in scored:
        if token_budget is not None and spent + item.tokens > token_budget:
            dropped.append(item.id)
            continue
        chosen.append((score, item, reasons))
        spent += item.tokens
    chosen.sort(key=lambda s: s[1].order)
    picked = tuple(i for _, i, _ in chosen)
    return SliceResult(
        items=picked,
        history=_history(picked, None),
        event=ContextSliced(
            child_run_id=child_run_id,
            mode="selective",
            entries=tuple(
                SliceEntry(id=i.id, tokens=i.tokens, score=round(s, 3), reasons=tuple(r))
                for s, i, r in chosen
            ),
            tokens_passed=spent,
            tokens_available=available,
            token_budget=token_budget,
            dropped=tuple(dropped),
        ),
        scores={i.id: round(s, 3) for s, i, _ in chosen},
    )


def _full_history(messages: Sequence[Message], items: Sequence[SliceItem]) -> tuple[Message, ...]:
    """Everything: the conversation (without calls still awaiting results) and all notes."""
    answered = {i.id.removeprefix("call:") for i in items if i.kind == "tool_pair"}
    kept: list[Message] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "assistant" and message.tool_calls:
            parts = tuple(
                p for p in message.parts if not isinstance(p, ToolCallPart) or p.id in answered
            )
            if not parts:
                continue
            message = Message(role="assistant", parts=parts)
        kept.append(message)
    extras = [i for i in items if i.kind in ("memory", "state")]
    if extras:
        lines = ["Memory and state of the parent run:"]
        lines += [f"- [{i.id}] {i.text}" for i in extras]
        kept.insert(0, Message.user("\n".join(lines)))
    return tuple(kept)
