"""Tool schemas from type hints and docstrings, and argument validation."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import Enum
from typing import Annotated, Any, Literal, NotRequired
from uuid import UUID

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import JsonValue
from legato.tools import RunContext, Tool, function_schema, tool

# -- types used by the tools below (module level, so string annotations resolve) ---------------


class Unit(Enum):
    C = "C"
    F = "F"


class Item(BaseModel):
    """A line item."""

    sku: str
    qty: int = 1
    title: str = ""


@dataclass
class Point:
    x: int
    y: int = 0


class Window(TypedDict):
    start: int
    end: NotRequired[int]


class Opaque:
    """A class pydantic knows nothing about."""


def _schema(fn: Callable[..., Any], **options: Any) -> dict[str, JsonValue]:
    return function_schema(fn, name=fn.__name__, **options).parameters


def _props(fn: Callable[..., Any]) -> dict[str, JsonValue]:
    props = _schema(fn)["properties"]
    assert isinstance(props, dict)
    return props


def _problems(fn: Callable[..., Any], arguments: JsonValue) -> list[str]:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        function_schema(fn, name=fn.__name__).validate(arguments)
    assert caught.value.tool == fn.__name__
    return caught.value.problems


# -- docstring styles -----------------------------------------------------------------------------


def google_weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    Args:
        city: The city, e.g. "Paris".
        unit: Temperature unit,
            Celsius or Fahrenheit.
        days: How many days to forecast.

    Returns:
        The forecast as text.
    """
    return ""


def numpy_weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    Parameters
    ----------
    city : str
        The city, e.g. "Paris".
    unit : str
        Temperature unit,
        Celsius or Fahrenheit.
    days : int
        How many days to forecast.

    Returns
    -------
    str
        The forecast as text.
    """
    return ""


def sphinx_weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    :param city: The city, e.g. "Paris".
    :param unit: Temperature unit,
        Celsius or Fahrenheit.
    :param days: How many days to forecast.
    :returns: The forecast as text.
    """
    return ""


WEATHER_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "city": {"description": 'The city, e.g. "Paris".', "type": "string"},
        "unit": {
            "default": "C",
            "description": "Temperature unit, Celsius or Fahrenheit.",
            "enum": ["C", "F"],
            "type": "string",
        },
        "days": {"default": 1, "description": "How many days to forecast.", "type": "integer"},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("fn", "style"),
    [
        (google_weather, "google"),
        (numpy_weather, "numpy"),
        (sphinx_weather, "sphinx"),
        (google_weather, "auto"),
        (numpy_weather, "auto"),
        (sphinx_weather, "auto"),
    ],
)
def test_golden_schema_per_docstring_style(fn: Callable[..., Any], style: Any) -> None:
    schema = function_schema(fn, name="weather", docstring_format=style)
    assert schema.description == "Get the weather forecast.\n\nUses the national weather service."
    assert schema.parameters == WEATHER_SCHEMA
    assert schema.context_parameter is None


def no_doc(x: int) -> None: ...


def one_line(x: int) -> None:
    """Do one thing."""


def test_missing_or_short_docstrings() -> None:
    assert function_schema(no_doc, name="f").description == ""
    assert function_schema(one_line, name="f").description == "Do one thing."
    assert _props(one_line) == {"x": {"type": "integer"}}


def field_description_wins(
    city: Annotated[str, Field(description="From Field.")],
    count: int = Field(default=2, description="From the default."),
) -> None:
    """Look something up.

    Args:
        city: From the docstring.
        count: From the docstring too.
    """


def test_field_description_wins_over_docstring() -> None:
    assert function_schema(field_description_wins, name="f").description == "Look something up."
    assert _props(field_description_wins) == {
        "city": {"description": "From Field.", "type": "string"},
        "count": {"default": 2, "description": "From the default.", "type": "integer"},
    }


# -- supported types ------------------------------------------------------------------------------


def t_str(x: str) -> None: ...
def t_int(x: int) -> None: ...
def t_float(x: float) -> None: ...
def t_bool(x: bool) -> None: ...
def t_bytes(x: bytes) -> None: ...
def t_literal(x: Literal["a", "b"]) -> None: ...
def t_enum(x: Unit) -> None: ...
def t_optional(x: int | None = None) -> None: ...
def t_union(x: int | str) -> None: ...
def t_default(x: int = 3) -> None: ...
def t_constrained(x: Annotated[int, Field(ge=1, le=10)]) -> None: ...
def t_pattern(x: Annotated[str, Field(min_length=2, pattern="^[a-z]+$")]) -> None: ...
def t_list(x: list[int]) -> None: ...
def t_dict(x: dict[str, float]) -> None: ...
def t_set(x: set[str]) -> None: ...
def t_tuple(x: tuple[int, str]) -> None: ...
def t_vartuple(x: tuple[int, ...]) -> None: ...
def t_model(x: Item) -> None: ...
def t_dataclass(x: Point) -> None: ...
def t_typeddict(x: Window) -> None: ...
def t_datetime(x: datetime) -> None: ...
def t_date(x: date) -> None: ...
def t_uuid(x: UUID) -> None: ...
def t_any(x: Any) -> None: ...


