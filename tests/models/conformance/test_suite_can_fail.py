"""The conformance checks catch real translator bugs: break a translator, watch them fail."""

from __future__ import annotations

from typing import Any

import pytest
from conformance_cases import CASES, Case
from scenarios import check_awkward_arguments, check_one_tool_call, check_text_before_tool_call

import legato.models._chat_read as chat_read
from legato.models.anthropic import AnthropicModel
from legato.models.assembly import ResponseAssembler
from legato.simulator import WireSimulator


def _case(case_id: str) -> Case:
    return next(c for c in CASES if c.id == case_id)


def _drop_first_chat_argument_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    original = chat_read.feed
    dropped = False

    def feed(assembler: ResponseAssembler, delta: Any, *, streamed: bool) -> Any:
        nonlocal dropped
        for call in delta.get("tool_calls") or ():
            function = call.get("function")
            if function is not None and function.get("arguments") and not dropped:
                dropped = True
                function["arguments"] = ""
        return original(assembler, delta, streamed=streamed)

    monkeypatch.setattr(chat_read, "feed", feed)


def _drop_first_anthropic_input_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    original = AnthropicModel._delta
    dropped = False

    def delta(self: AnthropicModel, event: Any, assembler: ResponseAssembler, state: Any) -> Any:
        nonlocal dropped
        if event["delta"]["type"] == "input_json_delta" and not dropped:
            dropped = True
            return None
        return original(self, event, assembler, state)

    monkeypatch.setattr(AnthropicModel, "_delta", delta)


async def test_the_checks_pass_on_the_real_translators(sim: WireSimulator) -> None:
    await check_one_tool_call(_case("openai-chat"), sim, stream=True)
    await check_one_tool_call(_case("anthropic"), sim, stream=True)


@pytest.mark.parametrize(
    ("case_id", "breaker"),
    [
        ("openai-chat", _drop_first_chat_argument_delta),
        ("groq", _drop_first_chat_argument_delta),
        ("anthropic", _drop_first_anthropic_input_delta),
    ],
)
@pytest.mark.parametrize(
    "check",
    [check_one_tool_call, check_text_before_tool_call, check_awkward_arguments],
    ids=["one_call", "text_before_call", "awkward_split"],
)
async def test_dropping_the_first_argument_delta_fails_the_suite(
    sim: WireSimulator,
    monkeypatch: pytest.MonkeyPatch,
    case_id: str,
    breaker: Any,
    check: Any,
) -> None:
    breaker(monkeypatch)
    kwargs = {"byte_split": 5} if check is check_awkward_arguments else {"stream": True}
    with pytest.raises(AssertionError):
        await check(_case(case_id), sim, **kwargs)
