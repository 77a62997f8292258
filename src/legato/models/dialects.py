"""Schema dialects: pure rewrites of a tool's neutral JSON schema for one provider.

A tool keeps one neutral JSON schema (what `legato.tools.function_schema` generates, or what
an MCP server sent, unchanged). Providers accept different subsets of JSON Schema, so each
provider adapter rewrites the schema at the wire, through the dialect named in its
`ModelProfile.schema_dialect`:

- `json_schema`: unchanged (a deep copy).
- `openai_strict`: OpenAI's strict mode (structured outputs / `strict: true` tools).
- `anthropic`: standard JSON Schema, passed through.
- `gemini`: Gemini's OpenAPI-style subset (no `$ref`, no `additionalProperties`), for
  Gemini models whose profile does not take JSON Schema; those that do get the schema through
  `to_gemini_json_schema` (`parametersJsonSchema` / `responseJsonSchema`).

Every function returns a new dict and never mutates its input. A schema that a dialect cannot
express raises `ToolDefinitionError` naming the place in the schema. For OpenAI strict mode
the providers do not fail on it: `strict_or_plain` sends that one tool (or output schema)
without `strict`, with a warning logged once per tool.

The providers go through `wire_schema` and `wire_strict_or_plain`, which build a schema's
rewrite once per dialect and hand the same dict to every request after that (a tool's
schema is the same object from one request to the next); a schema changed in place since is
rewritten again. Those results are shared: read them, never change them.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeAlias, TypeVar, cast

from legato.exceptions import ToolDefinitionError
from legato.messages import JsonValue
from legato.models._base import SchemaDialect

__all__ = [
    "apply_dialect",
    "strict_or_plain",
    "strict_problem",
    "to_anthropic",
    "to_gemini",
    "to_gemini_json_schema",
    "to_json_schema",
    "to_openai_strict",
    "wire_schema",
    "wire_strict_or_plain",
]

logger = logging.getLogger("legato.models")

Schema: TypeAlias = dict[str, JsonValue]
_NULL: Schema = {"type": "null"}


def apply_dialect(schema: Mapping[str, JsonValue], dialect: SchemaDialect) -> Schema:
    """Rewrite `schema` for the provider dialect `dialect` (see the module docstring)."""
    return _DIALECTS[dialect](schema)


def to_json_schema(schema: Mapping[str, JsonValue]) -> Schema:
    """The schema unchanged (a deep copy), for providers that accept JSON Schema as is."""
    return copy.deepcopy(dict(schema))


def to_anthropic(schema: Mapping[str, JsonValue]) -> Schema:
    """Anthropic's `input_schema`: standard JSON Schema, passed through.

    Anthropic validates tool input against ordinary JSON Schema (`$ref`/`$defs`, `anyOf`,
    `additionalProperties`, formats and defaults all allowed), so nothing is dropped. The one
    requirement is an object at the top, so `"type": "object"` is added when missing (MCP
    servers sometimes leave it out).
    """
    out = copy.deepcopy(dict(schema))
    out.setdefault("type", "object")
    return out


# -- OpenAI strict ----------------------------------------------------------------------------------

_OPENAI_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "description",
        "$ref",
        "$defs",
        "definitions",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_OPENAI_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)


def to_openai_strict(schema: Mapping[str, JsonValue]) -> Schema:
    """OpenAI strict mode: every object closed and complete, optional values nullable.

    Strict mode compiles the schema into a grammar, so it accepts only a subset of JSON
    Schema and insists that objects list every property in `required`. The rewrite, for every
    object (nested ones and `$defs` included):

    - `required` lists all properties and `additionalProperties` is `false`;
    - a property that was optional becomes nullable (`anyOf [..., {"type": "null"}]`): the model
      sends `null` for "not given", and `FunctionSchema.validate` drops such nulls (at any
      depth) so the default applies;
    - keywords outside strict mode's subset are dropped (`default`, `title`, `minLength`,
      `uniqueItems`, formats it does not know, ...); legato's own validation still enforces
      them and sends the model a retry message;
    - `oneOf` becomes `anyOf`, a one-element `allOf` is merged, fixed-length tuples
      (`prefixItems`) become arrays of the union of their item types, and a `$ref` with
      sibling keywords is inlined; plain `$ref`/`$defs` are kept.

    Raises:
        ToolDefinitionError: a free-form object (a `dict[str, T]` field, `additionalProperties`
            given as a schema) has no strict equivalent; send the tool without `strict`.
    """
    root = copy.deepcopy(dict(schema))
    return _Strict(_definitions(root)).node(root, "", root=True)


def strict_problem(schema: Mapping[str, JsonValue]) -> str | None:
    """Why `schema` cannot be sent in OpenAI strict mode, or None if it can."""
    try:
        to_openai_strict(schema)
    except ToolDefinitionError as exc:
        return str(exc)
    return None


def strict_or_plain(
    name: str, schema: Mapping[str, JsonValue], *, plain: SchemaDialect = "json_schema"
) -> tuple[Schema, bool]:
    """`(schema, True)` in strict form, or `(schema, False)` in the `plain` dialect.

    A tool (or output schema) that asks for strict mode but holds something strict mode cannot
    express (a free-form dict) falls back to non-strict for that one tool, as other
    frameworks do, and a warning naming the tool and the place is logged once.
    """
    try:
        return to_openai_strict(schema), True
    except ToolDefinitionError as exc:
        _warn_not_strict(name, str(exc))
        return apply_dialect(schema, plain), False


@lru_cache(maxsize=512)
def _warn_not_strict(name: str, reason: str) -> None:
    logger.warning("%r is sent without strict mode: %s", name, reason)


# -- built once per schema and dialect ---------------------------------------------------------

T = TypeVar("T")
_Entry: TypeAlias = tuple[Mapping[str, JsonValue], Schema, object]
_BUILT: dict[tuple[int, str], _Entry] = {}
"""`(id(schema), what) -> (schema, a copy of it then, the rewrite)`. Holding the schema
keeps its id from being reused while the entry lives."""
_BUILT_LIMIT = 2048


def _unchanged(entry: _Entry, schema: Mapping[str, JsonValue]) -> bool:
    """Whether `entry` was built from this very schema, as it still is."""
    return entry[0] is schema and entry[1] == schema


def _built(what: str, schema: Mapping[str, JsonValue], build: Callable[[], T]) -> T:
    key = (id(schema), what)
    entry = _BUILT.get(key)
    if entry is not None and _unchanged(entry, schema):
        return cast(T, entry[2])
    value = build()
    if len(_BUILT) >= _BUILT_LIMIT:  # tools made per request: start over rather than grow
        _BUILT.clear()
    _BUILT[key] = (schema, copy.deepcopy(dict(schema)), value)
    return value


def wire_schema(schema: Mapping[str, JsonValue], dialect: SchemaDialect | str) -> Schema:
    """`apply_dialect(schema, dialect)`, built once and shared (never change the result).

    `dialect` may also be `"gemini_json_schema"` (`to_gemini_json_schema`).
    """
    if dialect == "gemini_json_schema":
        return _built(dialect, schema, lambda: to_gemini_json_schema(schema))
    known = cast(SchemaDialect, dialect)
    return _built(dialect, schema, lambda: apply_dialect(schema, known))


def wire_strict_or_plain(
    name: str, schema: Mapping[str, JsonValue], *, plain: SchemaDialect = "json_schema"
) -> tuple[Schema, bool]:
    """`strict_or_plain(name, schema, plain=plain)`, built once and shared (never change it)."""
    found: Any = _built(
        f"strict/{plain}/{name}", schema, lambda: strict_or_plain(name, schema, plain=plain)
    )
    return cast(tuple[Schema, bool], found)


class _Strict:
    def __init__(self, defs: Mapping[str, JsonValue]) -> None:
        self.defs = defs
        self.inlining: tuple[str, ...] = ()

    def node(self, schema: Schema, path: str, *, root: bool = False) -> Schema:
        schema = _simplify(schema)
        ref = schema.get("$ref")
        if isinstance(ref, str):
            siblings = {k: v for k, v in schema.items() if k != "$ref" and k in _OPENAI_KEYWORDS}
            if not siblings or ref in self.inlining:
                return {"$ref": ref}
            self.inlining += (ref,)
            try:
                return self.node({**_resolve(self.defs, ref), **siblings}, path)
            finally:
                self.inlining = self.inlining[:-1]
        out: Schema = {}
        for key, value in schema.items():
            if key not in _OPENAI_KEYWORDS:
                continue
            if key == "format" and value not in _OPENAI_FORMATS:
                continue
            out[key] = self.child(key, value, path)
        if _is_object(out) or root:
            self.close(out, path, root=root)
        return out

    def child(self, key: str, value: JsonValue, path: str) -> JsonValue:
        if key in ("$defs", "definitions") and isinstance(value, dict):
            return {k: self.sub(v, f"{key}.{k}") for k, v in value.items()}
        if key == "properties" and isinstance(value, dict):
            return {k: self.sub(v, _join(path, k)) for k, v in value.items()}
        if key == "items":
            return self.sub(value, _join(path, "items"))
        if key == "anyOf" and isinstance(value, list):
            return [self.sub(v, path) for v in value]
        return value

    def sub(self, value: JsonValue, path: str) -> JsonValue:
        return self.node(value, path) if isinstance(value, dict) else value

    def close(self, out: Schema, path: str, *, root: bool) -> None:
        extra = out.get("additionalProperties")
        # `properties: {}` without `additionalProperties: false` is a free-form dict too:
        # closing it would tell the model the value must be `{}`.
        free_form = not out.get("properties") and extra is not False and not root
        if free_form or (isinstance(extra, dict) and extra):
            where = path or "the top level"
            msg = (
                f"{where}: a free-form object (dict) has no OpenAI strict equivalent; "
                "use a model with named fields, or send the tool without strict"
            )
            raise ToolDefinitionError(msg)
        props = out.get("properties")
        props = props if isinstance(props, dict) else {}
        required = out.get("required")
        was_required = {r for r in _as_list(required) if isinstance(r, str)}
        out.setdefault("type", "object")
        out["properties"] = {k: v if k in was_required else _nullable(v) for k, v in props.items()}
        out["required"] = list(props)
        out["additionalProperties"] = False


def _nullable(schema: JsonValue) -> JsonValue:
    """`schema` or null; a description stays on the outside."""
    if not isinstance(schema, dict) or _accepts_null(schema):
        return schema
    inner = {k: v for k, v in schema.items() if k != "description"}
    branches = inner.get("anyOf")
    out: Schema = (
        {"anyOf": [*branches, _NULL]}
        if isinstance(branches, list) and len(inner) == 1
        else {"anyOf": [inner, dict(_NULL)]}
    )
    if "description" in schema:
        out["description"] = schema["description"]
    return out


# -- Gemini -----------------------------------------------------------------------------------------

_GEMINI_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
    }
)
_GEMINI_FORMATS: Mapping[str, frozenset[str]] = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}


def to_gemini(schema: Mapping[str, JsonValue]) -> Schema:
    """Gemini function declarations: the OpenAPI-3.0-style subset Gemini accepts.

    Gemini rejects `$ref`/`$defs`, `additionalProperties`, `$schema` and type lists, and
    refuses some keywords other providers accept. The rewrite:

    - every `$ref` is inlined from `$defs` and `$defs` is dropped; a recursive type cannot be
      inlined, so it raises `ToolDefinitionError` (legato refuses rather than silently cutting
      the type at some depth);
    - `anyOf`/type lists with `null` become `nullable: true`; `const` becomes a one-value
      `enum`; Gemini enums are strings only, so a numeric or boolean enum keeps its type and
      lists its values in the description instead;
    - `oneOf` becomes `anyOf`, a one-element `allOf` is merged, tuples become arrays;
      `exclusiveMinimum`/`exclusiveMaximum` of integers become `minimum`/`maximum`;
    - only formats Gemini accepts are kept (`enum`, `date-time` for strings; `float`, `double`,
      `int32`, `int64` for numbers); a dropped string format is noted in the description;
    - `required` keeps only names listed in `properties`; empty `properties`/`required` and
      every other keyword (`additionalProperties`, `title`, `default`, `$schema`, ...) are
      dropped.

    Type names stay lower-case JSON Schema names; SDKs that want `STRING` map them.

    Raises:
        ToolDefinitionError: a recursive type, a `$ref` that `$defs` does not define, or a
            free-form object (a dict field: Gemini refuses an OBJECT without properties).
    """
    root = copy.deepcopy(dict(schema))
    return _gemini(root, _definitions(root), (), "")


def _gemini(
    schema: Schema, defs: Mapping[str, JsonValue], stack: tuple[str, ...], path: str
) -> Schema:
    schema = _gemini_nullable(_simplify(schema))
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in stack:
            where = path or "the top level"
            msg = (
                f"{where}: {ref!r} refers to itself; Gemini accepts no $ref, so a recursive "
                "type cannot be sent to Gemini"
            )
            raise ToolDefinitionError(msg)
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        return _gemini({**_resolve(defs, ref), **siblings}, defs, (*stack, ref), path)
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]
    if path and _free_form(schema):
        msg = (
            f"{path}: a free-form object (dict) has no equivalent in Gemini's `parameters` "
            "schema (an OBJECT without properties is refused); send JSON Schema instead "
            "(ModelProfile.native_json_schema) or use a model with named fields"
        )
        raise ToolDefinitionError(msg)
    out: Schema = {}
    for key, value in schema.items():
        if key not in _GEMINI_KEYWORDS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                k: _gemini(v, defs, stack, _join(path, k)) if isinstance(v, dict) else v
                for k, v in value.items()
            }
        elif key == "items" and isinstance(value, dict):
            out[key] = _gemini(value, defs, stack, _join(path, "items"))
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_gemini(v, defs, stack, path) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return _gemini_tidy(out)


def _free_form(schema: Schema) -> bool:
    """An object schema whose keys are not named (a dict), unless explicitly closed."""
    if schema.get("type") != "object" or schema.get("properties"):
        return False
    return schema.get("additionalProperties") is not False


def to_gemini_json_schema(schema: Mapping[str, JsonValue]) -> Schema:
    """Gemini's `parametersJsonSchema` / `responseJsonSchema`: JSON Schema, `$ref` included.

    Those fields take standard JSON Schema (`$ref`/`$defs`, recursion, `additionalProperties`,
    type lists), so the schema goes as given, less its `$schema` URI, with a top-level
    `"type": "object"` added when missing.
    """
    out = copy.deepcopy(dict(schema))
    out.pop("$schema", None)
    out.setdefault("type", "object")
    return out


def _gemini_nullable(schema: Schema) -> Schema:
    """Turn `null` in a type list or an `anyOf` into `nullable: true`."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) < len(kind):
            schema["nullable"] = True
        if len(kinds) == 1:
            schema["type"] = kinds[0]
        else:
            del schema["type"]
            schema["anyOf"] = [*_as_list(schema.get("anyOf")), *({"type": k} for k in kinds)]
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        rest = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(rest) < len(branches):
            schema["nullable"] = True
        if len(rest) == 1 and isinstance(rest[0], dict):
            del schema["anyOf"]
            return _gemini_nullable({**_simplify(rest[0]), **schema})
        schema["anyOf"] = rest
    return schema


