"""Evaluators over the output and the journal; custom ones; the LLM judge."""

from __future__ import annotations

import asyncio

import pytest

from legato import Agent
from legato.evals import (
    Case,
    Checks,
    EvalContext,
    Score,
    approvals_asked,
    case_evaluators,
    contains,
    equals,
    evaluator,
    json_schema,
    judge,
    matches,
    max_cost,
    max_latency,
    max_tokens,
    max_tool_calls,
    no_contract_rejections,
    tool_called,
    tool_calls_in_order,
    tool_not_called,
)
from legato.events import (
    ApprovalRequested,
    Journal,
    ModelResponded,
    RunFinished,
    RunStarted,
    StateRejected,
)
from legato.exceptions import ConfigurationError
from legato.messages import JsonValue, Message, ModelResponse, StopReason, ToolCallPart, Usage
from legato.testing import ScriptedModel, call, reply


def lookup(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def note(text: str) -> str:
    """Keep a note."""
    return "kept"


def _run_journal() -> tuple[str, Journal]:
    model = ScriptedModel(
        [
            reply(call("lookup", {"city": "Paris"}), call("note", {"text": "hi"})),
            reply(call("lookup", {"city": "Rome"})),
            "Paris and Rome are sunny.",
        ]
    )
    result = Agent(model, tools=[lookup, note]).run_sync("weather?")
    return result.output, result.journal


OUTPUT, JOURNAL = _run_journal()
CASE = Case(id="c", input="weather?", expected="Paris and Rome are sunny.")


def score(ev: object, output: JsonValue = OUTPUT, journal: Journal = JOURNAL) -> Score:
    context = EvalContext(case=CASE, output=output, journal=journal)
    return asyncio.run(ev.evaluate(context))  # type: ignore[attr-defined] # every evaluator has it


def test_output_evaluators_pass_and_fail_with_a_reason() -> None:
    assert score(equals()).passed is True
    wrong = score(equals("something else"))
    assert wrong.passed is False and "something else" in wrong.reason
    assert score(contains("Rome")).passed is True
    assert score(contains("rome", case_sensitive=False)).passed is True
    assert score(contains("Berlin")).passed is False
    assert score(matches(r"Paris .* sunny")).passed is True
    assert score(matches(r"^Rome")).passed is False
    with pytest.raises(ConfigurationError, match="regular expression"):
        matches("(")


def test_json_schema_checks_structured_and_text_output() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    assert score(json_schema(schema), output={"city": "Paris"}).passed is True
    missing = score(json_schema(schema), output='{"town": "Paris"}')
    assert missing.passed is False and "city" in missing.reason
    assert "not JSON" in score(json_schema(schema), output="Paris").reason
    with pytest.raises(ConfigurationError, match="JSON Schema"):
        json_schema({"type": "no such type"})


def test_tool_call_evaluators_read_names_arguments_order_and_count() -> None:
    assert score(tool_called("lookup")).passed is True
    assert score(tool_called("lookup", times=2)).passed is True
    assert score(tool_called("lookup", times=1)).passed is False
    assert score(tool_called("lookup", arguments={"city": "Rome"})).passed is True
    oslo = score(tool_called("lookup", arguments={"city": "Oslo"}))
    assert oslo.passed is False and "Paris" in oslo.reason
    assert score(tool_called("note", arguments={"text": "hi"}, match="exact")).passed is True
    assert score(tool_called("delete")).passed is False
    assert score(tool_not_called("delete")).passed is True
    assert score(tool_not_called("note")).passed is False
    assert score(tool_calls_in_order(["lookup", "lookup"])).passed is True
    assert score(tool_calls_in_order(["note", "lookup"])).passed is True
    assert score(tool_calls_in_order(["lookup", "note", "lookup"], order="exact")).passed is True
    assert score(tool_calls_in_order(["note", "lookup"], order="exact")).passed is False
    assert score(tool_calls_in_order(["note", "note"], order="any")).passed is False
    assert score(max_tool_calls(3)).passed is True
    assert score(max_tool_calls(2)).passed is False


def test_usage_evaluators_read_the_journal() -> None:
    tokens = sum(
        e.response.usage.input_tokens + e.response.usage.output_tokens
        for e in JOURNAL
        if isinstance(e, ModelResponded)
    )
    assert tokens > 0
    assert score(max_tokens(tokens)).passed is True
    assert score(max_tokens(tokens - 1)).passed is False
    assert score(max_latency(3600)).passed is True
    assert score(max_latency(-1)).passed is False
    unknown = score(max_cost(1.0))
    assert unknown.passed is False and "unknown" in unknown.reason


def _golden(*middle: object) -> Journal:
    response = ModelResponse(
        message=Message(role="assistant", parts=()),
        usage=Usage(input_tokens=10, output_tokens=5),
        stop_reason=StopReason.END_TURN,
        cost=0.25,
    )
    events = [
        RunStarted(run_id="r", agent="a", model="m"),
        ModelResponded(step=1, response=response),
        *middle,
        RunFinished(output="done", usage=Usage()),
    ]
    return Journal(events)  # type: ignore[arg-type] # the middle events are journal events


def test_approvals_contracts_and_cost_golden_passes_mutated_fails() -> None:
    golden = _golden()
    asked = ApprovalRequested(
        step=1,
        request_id="q",
        call=ToolCallPart.from_arguments(id="c1", name="send", arguments={}),
        arguments_hash="h",
        rule="ask",
    )
    rejected = StateRejected(
        tool="pay",
        call_id="c2",
        stage="pre",
        predicate="funds",
        message="no funds",
        evidence={},
        version=1,
    )
    assert score(approvals_asked(at_most=0), journal=golden).passed is True
    assert score(approvals_asked(at_most=0), journal=_golden(asked)).passed is False
    assert score(approvals_asked(at_least=1), journal=_golden(asked)).passed is True
    assert score(no_contract_rejections(), journal=golden).passed is True
    mutated = score(no_contract_rejections(), journal=_golden(rejected))
    assert mutated.passed is False and "no funds" in mutated.reason
    assert score(max_cost(0.25), journal=golden).passed is True
    assert score(max_cost(0.2), journal=golden).passed is False


def test_custom_evaluators_are_typed_functions() -> None:
    @evaluator
    def short(ctx: EvalContext) -> bool:
        return len(ctx.text) < 100

    @evaluator
    def ratio(ctx: EvalContext) -> float:
        return 0.25

    @evaluator
    async def explained(ctx: EvalContext) -> tuple[bool, str]:
        return False, "too vague"

    assert score(short) == Score(name="short", passed=True, value=1.0)
    assert score(ratio).passed is False and score(ratio).value == 0.25
    assert score(explained).reason == "too vague"
    weird = evaluator(lambda ctx: "yes", name="weird")  # type: ignore[arg-type,return-value] # a wrong return on purpose
    with pytest.raises(TypeError, match="weird"):
        score(weird)


def test_case_checks_become_evaluators() -> None:
    case = Case(
        id="x",
        input="q",
        expected="a",
        checks=Checks(contains=["a"], matches="a", tools_called=["t"], max_approvals=0),
    )
    names = [e.name for e in case_evaluators(case)]
    assert names == ["equals", "contains:a", "matches", "tool_calls", "approvals"]


def test_the_judge_passes_fails_and_marks_an_answer_that_does_not_parse() -> None:
    model = ScriptedModel(
        [
            '{"pass": true, "reason": "names both cities"}',
            '```json\n{"pass": false, "reason": "wrong"}\n```',
            "I think it is fine.",
            '{"verdict": "yes"}',
        ]
    )
    grader = judge(model, "The answer names the cities asked about.", cache=None)
    good = score(grader)
    assert good == Score(name="judge", passed=True, value=1.0, reason="names both cities")
    assert score(grader).passed is False
    prose = score(grader)
    assert prose.passed is None and "did not parse" in prose.reason
    assert score(grader).passed is None
    model.assert_complete()
    prompt = model.requests[0].messages[-1].text
    assert "Rubric:" in prompt and "Paris and Rome are sunny." in prompt
