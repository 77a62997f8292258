"""`Tool`, the `@tool` decorator, and building tools from raw JSON schemas."""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, replace
from types import FunctionType
from typing import Any, Literal, TypeAlias, cast, get_args, get_type_hints, overload

from legato._values import value_class
from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import JsonValue, ToolDefinition
from legato.tools._context import RunContext
from legato.tools._contract import Postcondition, Precondition, ToolContract, conditions
from legato.tools._isolation import Isolation, call_in_process, call_in_thread, check_isolatable
from legato.tools._reconcile import Reconciler
from legato.tools._schema import DocstringFormat, function_schema, is_run_context
from legato.tools._validate import SchemaArguments

__all__ = ["SideEffects", "SinkKind", "Tool", "tool"]

SideEffects: TypeAlias = Literal["none", "idempotent", "irreversible"]
"""What calling a tool does to the world: `none` (read-only), `idempotent` (safe to
repeat), `irreversible` (must happen at most once)."""

SinkKind: TypeAlias = Literal[
    "recipient", "account", "url", "path", "command", "credential", "id", "time", "text"
]
"""What a sink parameter decides: who a message or payment reaches (`recipient`,
`account`), where data goes (`url`), what is written or deleted (`path`), what runs
(`command`), a secret that is set (`credential`), which object is changed or deleted
(`id`: matched only against id fields of returned objects and the user's words), when
an effect lands (`time`: the day of a calendar event or a booking, matched as a date in
any written form), or any other value (`text`)."""

SINK_KINDS: frozenset[str] = frozenset(get_args(SinkKind))

_SIDE_EFFECTS: tuple[str, ...] = get_args(SideEffects)

logger = logging.getLogger("legato.tools")

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