def _gemini_tidy(out: Schema) -> Schema:
    """Formats, enums, bounds and object keywords Gemini would refuse."""
    kind = out.get("type")
    if kind is None and "properties" in out:
        out["type"] = kind = "object"
    enum = out.get("enum")
    if isinstance(enum, list):
        kind = _gemini_enum(out, enum)
    fmt = out.get("format")
    if fmt is not None and fmt not in _GEMINI_FORMATS.get(str(kind), frozenset()):
        del out["format"]
        if kind == "string":
            _note(out, f"Format: {fmt}.")
    if kind != "object":
        out.pop("properties", None)
        out.pop("required", None)
    props = out.get("properties")
    required = out.get("required")
    if isinstance(required, list):
        names = props if isinstance(props, dict) else {}
        kept: list[JsonValue] = [r for r in required if isinstance(r, str) and r in names]
        out["required"] = kept
    for key in ("properties", "required"):
        if out.get(key) in ({}, []):
            del out[key]
    return out


def _gemini_enum(out: Schema, enum: list[JsonValue]) -> JsonValue:
    """Gemini enums are strings only.

    A numeric or boolean enum keeps its type and moves the allowed values into the description
    (turning them into strings would make the model send `"1"` where the tool expects `1`).
    """
    values: list[JsonValue] = [v for v in enum if v is not None]
    if len(values) < len(enum):
        out["nullable"] = True
    kind = out.get("type")
    if all(isinstance(v, str) for v in values):
        out["enum"] = values
        out["type"] = "string"
        return "string"
    if kind in ("integer", "number", "boolean"):
        del out["enum"]
        _note(out, "Allowed values: " + ", ".join(json.dumps(v) for v in values) + ".")
        return kind
    out["enum"] = [v if isinstance(v, str) else json.dumps(v) for v in values]
    out["type"] = "string"
    return "string"


