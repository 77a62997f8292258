"""Raw-schema tools (MCP, catalogs): full JSON Schema validation, context by type, options.

The violations are the ones the issue found reaching the tool body: a string where a number
is required, a value outside an `enum`, an object where an array is required, an extra
argument when the schema is closed. Each test calls the tool through `validate` and shows the
body never ran.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legato import RunContext, Tool, tool
from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import JsonValue

WEATHER: dict[str, JsonValue] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "stations": {"type": "array", "items": {"type": "string"}},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
            "additionalProperties": False,
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}


def ctx() -> RunContext[None]:
    return RunContext(deps=None, run_id="r")


def _spy_tool(schema: dict[str, JsonValue]) -> tuple[Tool, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def body(**arguments: Any) -> str:
        calls.append(arguments)
        return "ran"

    return Tool.from_schema(name="weather", description="", parameters=schema, function=body), calls


def _problems(t: Tool, arguments: JsonValue) -> list[str]:
    with pytest.raises(ToolArgumentsInvalid) as info:
        t.validate(arguments)
    return info.value.problems


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"city": "Paris", "days": "3"}, "days: expected an integer, got '3'"),
        ({"city": "Paris", "unit": "K"}, "unit: must be one of 'C', 'F'"),
        ({"city": "Paris", "stations": {"a": 1}}, "stations: expected an array, got {'a': 1}"),
        ({"city": "Paris", "stations": ["a", 2]}, "stations.1: expected a string, got 2"),
        ({"city": "Paris", "mood": "sunny"}, "mood: unexpected argument"),
        ({"city": "Paris", "where": {"lat": 1}}, "where.lon: missing required field"),
        ({"city": "Paris", "where": {"lat": 1, "lon": 2, "alt": 3}}, "where.alt: unexpected field"),
        ({"city": "Paris", "days": 30}, "days: must be <= 14, got 30"),
        ({"city": ""}, "city: must be at least 1 characters long, got ''"),
        ({}, "city: missing required argument"),
    ],
)
def test_every_violation_is_caught_before_the_body(arguments: JsonValue, problem: str) -> None:
    t, calls = _spy_tool(WEATHER)
    assert _problems(t, arguments) == [problem]
    assert calls == []


def test_a_valid_call_reaches_the_body_unchanged() -> None:
    t, calls = _spy_tool(WEATHER)
    arguments: dict[str, JsonValue] = {
        "city": "Paris",
        "unit": "C",
        "days": 3,
        "stations": ["a"],
        "where": {"lat": 48.8, "lon": 2.3},
    }
    assert asyncio.run(t.invoke(t.validate(arguments), ctx())) == "ran"
    assert calls == [arguments]


def test_several_violations_are_all_reported() -> None:
    t, _ = _spy_tool(WEATHER)
    assert sorted(_problems(t, {"unit": "K", "days": "3", "x": 1})) == [
        "city: missing required argument",
        "days: expected an integer, got '3'",
        "unit: must be one of 'C', 'F'",
        "x: unexpected argument",
    ]


def test_unions_and_refs_are_followed() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["name"],
            }
        },
        "properties": {
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "tree": {"$ref": "#/$defs/node"},
        },
    }
    t, _ = _spy_tool(schema)
    assert _problems(t, {"id": 1.5}) == ["id: expected a string or an integer, got 1.5"]
    assert _problems(t, {"tree": {"name": "a", "children": [{"name": 3}]}}) == [
        "tree.children.0.name: expected a string, got 3"
    ]
    assert t.validate({"id": 7, "tree": {"name": "a", "children": [{"name": "b"}]}})


def test_a_union_whose_shape_matched_reports_that_branch() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {
            "target": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                    },
                ]
            }
        },
    }
    t, _ = _spy_tool(schema)
    assert _problems(t, {"target": {}}) == ["target.path: missing required field"]


def test_the_old_top_level_check_missed_these_twin() -> None:
    """Twin: without the full schema (only required/unknown names checked), they got through."""
    open_schema = {k: v for k, v in WEATHER.items() if k != "additionalProperties"}
    loose_schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {k: {} for k in ("city", "unit", "days", "stations", "where")},
        "required": ["city"],
    }
    loose, calls = _spy_tool(loose_schema)
    bad_calls: list[dict[str, JsonValue]] = [
        {"city": "Paris", "days": "3"},
        {"city": "Paris", "unit": "K"},
    ]
    for bad in bad_calls:
        asyncio.run(loose.invoke(loose.validate(bad), ctx()))
    assert len(calls) == 2  # nothing in that schema forbids them: they reach the body
    strict, _ = _spy_tool(open_schema)
    assert _problems(strict, {"city": "Paris", "days": "3"}) == [
        "days: expected an integer, got '3'"
    ]


def test_format_is_an_annotation_in_every_draft() -> None:
    """Draft-07 leaves asserting `format` optional; the server decides what a "uri" is."""
    schema: dict[str, JsonValue] = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"url": {"type": "string", "format": "uri"}},
    }
    t, _ = _spy_tool(schema)
    assert t.validate({"url": "example.com/page"}) == {"url": "example.com/page"}
    assert _problems(t, {"url": 5}) == ["url: expected a string, got 5"]


def test_nulls_for_optional_non_nullable_properties_are_dropped() -> None:
    t, _ = _spy_tool(WEATHER)
    assert t.validate({"city": "Paris", "unit": None, "days": None}) == {"city": "Paris"}


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "not valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"minimum": "five"}}}, "not valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "missing"),
        ({"type": "object", "properties": {"a": {"pattern": "(["}}}, "regex"),
        ({"$schema": "https://example.invalid/mine", "type": "object"}, "meta-schema"),
    ],
)
def test_an_invalid_schema_is_refused_at_definition(
    schema: dict[str, JsonValue], fragment: str
) -> None:
    with pytest.raises(ToolDefinitionError, match=fragment):
        Tool.from_schema(name="bad", description="", parameters=schema, function=dict)


def test_remote_references_are_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    dialed: list[object] = []

    def no_connect(self: socket.socket, address: object) -> None:
        dialed.append(address)
        raise OSError("blocked")

    monkeypatch.setattr(socket.socket, "connect", no_connect)
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"a": {"$ref": "https://schemas.example.invalid/a.json"}},
    }
    with pytest.raises(ToolDefinitionError, match="not fetched"):
        Tool.from_schema(name="remote_ref", description="", parameters=schema, function=dict)
    assert dialed == []


# -- the run context is found by type, never by name ------------------------------------------------


def test_a_schema_property_named_ctx_is_an_ordinary_argument() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def call(context: RunContext[None], /, **arguments: Any) -> str:
        seen.append((context.run_id, arguments))
        return "ok"

    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"ctx": {"type": "string"}, "q": {"type": "string"}},
        "required": ["ctx"],
    }
    t = Tool.from_schema(name="mcp_like", description="", parameters=schema, function=call)
    arguments: dict[str, JsonValue] = {"ctx": "user value", "q": "x"}
    asyncio.run(t.invoke(t.validate(arguments), ctx()))
    assert seen == [("r", {"ctx": "user value", "q": "x"})]


def test_a_function_with_no_context_parameter_gets_none_even_if_it_has_ctx_kwarg() -> None:
    seen: list[dict[str, Any]] = []

    def call(**arguments: Any) -> str:
        seen.append(arguments)
        return "ok"

    schema: dict[str, JsonValue] = {"type": "object", "properties": {"ctx": {"type": "integer"}}}
    t = Tool.from_schema(name="plain", description="", parameters=schema, function=call)
    assert t.context_parameter is None
    asyncio.run(t.invoke(t.validate({"ctx": 5}), ctx()))
    assert seen == [{"ctx": 5}]


def test_a_context_parameter_that_a_property_could_shadow_is_refused() -> None:
    def call(ctx: RunContext[None], **arguments: Any) -> str:
        return "never"

    schema: dict[str, JsonValue] = {"type": "object", "properties": {"ctx": {"type": "string"}}}
    with pytest.raises(ToolDefinitionError, match="positional-only"):
        Tool.from_schema(name="shadowed", description="", parameters=schema, function=call)


# -- tool options are checked when the tool is defined ----------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (
            {"side_effects": "irreversable"},
            "side_effects must be one of 'none', 'idempotent', 'irreversible'",
        ),
        ({"side_effects": True}, "side_effects must be one of"),
        ({"timeout": "5"}, "timeout must be a positive number"),
        ({"timeout": True}, "timeout must be a positive number"),
        ({"max_retries": 1.5}, "max_retries must be an integer"),
        ({"sequential": "yes"}, "sequential must be True or False"),
        ({"strict": "yes"}, "strict must be True, False or None"),
    ],
)
def test_tool_options_are_validated_at_definition(options: dict[str, Any], fragment: str) -> None:
    def look(city: str) -> str:
        return city

    with pytest.raises(ToolDefinitionError, match=fragment):
        tool(**options)(look)
    with pytest.raises(ToolDefinitionError, match=fragment):
        Tool.from_schema(
            name="look", description="", parameters={"type": "object"}, function=look, **options
        )


def test_valid_options_are_accepted() -> None:
    def look(city: str) -> str:
        return city

    for kind in ("none", "idempotent", "irreversible"):
        assert (
            tool(side_effects=kind, timeout=2, max_retries=0, strict=False)(look).side_effects
            == kind
        )


# -- agreement with an independent implementation ----------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-30, max_value=30),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["", "C", "F", "K", "Paris", "a"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["lat", "lon", "alt", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_ARGUMENTS = st.dictionaries(
    st.sampled_from(["city", "unit", "days", "stations", "where", "mood"]),
    _VALUES.filter(lambda v: v is not None),  # top-level nulls are dropped on purpose (above)
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(_ARGUMENTS)
def test_accepts_exactly_what_the_reference_validator_accepts(arguments: dict[str, Any]) -> None:
    """The pure-Python `jsonschema` package, as an independent oracle, agrees on every call;
    each rejection names at least one problem."""
    import jsonschema

    oracle: Any = jsonschema.Draft7Validator(WEATHER)
    reference = bool(oracle.is_valid(arguments))
    t, calls = _spy_tool(WEATHER)
    try:
        t.validate(arguments)
        accepted = True
    except ToolArgumentsInvalid as exc:
        accepted = False
        assert exc.problems and all(": " in p for p in exc.problems)
    assert accepted is reference
    assert calls == []
