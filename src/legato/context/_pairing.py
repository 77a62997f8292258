"""Conversation validity: tool call/result pairing, role order, first message — and repair.

`validate` checks a message list against one provider family's rules and lists every
problem; `repair` rewrites a foreign or damaged history into one that every rule set
accepts and reports each change it made (nothing is changed silently).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from legato.messages import Message, Part, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "ANTHROPIC_RULES",
    "GEMINI_RULES",
    "OPENAI_RULES",
    "RULES",
    "PairingProblem",
    "PairingRules",
    "Repaired",
    "repair",
    "validate",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingRules:
    """What a provider family requires of a conversation (beyond tool pairing, always checked)."""

    name: str
    first_must_be_user: bool = False
    """The first non-system message must come from the user."""
    no_adjacent_same_role: bool = False
    """Two user messages or two assistant messages may not follow each other."""
    system_only_at_start: bool = False
    """System messages may only open the conversation."""


OPENAI_RULES = PairingRules(name="openai")
ANTHROPIC_RULES = PairingRules(
    name="anthropic", first_must_be_user=True, no_adjacent_same_role=True, system_only_at_start=True
)
GEMINI_RULES = PairingRules(
    name="gemini", first_must_be_user=True, no_adjacent_same_role=True, system_only_at_start=True
)
RULES: tuple[PairingRules, ...] = (OPENAI_RULES, ANTHROPIC_RULES, GEMINI_RULES)
"""Every rule set; a compacted conversation must satisfy all of them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingProblem:
    """One way a conversation breaks the rules."""

    index: int
    """The message at fault."""
    code: str
    """A short tag: `orphan_result`, `missing_result`, `misplaced_tool_message`, ..."""
    detail: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.code}: {self.detail}"


def validate(
    messages: Sequence[Message], rules: PairingRules = ANTHROPIC_RULES
) -> list[PairingProblem]:
    """Every problem of `messages` under `rules`; an empty list means valid."""
    problems: list[PairingProblem] = []
    _check_pairs(messages, problems)
    _check_order(messages, rules, problems)
    return problems


def _check_pairs(messages: Sequence[Message], problems: list[PairingProblem]) -> None:
    open_calls: dict[str, ToolCallPart] = {}
    all_ids: set[str] = set()
    owner = -1
    for i, m in enumerate(messages):
        results = m.tool_results
        if m.role != "tool" and results:
            problems.append(PairingProblem(index=i, code="result_outside_tool_message", detail=""))
        if m.role == "tool":
            prev = messages[i - 1] if i else None
            if prev is None or not (prev.role == "tool" or prev.tool_calls):
                problems.append(
                    PairingProblem(
                        index=i,
                        code="misplaced_tool_message",
                        detail="a tool message must follow the assistant message with its calls",
                    )
                )
            if len(results) != len(m.parts):
                problems.append(
                    PairingProblem(index=i, code="non_result_in_tool_message", detail="")
                )
            for r in results:
                if r.call_id not in open_calls:
                    problems.append(
                        PairingProblem(
                            index=i, code="orphan_result", detail=f"no open call {r.call_id!r}"
                        )
                    )
                else:
                    del open_calls[r.call_id]
            continue
        if open_calls:
            missing = ", ".join(sorted(open_calls))
            problems.append(
                PairingProblem(index=owner, code="missing_result", detail=f"unanswered: {missing}")
            )
            open_calls = {}
        if m.role == "assistant":
            calls = m.tool_calls
            ids = [c.id for c in calls]
            if any(not c for c in ids) or len(set(ids)) != len(ids) or all_ids & set(ids):
                problems.append(PairingProblem(index=i, code="bad_call_ids", detail=str(ids)))
            all_ids.update(ids)
            open_calls = {c.id: c for c in calls}
            owner = i
    if open_calls:
        missing = ", ".join(sorted(open_calls))
        problems.append(
            PairingProblem(index=owner, code="missing_result", detail=f"unanswered: {missing}")
        )


def _check_order(
    messages: Sequence[Message], rules: PairingRules, problems: list[PairingProblem]
) -> None:
    body = [(i, m) for i, m in enumerate(messages) if m.role != "system"]
    if rules.system_only_at_start:
        seen_other = False
        for i, m in enumerate(messages):
            if m.role == "system" and seen_other:
                problems.append(PairingProblem(index=i, code="late_system_message", detail=""))
            seen_other = seen_other or m.role != "system"
    if rules.first_must_be_user and body and body[0][1].role != "user":
        problems.append(
            PairingProblem(
                index=body[0][0], code="first_not_user", detail=f"starts with {body[0][1].role}"
            )
        )
    if rules.no_adjacent_same_role:
        for (_, a), (j, b) in itertools.pairwise(body):
            if a.role == b.role and a.role in ("user", "assistant"):
                problems.append(
                    PairingProblem(
                        index=j, code="adjacent_same_role", detail=f"two {a.role} messages"
                    )
                )


# -- repair ---------------------------------------------------------------------------------------

NOTE_PREFIX = "[legato: "
"""Text that opens every message legato inserts into a conversation."""

MISSING_RESULT_TEXT = "No result was recorded for this call."


def note(text: str, body: str = "") -> Message:
    """A user message legato inserts (a summary, an omission marker): `[legato: text]`."""
    return Message.user(f"{NOTE_PREFIX}{text}]" + (f"\n{body}" if body else ""))


SUMMARY_PREFIX = f"{NOTE_PREFIX}summary of "
"""How the note holding a summary starts."""