_ITEM_DEF: dict[str, JsonValue] = {
    "description": "A line item.",
    "properties": {
        "sku": {"type": "string"},
        "qty": {"default": 1, "type": "integer"},
        "title": {"default": "", "type": "string"},
    },
    "required": ["sku"],
    "type": "object",
}


@pytest.mark.parametrize(
    ("fn", "prop", "defs"),
    [
        (t_str, {"type": "string"}, None),
        (t_int, {"type": "integer"}, None),
        (t_float, {"type": "number"}, None),
        (t_bool, {"type": "boolean"}, None),
        (t_bytes, {"format": "binary", "type": "string"}, None),
        (t_literal, {"enum": ["a", "b"], "type": "string"}, None),
        (
            t_enum,
            {"$ref": "#/$defs/Unit"},
            {"Unit": {"enum": ["C", "F"], "type": "string"}},
        ),
        (t_optional, {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}, None),
        (t_union, {"anyOf": [{"type": "integer"}, {"type": "string"}]}, None),
        (t_default, {"default": 3, "type": "integer"}, None),
        (t_constrained, {"maximum": 10, "minimum": 1, "type": "integer"}, None),
        (t_pattern, {"minLength": 2, "pattern": "^[a-z]+$", "type": "string"}, None),
        (t_list, {"items": {"type": "integer"}, "type": "array"}, None),
        (t_dict, {"additionalProperties": {"type": "number"}, "type": "object"}, None),
        (t_set, {"items": {"type": "string"}, "type": "array", "uniqueItems": True}, None),
        (
            t_tuple,
            {
                "maxItems": 2,
                "minItems": 2,
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "type": "array",
            },
            None,
        ),
        (t_vartuple, {"items": {"type": "integer"}, "type": "array"}, None),
        (t_model, {"$ref": "#/$defs/Item"}, {"Item": _ITEM_DEF}),
        (
            t_dataclass,
            {"$ref": "#/$defs/Point"},
            {
                "Point": {
                    "additionalProperties": False,
                    "properties": {
                        "x": {"type": "integer"},
                        "y": {"default": 0, "type": "integer"},
                    },
                    "required": ["x"],
                    "type": "object",
                }
            },
        ),
        (
            t_typeddict,
            {"$ref": "#/$defs/Window"},
            {
                "Window": {
                    "additionalProperties": False,
                    "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                    "required": ["start"],
                    "type": "object",
                }
            },
        ),
        (t_datetime, {"format": "date-time", "type": "string"}, None),
        (t_date, {"format": "date", "type": "string"}, None),
        (t_uuid, {"format": "uuid", "type": "string"}, None),
        (t_any, {}, None),
    ],
)
def test_supported_types(
    fn: Callable[..., Any], prop: dict[str, JsonValue], defs: dict[str, JsonValue] | None
) -> None:
    schema = _schema(fn)
    optional = fn in (t_optional, t_default)
    expected: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"x": prop},
        "required": [] if optional else ["x"],
        "additionalProperties": False,
    }
    if defs is not None:
        expected["$defs"] = defs
    assert schema == expected


def uses_reserved_names(
    schema: str, json: int, model_config: bool, title: str, _private: int = 0
) -> None: ...


def test_any_parameter_name_works_and_title_properties_survive() -> None:
    fs = function_schema(uses_reserved_names, name="f")
    assert list(_props(uses_reserved_names)) == [
        "schema",
        "json",
        "model_config",
        "title",
        "_private",
    ]
    args = fs.validate({"schema": "s", "json": 1, "model_config": True, "title": "t"})
    assert args == {"schema": "s", "json": 1, "model_config": True, "title": "t", "_private": 0}


def test_same_function_gives_identical_schema() -> None:
    first = function_schema(google_weather, name="w").parameters
    second = function_schema(google_weather, name="w").parameters
    assert first == second
    assert json.dumps(first) == json.dumps(second)
    assert first is not second


# -- RunContext -----------------------------------------------------------------------------------