@value_class
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
    """The parameter that receives the `RunContext`, if any (found by its type)."""
    context_positional: bool = False
    """The context goes in as the first positional argument, so that no argument the model
    sends (a schema property named `ctx`, say) can take its place or be dropped for it."""
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
    defer_loading: bool = False
    """Loaded by the provider's own tool search (see `ToolCatalog(native=True)`)."""
    search_fallback: bool = False
    """legato's catalog search tool, for providers without their own tool search."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    contract: ToolContract | None = None
    """Pre/postconditions over the run's verified state (see `legato.contracts`)."""
    reconcile: Reconciler | None = field(default=None, repr=False)
    """For an irreversible tool: finds out whether a call whose outcome a crash left unknown
    took effect (`legato.tools.Reconciled`); without it, a person is asked."""
    sinks: Mapping[str, SinkKind] = field(default_factory=lambda: {})
    """Parameters whose values decide who or what a side effect reaches, by kind; the
    injection defence checks where their values came from (`legato.injection`)."""
    trusted_arguments: bool = False
    """The tool's arguments cannot steer its effect anywhere harmful (it declares no sinks
    on purpose); without this, a side-effecting tool with no sinks is refused when the
    injection defence is on."""
    isolation: Isolation | None = None
    """Where the function runs: `thread` (a sync function on a daemon thread, an async one
    on the run's loop; neither can be stopped for sure: a cancelled or timed-out call's
    thread, or a thread it started, may still land its effect) or `process` (a worker
    process whose group is killed on cancellation or timeout; `def` and `async def` alike;
    arguments and results cross by value; the timeout counts from the tool's first line).
    `None`: the agent's default, which is `thread` unless the agent was made with
    `isolate_irreversible=True` and the tool is an irreversible sync tool."""

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_sinks(self.name, self.parameters, self.sinks)
        _check_options(self)
        if self.strict:
            from legato.models.dialects import strict_problem  # only a strict tool needs it

            problem = strict_problem(self.parameters)
            if problem is not None:
                logger.warning(
                    "tool %r asks for strict mode, which cannot express %s; providers send "
                    "it without strict",
                    self.name,
                    problem,
                )
        if self.isolation == "process":
            check_isolatable(
                self.name,
                self.function,
                context_parameter=self.context_parameter,
                is_async=_is_async(self.function),
            )
        elif self.isolation not in ("thread", None):
            msg = f"tool {self.name!r}: isolation must be 'thread' or 'process'"
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
        reconcile: Reconciler | None = None,
        sinks: Iterable[str] | Mapping[str, SinkKind] | None = None,
        trusted_arguments: bool = False,
        isolation: Isolation | None = None,
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
            reconcile=reconcile,
            sinks=_sink_map(sinks),
            trusted_arguments=trusted_arguments,
            isolation=isolation,
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
        strict: bool | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        contract: ToolContract | None = None,
        sinks: Iterable[str] | Mapping[str, SinkKind] | None = None,
        trusted_arguments: bool = False,
    ) -> Tool:
        """Build a tool from a raw JSON schema and a callable (MCP servers, catalogs).

        The callable receives the arguments as keyword arguments. If its first parameter is
        typed `RunContext` (found by type, never by name), it receives the run context by
        position; make it positional-only (`def call(ctx: RunContext, /, **arguments)`) when
        the schema may hold a property of the same name.

        Every call is validated against the whole schema (types, enums, nested objects and
        arrays, `additionalProperties`, combinators, `$ref`) before the callable runs; a
        violation goes back to the model as `ToolArgumentsInvalid`. A null sent for an
        optional property whose schema does not allow null (strict providers send those) is
        dropped, as if omitted.

        Raises:
            ToolDefinitionError: the schema is not an object schema, is not valid JSON
                Schema, or holds a reference that does not resolve inside it.
        """
        params = dict(parameters)
        if params.get("type", "object") != "object":
            msg = f"tool {name!r}: the parameters schema must describe an object"
            raise ToolDefinitionError(msg)
        _check_name(name)
        context = _context_parameter(function, name, params)
        return cls(
            name=name,
            description=description,
            parameters=params,
            function=function,
            validator=SchemaArguments(name, params),
            context_parameter=context,
            context_positional=context is not None,
            side_effects=side_effects,
            timeout=timeout,
            max_retries=max_retries,
            sequential=sequential,
            strict=strict,
            metadata=dict(metadata or {}),
            contract=contract,
            sinks=_sink_map(sinks),
            trusted_arguments=trusted_arguments,
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
            defer_loading=self.defer_loading,
            search_fallback=self.search_fallback,
        )

    def validate(self, arguments: JsonValue) -> dict[str, Any]:
        """Check the model's arguments; return keyword arguments or raise `ToolArgumentsInvalid`."""
        if arguments is None:
            raise ToolArgumentsInvalid(self.name, ["arguments: not valid JSON"])
        return self.validator(arguments)

    async def invoke(self, arguments: Mapping[str, Any], ctx: RunContext[Any]) -> Any:
        """Call the function with validated arguments.

        Sync functions run on a daemon thread and async ones on the running loop, or either
        in a worker process with `isolation="process"` (see `legato.tools._isolation`).
        """
        kwargs = dict(arguments)
        args: tuple[Any, ...] = ()
        if self.context_positional:
            args = (ctx,)
        elif self.context_parameter is not None:
            kwargs[self.context_parameter] = ctx
        if self.isolation == "process":  # `def` or `async def`: in a worker process
            return await call_in_process(self.name, self.function, kwargs)
        if _is_async(self.function):
            return await self.function(*args, **kwargs)
        call = functools.partial(self.function, *args) if args else self.function
        result = await call_in_thread(call, kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    def replace(self, **changes: Any) -> Tool:
        """A copy with some fields changed (name, description, side_effects, ...)."""
        return replace(self, **changes)

    def isolated_if_irreversible(self) -> Tool:
        """This tool, in a worker process if it is an irreversible sync tool left to the default.

        What `Agent(isolate_irreversible=True)` applies to its tools.

        Raises:
            ToolDefinitionError: the tool is such a tool and cannot cross into a process
                (a lambda, a local function, a method, or it takes the `RunContext`).
        """
        if (
            self.side_effects != "irreversible"
            or self.isolation is not None
            or _is_async(self.function)
        ):
            return self
        return replace(self, isolation="process")

    def __get__(self, instance: object, owner: type | None = None) -> Tool:
        """Bind a tool defined on a class to the instance it is read from."""
        if instance is None or not _is_method_tool(self):
            return self
        bound = self.function.__get__(instance, owner)
        return replace(self, function=bound, metadata={**self.metadata, "_method": False})


def _check_sinks(name: str, parameters: Mapping[str, JsonValue], sinks: Mapping[str, str]) -> None:
    """`ToolDefinitionError` for a sink naming no parameter, or of an unknown kind."""
    props = parameters.get("properties")
    known = set(props) if isinstance(props, dict) else set[str]()
    for param, kind in sinks.items():
        if param not in known:
            msg = (
                f"tool {name!r}: sink {param!r} is not a parameter "
                f"(parameters: {', '.join(sorted(known)) or 'none'})"
            )
            raise ToolDefinitionError(msg)
        if kind not in SINK_KINDS:
            msg = f"tool {name!r}: sink {param!r} has unknown kind {kind!r} (kinds: {', '.join(sorted(SINK_KINDS))})"
            raise ToolDefinitionError(msg)


def _sink_map(sinks: Iterable[str] | Mapping[str, SinkKind] | None) -> dict[str, SinkKind]:
    """Sinks given as a mapping (parameter -> kind) or as names (kind `text`)."""
    if sinks is None:
        return {}
    if isinstance(sinks, Mapping):
        given = cast("Mapping[str, SinkKind]", sinks)
        return dict(given)
    if isinstance(sinks, str):
        return {sinks: "text"}
    text: SinkKind = "text"
    return dict.fromkeys(sinks, text)


def _check_options(t: Tool) -> None:
    """Refuse options of the wrong type or value when the tool is defined.

    The values are read as plain objects: type hints do not stop `side_effects=True` or a
    misspelt literal at run time, and the gate trusts what is declared here.
    """
    side, description, retries, timeout, sequential, strict, metadata = cast(
        tuple[object, ...],
        (
            t.side_effects,
            t.description,
            t.max_retries,
            t.timeout,
            t.sequential,
            t.strict,
            t.metadata,
        ),
    )
    problems: list[str] = []
    if not isinstance(side, str) or side not in _SIDE_EFFECTS:
        allowed = ", ".join(repr(v) for v in _SIDE_EFFECTS)
        problems.append(f"side_effects must be one of {allowed}, got {side!r}")
    if not isinstance(description, str):
        problems.append(f"description must be a string, got {description!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        problems.append(f"max_retries must be an integer >= 0, got {retries!r}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        problems.append(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    if not isinstance(sequential, bool):
        problems.append(f"sequential must be True or False, got {sequential!r}")
    if strict is not None and not isinstance(strict, bool):
        problems.append(f"strict must be True, False or None, got {strict!r}")
    if not isinstance(metadata, Mapping):
        problems.append(f"metadata must be a mapping, got {metadata!r}")
    if problems:
        raise ToolDefinitionError(f"tool {t.name!r}: " + "; ".join(problems))


def _context_parameter(
    function: Callable[..., Any], tool: str, schema: Mapping[str, JsonValue]
) -> str | None:
    """The first parameter of a raw-schema tool's callable, if it is typed `RunContext`."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    if not params or params[0].kind not in (
        params[0].POSITIONAL_ONLY,
        params[0].POSITIONAL_OR_KEYWORD,
    ):
        return None
    first = params[0]
    target: Any = function if inspect.isroutine(function) else type(function).__call__
    try:
        hint = get_type_hints(target).get(first.name, first.annotation)
    except (NameError, TypeError, SyntaxError, AttributeError):
        hint = first.annotation
    if not is_run_context(hint):
        return None
    props = schema.get("properties")
    if (
        first.kind is first.POSITIONAL_OR_KEYWORD
        and isinstance(props, dict)
        and first.name in props
    ):
        msg = (
            f"tool {tool!r}: the schema has a property {first.name!r}, the name of the "
            "RunContext parameter; make that parameter positional-only "
            f"(def call({first.name}: RunContext, /, **arguments))"
        )
        raise ToolDefinitionError(msg)
    return first.name


def _is_method_tool(t: Tool) -> bool:
    return bool(t.metadata.get("_method"))


def _is_async(function: Callable[..., Any]) -> bool:
    target = getattr(function, "__func__", function)
    if inspect.iscoroutinefunction(target):
        return True
    if type(target) is FunctionType:  # a plain function's `__call__` is never a coroutine one
        return False
    return inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


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
    reconcile: Reconciler | None = None,
    sinks: Iterable[str] | Mapping[str, SinkKind] | None = None,
    trusted_arguments: bool = False,
    isolation: Isolation | None = None,
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
    reconcile: Reconciler | None = None,
    sinks: Iterable[str] | Mapping[str, SinkKind] | None = None,
    trusted_arguments: bool = False,
    isolation: Isolation | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a function (sync or async) or a method into a `Tool`.

    Use bare (`@tool`) or with options (`@tool(side_effects="irreversible", timeout=5)`).
    On a method defined in a class body, the tool binds to the instance it is read from.
    `requires`, `ensures`, `reads` and `writes` give the tool a contract over the run's
    verified state (or pass a ready `contract`; see `legato.contracts`). A tool that
    `writes` keys needs a postcondition (`ensures`) to decide what may be committed, or an
    explicit `unchecked_writes=True` to commit any value of the right type.

    `reconcile` tells, after a crash, whether an irreversible call that never finished took
    effect. `sinks` names the parameters that decide where a side effect lands
    (`{"to": "recipient"}`, or names for kind `text`); `trusted_arguments=True` says a
    side-effecting tool has none on purpose. `isolation="process"` runs the function (sync
    or async) in a worker process that is killed when the call is cancelled or times out.

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
            reconcile=reconcile,
            sinks=sinks,
            trusted_arguments=trusted_arguments,
            isolation=isolation,
        )

    if function is not None:
        return build(function)
    return build


def _defined_in_class(fn: Callable[..., Any]) -> bool:
    """A function whose qualified name puts it directly inside a class body."""
    qualname = getattr(fn, "__qualname__", "")
    owner, _, _ = qualname.rpartition(".")
    return bool(owner) and not owner.endswith("<locals>")
