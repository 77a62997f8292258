"""Tool schemas from signatures, type hints and docstrings.

`function_schema` reads a function once, at definition time, and returns a `FunctionSchema`:
the tool description, the neutral JSON schema of its arguments, the parameter that receives
the `RunContext` (found by type, never by name), and a validator built from a pydantic model
made with public APIs only (`create_model`). Validation errors become one short line per
problem, in the vocabulary of BFCL's checker: missing, unexpected, wrong type, wrong value.

The schema is the neutral form; providers rewrite it at the wire (`legato.models.dialects`).
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Annotated, Any, Literal, TypeAlias, get_args, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticUndefinedAnnotation, PydanticUserError
from pydantic_core import ErrorDetails

from legato._values import value_class
from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import JsonValue
from legato.tools._context import RunContext

__all__ = ["DocstringFormat", "FunctionSchema", "function_schema"]

DocstringFormat: TypeAlias = Literal["auto", "google", "numpy", "sphinx"]
"""Docstring style to parse; `auto` picks whichever style yields the most structure."""

_STYLES: Mapping[DocstringFormat, str] = {
    "auto": "AUTO",
    "google": "GOOGLE",
    "numpy": "NUMPYDOC",
    "sphinx": "REST",
}
"""docstring_parser's style names; the parser is imported on first use, not with legato."""

_CONFIG = ConfigDict(extra="forbid")
_ANNOTATED: Any = Annotated  # subscripted with runtime types below
_SCHEMA_ERRORS = (PydanticUserError, PydanticUndefinedAnnotation)
_HINT_ERRORS = (NameError, TypeError, SyntaxError, AttributeError)


@value_class
class FunctionSchema:
    """What a function looks like as a tool: description, argument schema and validator."""

    name: str
    """The tool name, used in error messages."""
    description: str
    """Summary and long description from the docstring (sections such as Args removed)."""
    parameters: dict[str, JsonValue]
    """Neutral JSON schema of the arguments object (no `title` keys; may hold `$defs`)."""
    context_parameter: str | None = None
    """The parameter typed `RunContext[...]`, left out of `parameters`."""
    _model: type[BaseModel] = field(repr=False, compare=False)
    _fields: tuple[tuple[str, str], ...] = field(repr=False, compare=False)
    """(model field, parameter name) pairs, in signature order."""
    _nulls_to_drop: bool = field(default=False, repr=False, compare=False)
    """Some optional property does not accept null, so a null sent for it means "not given"."""

    def validate(self, arguments: JsonValue) -> dict[str, Any]:
        """Check the model's arguments and return the keyword arguments to call the function with.

        Values are converted by pydantic (nested models, dataclasses, enums, dates become real
        instances) and defaults are filled in. A null sent for an optional parameter or field
        that does not accept null counts as "not given", so its default applies (OpenAI strict
        mode makes every optional property nullable and the model sends null for it).

        Raises:
            ToolArgumentsInvalid: one problem per line, e.g. `city: missing required argument`.
        """
        if not isinstance(arguments, dict):
            problem = f"arguments: expected a JSON object, got {_short(arguments)}"
            raise ToolArgumentsInvalid(self.name, [problem])
        if self._nulls_to_drop:
            arguments = _drop_nulls(arguments, self.parameters, self.parameters.get("$defs"))
        try:
            model = self._model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsInvalid(self.name, _problems(exc, arguments)) from exc
        return {param: getattr(model, attr) for attr, param in self._fields}


def function_schema(
    fn: Callable[..., Any],
    *,
    name: str,
    docstring_format: DocstringFormat = "auto",
    skip_first: bool = False,
) -> FunctionSchema:
    """Build the schema and validator of a tool from a function.

    Args:
        fn: The function (sync or async), bound method or callable object.
        name: The tool name, used in error messages.
        docstring_format: Docstring style; `auto` detects Google, NumPy or Sphinx.
        skip_first: Leave out the first parameter (`self` of a method read from its class).

    Raises:
        ToolDefinitionError: the function cannot be a tool; the message names the parameter.
    """
    params = _parameters(fn, name, skip_first=skip_first)
    hints = _type_hints(fn, name, params)
    doc = _parse_docstring(fn, name, docstring_format)
    context_parameter: str | None = None
    fields: dict[str, Any] = {}
    pairs: list[tuple[str, str]] = []
    for index, param in enumerate(params):
        hint = hints.get(param.name, param.annotation)
        if is_run_context(hint):
            if context_parameter is not None:
                msg = (
                    f"tool {name!r}: parameters {context_parameter!r} and {param.name!r} are both "
                    "RunContext; a tool takes at most one"
                )
                raise ToolDefinitionError(msg)
            context_parameter = param.name
            continue
        attr = f"p{index}"
        fields[attr] = _field(param, hint, doc.params.get(param.name))
        pairs.append((attr, param.name))
    model, parameters = _build(name, fields, {p: hints.get(p) for _, p in pairs})
    return FunctionSchema(
        name=name,
        description=doc.description,
        parameters=parameters,
        context_parameter=context_parameter,
        _model=model,
        _fields=tuple(pairs),
        _nulls_to_drop=_has_droppable_nulls(parameters, parameters.get("$defs")),
    )