def is_note(message: Message) -> bool:
    """Whether the message holds a note legato inserted."""
    return any(isinstance(p, TextPart) and p.text.startswith(NOTE_PREFIX) for p in message.parts)


def is_summary(message: Message) -> bool:
    """Whether the message holds a summary note (keep-recent passes keep it)."""
    return any(isinstance(p, TextPart) and p.text.startswith(SUMMARY_PREFIX) for p in message.parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Repaired:
    """A repaired conversation and the list of changes made to it."""

    messages: list[Message]
    changes: list[str]
    """One line per change, e.g. `"message 4: dropped orphan result for call 'x'"`."""

    @property
    def changed(self) -> bool:
        """Whether anything had to change."""
        return bool(self.changes)


def repair(messages: Sequence[Message]) -> Repaired:
    """Rewrite `messages` so that every rule set in `RULES` accepts them.

    Calls without ids get ids; results are moved right after their call (orphans are
    dropped, missing ones become error results); stray system messages become user
    notes; adjacent messages of one role are merged; a conversation that does not start
    with the user gets a note first.
    """
    changes: list[str] = []
    fixed = _fix_ids(messages, changes)
    fixed = _fix_results(fixed, changes)
    fixed = _fix_order(fixed, changes)
    return Repaired(messages=fixed, changes=changes)


def _fix_ids(messages: Sequence[Message], changes: list[str]) -> list[Message]:
    out: list[Message] = []
    counter = itertools.count(1)
    used = {c.id for m in messages for c in m.tool_calls if c.id}
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if m.role != "assistant" or not m.tool_calls:
            out.append(m)
            continue
        parts: list[Part] = []
        for p in m.parts:
            if isinstance(p, ToolCallPart) and (not p.id or p.id in seen):
                new_id = next(f"repaired_{n}" for n in counter if f"repaired_{n}" not in used)
                used.add(new_id)
                changes.append(f"message {i}: gave call {p.name!r} the unique id {new_id!r}")
                p = replace(p, id=new_id)
            if isinstance(p, ToolCallPart):
                seen.add(p.id)
            parts.append(p)
        out.append(replace(m, parts=tuple(parts)))
    return out


def _fix_results(messages: list[Message], changes: list[str]) -> list[Message]:
    """Place each call's result right after its assistant message; drop the rest."""
    calls_at: dict[str, int] = {}
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            calls_at[c.id] = i
    results: dict[str, ToolResultPart] = {}
    out: list[Message] = []
    for i, m in enumerate(messages):
        kept_parts: list[Part] = []
        for p in m.parts:
            if not isinstance(p, ToolResultPart):
                kept_parts.append(p)
                continue
            owner = calls_at.get(p.call_id)
            if owner is None or owner > i or p.call_id in results:
                changes.append(f"message {i}: dropped orphan result for call {p.call_id!r}")
                continue
            if not (m.role == "tool" and _answers_directly(messages, owner, i)):
                changes.append(f"message {i}: moved result for call {p.call_id!r} after its call")
            results[p.call_id] = p
        if m.role == "tool":
            if kept_parts:
                changes.append(
                    f"message {i}: moved non-result content of a tool message to a user message"
                )
                out.append(Message(role="user", parts=tuple(kept_parts)))
            continue
        if kept_parts or m.role != "user" or not m.tool_results:
            out.append(
                replace(m, parts=tuple(kept_parts)) if len(kept_parts) != len(m.parts) else m
            )
    rebuilt: list[Message] = []
    for m in out:
        rebuilt.append(m)
        calls = m.tool_calls if m.role == "assistant" else []
        if not calls:
            continue
        parts: list[Part] = []
        for c in calls:
            r = results.get(c.id)
            if r is None:
                changes.append(f"added an error result for unanswered call {c.id!r} ({c.name})")
                r = ToolResultPart.text_result(
                    call_id=c.id, name=c.name, text=MISSING_RESULT_TEXT, is_error=True
                )
            parts.append(r)
        rebuilt.append(Message(role="tool", parts=tuple(parts)))
    return rebuilt


def _answers_directly(messages: list[Message], owner: int, at: int) -> bool:
    return all(messages[k].role == "tool" for k in range(owner + 1, at + 1))


def _fix_order(messages: list[Message], changes: list[str]) -> list[Message]:
    out: list[Message] = []
    for i, m in enumerate(messages):
        if m.role == "system" and any(x.role != "system" for x in out):
            changes.append(f"message {i}: a late system message became a user note")
            m = Message(role="user", parts=(TextPart(text=f"{NOTE_PREFIX}system] {m.text}"),))
        if not m.parts and m.role in ("user", "assistant"):
            changes.append(f"message {i}: dropped an empty {m.role} message")
            continue
        prev = out[-1] if out else None
        if prev is not None and prev.role == m.role and m.role == "user":
            changes.append(f"message {i}: merged two adjacent user messages")
            out[-1] = replace(prev, parts=prev.parts + m.parts)
            continue
        if prev is not None and prev.role == m.role == "assistant":
            if prev.tool_calls:  # cannot happen after _fix_results; kept for safety
                out.append(note("continued"))
            else:
                changes.append(f"message {i}: merged two adjacent assistant messages")
                out[-1] = replace(m, parts=prev.parts + m.parts)
                continue
        out.append(m)
    first = next((k for k, m in enumerate(out) if m.role != "system"), None)
    if first is not None and out[first].role != "user":
        changes.append("inserted a user note before the first message (it was not from the user)")
        out.insert(first, note("the conversation so far"))
    return out
