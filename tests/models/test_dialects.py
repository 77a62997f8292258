"""Provider schema dialects on one nested model set, plus property tests."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from enum import Enum
from typing import Annotated, Any, Literal, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from legato.exceptions import ToolDefinitionError
from legato.messages import JsonValue
from legato.models.dialects import apply_dialect, to_anthropic, to_gemini, to_openai_strict
from legato.tools import function_schema

# -- the shared model set -------------------------------------------------------------------------


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Dimensions(BaseModel):
    """Size in centimetres."""

    width: float
    height: float


class Part(BaseModel):
    sku: str
    qty: Annotated[int, Field(ge=1, le=100)] = 1


class Product(BaseModel):
    name: str
    dims: Dimensions
    parts: list[Part]
    color: Color
    note: str | None = None
    size: Literal["S", "M", "L"] = "M"
    rating: Annotated[int, Field(ge=0, le=5)]
    labels: dict[str, int] = Field(default_factory=dict[str, int])


def save_product(product: Product, dry_run: bool = False) -> None:
    """Save a product.

    Args:
        product: The product to save.
        dry_run: Only check it.
    """


SCHEMA = function_schema(save_product, name="save_product").parameters
OBJECT_KEYS = ("properties", "$defs", "definitions")


def schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in the tree (property *names* are not mistaken for keywords)."""
    if isinstance(node, list):
        for item in cast(list[Any], node):
            yield from schemas(item)
        return
    if not isinstance(node, dict):
        return
    schema = cast(dict[str, Any], node)
    yield schema
    for key, value in schema.items():
        if key in OBJECT_KEYS and isinstance(value, dict):
            for sub in cast(dict[str, Any], value).values():
                yield from schemas(sub)
        elif key in ("items", "anyOf", "prefixItems", "additionalProperties", "allOf", "oneOf"):
            yield from schemas(value)


def keywords(node: Any) -> set[str]:
    return {key for schema in schemas(node) for key in schema}


def dig(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    node: Any = schema
    for key in path:
        node = node[key]
    return cast(dict[str, Any], node)


# -- Gemini ---------------------------------------------------------------------------------------


def _without_labels() -> dict[str, JsonValue]:
    """The shared schema less its free-form dict field (which Gemini's subset cannot say)."""
    schema = copy.deepcopy(SCHEMA)
    del dig(schema, "$defs", "Product", "properties")["labels"]
    return schema


def test_gemini_inlines_everything_and_drops_what_gemini_rejects() -> None:
    with pytest.raises(ToolDefinitionError, match=r"product\.labels: a free-form object"):
        to_gemini(SCHEMA)  # a bare OBJECT without properties is what Gemini refuses
    out = to_gemini(_without_labels())
    assert not keywords(out) & {"$ref", "$defs", "additionalProperties", "title", "default"}
    product = dig(out, "properties", "product")
    assert product["type"] == "object"
    assert product["description"] == "The product to save."
    assert product["required"] == ["name", "dims", "parts", "color", "rating"]
    props = dig(product, "properties")
    assert props["dims"] == {
        "description": "Size in centimetres.",
        "properties": {"width": {"type": "number"}, "height": {"type": "number"}},
        "required": ["width", "height"],
        "type": "object",
    }
    assert dig(props, "parts", "items", "properties", "qty") == {
        "maximum": 100,
        "minimum": 1,
        "type": "integer",
    }
    assert props["color"] == {"enum": ["red", "green"], "type": "string"}
    assert props["note"] == {"type": "string", "nullable": True}
    assert props["size"] == {"enum": ["S", "M", "L"], "type": "string"}
    assert props["rating"] == {"maximum": 5, "minimum": 0, "type": "integer"}
    assert "labels" not in props


def test_gemini_refuses_recursive_types() -> None:
    tree: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    with pytest.raises(ToolDefinitionError, match=r"root\.children\.items: '#/\$defs/Node'"):
        to_gemini(tree)


def test_gemini_keywords_it_does_not_know() -> None:
    out = to_gemini(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "id": {"type": "string", "format": "uuid", "description": "The id."},
                "when": {"type": ["string", "null"], "format": "date-time"},
                "mode": {"const": "fast"},
                "level": {"type": "integer", "enum": [1, 2], "exclusiveMinimum": 0},
                "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
                "either": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            },
            "required": ["id", "ghost"],
        }
    )
    assert out == {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The id. Format: uuid."},
            "when": {"type": "string", "format": "date-time", "nullable": True},
            "mode": {"enum": ["fast"], "type": "string"},
            "level": {"type": "integer", "minimum": 1, "description": "Allowed values: 1, 2."},
            "pair": {
                "type": "array",
                "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            },
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        },
        "required": ["id"],
    }


# -- OpenAI strict --------------------------------------------------------------------------------


def assert_strict(out: dict[str, JsonValue]) -> None:
    for schema in schemas(out):
        if schema.get("type") == "object" or "properties" in schema:
            assert schema["additionalProperties"] is False, schema
            assert schema["required"] == list(schema["properties"]), schema
    assert "default" not in keywords(out)


def is_nullable(schema: dict[str, Any]) -> bool:
    return {"type": "null"} in schema.get("anyOf", [])


def test_openai_strict_refuses_the_dict_field_and_names_it() -> None:
    with pytest.raises(ToolDefinitionError, match=r"product\.labels: a free-form object"):
        to_openai_strict(SCHEMA)


