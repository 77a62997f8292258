"""Selective slicing: relevance, budgets, pairs never split, journaled reasons."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from legato.messages import Message, ToolCallPart, ToolResultPart
from legato.spawn import MemorySource, StateSource, items_from_messages, select_slice


def pair(call_id: str, name: str, args: str, result: str) -> list[Message]:
    return [
        Message(
            role="assistant",
            parts=(ToolCallPart.from_raw(id=call_id, name=name, raw_arguments=args),),
        ),
        Message(
            role="tool",
            parts=(ToolResultPart.text_result(call_id=call_id, name=name, text=result),),
        ),
    ]


CONVERSATION = [
    Message.user("Fix the login bug and update the billing currency."),
    *pair("c1", "read_file", '{"path": "auth/session.py"}', "SESSION_TTL = 900 # expires sessions"),
    *pair("c2", "read_file", '{"path": "billing/rates.py"}', "CURRENCY = 'EUR'; VAT = 0.2"),
    *pair("c3", "search", '{"q": "login"}', "login handled in auth/session.py line 40"),
    Message.assistant("I looked at both areas."),
    *pair(
        "c4", "read_file", '{"path": "docs/changelog.md"}', "v1.2 released with new theme colours"
    ),
]


def test_relevant_items_are_chosen_with_reasons() -> None:
    result = select_slice(
        "Fix the login bug in auth/session.py",
        child_run_id="child",
        messages=CONVERSATION,
        granted_tools=["read_file"],
        token_budget=1000,
    )
    ids = [e.id for e in result.event.entries]
    assert "call:c1" in ids and "call:c3" in ids
    assert "call:c2" not in ids and "call:c4" not in ids
    reasons = {e.id: e.reasons for e in result.event.entries}
    assert any("mentions: auth/session.py" in r for r in reasons["call:c1"])
    assert any("granted tool read_file" in r for r in reasons["call:c1"])
    assert result.event.tokens_passed < result.event.tokens_available
    text = " ".join(getattr(p, "text", "") for m in result.history for p in m.parts)
    assert "SESSION_TTL" in text and "CURRENCY" not in text


def test_full_mode_passes_everything() -> None:
    result = select_slice("anything", child_run_id="c", messages=CONVERSATION, mode="full")
    assert result.event.mode == "full"
    assert result.event.tokens_passed == result.event.tokens_available
    assert len(result.event.entries) == len(items_from_messages(CONVERSATION))
    assert list(result.history) == CONVERSATION


def test_the_budget_keeps_the_best_items_and_records_what_it_dropped() -> None:
    result = select_slice(
        "login auth/session.py", child_run_id="c", messages=CONVERSATION, token_budget=25
    )
    assert result.event.tokens_passed <= 25
    # c3 mentions the file and every task word; c1 only the file and two words
    assert [e.id for e in result.event.entries] == ["call:c3"]
    assert "call:c1" in result.event.dropped


def test_memory_items_and_state_keys_are_sliced_by_reference() -> None:
    result = select_slice(
        "Apply the `retry_policy` to INV-2041",
        child_run_id="c",
        messages=[],
        sources=[
            StateSource(state={"retry_policy": {"max": 3}, "theme": "dark"}),
            MemorySource(
                items={"m1": "Customer INV-2041 prefers email", "m2": "Office closed Fridays"}
            ),
        ],
    )
    assert [e.id for e in result.event.entries] == ["state:retry_policy", "memory:m1"]
    assert "retry_policy" in result.history[0].text


def test_calls_without_results_are_left_out() -> None:
    pending = Message(
        role="assistant", parts=(ToolCallPart.from_raw(id="p", name="spawn", raw_arguments="{}"),)
    )
    assert all(i.id != "call:p" for i in items_from_messages([*CONVERSATION, pending]))


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    words = ["alpha", "beta", "gamma", "delta", "report.txt", "ID-7"]
    messages: list[Message] = [
        Message.user(" ".join(draw(st.lists(st.sampled_from(words), max_size=4))))
    ]
    for n in range(draw(st.integers(0, 6))):
        calls = [
            ToolCallPart.from_raw(id=f"c{n}-{k}", name="read", raw_arguments='{"path": "x"}')
            for k in range(draw(st.integers(1, 3)))
        ]
        messages.append(Message(role="assistant", parts=tuple(calls)))
        messages.append(
            Message(
                role="tool",
                parts=tuple(
                    ToolResultPart.text_result(
                        call_id=c.id,
                        name="read",
                        text=" ".join(draw(st.lists(st.sampled_from(words), max_size=5))),
                    )
                    for c in calls
                ),
            )
        )
    return messages


@settings(max_examples=60, deadline=None)
@given(
    conversations(), st.integers(1, 80), st.sampled_from(["alpha report.txt", "ID-7 gamma", "beta"])
)
def test_a_slice_never_splits_a_call_from_its_result(
    messages: list[Message], budget: int, task: str
) -> None:
    result = select_slice(task, child_run_id="c", messages=messages, token_budget=budget)
    assert result.event.tokens_passed <= budget
    calls = [c.id for m in result.history for c in m.tool_calls]
    results = [r.call_id for m in result.history for r in m.tool_results]
    assert calls == results
    for i, m in enumerate(result.history):
        if m.tool_calls:
            assert result.history[i + 1].role == "tool"
            assert [r.call_id for r in result.history[i + 1].tool_results] == [
                c.id for c in m.tool_calls
            ]