def _note(out: Schema, note: str) -> None:
    desc = out.get("description")
    out["description"] = f"{desc} {note}" if isinstance(desc, str) and desc else note


# -- shared -----------------------------------------------------------------------------------------


def _simplify(schema: Schema) -> Schema:
    """Rewrites the OpenAI and Gemini dialects share.

    `oneOf` becomes `anyOf`, `allOf` parts are merged, tuples become arrays, and integer
    exclusive bounds become inclusive ones.
    """
    schema = dict(schema)
    if "oneOf" in schema:
        schema["anyOf"] = [*_as_list(schema.get("anyOf")), *_as_list(schema.pop("oneOf"))]
        schema.pop("discriminator", None)
    parts = schema.get("allOf")
    if isinstance(parts, list) and all(isinstance(p, dict) for p in parts):
        del schema["allOf"]
        merged: Schema = {}
        for part in parts:
            if isinstance(part, dict):
                merged.update(part)
        schema = {**merged, **schema}
    prefix = schema.pop("prefixItems", None)
    if isinstance(prefix, list) and "items" not in schema:
        unique = list({repr(p): p for p in prefix}.values())
        schema["items"] = unique[0] if len(unique) == 1 else {"anyOf": unique}
        schema.setdefault("type", "array")
    if schema.get("type") == "integer":
        for exclusive, inclusive, step in (
            ("exclusiveMinimum", "minimum", 1),
            ("exclusiveMaximum", "maximum", -1),
        ):
            bound = schema.get(exclusive)
            if isinstance(bound, int) and not isinstance(bound, bool) and inclusive not in schema:
                del schema[exclusive]
                schema[inclusive] = bound + step
    return schema