# -- reading the function ------------------------------------------------------------------------


def _parameters(fn: Callable[..., Any], tool: str, *, skip_first: bool) -> list[inspect.Parameter]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        msg = f"tool {tool!r}: cannot read the signature of {fn!r}"
        raise ToolDefinitionError(msg) from exc
    params = list(signature.parameters.values())[1 if skip_first else 0 :]
    where = f"tool {tool!r} ({_qualname(fn)})"
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            msg = f"{where}: parameter {star}{p.name} is not allowed; tools take named parameters"
            raise ToolDefinitionError(msg)
        if p.kind is p.POSITIONAL_ONLY:
            msg = f"{where}: parameter {p.name!r} is positional-only; tools are called by keyword"
            raise ToolDefinitionError(msg)
        if p.annotation is p.empty:
            msg = f"{where}: parameter {p.name!r} has no type annotation"
            raise ToolDefinitionError(msg)
    return params


def _qualname(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def _type_hints(
    fn: Callable[..., Any], tool: str, params: Sequence[inspect.Parameter]
) -> dict[str, Any]:
    """Resolve the parameters' hints (string annotations included) with `get_type_hints`."""
    target: Any = fn if inspect.isroutine(fn) else type(fn).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except _HINT_ERRORS:
        pass  # find the culprit below; the return annotation alone may be unresolvable
    annotations: dict[str, Any] = dict(getattr(target, "__annotations__", {}))
    globalns: dict[str, Any] | None = getattr(target, "__globals__", None)
    hints: dict[str, Any] = {}
    for p in params:
        shim = types.SimpleNamespace(__annotations__={p.name: annotations.get(p.name)})
        try:
            hints.update(typing.get_type_hints(shim, globalns=globalns, include_extras=True))
        except _HINT_ERRORS as exc:
            msg = (
                f"tool {tool!r} ({_qualname(fn)}): cannot resolve the type of parameter "
                f"{p.name!r} ({annotations.get(p.name)!r}): {exc}"
            )
            raise ToolDefinitionError(msg) from exc
    return hints


def is_run_context(hint: Any) -> bool:
    """Whether a type hint is `RunContext` (or `RunContext[...]`, or it `Annotated`)."""
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    target = get_origin(hint) or hint
    return isinstance(target, type) and issubclass(target, RunContext)


@value_class(kw_only=False)
class _Doc:
    description: str
    params: Mapping[str, str]


def _parse_docstring(fn: Callable[..., Any], tool: str, style: DocstringFormat) -> _Doc:
    text = inspect.getdoc(fn)
    if not text:
        return _Doc("", {})
    import docstring_parser

    try:
        parsed = docstring_parser.parse(text, style=docstring_parser.DocstringStyle[_STYLES[style]])
    except docstring_parser.ParseError as exc:
        if style == "auto":
            return _Doc(text, {})
        msg = f"tool {tool!r} ({_qualname(fn)}): cannot parse the {style} docstring: {exc}"
        raise ToolDefinitionError(msg) from exc
    params = {p.arg_name: _reflow(p.description) for p in parsed.params if p.description}
    return _Doc((parsed.description or "").strip(), params)


def _reflow(text: str) -> str:
    """Join wrapped lines; keep blank-line paragraph breaks."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


# -- building the model and the schema -----------------------------------------------------------


def _field(param: inspect.Parameter, hint: Any, doc: str | None) -> tuple[Any, Any]:
    """`(type, default)` for `create_model`; the parameter name is the field's alias.

    Aliases let any parameter name through (`schema`, `json`, `model_config`, `_x`) without
    clashing with `BaseModel` attributes. A docstring description is added only when the
    annotation or a `Field(...)` default carries none, so an explicit one wins.
    """
    from pydantic import Field  # pydantic.fields: loaded with the first tool, not at import

    options: dict[str, Any] = {"alias": param.name}
    if doc and not _has_description(hint, param.default):
        options["description"] = doc
    default = ... if param.default is param.empty else param.default
    return _ANNOTATED[hint, Field(**options)], default


def _has_description(hint: Any, default: Any) -> bool:
    from pydantic.fields import FieldInfo

    if isinstance(default, FieldInfo) and default.description:
        return True
    if get_origin(hint) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in get_args(hint)[1:])


def _build(
    tool: str, fields: dict[str, Any], hints: Mapping[str, Any]
) -> tuple[type[BaseModel], dict[str, JsonValue]]:
    try:
        model = create_model(f"{tool}_arguments", __config__=_CONFIG, **fields)
        raw = model.model_json_schema()
    except _SCHEMA_ERRORS as exc:
        raise ToolDefinitionError(_blame(tool, hints, exc)) from exc
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": raw.get("properties", {}),
        "required": raw.get("required", []),
        "additionalProperties": False,
    }
    if "$defs" in raw:
        schema["$defs"] = raw["$defs"]
    return model, _strip_titles(schema)


def _blame(tool: str, hints: Mapping[str, Any], error: Exception) -> str:
    """Name the parameter whose type pydantic cannot handle (only run on failure)."""
    for param, hint in hints.items():
        try:
            TypeAdapter(hint).json_schema()
        except _SCHEMA_ERRORS as exc:
            return (
                f"tool {tool!r}: parameter {param!r} has type {hint!r}, which cannot be "
                f"validated or described as JSON schema ({_first_line(exc)}); use a builtin "
                "type, a pydantic model, a dataclass or a TypedDict"
            )
    return f"tool {tool!r}: cannot build the argument schema ({_first_line(error)})"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_DATA_KEYWORDS = frozenset({"default", "enum", "const", "examples", "example"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _strip_titles(node: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Drop every `title` keyword; property and definition *names* are kept as they are."""
    out: dict[str, JsonValue] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYWORDS:
            out[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _strip_any(v) for k, v in value.items()}
        else:
            out[key] = _strip_any(value)
    return out


def _strip_any(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return _strip_titles(value)
    if isinstance(value, list):
        return [_strip_any(v) for v in value]
    return value


def _has_droppable_nulls(schema: JsonValue, defs: JsonValue) -> bool:
    """Whether any object in the schema has an optional property that rejects null."""
    if isinstance(schema, list):
        return any(_has_droppable_nulls(s, defs) for s in schema)
    if not isinstance(schema, dict):
        return False
    props = schema.get("properties")
    if isinstance(props, dict):
        required = _as_list(schema.get("required"))
        if any(k not in required and not _accepts_null(v, defs) for k, v in props.items()):
            return True
    return any(_has_droppable_nulls(v, defs) for v in schema.values())


def _drop_nulls(
    arguments: dict[str, JsonValue], schema: dict[str, JsonValue], defs: JsonValue
) -> dict[str, JsonValue]:
    """The arguments without nulls sent for optional properties that do not accept null."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return arguments
    required = _as_list(schema.get("required"))
    out: dict[str, JsonValue] = {}
    for key, value in arguments.items():
        prop = props.get(key)
        if prop is None:
            out[key] = value
        elif value is None and key not in required and not _accepts_null(prop, defs):
            continue
        else:
            out[key] = _drop_nulls_in(value, prop, defs)
    return out


def _drop_nulls_in(value: JsonValue, schema: JsonValue, defs: JsonValue) -> JsonValue:
    schema = _deref(schema, defs)
    if not isinstance(schema, dict):
        return value
    branches = [b for b in _as_list(schema.get("anyOf")) if not _is_null(b)]
    if len(branches) == 1:
        schema = _deref(branches[0], defs)
        if not isinstance(schema, dict):
            return value
    if isinstance(value, dict):
        return _drop_nulls(value, schema, defs)
    if isinstance(value, list):
        prefix = _as_list(schema.get("prefixItems"))
        items = schema.get("items")
        return [
            _drop_nulls_in(v, prefix[i] if i < len(prefix) else items, defs)
            for i, v in enumerate(value)
        ]
    return value


def _deref(schema: JsonValue, defs: JsonValue) -> JsonValue:
    for _ in range(32):  # a chain of plain aliases; recursion is not followed further
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or not isinstance(defs, dict):
            return schema
        schema = defs.get(ref.rsplit("/", 1)[-1])
    return schema


def _accepts_null(schema: JsonValue, defs: JsonValue) -> bool:
    schema = _deref(schema, defs)
    if not isinstance(schema, dict) or not schema:
        return True  # `{}` (Any), boolean schemas, unknown references
    kind = schema.get("type")
    if _is_null(schema) or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_accepts_null(b, defs) for b in _as_list(schema.get("anyOf")))


def _is_null(schema: JsonValue) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _as_list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


# -- validation errors as one line per problem ------------------------------------------------------

_EXPECTED: Mapping[str, str] = {
    **dict.fromkeys(("string_type", "string_unicode", "bytes_type"), "a string"),
    **dict.fromkeys(
        ("int_type", "int_parsing", "int_from_float", "int_parsing_size"), "an integer"
    ),
    **dict.fromkeys(("float_type", "float_parsing", "decimal_type", "decimal_parsing"), "a number"),
    **dict.fromkeys(("bool_type", "bool_parsing"), "a boolean"),
    **dict.fromkeys(("list_type", "tuple_type", "set_type", "frozen_set_type"), "an array"),
    **dict.fromkeys(
        ("dict_type", "model_type", "model_attributes_type", "dataclass_type", "mapping_type"),
        "an object",
    ),
    **dict.fromkeys(
        ("datetime_type", "datetime_parsing", "datetime_from_date_parsing"),
        "a date-time (ISO 8601, e.g. '2024-05-01T09:30:00Z')",
    ),
    **dict.fromkeys(
        ("date_type", "date_parsing", "date_from_datetime_parsing", "date_from_datetime_inexact"),
        "a date (YYYY-MM-DD)",
    ),
    **dict.fromkeys(("time_type", "time_parsing"), "a time (HH:MM[:SS])"),
    **dict.fromkeys(("uuid_type", "uuid_parsing"), "a UUID"),
    "none_required": "null",
}

_MISSING = frozenset({"missing", "missing_argument", "missing_keyword_only_argument"})
_UNEXPECTED = frozenset({"extra_forbidden", "unexpected_keyword_argument"})
_SHOULD = re.compile(r"^(?:Input|String|List|Tuple|Set|Dictionary|Value|Object|Data) should ")


def _problems(error: ValidationError, arguments: dict[str, JsonValue]) -> list[str]:
    """One line per problem; wrong-type errors at one path (union branches) are merged."""
    found: list[tuple[str, list[str] | None, str]] = []  # (path, expected, got-or-message)
    for err in error.errors(include_url=False):
        parts = _path(err["loc"], arguments, keep_last=err["type"] in _MISSING)
        path = ".".join(str(p) for p in parts) or "arguments"
        expected = _EXPECTED.get(err["type"])
        if expected is None:
            found.append((path, None, _message(err, parts)))
            continue
        got = _short(err["input"])
        same = [e for p, e, g in found if p == path and e is not None and g == got]
        if same:
            if expected not in same[0]:
                same[0].append(expected)
        else:
            found.append((path, [expected], got))
    lines = [
        f"{path}: expected {' or '.join(exp)}, got {text}" if exp else f"{path}: {text}"
        for path, exp, text in found
    ]
    return list(dict.fromkeys(lines))


def _path(
    loc: tuple[int | str, ...], arguments: dict[str, JsonValue], *, keep_last: bool
) -> list[int | str]:
    """The part of pydantic's `loc` that names places in the input (union branch tags dropped)."""
    parts: list[int | str] = []
    current: JsonValue = arguments
    for i, part in enumerate(loc):
        if isinstance(current, dict) and isinstance(part, str) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        elif not (keep_last and i == len(loc) - 1):
            continue  # a union member's tag such as 'int' or 'Address'
        parts.append(part)
    return parts


def _message(err: ErrorDetails, parts: Sequence[int | str]) -> str:
    kind = err["type"]
    noun = "item" if parts and isinstance(parts[-1], int) else "argument"
    if len(parts) > 1 and noun == "argument":
        noun = "field"
    if kind in _MISSING:
        return f"missing required {noun}"
    if kind in _UNEXPECTED:
        return f"unexpected {noun}"
    ctx = err.get("ctx") or {}
    if kind in ("enum", "literal_error") and "expected" in ctx:
        head, sep, tail = str(ctx["expected"]).rpartition(" or ")
        return f"must be one of {head}, {tail}" if sep else f"must be {tail}"
    text = err["msg"]
    if text.startswith("Value error, "):
        return text.removeprefix("Value error, ")
    text = _SHOULD.sub("must ", text)
    return f"{text[:1].lower()}{text[1:]}, got {_short(err['input'])}"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