def ctx_named_but_int(ctx: int, city: str) -> None: ...
def context_named_anything(city: str, whatever: RunContext[None]) -> None: ...
def bare_context(run: RunContext, city: str) -> None: ...
def annotated_context(c: Annotated[RunContext[str], "meta"], n: int) -> None: ...
def two_contexts(a: RunContext[None], b: RunContext[None]) -> None: ...


def test_context_parameter_found_by_type_not_name() -> None:
    kept = function_schema(ctx_named_but_int, name="f")
    assert kept.context_parameter is None
    assert kept.parameters["required"] == ["ctx", "city"]

    for fn, param in [
        (context_named_anything, "whatever"),
        (bare_context, "run"),
        (annotated_context, "c"),
    ]:
        fs = function_schema(fn, name="f")
        assert fs.context_parameter == param
        props = fs.parameters["properties"]
        assert isinstance(props, dict)
        assert param not in props and len(props) == 1


def test_two_context_parameters_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="'a' and 'b' are both RunContext"):
        function_schema(two_contexts, name="f")


class Catalog:
    def lookup(self, key: str, limit: int = 5) -> list[str]:
        """Find entries.

        Args:
            key: What to look for.
            limit: At most this many.
        """
        return [key] * limit


def test_method_with_skip_first() -> None:
    fs = function_schema(Catalog.lookup, name="lookup", skip_first=True)
    assert fs.parameters["required"] == ["key"]
    assert fs.validate({"key": "k"}) == {"key": "k", "limit": 5}
    bound = function_schema(Catalog().lookup, name="lookup")
    assert bound.parameters == fs.parameters


# -- functions that cannot be tools ---------------------------------------------------------------


def star_args(*names: str) -> None: ...
def star_kwargs(city: str, **extra: int) -> None: ...
def positional_only(city: str, /, days: int) -> None: ...
def unannotated(city: str, days: int) -> None: ...
def opaque_type(thing: Opaque) -> None: ...
def socket_type(sock: socket.socket) -> None: ...
def callable_type(callback: Callable[[int], int]) -> None: ...
def unresolvable(city: str, thing: int) -> None: ...


