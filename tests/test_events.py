"""Journals: exact JSONL round-trip, and replay that rebuilds the run without calling anything."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legato import Agent, Journal, replay, tool
from legato.events import (
    JournalEvent,
    ModelResponded,
    RunStarted,
    ToolCallFinished,
    is_journal_event,
)
from legato.exceptions import JournalError, RunError
from legato.messages import ModelResponse, Part, TextPart, ToolCallPart
from legato.models import TextDelta
from legato.testing import ScriptedModel, call, reply

CALLS: list[str] = []


@tool
def record(value: int) -> str:
    """Record a value and echo it."""
    CALLS.append(str(value))
    return f"recorded {value}"


@tool
def fail_sometimes(value: int) -> str:
    """Fails on odd values."""
    if value % 2:
        raise ValueError(f"odd value {value}")
    return "even"


def random_script(rng: random.Random) -> list[ModelResponse | str]:
    """A random but valid conversation: some steps with parallel calls, then an answer."""
    turns: list[ModelResponse | str] = []
    for _ in range(rng.randint(0, 4)):
        parts: list[str | Part] = []
        if rng.random() < 0.5:
            parts.append(f"thinking {rng.randint(0, 99)}")
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(["record", "fail_sometimes", "missing_tool"])
            if rng.random() < 0.1:
                parts.append(call(name, raw='{"value": '))
            else:
                parts.append(call(name, {"value": rng.randint(0, 9)}))
        turns.append(reply(*parts))
    turns.append(f"final answer {rng.randint(0, 999)}")
    return turns


def agent_journal(agent: Agent, seed: int) -> list[JournalEvent]:
    """Run the same script again, streaming, and return the journaled events."""
    model = ScriptedModel(random_script(random.Random(seed)))
    again = Agent(model, tools=agent.toolset.tools, max_steps=10)
    events: list[JournalEvent] = []
    with pytest.raises(RunError):
        for event in again.stream_sync("start"):
            if is_journal_event(event):
                events.append(event)
    return events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_replay_equals_the_original_run(seed: int) -> None:
    rng = random.Random(seed)
    model = ScriptedModel(random_script(rng), chunk_size=rng.randint(1, 12))
    agent = Agent(model, tools=[record, fail_sometimes.replace(max_retries=10)], max_steps=10)
    try:
        original = agent.run_sync("start")
    except RunError as exc:
        # e.g. a call to `missing_tool` twice: the failure is journaled and replay refuses it
        events = [e for e in agent_journal(agent, seed) if e.kind == "run_failed"]
        assert events and events[0].error_type == type(exc).__name__
        return
    calls_before = len(CALLS)
    text = original.journal.to_jsonl()
    rebuilt = replay(text)
    assert len(CALLS) == calls_before  # replay ran no tool
    assert rebuilt.output == original.output
    assert rebuilt.messages == original.messages
    assert rebuilt.usage == original.usage
    assert rebuilt.journal == original.journal
    assert Journal.from_jsonl(text).to_jsonl() == text


def test_journal_of_a_run_has_the_expected_shape() -> None:
    model = ScriptedModel([reply(call("record", {"value": 1}), call("record", {"value": 2})), "ok"])
    result = Agent(model, tools=[record]).run_sync("go")
    kinds = [e.kind for e in result.journal]
    assert kinds == [
        "run_started",
        "user_prompt",
        "model_requested",
        "model_responded",
        "tool_call_started",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_finished",
        "step_finished",
        "model_requested",
        "model_responded",
        "step_finished",
        "run_finished",
    ]
    first = result.journal.events[0]
    assert isinstance(first, RunStarted)
    assert result.journal.run_id == first.run_id == result.run_id
    finished = [e for e in result.journal if isinstance(e, ToolCallFinished)]
    assert [e.result.text for e in finished] == ["recorded 1", "recorded 2"]


def test_stream_only_deltas_are_not_journaled() -> None:
    model = ScriptedModel(["a long enough answer"], chunk_size=3)
    events = list(Agent(model).stream_sync("go"))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3
    assert not any(is_journal_event(e) for e in deltas)
    journaled = [e for e in events if is_journal_event(e)]
    assert len(journaled) == 6


def test_structured_output_replays_into_its_type() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    model = ScriptedModel([reply(call("final_result", {"value": 7}))])
    result = Agent(model, output_type=Answer).run_sync("go")
    again = replay(result.journal, output_type=Answer)
    assert again.output == Answer(value=7)


def test_replay_refuses_an_unfinished_or_failed_journal() -> None:
    model = ScriptedModel(["x"])
    result = Agent(model).run_sync("go")
    cut = Journal(result.journal.events[:-1])
    with pytest.raises(JournalError, match="no RunFinished"):
        replay(cut)


def test_bad_journal_line_names_the_line() -> None:
    model = ScriptedModel(["x"])
    text = Agent(model).run_sync("go").journal.to_jsonl()
    lines = text.splitlines()
    lines[2] = '{"kind": "model_requested", "step": "not a number"}'
    with pytest.raises(JournalError, match="line 3"):
        Journal.from_jsonl("\n".join(lines))
    with pytest.raises(JournalError, match="line 1"):
        Journal.from_jsonl("not json at all")


def test_events_round_trip_with_binary_and_thinking_parts() -> None:
    from legato.messages import ImagePart, Message, ThinkingPart

    response = ModelResponse(
        message=Message(
            role="assistant",
            parts=(
                ThinkingPart(text="hm", signature="sig", provider="anthropic"),
                TextPart(text="look"),
                ToolCallPart.from_raw(id="1", name="f", raw_arguments="{"),
            ),
        )
    )
    journal = Journal(
        [
            RunStarted(
                run_id="r",
                agent="a",
                model="m",
                history=(Message.user([ImagePart(data=b"\x00\xff")]),),
            ),
            ModelResponded(step=1, response=response, duration=0.5),
        ]
    )
    assert Journal.from_jsonl(journal.to_jsonl()) == journal


def test_text_with_unicode_line_breaks_round_trips() -> None:
    """JSON leaves U+2028, U+0085, \x1c ... unescaped: a journal line must not split there."""
    from legato.events import UserPrompt
    from legato.messages import Message

    text = "a\u2028b\u2029c\x85d\x1ce\x0bf\x0cg\rh"
    journal = Journal(
        [RunStarted(run_id="r", agent="a", model="m"), UserPrompt(message=Message.user(text))]
    )
    assert Journal.from_jsonl(journal.to_jsonl()) == journal
    assert Journal.from_jsonl(journal.to_jsonl().replace("\n", "\r\n")) == journal
