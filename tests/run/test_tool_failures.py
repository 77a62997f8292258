"""Failing tools end a run by consecutive failing turns, and the error quotes a failed call."""

from __future__ import annotations

import pytest

from legato import Agent, tool
from legato.exceptions import ToolError, ToolRetriesExceeded
from legato.messages import Message
from legato.testing import ScriptedModel, call, reply


@tool(max_retries=1)
def fetch(key: str) -> str:
    """Fetch a value; keys starting with `bad` fail."""
    if key.startswith("bad"):
        msg = f"no such key: {key}"
        raise ToolError(msg)
    return f"value of {key}"


def tool_errors(message: Message) -> list[str]:
    return [r.text for r in message.tool_results if r.is_error]


def test_two_failing_parallel_calls_are_one_failing_turn_and_the_model_sees_both() -> None:
    model = ScriptedModel(
        [reply(call("fetch", {"key": "bad1"}), call("fetch", {"key": "bad2"})), "I give up."]
    )
    result = Agent(model, tools=[fetch]).run_sync("go")
    assert result.output == "I give up."
    second = model.requests[1]
    assert tool_errors(second.messages[-1]) == ["no such key: bad1", "no such key: bad2"]


def test_consecutive_failing_turns_end_the_run_quoting_the_latest_failed_call() -> None:
    model = ScriptedModel(
        [
            reply(call("fetch", {"key": "bad1"}), call("fetch", {"key": "bad2"})),
            reply(call("fetch", {"key": "bad3"}), call("fetch", {"key": "good"})),
            "never asked",
        ]
    )
    with pytest.raises(ToolRetriesExceeded) as info:
        Agent(model, tools=[fetch]).run_sync("go")
    assert info.value.tool == "fetch"
    assert info.value.last_error == "no such key: bad3"  # not the successful call's text
    assert len(model.requests) == 2  # the model saw the first turn's results


def test_a_failed_call_before_a_successful_one_is_what_the_error_quotes() -> None:
    @tool(max_retries=0)
    def strict(key: str) -> str:
        """Fetch; keys starting with `bad` fail."""
        result: str = fetch.function(key)
        return result

    model = ScriptedModel([reply(call("strict", {"key": "bad"}), call("strict", {"key": "ok"}))])
    with pytest.raises(ToolRetriesExceeded) as info:
        Agent(model, tools=[strict]).run_sync("go")
    assert info.value.last_error == "no such key: bad"
    assert "value of ok" not in str(info.value)


def test_a_turn_whose_calls_all_succeed_resets_the_count() -> None:
    model = ScriptedModel(
        [
            reply(call("fetch", {"key": "bad1"})),
            reply(call("fetch", {"key": "a"}), call("fetch", {"key": "b"})),
            reply(call("fetch", {"key": "bad2"})),
            "done",
        ]
    )
    result = Agent(model, tools=[fetch]).run_sync("go")
    assert result.output == "done"
