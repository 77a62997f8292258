"""Arguments of raw-schema tools, checked against the whole JSON Schema.

Tools built from a schema that came from elsewhere (`Tool.from_schema`: MCP servers,
catalogs) have no pydantic model. Their arguments are checked by a maintained JSON Schema
validator (`jsonschema-rs`, drafts 4 to 2020-12), compiled once per schema when the tool is
defined and shared by every tool with the same schema. `format` is treated as an annotation
in every draft (not asserted), so a server's own reading of `uri` or `date-time` decides. Each violation becomes one line in the
same vocabulary as typed tools (`legato.tools._schema`): missing, unexpected, wrong type,
wrong value, each with the path of the field (`address.city: missing required field`).

A schema the validator cannot compile, or a reference it cannot resolve locally, is a
`ToolDefinitionError` when the tool is defined. Remote references are never fetched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import JsonValue

if TYPE_CHECKING:
    import jsonschema_rs

__all__ = ["SchemaArguments", "compile_schema"]

_TYPE_NAMES: Mapping[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _no_remote(uri: str, /) -> Any:
    """The retriever: a schema from an MCP server must not make legato fetch URLs."""
    msg = f"remote reference {uri!r} is not fetched; inline it in the schema or in $defs"
    raise ValueError(msg)


def compile_schema(tool: str, schema: Mapping[str, JsonValue]) -> jsonschema_rs.Validator:
    """The compiled validator of a tool's parameters schema (cached by schema content).

    Raises:
        ToolDefinitionError: the schema is not valid JSON Schema, names an unknown
            meta-schema, or holds a reference that does not resolve inside it.
    """
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        msg = f"tool {tool!r}: the parameters schema is not JSON ({exc})"
        raise ToolDefinitionError(msg) from exc
    try:
        return _compiled(key)
    except _Invalid as exc:
        msg = f"tool {tool!r}: the parameters schema is not valid JSON Schema: {exc}"
        raise ToolDefinitionError(msg) from None


class _Invalid(Exception):
    """A schema that cannot be compiled (internal; becomes a `ToolDefinitionError`)."""


@lru_cache(maxsize=1024)
def _compiled(key: str) -> jsonschema_rs.Validator:
    import jsonschema_rs

    schema = json.loads(key)
    try:
        # Compile first: it refuses unknown meta-schemas without fetching them, so the
        # meta-schema check below only ever runs against a draft the library ships.
        # `format` is an annotation, as from draft 2019-09 on (older drafts leave asserting it
        # optional): the server's own reading of "uri" or "date-time" decides, not ours.
        validator = jsonschema_rs.validator_for(
            schema, retriever=_no_remote, validate_formats=False
        )
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        where = "/".join(str(p) for p in exc.instance_path)
        msg = f"{_first_line(exc.message)}{f' (at {where})' if where else ''}"
        raise _Invalid(msg) from None
    except (jsonschema_rs.ReferencingError, ValueError) as exc:
        raise _Invalid(_first_line(str(exc))) from None
    return validator


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid schema"


class SchemaArguments:
    """The validator of a raw-schema tool: model arguments in, keyword arguments out."""

    __slots__ = ("_name", "_optional_non_null", "_validator")

    def __init__(self, name: str, schema: Mapping[str, JsonValue]) -> None:
        self._name = name
        self._validator = compile_schema(name, schema)
        props = schema.get("properties")
        required = schema.get("required")
        needed = set(required) if isinstance(required, list) else set[JsonValue]()
        self._optional_non_null = frozenset(
            k
            for k, v in (props.items() if isinstance(props, dict) else ())
            if k not in needed and not _allows_null(v)
        )

    def __call__(self, arguments: JsonValue) -> dict[str, Any]:
        """Check the arguments; a null sent for an optional non-nullable property is dropped.

        Raises:
            ToolArgumentsInvalid: one line per problem, e.g. `unit: must be one of 'C', 'F'`.
        """
        if not isinstance(arguments, dict):
            raise ToolArgumentsInvalid(self._name, ["arguments: expected a JSON object"])
        if self._optional_non_null:
            arguments = {
                k: v
                for k, v in arguments.items()
                if not (v is None and k in self._optional_non_null)
            }
        if not self._validator.is_valid(arguments):
            problems = [line for e in self._validator.iter_errors(arguments) for line in _lines(e)]
            raise ToolArgumentsInvalid(self._name, list(dict.fromkeys(problems)))
        return dict(arguments)


def _allows_null(schema: JsonValue) -> bool:
    """Whether a property schema admits null (unknown shapes are given the benefit of the doubt)."""
    if not isinstance(schema, dict) or not schema:
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    options = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(options, list):
        return any(_allows_null(o) for o in options)
    return kind is None and "$ref" not in schema and "enum" not in schema and "const" not in schema


# -- violations as one line each ---------------------------------------------------------------


def _lines(error: jsonschema_rs.ValidationError) -> list[str]:
    import jsonschema_rs

    kinds = jsonschema_rs.ValidationErrorKind
    path = list(error.instance_path)
    kind = error.kind
    if isinstance(kind, kinds.Required):
        return [f"{_where(path + [kind.property])}: missing required {_noun(path, kind.property)}"]
    if isinstance(kind, kinds.AdditionalProperties | kinds.UnevaluatedProperties):
        return [f"{_where(path + [k])}: unexpected {_noun(path, k)}" for k in kind.unexpected]
    if isinstance(kind, kinds.AnyOf | kinds.OneOfNotValid):
        return _branches(path, error.instance, kind.context)
    return [f"{_where(path)}: {_describe(error)}"]


def _describe(error: jsonschema_rs.ValidationError) -> str:
    import jsonschema_rs

    kinds = jsonschema_rs.ValidationErrorKind
    kind, got = error.kind, _short(error.instance)
    text: str
    match kind:
        case kinds.Type(types=types):
            text = f"expected {' or '.join(_TYPE_NAMES.get(t, t) for t in types)}, got {got}"
        case kinds.Enum(options=options):
            text = _one_of(options)
        case kinds.Constant(expected_value=value):
            text = f"must be {_short(value)}"
        case kinds.Minimum(limit=limit):
            text = f"must be >= {limit}, got {got}"
        case kinds.Maximum(limit=limit):
            text = f"must be <= {limit}, got {got}"
        case kinds.ExclusiveMinimum(limit=limit):
            text = f"must be > {limit}, got {got}"
        case kinds.ExclusiveMaximum(limit=limit):
            text = f"must be < {limit}, got {got}"
        case kinds.MinLength(limit=limit):
            text = f"must be at least {limit} characters long, got {got}"
        case kinds.MaxLength(limit=limit):
            text = f"must be at most {limit} characters long, got {got}"
        case kinds.MinItems(limit=limit):
            text = f"must have at least {limit} items"
        case kinds.MaxItems(limit=limit):
            text = f"must have at most {limit} items"
        case kinds.Pattern(pattern=pattern):
            text = f"must match the pattern {pattern!r}, got {got}"
        case kinds.OneOfMultipleValid():
            text = f"matches more than one of the allowed shapes, got {got}"
        case _:
            text = f"{_first_line(error.message)}"
    return text


def _branches(
    path: list[str | int],
    instance: object,
    branches: Sequence[Sequence[jsonschema_rs.ValidationError]],
) -> list[str]:
    """Why a value matched none of `anyOf`/`oneOf`: merged types, or the closest branch."""
    import jsonschema_rs

    kinds = jsonschema_rs.ValidationErrorKind

    def wrong_type(errors: Sequence[jsonschema_rs.ValidationError]) -> bool:
        return all(
            isinstance(e.kind, kinds.Type | kinds.Enum | kinds.Constant)
            and list(e.instance_path) == path
            for e in errors
        )

    closer = [b for b in branches if b and not wrong_type(b)]
    if closer:
        best = min(closer, key=len)
        return [line for e in best for line in _lines(e)]
    expected: list[str] = []
    for branch in branches:
        for e in branch:
            kind = e.kind
            if isinstance(kind, kinds.Type):
                expected += [_TYPE_NAMES.get(t, t) for t in kind.types]
            elif isinstance(kind, kinds.Enum):
                expected += [_short(o) for o in kind.options]
            elif isinstance(kind, kinds.Constant):
                expected.append(_short(kind.expected_value))
    shown = " or ".join(dict.fromkeys(expected)) or "one of the allowed shapes"
    return [f"{_where(path)}: expected {shown}, got {_short(instance)}"]


def _where(path: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in path) or "arguments"


def _noun(parent: Sequence[str | int], _name: str) -> str:
    return "field" if parent else "argument"


def _one_of(options: Sequence[object]) -> str:
    shown = [_short(o) for o in options]
    return f"must be {shown[0]}" if len(shown) == 1 else f"must be one of {', '.join(shown)}"


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
