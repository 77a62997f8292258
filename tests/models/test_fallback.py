"""FallbackModel over many scripted outages: the backup always continues the same conversation."""

from __future__ import annotations

import random
from dataclasses import replace

from legato import Agent, tool
from legato.exceptions import ModelOverloaded, ProviderServerError, RateLimited
from legato.messages import ModelResponse
from legato.models import FallbackModel, ModelRequest
from legato.testing import FunctionModel, call, reply

STEPS = 5


@tool
def step(n: int) -> str:
    """Record a step.

    Args:
        n: The step number.
    """
    return f"done {n}"


def _answer(request: ModelRequest) -> ModelResponse:
    done = [r.text for m in request.messages for r in m.tool_results]
    if len(done) < STEPS:
        return reply(call("step", {"n": len(done)}))
    return reply(" | ".join(done))


def _outages(*, forward_history: bool) -> tuple[int, int, int]:
    """Runs until 750 failovers; returns (failovers, continued, wrong outputs)."""
    rng = random.Random(2026)
    errors = [ModelOverloaded("busy"), RateLimited("slow down"), ProviderServerError("500")]
    failovers = 0
    continued = 0

    def primary(request: ModelRequest) -> ModelResponse:
        nonlocal failovers
        if rng.random() < 0.6:
            failovers += 1
            raise rng.choice(errors)
        return _answer(request)

    def backup(request: ModelRequest) -> ModelResponse:
        nonlocal continued
        # Continuity: the backup sees every call and result made so far, on either model.
        calls = [c.arguments for m in request.messages for c in m.tool_calls]
        results = [r.text for m in request.messages for r in m.tool_results]
        if calls == [{"n": i} for i in range(len(calls))] and results == [
            f"done {i}" for i in range(len(results))
        ]:
            continued += 1
        return _answer(request)

    def stateless(request: ModelRequest) -> ModelResponse:
        # What a failover that does not forward the history would send.
        return backup(replace(request, messages=request.messages[-1:]))

    wrong = 0
    expected = " | ".join(f"done {i}" for i in range(STEPS))
    while failovers < 750:
        second = FunctionModel(backup if forward_history else stateless)
        model = FallbackModel([FunctionModel(primary), second])
        result = Agent(model, tools=[step], max_steps=4 * STEPS).run_sync("Do five steps.")
        wrong += result.output != expected
    return failovers, continued, wrong


def test_continuity_over_hundreds_of_failovers() -> None:
    failovers, continued, wrong = _outages(forward_history=True)
    assert failovers >= 750
    assert continued == failovers  # continuity preserved on every failover (CPR = 100%)
    assert wrong == 0


def test_the_check_fails_when_history_is_not_forwarded() -> None:
    failovers, continued, _ = _outages(forward_history=False)
    assert continued < failovers * 0.5
