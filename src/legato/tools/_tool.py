"""`Tool`, the `@tool` decorator, and building tools from raw JSON schemas."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, overload

from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import JsonValue, ToolDefinition
from legato.tools._context import RunContext
from legato.tools._contract import Postcondition, Precondition, ToolContract, conditions
from legato.tools._schema import DocstringFormat, function_schema

__all__ = ["SideEffects", "Tool", "tool"]

SideEffects: TypeAlias = Literal["none", "idempotent", "irreversible"]
"""What calling a tool does to the world: `none` (read-only), `idempotent` (safe to
repeat), `irreversible` (must happen at most once)."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Validator = Callable[[JsonValue], dict[str, Any]]


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        msg = (
            f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-' "
            "(the characters every provider accepts)"
        )
        raise ToolDefinitionError(msg)
    return name


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A callable the model may use: a name, a description, a JSON schema and a function.

    Tools are immutable values; the same tool can run concurrently with itself.
    Build one with `@tool`, `Tool.from_function` or `Tool.from_schema`.
    """

    name: str
    description: str
    parameters: dict[str, JsonValue]
    """JSON schema of the arguments object, as generated or as given (never rewritten)."""
    function: Callable[..., Any] = field(repr=False)
    validator: Validator = field(repr=False)
    """Turns the model's arguments into keyword arguments, or raises `ToolArgumentsInvalid`."""
    context_parameter: str | None = None
    """The parameter that receives the `RunContext`, if any."""
    side_effects: SideEffects = "none"
    timeout: float | None = None
    """Seconds a call may take before it fails with a timeout error the model sees."""
    max_retries: int = 1
    """Consecutive failed calls (reset by a success) allowed before the run stops with
    `ToolRetriesExceeded`."""
    sequential: bool = False
    """Never run concurrently with other calls of the same response."""
    strict: bool | None = None
    """Ask providers for strict schema adherence."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    contract: ToolContract | None = None
    """Pre/postconditions over the run's verified state (see `legato.contracts`)."""

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.max_retries < 0:
            msg = f"tool {self.name!r}: max_retries must be >= 0"
            raise ToolDefinitionError(msg)
        if self.timeout is not None and self.timeout <= 0:
            msg = f"tool {self.name!r}: timeout must be positive"
            raise ToolDefinitionError(msg)

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        docstring_format: DocstringFormat = "auto",
        side_effects: SideEffects = "none",
        timeout: float | None = None,
        max_retries: int = 1,
        sequential: bool = False,
        strict: bool | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        skip_self: bool = False,
        contract: ToolContract | None = None,
    ) -> Tool:
        """Build a tool from a function's signature, type hints and docstring.

        `skip_self` leaves the first parameter out of the schema: the function is a method
        read from its class, and the tool binds to an instance later (see `__get__`).
        """
        tool_name = _check_name(name or getattr(function, "__name__", ""))
        schema = function_schema(
            function, name=tool_name, docstring_format=docstring_format, skip_first=skip_self
        )
        return cls(
            name=tool_name,
            description=description if description is not None else schema.description,
            parameters=schema.parameters,
            function=function,
            validator=schema.validate,
            context_parameter=schema.context_parameter,
            side_effects=side_effects,
            timeout=timeout,
            max_retries=max_retries,
            sequential=sequential,
            strict=strict,
            metadata=dict(metadata or {}),
            contract=contract,
        )

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str,
        parameters: Mapping[str, JsonValue],
        function: Callable[..., Any],
        side_effects: SideEffects = "none",
        timeout: float | None = None,
        max_retries: int = 1,
        sequential: bool = False,
        takes_context: bool = False,
        strict: bool | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        contract: ToolContract | None = None,
    ) -> Tool:
        """Build a tool from a raw JSON schema and a callable (MCP servers, catalogs).

        The callable receives the arguments as keyword arguments (plus `ctx=` when
        `takes_context`). Arguments are checked against the schema's top-level `required`
        and `properties` (and `additionalProperties: false`) before the call; deeper
        validation is the callee's. A null sent for an optional property whose schema does
        not allow null (strict providers send those) is dropped, as if omitted.
        """
        params = dict(parameters)
        if params.get("type", "object") != "object":
            msg = f"tool {name!r}: the parameters schema must describe an object"
            raise ToolDefinitionError(msg)
        return cls(
            name=name,
            description=description,
            parameters=params,
            function=function,
            validator=_SchemaValidator(name, params),
            context_parameter="ctx" if takes_context else None,
            side_effects=side_effects,
            timeout=timeout,
            max_retries=max_retries,
            sequential=sequential,
            strict=strict,
            metadata=dict(metadata or {}),
            contract=contract,
        )

    # -- use -----------------------------------------------------------------------------------------

    @property
    def definition(self) -> ToolDefinition:
        """The neutral definition sent to models."""
        return ToolDefinition(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            strict=self.strict,
        )

    def validate(self, arguments: JsonValue) -> dict[str, Any]:
        """Check the model's arguments; return keyword arguments or raise `ToolArgumentsInvalid`."""
        if arguments is None:
            raise ToolArgumentsInvalid(self.name, ["arguments: not valid JSON"])
        return self.validator(arguments)

    async def invoke(self, arguments: Mapping[str, Any], ctx: RunContext[Any]) -> Any:
        """Call the function with validated arguments; sync functions run in a worker thread."""
        kwargs = dict(arguments)
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = ctx
        if _is_async(self.function):
            return await self.function(**kwargs)
        result = await asyncio.to_thread(self.function, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    def replace(self, **changes: Any) -> Tool:
        """A copy with some fields changed (name, description, side_effects, ...)."""
        return replace(self, **changes)

    def __get__(self, instance: object, owner: type | None = None) -> Tool:
        """Bind a tool defined on a class to the instance it is read from."""
        if instance is None or not _is_method_tool(self):
            return self
        bound = self.function.__get__(instance, owner)
        return replace(self, function=bound, metadata={**self.metadata, "_method": False})


def _is_method_tool(t: Tool) -> bool:
    return bool(t.metadata.get("_method"))


def _is_async(function: Callable[..., Any]) -> bool:
    target = getattr(function, "__func__", function)
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


class _SchemaValidator:
    """Top-level checks for tools whose schema came from elsewhere."""

    __slots__ = ("_additional", "_name", "_properties", "_required")

    def __init__(self, name: str, schema: Mapping[str, JsonValue]) -> None:
        self._name = name
        props = schema.get("properties")
        self._properties: dict[str, JsonValue] = dict(props) if isinstance(props, dict) else {}
        required = schema.get("required")
        self._required = (
            [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        )
        self._additional = schema.get("additionalProperties", True) is not False

    def __call__(self, arguments: JsonValue) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ToolArgumentsInvalid(self._name, ["arguments: expected a JSON object"])
        problems = [f"{r}: missing required argument" for r in self._required if r not in arguments]
        if not self._additional:
            problems += [
                f"{k}: unexpected argument" for k in arguments if k not in self._properties
            ]
        if problems:
            raise ToolArgumentsInvalid(self._name, problems)
        return {
            k: v
            for k, v in arguments.items()
            if not (
                v is None and k not in self._required and not _allows_null(self._properties.get(k))
            )
        }


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


ToolFunction = Callable[..., Any]


@overload
def tool(function: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    docstring_format: DocstringFormat = "auto",
    side_effects: SideEffects = "none",
    timeout: float | None = None,
    max_retries: int = 1,
    sequential: bool = False,
    strict: bool | None = None,
    requires: Precondition | Iterable[Precondition] | None = None,
    ensures: Postcondition | Iterable[Postcondition] | None = None,
    reads: Iterable[str] | None = None,
    writes: Iterable[str] | None = None,
    unchecked_writes: bool = False,
    contract: ToolContract | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    docstring_format: DocstringFormat = "auto",
    side_effects: SideEffects = "none",
    timeout: float | None = None,
    max_retries: int = 1,
    sequential: bool = False,
    strict: bool | None = None,
    requires: Precondition | Iterable[Precondition] | None = None,
    ensures: Postcondition | Iterable[Postcondition] | None = None,
    reads: Iterable[str] | None = None,
    writes: Iterable[str] | None = None,
    unchecked_writes: bool = False,
    contract: ToolContract | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a function (sync or async) or a method into a `Tool`.

    Use bare (`@tool`) or with options (`@tool(side_effects="irreversible", timeout=5)`).
    On a method defined in a class body, the tool binds to the instance it is read from.
    `requires`, `ensures`, `reads` and `writes` give the tool a contract over the run's
    verified state (or pass a ready `contract`; see `legato.contracts`). A tool that
    `writes` keys needs a postcondition (`ensures`) to decide what may be committed, or an
    explicit `unchecked_writes=True` to commit any value of the right type.

    Raises:
        ToolDefinitionError: `writes` without `ensures` or `unchecked_writes=True`, or
            both `contract` and the contract keywords.
    """
    spec = conditions(
        requires=requires,
        ensures=ensures,
        reads=reads,
        writes=writes,
        unchecked_writes=unchecked_writes,
    )
    if spec is not None and contract is not None:
        msg = (
            "give either contract= or requires=/ensures=/reads=/writes=/unchecked_writes=, not both"
        )
        raise ToolDefinitionError(msg)
    tool_contract = contract if contract is not None else spec

    def build(fn: ToolFunction) -> Tool:
        method = _defined_in_class(fn)
        return Tool.from_function(
            fn,
            name=name or fn.__name__,
            description=description,
            docstring_format=docstring_format,
            side_effects=side_effects,
            timeout=timeout,
            max_retries=max_retries,
            sequential=sequential,
            strict=strict,
            metadata={"_method": True} if method else None,
            skip_self=method,
            contract=tool_contract,
        )

    if function is not None:
        return build(function)
    return build


def _defined_in_class(fn: Callable[..., Any]) -> bool:
    """A function whose qualified name puts it directly inside a class body."""
    qualname = getattr(fn, "__qualname__", "")
    owner, _, _ = qualname.rpartition(".")
    return bool(owner) and not owner.endswith("<locals>")
