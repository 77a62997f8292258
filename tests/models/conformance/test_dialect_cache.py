"""Tool and output schemas rewritten once per (schema, dialect), shared by every request.

`models.dialects.wire_schema` / `wire_strict_or_plain` build a schema's rewrite on first
use and hand the same dict to the requests after it. These tests check that the rewrite
runs once, that a schema changed in place is rewritten again (with the twin: the check
off, the stale rewrite goes out), and, through every provider against the simulator, that
nothing on the way to the wire (legato's body building, the SDKs) changes a shared result.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_cases import CASES, Case
from scenarios import WEATHER, call, close, make, request_for

from legato.messages import JsonValue
from legato.models import OutputSpec, dialects
from legato.simulator import SimCall, SimTurn, WireSimulator


def _schema() -> dict[str, JsonValue]:
    return {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
        "required": ["city"],
    }


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    rewrite = dialects.to_openai_strict

    def counted(schema: Any) -> dict[str, JsonValue]:
        calls.append(1)
        return rewrite(schema)

    monkeypatch.setattr(dialects, "to_openai_strict", counted)
    return calls


def test_a_schema_is_rewritten_once_per_dialect(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    schema = _schema()
    first = dialects.wire_strict_or_plain("t", schema)
    assert dialects.wire_strict_or_plain("t", schema) is first
    assert len(calls) == 1
    assert first == (dialects.to_openai_strict(schema), True)
    assert dialects.wire_schema(schema, "gemini") == dialects.to_gemini(schema)
    assert dialects.wire_schema(schema, "gemini") is dialects.wire_schema(schema, "gemini")
    assert schema == _schema()  # the tool's own schema is never touched


def test_a_schema_changed_in_place_is_rewritten_again() -> None:
    schema = _schema()
    before = dialects.wire_schema(schema, "json_schema")
    schema["required"] = ["city", "days"]
    after = dialects.wire_schema(schema, "json_schema")
    assert after["required"] == ["city", "days"] and before["required"] == ["city"]


def test_twin_without_the_change_check_a_stale_rewrite_goes_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def same_object(entry: tuple[object, ...], schema: object) -> bool:
        return entry[0] is schema  # the protection off: a change in place goes unseen

    monkeypatch.setattr(dialects, "_unchanged", same_object)
    schema = _schema()
    dialects.wire_schema(schema, "json_schema")
    schema["required"] = ["city", "days"]
    assert dialects.wire_schema(schema, "json_schema")["required"] == ["city"]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_requests_leave_the_shared_rewrites_as_built(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    output = OutputSpec(name="answer", schema=_schema())
    model = make(case, sim, stream=stream)
    try:
        for _ in range(2):
            sim.enqueue(SimTurn(calls=(SimCall(name="get_weather", arguments={"city": "Bern"}),)))
            await call(model, request_for(tools=[WEATHER]))
            sim.enqueue(SimTurn(text='{"city": "Bern"}'))
            await call(model, request_for(output=output))
    finally:
        await close(model)
    built = [e for e in dialects._BUILT.values() if e[0] is WEATHER.parameters]
    assert built, "the provider goes through the shared rewrites"
    for (_, what), (_, source, result) in dialects._BUILT.items():
        assert result == _fresh(what, source), what


def _fresh(what: str, schema: dict[str, JsonValue]) -> object:
    """The rewrite `what` of `schema`, built anew."""
    if what.startswith("strict/"):
        _, plain, name = what.split("/", 2)
        return dialects.strict_or_plain(name, schema, plain=plain)  # type: ignore[arg-type]
    if what == "gemini_json_schema":
        return dialects.to_gemini_json_schema(schema)
    return dialects.apply_dialect(schema, what)  # type: ignore[arg-type]
