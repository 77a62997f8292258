"""The agent loop end to end with scripted models."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from legato import Agent, RunContext, Tool, ToolError, tool
from legato.events import (
    ModelResponded,
    RunFailed,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from legato.exceptions import (
    ConfigurationError,
    MaxStepsExceeded,
    OutputRetriesExceeded,
    ToolDefinitionError,
    ToolRetriesExceeded,
    UnexpectedModelBehavior,
    UnknownModel,
)
from legato.messages import Message, ToolResultPart
from legato.models import ModelProfile, ModelRequest
from legato.testing import FunctionModel, ScriptedModel, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def results_of(message: Message) -> list[ToolResultPart]:
    assert message.role == "tool"
    return message.tool_results


def test_plain_text_answer() -> None:
    model = ScriptedModel(["Hello there."])
    result = Agent(model, instructions="Be brief.").run_sync("Hi")
    assert result.output == "Hello there."
    assert model.requests[0].instructions == "Be brief."
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert result.usage.requests == 1
    model.assert_complete()


def test_tool_call_then_answer_keeps_pairs() -> None:
    model = ScriptedModel([reply("Let me add.", call("add", {"a": 2, "b": 3})), "5"])
    result = Agent(model, tools=[add]).run_sync("2+3?")
    assert result.output == "5"
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    (res,) = results_of(result.messages[2])
    assert res.text == "5"
    assert res.call_id == result.messages[1].tool_calls[0].id
    # the tool's definition reached the model
    assert [t.name for t in model.requests[0].tools] == ["add"]


async def test_parallel_calls_run_concurrently_and_report_in_model_order() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    @tool
    async def slow(name: str, delay: float) -> str:
        """Wait, then answer."""
        started.append(name)
        if len(started) == 3:
            gate.set()
        await asyncio.wait_for(gate.wait(), 5)  # all three must be running at once
        await asyncio.sleep(delay)
        return name

    model = ScriptedModel(
        [
            reply(
                call("slow", {"name": "a", "delay": 0.03}),
                call("slow", {"name": "b", "delay": 0.0}),
                call("slow", {"name": "c", "delay": 0.01}),
            ),
            "done",
        ]
    )
    result = await Agent(model, tools=[slow]).run("go")
    assert [r.text for r in results_of(result.messages[2])] == ["a", "b", "c"]
    finished = [e.call.arguments for e in result.journal if isinstance(e, ToolCallFinished)]
    assert [f["name"] for f in finished if isinstance(f, dict)] == ["a", "b", "c"]


async def test_sequential_tool_runs_alone() -> None:
    running = 0
    overlaps: list[int] = []

    async def work(label: str) -> str:
        nonlocal running
        running += 1
        overlaps.append(running)
        await asyncio.sleep(0.01)
        running -= 1
        return label

    free = Tool.from_function(work, name="free")
    alone = Tool.from_function(work, name="alone", sequential=True)
    model = ScriptedModel(
        [
            reply(
                call("free", {"label": "1"}),
                call("alone", {"label": "2"}),
                call("free", {"label": "3"}),
            ),
            "ok",
        ]
    )
    result = await Agent(model, tools=[free, alone]).run("go")
    assert [r.text for r in results_of(result.messages[2])] == ["1", "2", "3"]
    assert max(overlaps) == 1


def test_unknown_tool_becomes_error_result_then_model_recovers() -> None:
    model = ScriptedModel([reply(call("nope", {})), reply(call("add", {"a": 1, "b": 1})), "2"])
    result = Agent(model, tools=[add]).run_sync("1+1")
    (err,) = results_of(result.messages[2])
    assert err.is_error
    assert "unknown tool 'nope'" in err.text and "add" in err.text
    assert result.output == "2"


def test_invalid_arguments_never_reach_the_tool_and_name_the_field() -> None:
    calls: list[tuple[int, int]] = []

    @tool
    def spy(a: int, b: int) -> int:
        """Record a call."""
        calls.append((a, b))
        return a + b

    model = ScriptedModel(
        [
            reply(call("spy", {"a": "ten"})),
            reply(call("spy", raw='{"a": 1, "b":')),
            reply(call("spy", {"a": 1, "b": 2})),
            "3",
        ]
    )
    agent = Agent(model, tools=[spy.replace(max_retries=2)])
    result = agent.run_sync("go")
    first = results_of(result.messages[2])[0]
    assert first.is_error
    assert "a:" in first.text and "b: missing required argument" in first.text
    second = results_of(result.messages[4])[0]
    assert second.is_error and "not valid JSON" in second.text
    assert calls == [(1, 2)]


def test_retries_exceeded_fails_the_run_clearly() -> None:
    @tool(max_retries=1)
    def flaky() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([reply(call("flaky")), reply(call("flaky")), "unreachable"])
    with pytest.raises(ToolRetriesExceeded, match="disk on fire") as info:
        Agent(model, tools=[flaky]).run_sync("go")
    assert info.value.tool == "flaky"
    assert model.remaining == 1


def test_tool_exceptions_are_messages_not_tracebacks() -> None:
    @tool
    def boom() -> str:
        """Fails."""
        raise ValueError("bad input value")

    @tool
    def polite() -> str:
        """Fails on purpose."""
        raise ToolError("try a smaller number")

    model = ScriptedModel([reply(call("boom"), call("polite")), "ok"])
    result = Agent(model, tools=[boom, polite]).run_sync("go")
    first, second = results_of(result.messages[2])
    assert first.text == "ValueError: bad input value"
    assert "Traceback" not in first.text
    assert second.text == "try a smaller number"
    assert first.is_error and second.is_error


async def test_tool_timeout_is_an_error_result_not_a_hang() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never returns."""
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel([reply(call("hang")), "gave up"])
    started = time.monotonic()
    result = await Agent(model, tools=[hang]).run("go")
    assert time.monotonic() - started < 30
    (err,) = results_of(result.messages[2])
    assert err.is_error and "timed out after 0.05 seconds" in err.text
    outcomes = [e.outcome for e in result.journal if isinstance(e, ToolCallFinished)]
    assert outcomes == ["timeout"]