def _definitions(root: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    defs: dict[str, JsonValue] = {}
    for key in ("definitions", "$defs"):
        table = root.get(key)
        if isinstance(table, dict):
            defs.update({f"#/{key}/{name}": value for name, value in table.items()})
    return defs


def _resolve(defs: Mapping[str, JsonValue], ref: str) -> Schema:
    target = defs.get(ref)
    if not isinstance(target, dict):
        msg = f"schema reference {ref!r} is not defined in $defs"
        raise ToolDefinitionError(msg)
    return copy.deepcopy(target)


def _is_object(schema: Mapping[str, JsonValue]) -> bool:
    kind = schema.get("type")
    return (
        kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema
    )


def _accepts_null(schema: Mapping[str, JsonValue]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches = schema.get("anyOf")
    return isinstance(branches, list) and any(
        isinstance(b, dict) and _accepts_null(b) for b in branches
    )


def _as_list(value: JsonValue) -> list[JsonValue]:
    return list(value) if isinstance(value, list) else []


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_DIALECTS: Mapping[SchemaDialect, Callable[[Mapping[str, JsonValue]], Schema]] = {
    "json_schema": to_json_schema,
    "openai_strict": to_openai_strict,
    "anthropic": to_anthropic,
    "gemini": to_gemini,
}
