"""Hypothesis strategies for valid conversations (parallel tool calls included)."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from legato.messages import Message, Part, TextPart, ToolCallPart, ToolResultPart

PIN = "PINNED:"


@st.composite
def conversations(draw: st.DrawFn, *, max_turns: int = 8) -> list[Message]:
    """A conversation every provider accepts: user turns, tool rounds, answers."""
    ids = itertools.count(1)
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message.system("You are a test."))
    turns = draw(st.integers(min_value=1, max_value=max_turns))
    for turn in range(turns):
        pinned = draw(st.integers(0, 9)) == 0
        prefix = PIN if pinned else ""
        messages.append(Message.user(f"{prefix}question {turn} " + "q" * draw(st.integers(0, 200))))
        rounds = draw(st.integers(min_value=0, max_value=3))
        for _ in range(rounds):
            width = draw(st.integers(min_value=1, max_value=3))
            calls = [
                ToolCallPart.from_arguments(
                    id=f"call_{next(ids)}", name="lookup", arguments={"n": turn}
                )
                for _ in range(width)
            ]
            text = draw(st.sampled_from(["", "Let me check."]))
            parts: list[Part] = [TextPart(text=text)] if text else []
            messages.append(Message(role="assistant", parts=(*parts, *calls)))
            order = draw(st.permutations(calls))
            results = tuple(
                ToolResultPart.text_result(
                    call_id=c.id,
                    name=c.name,
                    text="r" * draw(st.sampled_from([10, 300, 3000, 12000])),
                )
                for c in order
            )
            messages.append(Message(role="tool", parts=results))
        last_turn = turn == turns - 1
        if not last_turn or draw(st.booleans()):
            messages.append(Message.assistant(f"answer {turn} " + "a" * draw(st.integers(0, 300))))
    return messages


def is_pinned(message: Message) -> bool:
    return message.text.startswith(PIN)


def pairs(messages: list[Message]) -> dict[str, str]:
    """Call id -> the name of the tool result answering it."""
    out: dict[str, str] = {}
    for m in messages:
        for r in m.tool_results:
            out[r.call_id] = r.name
    return out