def test_openai_strict_closes_every_object_and_makes_optionals_nullable() -> None:
    without_dict = copy.deepcopy(SCHEMA)
    del dig(without_dict, "$defs", "Product", "properties")["labels"]
    out = to_openai_strict(without_dict)
    assert_strict(out)
    assert out["required"] == ["product", "dry_run"]
    assert dig(out, "properties", "dry_run") == {
        "anyOf": [{"type": "boolean"}, {"type": "null"}],
        "description": "Only check it.",
    }
    product = dig(out, "properties", "product")  # a $ref with a description is inlined
    assert product["description"] == "The product to save."
    props = dig(product, "properties")
    assert is_nullable(props["note"]) and is_nullable(props["size"])
    assert not is_nullable(props["name"]) and not is_nullable(props["rating"])
    assert props["dims"] == {"$ref": "#/$defs/Dimensions"}  # plain $ref and $defs are kept
    assert is_nullable(dig(out, "$defs", "Part", "properties", "qty"))
    assert dig(out, "$defs", "Color") == {"enum": ["red", "green"], "type": "string"}


def test_openai_strict_round_trips_through_validation() -> None:
    """What a strict model sends (every key, null for "not given") validates to the defaults."""

    def save_part(part: Part, count: int = 2) -> None: ...

    fs = function_schema(save_part, name="save_part")
    assert_strict(to_openai_strict(fs.parameters))
    args = fs.validate({"part": {"sku": "a", "qty": None}, "count": None})
    assert args == {"part": Part(sku="a", qty=1), "count": 2}


def test_openai_strict_no_argument_tool() -> None:
    assert to_openai_strict({"type": "object"}) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


# -- Anthropic, dispatch, purity ------------------------------------------------------------------


def test_anthropic_passes_the_schema_through() -> None:
    assert to_anthropic(SCHEMA) == SCHEMA
    assert to_anthropic({"properties": {}}) == {"properties": {}, "type": "object"}


def test_apply_dialect_dispatches() -> None:
    assert apply_dialect(_without_labels(), "gemini") == to_gemini(_without_labels())
    assert apply_dialect(SCHEMA, "anthropic") == SCHEMA
    assert apply_dialect(SCHEMA, "json_schema") == SCHEMA
    with pytest.raises(ToolDefinitionError):
        apply_dialect(SCHEMA, "openai_strict")


def test_no_dialect_mutates_its_input() -> None:
    before = copy.deepcopy(SCHEMA)
    for dialect in ("json_schema", "anthropic"):
        out = apply_dialect(SCHEMA, dialect)
        assert SCHEMA == before
        out["mutated"] = True
        assert "mutated" not in SCHEMA
    with pytest.raises(ToolDefinitionError):
        to_openai_strict(SCHEMA)
    with pytest.raises(ToolDefinitionError):
        to_gemini(SCHEMA)
    assert SCHEMA == before


# -- property tests -------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "title", "$ref", "type", "items", "x-y"])
LEAVES: st.SearchStrategy[dict[str, JsonValue]] = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "minimum": 0, "title": "N"},
        {"type": "string", "enum": ["p", "q"]},
        {"type": "string", "format": "uuid", "default": "u"},
        {"type": "number", "exclusiveMinimum": 0},
        {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        {"type": ["boolean", "null"]},
        {"const": 3},
        {"$ref": "#/$defs/Leaf"},
        {"$ref": "#/$defs/Leaf", "description": "a leaf"},
    ]
)


def _object(children: st.SearchStrategy[dict[str, JsonValue]]) -> st.SearchStrategy[Any]:
    def build(props: dict[str, dict[str, JsonValue]], required: list[str], extra: bool) -> Any:
        node: dict[str, JsonValue] = {
            "type": "object",
            "title": "Obj",
            "properties": dict(props),
            "required": [r for r in required if r in props],
        }
        if (
            extra or not props
        ):  # an open `properties: {}` is a free-form dict (test_strict_fallback)
            node["additionalProperties"] = False
        return node

    return st.builds(
        build,
        st.dictionaries(NAMES, children, max_size=4),
        st.lists(NAMES, max_size=4, unique=True),
        st.booleans(),
    )


def _array(child: Any) -> Any:
    return {"type": "array", "items": child}


def _optional(child: Any) -> Any:
    return {"anyOf": [child, {"type": "null"}], "description": "maybe"}


def _all_of(child: Any) -> Any:
    return {"allOf": [child]}


def _with_defs(root: Any, leaf: Any) -> Any:
    return {**root, "$defs": {"Leaf": leaf}}


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _object(children),
        st.builds(_array, children),
        st.builds(_optional, children),
        st.builds(_all_of, children),
    )


NESTED: st.SearchStrategy[Any] = st.recursive(LEAVES, _extend, max_leaves=12)
ROOTS: st.SearchStrategy[Any] = st.builds(
    _with_defs, _object(NESTED), _object(LEAVES.filter(lambda s: "$ref" not in s))
)


@given(ROOTS)
def test_gemini_output_never_has_refs_or_rejected_keywords(schema: dict[str, JsonValue]) -> None:
    before = copy.deepcopy(schema)
    out = to_gemini(schema)
    assert schema == before
    assert not keywords(out) & {"$ref", "$defs", "additionalProperties", "title", "default"}
    for node in schemas(out):
        assert not isinstance(node.get("type"), list)
        assert {"type": "null"} not in node.get("anyOf", [])
        props = node.get("properties", {})
        assert all(name in props for name in node.get("required", []))


@given(ROOTS)
def test_openai_strict_output_satisfies_the_strict_invariants(
    schema: dict[str, JsonValue],
) -> None:
    before = copy.deepcopy(schema)
    out = to_openai_strict(schema)
    assert schema == before
    assert_strict(out)
    assert not keywords(out) & {"title", "allOf", "default"}
    for node in schemas(out):
        ref = node.get("$ref")
        assert ref is None or node == {"$ref": ref}  # a $ref never has siblings