def test_run_context_is_injected_with_deps() -> None:
    seen: list[tuple[str, int, str | None]] = []

    @tool
    def whoami(ctx: RunContext[str], greeting: str) -> str:
        """Greet the user in deps."""
        seen.append((ctx.deps, ctx.step, ctx.tool_call_id))
        return f"{greeting}, {ctx.deps}"

    assert "ctx" not in str(whoami.parameters)
    model = ScriptedModel([reply(call("whoami", {"greeting": "hi"}, id="c1")), "ok"])
    result = Agent(model, tools=[whoami]).run_sync("go", deps="Ada")
    assert seen == [("Ada", 1, "c1")]
    assert results_of(result.messages[2])[0].text == "hi, Ada"


class City(BaseModel):
    name: str
    population: int


@dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


@pytest.mark.parametrize(
    ("output_type", "arguments", "expected"),
    [
        (
            City,
            {"name": "Paris", "population": 2_100_000},
            City(name="Paris", population=2_100_000),
        ),
        (Point, {"x": 1, "y": 2}, Point(x=1, y=2)),
        (Pair, {"left": "a", "right": "b"}, {"left": "a", "right": "b"}),
        (int, {"response": 42}, 42),
        (list[str], {"response": ["a", "b"]}, ["a", "b"]),
    ],
)
def test_structured_output_through_the_final_result_tool(
    output_type: type[object], arguments: dict[str, object], expected: object
) -> None:
    model = ScriptedModel([reply(call("final_result", arguments))])  # type: ignore[arg-type] # test data
    result = Agent(model, output_type=output_type).run_sync("go")
    assert result.output == expected
    request = model.requests[0]
    assert request.tool_choice == "required"
    assert [t.name for t in request.tools] == ["final_result"]
    # the history stays valid for a next turn: every call has a result
    assert results_of(result.messages[-1])[0].text == "Final result received."


def test_invalid_output_goes_back_to_the_model_then_succeeds() -> None:
    model = ScriptedModel(
        [
            reply(call("final_result", {"name": "Paris", "population": "many"})),
            reply(call("final_result", {"name": "Paris", "population": 3})),
        ]
    )
    result = Agent(model, output_type=City).run_sync("go")
    assert result.output == City(name="Paris", population=3)
    retry = results_of(result.messages[2])[0]
    assert retry.is_error and "population" in retry.text


def test_output_retries_exceeded() -> None:
    bad = reply(call("final_result", {"name": 1}))
    model = ScriptedModel([bad, bad, bad])
    with pytest.raises(OutputRetriesExceeded):
        Agent(model, output_type=City, output_retries=1).run_sync("go")


def test_text_instead_of_output_tool_is_corrected() -> None:
    model = ScriptedModel(
        ["Paris, about 2 million", reply(call("final_result", {"name": "Paris", "population": 2}))]
    )
    result = Agent(model, output_type=City).run_sync("go")
    assert result.output.population == 2
    assert "final_result" in model.requests[1].messages[-1].text


def test_native_output_mode_validates_json_text() -> None:
    profile = ModelProfile(native_structured_output=True)
    model = ScriptedModel(
        ['{"name": "Rome"}', '{"name": "Rome", "population": 4}'], profile=profile
    )
    result = Agent(model, output_type=City, output_mode="native").run_sync("go")
    assert result.output == City(name="Rome", population=4)
    assert model.requests[0].output is not None
    assert model.requests[0].tools == ()