del unannotated.__annotations__["city"]  # as if written `def unannotated(city, days: int)`
unresolvable.__annotations__ = {"city": "str", "thing": "NoSuchType", "return": "None"}


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (star_args, r"\*names is not allowed"),
        (star_kwargs, r"\*\*extra is not allowed"),
        (positional_only, "'city' is positional-only"),
        (unannotated, "'city' has no type annotation"),
        (opaque_type, "parameter 'thing' has type .*Opaque"),
        (socket_type, "parameter 'sock' has type .*socket"),
        (callable_type, "parameter 'callback' has type"),
        (unresolvable, "parameter 'thing' .*NoSuchType"),
    ],
)
def test_bad_functions_raise_naming_the_parameter(fn: Callable[..., Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message) as caught:
        function_schema(fn, name="bad")
    assert "tool 'bad'" in str(caught.value)


def bad_return(city: str) -> None: ...


bad_return.__annotations__ = {"city": "str", "return": "NoSuchType"}


def test_unresolvable_return_annotation_is_ignored() -> None:
    assert _schema(bad_return)["required"] == ["city"]


# -- validation -----------------------------------------------------------------------------------


def order(
    city: str,
    items: list[Item],
    unit: Literal["C", "F"] = "C",
    limit: Annotated[int, Field(ge=1)] = 10,
    note: str | None = "none",
) -> None: ...


def test_each_problem_kind_has_its_message() -> None:
    problems = _problems(
        order,
        {"items": [{"sku": "a", "qty": "ten"}], "unit": "K", "limit": 0, "colour": "red"},
    )
    assert problems == [
        "city: missing required argument",
        "items.0.qty: expected an integer, got 'ten'",
        "unit: must be one of 'C', 'F'",
        "limit: must be greater than or equal to 1, got 0",
        "colour: unexpected argument",
    ]


def test_wrong_type_at_top_level_and_nested_missing() -> None:
    assert _problems(order, {"city": 3, "items": [{}]}) == [
        "city: expected a string, got 3",
        "items.0.sku: missing required field",
    ]


@pytest.mark.parametrize("arguments", [[1, 2], None, "x", 3])
def test_non_object_arguments_are_one_problem(arguments: JsonValue) -> None:
    assert _problems(order, arguments) == [f"arguments: expected a JSON object, got {arguments!r}"]


def test_union_branches_are_merged_into_one_line() -> None:
    assert _problems(t_union, {"x": [1]}) == ["x: expected an integer or a string, got [1]"]


def nested(point: Point, window: Window, when: datetime, tags: set[str]) -> None: ...


def test_nested_unexpected_and_wrong_values() -> None:
    problems = _problems(
        nested,
        {"point": {"x": 1, "z": 2}, "window": {"start": "x"}, "when": "soon", "tags": "a"},
    )
    assert problems == [
        "point.z: unexpected field",
        "window.start: expected an integer, got 'x'",
        "when: expected a date-time (ISO 8601, e.g. '2024-05-01T09:30:00Z'), got 'soon'",
        "tags: expected an array, got 'a'",
    ]


def test_missing_tuple_item() -> None:
    assert _problems(t_tuple, {"x": [1]}) == ["x.1: missing required item"]


def everything(
    item: Item,
    point: Point,
    window: Window,
    unit: Unit,
    when: datetime,
    day: date,
    ident: UUID,
    pair: tuple[int, str],
    tags: set[str],
    blob: bytes,
    count: int = 2,
) -> None: ...


def test_validate_converts_to_real_instances_and_applies_defaults() -> None:
    args = function_schema(everything, name="e").validate(
        {
            "item": {"sku": "a"},
            "point": {"x": 1},
            "window": {"start": 3},
            "unit": "F",
            "when": "2024-05-01T09:30:00Z",
            "day": "2024-05-01",
            "ident": "12345678-1234-5678-1234-567812345678",
            "pair": [1, "b"],
            "tags": ["x", "x"],
            "blob": "hi",
        }
    )
    assert args == {
        "item": Item(sku="a"),
        "point": Point(x=1, y=0),
        "window": {"start": 3},
        "unit": Unit.F,
        "when": datetime(2024, 5, 1, 9, 30, tzinfo=UTC),
        "day": date(2024, 5, 1),
        "ident": UUID("12345678-1234-5678-1234-567812345678"),
        "pair": (1, "b"),
        "tags": {"x"},
        "blob": b"hi",
        "count": 2,
    }
    assert isinstance(args["item"], Item) and isinstance(args["point"], Point)


def test_null_means_default_unless_the_parameter_accepts_null() -> None:
    fs = function_schema(order, name="order")
    args = fs.validate({"city": "c", "items": [], "unit": None, "limit": None, "note": None})
    assert args == {"city": "c", "items": [], "unit": "C", "limit": 10, "note": None}


def nested_nulls(items: list[Item], window: Window | None, point: Point) -> None: ...


def test_null_means_default_in_nested_objects_too() -> None:
    """What OpenAI strict mode sends for optional fields the model leaves out."""
    args = function_schema(nested_nulls, name="n").validate(
        {
            "items": [{"sku": "a", "qty": None, "title": None}],
            "window": {"start": 1, "end": None},
            "point": {"x": 1, "y": None},
        }
    )
    assert args == {"items": [Item(sku="a")], "window": {"start": 1}, "point": Point(x=1)}
    assert _problems(nested_nulls, {"items": None, "window": None, "point": {"x": None}}) == [
        "items: expected an array, got None",
        "point.x: expected an integer, got None",
    ]


# -- @tool end to end -----------------------------------------------------------------------------

CTX = RunContext(deps=None, run_id="r")


@tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


@tool(side_effects="idempotent", timeout=5)
async def greet(ctx: RunContext[str], name: str) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
    """
    return f"{ctx.deps}, {name}"


class Counter:
    def __init__(self, start: int) -> None:
        self.start = start

    @tool
    def bump(self, by: int) -> int:
        """Add to the counter.

        Args:
            by: How much.
        """
        return self.start + by


async def test_tool_on_a_sync_function() -> None:
    assert isinstance(add, Tool)
    assert add.description == "Add two numbers."
    args = add.validate({"a": "2"})
    assert await add.invoke(args, CTX) == 3


async def test_tool_on_an_async_function_with_context() -> None:
    assert greet.context_parameter == "ctx"
    assert greet.parameters["required"] == ["name"]
    assert greet.side_effects == "idempotent" and greet.timeout == 5
    ctx = RunContext(deps="Hello", run_id="r")
    assert await greet.invoke(greet.validate({"name": "Ada"}), ctx) == "Hello, Ada"


async def test_tool_on_a_method_binds_to_the_instance() -> None:
    bound = Counter(10).bump
    assert bound.parameters["properties"] == {"by": {"description": "How much.", "type": "integer"}}
    assert await bound.invoke(bound.validate({"by": 5}), CTX) == 15
    with pytest.raises(ToolArgumentsInvalid, match="by: missing required argument"):
        bound.validate({})
