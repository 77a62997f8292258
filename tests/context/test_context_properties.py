"""Property tests: every compaction of a valid conversation is valid for every provider."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from conversations import PIN, conversations, is_pinned, pairs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legato.context import (
    RULES,
    Chain,
    CharCounter,
    CompactionRequest,
    CompactionResult,
    ElideToolResults,
    KeepRecent,
    Summarize,
    count_message,
    elide_tool_results,
    is_summary,
    keep_recent,
    repair,
    validate,
)
from legato.messages import Message, ToolCallPart, ToolResultPart
from legato.models import ModelRequest
from legato.testing import FunctionModel

COUNTER = CharCounter()
# the machines are shared and loaded: no per-example deadline, no slow-generation failure
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def count(message: Message) -> int:
    return count_message(message, COUNTER)


def pinned(index: int, message: Message) -> bool:
    return is_pinned(message) or is_summary(message)


def assert_valid(messages: Sequence[Message]) -> None:
    for rules in RULES:
        problems = validate(messages, rules)
        assert not problems, f"{rules.name}: {[str(p) for p in problems]}"


def assert_faithful(original: list[Message], result: CompactionResult) -> None:
    """Calls and results in the output come from the input, kept whole."""
    out = list(result.messages)
    assert_valid(out)
    assert len(result.sources) == len(out)
    before, after = pairs(original), pairs(out)
    assert set(after) <= set(before)
    calls_out = {c.id for m in out for c in m.tool_calls}
    assert calls_out == set(after)
    for i, m in enumerate(out):
        source = result.sources[i]
        if source >= 0 and m.role in ("assistant", "tool", "system"):
            assert m.role == original[source].role
    last_user = max(i for i, m in enumerate(original) if m.role == "user")
    assert original[last_user].text in "".join(m.text for m in out if m.role == "user")
    for m in original:
        if m.role == "system" or is_pinned(m):
            assert any(m.text in o.text for o in out), "a pinned or system message was dropped"


@RELAXED
@given(conversations())
def test_generated_conversations_are_valid(messages: list[Message]) -> None:
    assert_valid(messages)
    assert not repair(messages).changed


@settings(RELAXED, max_examples=300)
@given(conversations(), st.integers(min_value=0, max_value=8000))
def test_keep_recent_output_is_valid_at_any_budget(messages: list[Message], budget: int) -> None:
    result = keep_recent(messages, budget=budget, count=count, pinned=pinned)
    assert_faithful(messages, result)
    kept = set(range(len(messages))) - set(result.removed)
    assert kept >= {i for i, m in enumerate(messages) if m.role == "system"}


@settings(RELAXED, max_examples=200)
@given(conversations(), st.integers(min_value=0, max_value=4), st.sampled_from([100, 2000, 20000]))
def test_elision_keeps_structure_and_handles(
    messages: list[Message], keep_last: int, min_chars: int
) -> None:
    result = elide_tool_results(messages, keep_last_rounds=keep_last, min_chars=min_chars)
    assert_faithful(messages, result)
    assert len(result.messages) == len(messages)
    stubs = {
        r.call_id
        for m in result.messages
        for r in m.tool_results
        if r.text.startswith("[legato: result elided")
    }
    assert stubs == set(result.elided)
    for m in result.messages:
        for r in m.tool_results:
            if r.call_id in stubs:
                assert f'"{r.call_id}"' in r.text


def _summarizer(request: ModelRequest) -> str:
    return f"summary of {len(request.messages[0].text)} characters"


@settings(RELAXED, max_examples=100)
@given(conversations(), st.integers(min_value=50, max_value=6000), st.integers(0, 2))
def test_every_strategy_output_is_valid(messages: list[Message], budget: int, which: int) -> None:
    strategies = [
        KeepRecent(),
        Chain(steps=(ElideToolResults(min_chars=500), KeepRecent())),
        Summarize(model=FunctionModel(_summarizer)),
    ]
    request = CompactionRequest(
        budget=budget, count=count, pinned=pinned, pinned_state={"user_name": "Ada"}
    )
    result = asyncio.run(strategies[which].compact(messages, request))
    assert_faithful(messages, result)
    if result.summary is not None:
        text = "".join(m.text for m in result.messages)
        assert "user_name: 'Ada'" in text
        assert result.summary in text


@settings(RELAXED, max_examples=100)
@given(conversations(), st.integers(min_value=0, max_value=3000))
def test_compacting_twice_stays_valid(messages: list[Message], budget: int) -> None:
    once = keep_recent(messages, budget=budget * 2, count=count, pinned=pinned)
    twice = keep_recent(list(once.messages), budget=budget, count=count, pinned=pinned)
    assert_valid(twice.messages)


@st.composite
def damaged(draw: st.DrawFn) -> list[Message]:
    """A valid conversation with random messages dropped, duplicated or parts stripped."""
    messages = draw(conversations())
    ops = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000)), max_size=6))
    for op, at in ops:
        if not messages:
            break
        i = at % len(messages)
        if op == 0:
            del messages[i]
        elif op == 1:
            messages.insert(i, messages[i])
        elif op == 2:
            m = messages[i]
            parts = tuple(
                ToolCallPart(id="", name=p.name, raw_arguments=p.raw_arguments)
                if isinstance(p, ToolCallPart)
                else p
                for p in m.parts
            )
            messages[i] = Message(role=m.role, parts=parts)
        else:
            messages.append(
                Message(
                    role="tool",
                    parts=(ToolResultPart.text_result(call_id="ghost", name="x", text="?"),),
                )
            )
    return messages


@settings(RELAXED, max_examples=300)
@given(damaged())
def test_repair_makes_any_damaged_history_valid_and_says_so(messages: list[Message]) -> None:
    fixed = repair(messages)
    assert_valid(fixed.messages)
    if validate(messages) or any(validate(messages, r) for r in RULES):
        assert fixed.changed
    again = repair(fixed.messages)
    assert not again.changed


def test_pin_marker_is_used() -> None:
    assert is_pinned(Message.user(f"{PIN} the code is 42"))