def test_empty_answers_are_retried_then_fail() -> None:
    model = ScriptedModel([reply(), reply(), reply()])
    with pytest.raises(UnexpectedModelBehavior, match="empty"):
        Agent(model).run_sync("go")


def test_max_steps_stops_a_looping_model() -> None:
    model = FunctionModel(lambda request: reply(call("add", {"a": 1, "b": 1})))
    with pytest.raises(MaxStepsExceeded):
        Agent(model, tools=[add], max_steps=3).run_sync("loop forever")
    assert len(model.requests) == 3


def test_failure_is_journaled() -> None:
    model = FunctionModel(lambda request: reply(call("add", {"a": 1, "b": 1})))
    events: list[object] = []
    with pytest.raises(MaxStepsExceeded):
        for event in Agent(model, tools=[add], max_steps=1).stream_sync("go"):
            events.append(event)
    assert isinstance(events[-1], RunFailed)
    assert events[-1].error_type == "MaxStepsExceeded"


def test_multi_turn_continues_from_previous_messages() -> None:
    model = ScriptedModel(["first answer", "second answer"])
    agent = Agent(model)
    first = agent.run_sync("one")
    second = agent.run_sync("two", message_history=first.messages)
    assert [m.text for m in model.requests[1].messages] == ["one", "first answer", "two"]
    assert [m.text for m in second.new_messages()] == ["two", "second answer"]
    assert second.output == "second answer"


def test_stream_yields_deltas_and_tool_events_in_order() -> None:
    model = ScriptedModel(
        [reply("Checking the sum now.", call("add", {"a": 1, "b": 2})), "It is 3."], chunk_size=4
    )
    events = list(Agent(model, tools=[add]).stream_sync("1+2"))
    kinds = [e.kind for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Checking the sum now.It is 3."
    started = kinds.index("tool_call_started")
    assert kinds.index("model_responded") < started < kinds.index("tool_call_finished")
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.output == "It is 3."


async def test_run_sync_works_inside_a_running_event_loop() -> None:
    # openai-agents-python #77/#127, pydantic-ai #114/#3014: sync wrappers inside a loop.
    model = ScriptedModel(["from inside a loop"])
    result = Agent(model).run_sync("hi")
    assert result.output == "from inside a loop"
    events = list(Agent(ScriptedModel(["streamed"])).stream_sync("hi"))
    assert isinstance(events[-1], RunFinished)


def test_run_sync_from_a_thread_whose_loop_is_running() -> None:
    outputs: list[str] = []

    def in_thread() -> None:
        async def main() -> None:
            outputs.append(Agent(ScriptedModel(["ok"])).run_sync("hi").output)

        asyncio.run(main())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(30)
    assert outputs == ["ok"]


def test_a_run_needs_a_prompt_or_history() -> None:
    with pytest.raises(ConfigurationError, match="nothing to run"):
        Agent(ScriptedModel([])).run_sync()
    model = ScriptedModel(["continued"])
    result = Agent(model).run_sync(message_history=[Message.user("earlier question")])
    assert result.output == "continued"
    assert model.requests[0].messages[-1].text == "earlier question"


def test_unknown_model_string_is_a_typed_error() -> None:
    with pytest.raises(UnknownModel, match="nosuch:model"):
        Agent("nosuch:model").run_sync("hi")
    with pytest.raises(UnknownModel):
        Agent("no-colon").run_sync("hi")


def test_duplicate_tool_names_are_refused() -> None:
    other = add.replace(description="again")
    with pytest.raises(ToolDefinitionError, match="add"):
        Agent(ScriptedModel([]), tools=[add, other])


def test_user_tool_named_final_result_clashes_with_output_tool() -> None:
    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ToolDefinitionError, match="final_result"):
        Agent(ScriptedModel(["x"]), tools=[final_result], output_type=int).run_sync("go")


def test_model_sees_tool_errors_in_the_request() -> None:
    def respond(request: ModelRequest) -> str | object:
        last = request.messages[-1]
        if last.role == "tool":
            return f"saw: {last.tool_results[0].text}"
        return reply(call("add", {"a": "x", "b": 1}))

    result = Agent(FunctionModel(respond), tools=[add]).run_sync("go")  # type: ignore[arg-type] # test function
    assert result.output.startswith("saw: invalid arguments for tool 'add'")
    responded = [e for e in result.journal if isinstance(e, ModelResponded)]
    assert len(responded) == 2
    assert any(isinstance(e, ToolCallStarted) for e in result.journal)
