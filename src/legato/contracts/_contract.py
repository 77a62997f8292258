"""Contracts: preconditions and postconditions over the state, and their outcomes.

A precondition is called as `(state, args)`; a postcondition as `(old, new, args, result)`,
where `state`, `old` and `new` are read-only `Snapshot`s, `args` the validated arguments and
`result` what the tool returned. Each returns `True`/`Allow()` (pass), `False` (reject with
a generic message), `Reject("message for the model")`, or `Halt("reason")` (stop the run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import Any, Literal, TypeAlias

from pydantic_core import to_jsonable_python

from legato._values import value_class
from legato.contracts._state import Schema, Snapshot
from legato.exceptions import ContractViolation, StateError, UndeclaredStateKey
from legato.messages import JsonValue
from legato.tools import Tool, ToolContract
from legato.tools._contract import Postcondition, Precondition, check_writes

__all__ = [
    "Allow",
    "Check",
    "Contract",
    "Halt",
    "Outcome",
    "Reject",
    "Verdict",
    "contract",
    "ensures",
    "requires",
]

Stage: TypeAlias = Literal["pre", "post"]


@value_class(kw_only=False)
class Allow:
    """The check passes."""


@value_class(kw_only=False)
class Reject:
    """The check fails: the call is not run (or its changes are discarded); the model sees `message`."""

    message: str


@value_class(kw_only=False)
class Halt:
    """The check fails so badly that the run must stop with `ContractHalt`."""

    reason: str


Outcome: TypeAlias = Allow | Reject | Halt
"""What a check decides."""

ALLOW = Allow()


@value_class
class Check:
    """A named predicate, as the helpers (`has`, `at_least`, `unchanged_except`, ...) build them.

    `pre` is called as `(state, args)`, `post` as `(old, new, args, result)`; a check that only
    makes sense after the call (e.g. `unchanged_except`) has no `pre`. `keys` are the state
    keys it names, checked against the state's schema before the first call.
    """

    name: str
    pre: Callable[[Snapshot[Any], Mapping[str, Any]], object] | None = None
    post: Callable[[Snapshot[Any], Snapshot[Any], Mapping[str, Any], Any], object] | None = None
    keys: frozenset[str] = field(default_factory=lambda: frozenset[str]())

    def __call__(self, *args: Any) -> object:
        """Evaluate: two arguments for a precondition, four for a postcondition."""
        if len(args) == 2 and self.pre is not None:
            return self.pre(args[0], args[1])
        if len(args) == 4 and self.post is not None:
            return self.post(args[0], args[1], args[2], args[3])
        where = "precondition" if len(args) == 2 else "postcondition"
        msg = f"check {self.name!r} cannot be used as a {where}"
        raise ContractViolation(msg)


@value_class
class Verdict:
    """The result of evaluating a list of predicates."""

    outcome: Outcome
    predicate: str | None = None
    """The predicate that decided (None when all passed)."""
    passed: tuple[str, ...] = ()
    evidence: dict[str, JsonValue] = field(default_factory=lambda: {})

    @property
    def allowed(self) -> bool:
        """Every predicate passed."""
        return isinstance(self.outcome, Allow)


Predicate: TypeAlias = Callable[..., object]


def predicate_name(predicate: Predicate, stage: Stage, index: int) -> str:
    """A readable name: a check's name, a function's name, or `pre#1` for a lambda."""
    if isinstance(predicate, Check):
        return predicate.name
    name = getattr(predicate, "__name__", None)
    if not isinstance(name, str) or name == "<lambda>":
        return f"{stage}#{index + 1}"
    return name


Compiled: TypeAlias = tuple[tuple[str, Callable[..., object]], ...]


def _compile(predicates: tuple[Predicate, ...], stage: Stage) -> Compiled:
    """Each predicate's name and the function to call for this stage (a check's own side)."""
    compiled: list[tuple[str, Callable[..., object]]] = []
    for index, predicate in enumerate(predicates):
        if not callable(predicate):
            msg = f"{stage}condition #{index + 1} is not callable: {predicate!r}"
            raise ContractViolation(msg)
        side = (
            (predicate.pre if stage == "pre" else predicate.post)
            if isinstance(predicate, Check)
            else predicate
        )
        compiled.append((predicate_name(predicate, stage, index), side or predicate))
    return tuple(compiled)


@value_class
class Contract:
    """Pre- and postconditions of a tool, and the state keys it reads and writes.

    Build one with `contract(...)`, or let `@tool(requires=..., ensures=..., writes=...)`
    build it. `reads=None` means the tool may read any key (and is re-checked whenever an
    earlier commit of the same step changed anything).
    """

    requires: tuple[Precondition, ...] = ()
    ensures: tuple[Postcondition, ...] = ()
    reads: frozenset[str] | None = None
    writes: frozenset[str] = field(default_factory=lambda: frozenset[str]())
    unchecked_writes: bool = False
    """Commit `writes` without a postcondition: an explicit opt-in, since nothing then
    checks the values beyond their declared types. A run refuses a contract that writes
    without `ensures` and without this flag (`ToolDefinitionError`)."""
    _pre: Compiled = field(init=False, repr=False, compare=False)
    _post: Compiled = field(init=False, repr=False, compare=False)
    _pre_ok: Verdict = field(init=False, repr=False, compare=False)
    _post_ok: Verdict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pre, post = _compile(self.requires, "pre"), _compile(self.ensures, "post")
        object.__setattr__(self, "_pre", pre)
        object.__setattr__(self, "_post", post)
        object.__setattr__(self, "_pre_ok", Verdict(outcome=ALLOW, passed=tuple(n for n, _ in pre)))
        object.__setattr__(
            self, "_post_ok", Verdict(outcome=ALLOW, passed=tuple(n for n, _ in post))
        )

    @classmethod
    def of(cls, spec: ToolContract) -> Contract:
        """A `Contract` from anything that implements `ToolContract`."""
        if isinstance(spec, Contract):
            return spec
        return cls(
            requires=tuple(spec.requires),
            ensures=tuple(spec.ensures),
            reads=spec.reads,
            writes=frozenset(spec.writes),
            unchecked_writes=bool(getattr(spec, "unchecked_writes", False)),
        )

    def bind(self, schema: Schema, *, tool: str) -> None:
        """Check every key the contract names against the schema; raise if one is undeclared."""
        named = set(self.writes) | set(self.reads or ())
        for stage, predicates in (("pre", self.requires), ("post", self.ensures)):
            for predicate in predicates:
                if isinstance(predicate, Check):
                    usable = predicate.pre if stage == "pre" else predicate.post
                    if usable is None:
                        kind = "precondition" if stage == "pre" else "postcondition"
                        msg = f"check {predicate.name!r} cannot be used as a {kind}"
                        raise ContractViolation(msg, tool=tool)
                    named |= predicate.keys
        for key in sorted(named):
            if key not in schema.keys:
                raise UndeclaredStateKey(key, list(schema.keys), tool=tool)
        if self.reads is not None:
            for predicate in (*self.requires, *self.ensures):
                if isinstance(predicate, Check):
                    extra = predicate.keys - self.reads - self.writes
                    if extra:
                        msg = (
                            f"check {predicate.name!r} reads {sorted(extra)}, which the "
                            "contract does not declare in reads="
                        )
                        raise ContractViolation(msg, tool=tool, key=sorted(extra)[0])

    @property
    def visible(self) -> frozenset[str] | None:
        """The keys the tool may see: reads and writes, or None for all."""
        return None if self.reads is None else self.reads | self.writes

    def precondition(self, state: Snapshot[Any], args: Mapping[str, Any], *, tool: str) -> Verdict:
        """Evaluate the preconditions in order; the first that does not allow decides."""
        return _evaluate(self._pre, self._pre_ok, "pre", (state, args), (state,), args, tool)

    def postcondition(
        self,
        old: Snapshot[Any],
        new: Snapshot[Any],
        args: Mapping[str, Any],
        result: Any,
        *,
        tool: str,
    ) -> Verdict:
        """Evaluate the postconditions in order; the first that does not allow decides."""
        call = (old, new, args, result)
        return _evaluate(self._post, self._post_ok, "post", call, (old, new), args, tool)


def _evaluate(
    compiled: Compiled,
    ok: Verdict,
    stage: Stage,
    call: tuple[Any, ...],
    views: tuple[Snapshot[Any], ...],
    args: Mapping[str, Any],
    tool: str,
) -> Verdict:
    for index, (name, predicate) in enumerate(compiled):
        out = _run(predicate, call, name, stage, tool)
        if out is True or type(out) is Allow:
            continue
        if out is False:
            kind = "precondition" if stage == "pre" else "postcondition"
            outcome: Outcome = Reject(f"{kind} {name!r} does not hold")
        elif isinstance(out, Reject | Halt):
            outcome = out
        else:
            msg = (
                f"{stage}condition {name!r} returned {out!r}; a predicate returns a bool, "
                "Allow(), Reject(message) or Halt(reason)"
            )
            raise ContractViolation(msg, tool=tool)
        return Verdict(
            outcome=outcome,
            predicate=name,
            passed=tuple(n for n, _ in compiled[:index]),
            evidence=_evidence(predicate, call, views, args),
        )
    return ok


def _run(
    predicate: Callable[..., object], call: tuple[Any, ...], name: str, stage: Stage, tool: str
) -> object:
    try:
        return predicate(*call)
    except StateError:
        raise
    except Exception as exc:
        msg = f"{stage}condition {name!r} raised {type(exc).__name__}: {exc}"
        raise ContractViolation(msg, tool=tool) from exc


def _evidence(
    predicate: Callable[..., object],
    call: tuple[Any, ...],
    views: tuple[Snapshot[Any], ...],
    args: Mapping[str, Any],
) -> dict[str, JsonValue]:
    """The values a failing predicate read, as JSON: state keys (`old.`/`new.` after a call).

    Predicates are pure, so the failing one runs once more with its reads recorded; the
    passing path pays nothing for evidence.
    """
    seen = [view._track() for view in views]  # pyright: ignore[reportPrivateUsage]
    try:
        predicate(*call)
    except Exception:  # it failed the same way a moment ago; only its reads matter
        pass
    finally:
        for view in views:
            view._seen = None  # pyright: ignore[reportPrivateUsage]
    evidence: dict[str, JsonValue] = {}
    labels = ("",) if len(views) == 1 else ("old.", "new.")
    for label, view, keys in zip(labels, views, seen, strict=True):
        for key in sorted(keys):
            evidence[f"{label}{key}"] = view.to_json([key])[key]
    for name, value in args.items():
        evidence[f"args.{name}"] = to_jsonable_python(value, fallback=repr)
    return evidence


# -- building contracts ------------------------------------------------------------------------


def _pre(items: Precondition | Iterable[Precondition] | None) -> tuple[Precondition, ...]:
    if items is None:
        return ()
    if callable(items):
        return (items,)
    return tuple(items)


def _post(items: Postcondition | Iterable[Postcondition] | None) -> tuple[Postcondition, ...]:
    if items is None:
        return ()
    if callable(items):
        return (items,)
    return tuple(items)


def contract(
    *,
    requires: Precondition | Iterable[Precondition] | None = None,
    ensures: Postcondition | Iterable[Postcondition] | None = None,
    reads: Iterable[str] | None = None,
    writes: Iterable[str] = (),
    unchecked_writes: bool = False,
) -> Contract:
    """A `Contract`: pass it as `@tool(contract=...)` or `Tool(..., contract=...)`.

    Raises:
        ToolDefinitionError: `writes` without `ensures` or `unchecked_writes=True`.
    """
    built = Contract(
        requires=_pre(requires),
        ensures=_post(ensures),
        reads=None if reads is None else frozenset(reads),
        writes=frozenset(writes),
        unchecked_writes=unchecked_writes,
    )
    check_writes(built)
    return built


def _extend(
    target: Tool,
    *,
    requires: tuple[Precondition, ...] = (),
    ensures: tuple[Postcondition, ...] = (),
    reads: Iterable[str] | None,
    writes: Iterable[str],
) -> Tool:
    base = Contract.of(target.contract) if target.contract is not None else Contract()
    merged_reads = base.reads
    if reads is not None:
        merged_reads = frozenset(reads) | (base.reads or frozenset())
    return target.replace(
        contract=Contract(
            requires=(*requires, *base.requires),
            ensures=(*base.ensures, *ensures),
            reads=merged_reads,
            writes=base.writes | frozenset(writes),
            unchecked_writes=base.unchecked_writes,
        )
    )


def requires(
    *checks: Precondition, reads: Iterable[str] | None = None, writes: Iterable[str] = ()
) -> Callable[[Tool], Tool]:
    """Decorate a `Tool` (put it above `@tool`) with more preconditions."""
    return lambda target: _extend(target, requires=checks, reads=reads, writes=writes)


def ensures(
    *checks: Postcondition, reads: Iterable[str] | None = None, writes: Iterable[str] = ()
) -> Callable[[Tool], Tool]:
    """Decorate a `Tool` (put it above `@tool`) with more postconditions."""
    return lambda target: _extend(target, ensures=checks, reads=reads, writes=writes)
