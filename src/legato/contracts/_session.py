"""One run's verified state: check calls, hand out drafts, commit in the model's order.

The run's tool executor calls `begin` before a call is admitted (preconditions against the
snapshot the call starts from) and `settle` when the call's turn comes in the model's order
(postconditions, the re-check after concurrent commits, the commit itself). Both return
plain values; the executor turns them into journal events and tool results.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

from pydantic_core import to_jsonable_python

from legato._effects_parts import current_switches
from legato._values import value_class
from legato.contracts._contract import Contract, Halt, Reject, Verdict
from legato.contracts._state import Draft, Snapshot, State
from legato.events import StateCommitted, StateLoaded, StateRejected
from legato.exceptions import (
    ConfigurationError,
    ContractHalt,
    ContractRetriesExceeded,
    ContractViolation,
    StateError,
    ToolDefinitionError,
    ToolError,
)
from legato.messages import JsonValue
from legato.tools import Tool
from legato.tools._contract import check_writes

__all__ = ["Pending", "Refusal", "Settlement", "StateOptions", "StateSession"]

Stage = Literal["pre", "post", "recheck", "write"]


@value_class
class StateOptions:
    """How a run shows its state to the model, and how many rejections it tolerates."""

    show: Literal["all", "none"] | tuple[str, ...] = "all"
    """Render every key (`all`), none, or the listed keys into the instructions."""
    read_tool: bool = False
    """Offer the model a read-only `read_state` tool."""
    max_rejections: int = 10
    """Contract rejections allowed per run before it stops with `ContractRetriesExceeded`."""

    def __post_init__(self) -> None:
        if self.max_rejections < 0:
            msg = "max_rejections must be >= 0"
            raise StateError(msg)


@dataclass(slots=True, kw_only=True)
class Pending:
    """A call whose preconditions passed; it runs on `draft` and waits for its commit turn."""

    tool: str
    call_id: str
    contract: Contract
    base: Snapshot[Any]
    draft: Draft[Any]
    args: Mapping[str, Any]
    """The arguments as admitted: a private copy the tool cannot change (see `admitted`)."""
    passed: tuple[str, ...] = ()


@value_class
class Refusal:
    """A call its preconditions refused; `halt` is set when the run must stop."""

    event: StateRejected
    message: str
    halt: StateError | None = None


@value_class
class Settlement:
    """What became of a call's draft: a commit, a rejection, or nothing (the call failed)."""

    event: StateCommitted | StateRejected | None = None
    error: str | None = None
    """The model's error text when the draft was rejected."""
    halt: StateError | None = None
    committed: bool = False


@dataclass(slots=True)
class _Bound:
    spec: object
    contract: Contract
    problem: StateError | None = None


class StateSession:
    """The verified state of one run, and the contract checks around its tool calls."""

    __slots__ = ("_bound", "options", "state")

    def __init__(self, state: State[Any], options: StateOptions | None = None) -> None:
        self.state = state
        self.options = options or StateOptions()
        self._bound: dict[int, _Bound] = {}

    @classmethod
    def for_run(
        cls,
        state: State[Any] | None,
        options: StateOptions | None,
        *,
        loaded: StateLoaded | None,
        commits: Sequence[StateCommitted],
    ) -> StateSession | None:
        """A run's session: on a fork of `state`, or rebuilt from the journal when resuming."""
        if state is None:
            return None
        if loaded is None:
            return cls(state.fork(), options)
        return cls(State.from_journal(loaded, commits, state.schema), options)

    # -- what tools and the model see -----------------------------------------------------

    @staticmethod
    def instructions(session: StateSession | None, base: str | None) -> str | None:
        """The instructions with the state rendered in, when a session asks for it."""
        rendered = session.render() if session is not None else None
        if rendered is None:
            return base
        return f"{base}\n\n{rendered}" if base else rendered

    def snapshot_for(self, tool: str | None) -> Snapshot[Any]:
        """A read-only view of the committed state for a tool without a contract."""
        current = self.state.snapshot()
        return Snapshot(
            current._schema,  # pyright: ignore[reportPrivateUsage]
            current._values,  # pyright: ignore[reportPrivateUsage]
            current.version,
            tool=tool,
        )

    def render(self) -> str | None:
        """The state as text for the instructions, per `options.show` (None for `none`)."""
        show = self.options.show
        if show == "none":
            return None
        snapshot = self.state.snapshot()
        keys = self.state.keys if show == "all" else show
        values = snapshot.to_json(keys)
        lines = [
            f"Verified state (version {snapshot.version}); it changes only through tool calls:"
        ]
        lines += [f"- {k}: {json.dumps(v, sort_keys=True)}" for k, v in values.items()]
        return "\n".join(lines)

    def read_tool(self) -> Tool:
        """The read-only `read_state` tool."""
        state = self.state

        async def read_state(keys: list[str] | None = None) -> dict[str, JsonValue]:
            """Read the verified state: the committed value of each key.

            Args:
                keys: The keys to read; every key when omitted.
            """
            snapshot = state.snapshot()
            try:
                values = snapshot.to_json(keys)
            except StateError as exc:
                raise ToolError(str(exc)) from exc
            return {"version": snapshot.version, "values": values}

        return Tool.from_function(read_state)

    def check_rejections(self, count: int, last: str) -> None:
        """Stop the run when the contracts rejected more calls than it allows."""
        if count > self.options.max_rejections:
            raise ContractRetriesExceeded(self.options.max_rejections, last)

    # -- the transaction around one call ----------------------------------------------------

    def _bind(self, tool: Tool) -> Contract:
        spec = tool.contract
        assert spec is not None
        bound = self._bound.get(id(spec))
        if bound is None or bound.spec is not spec:
            contract = Contract.of(spec)
            bound = _Bound(spec=spec, contract=contract)
            try:
                contract.bind(self.state._schema, tool=tool.name)  # pyright: ignore[reportPrivateUsage]
            except StateError as exc:
                bound.problem = exc
            self._bound[id(spec)] = bound
        if bound.problem is not None:
            raise bound.problem
        return bound.contract

    def _view(self, base: Snapshot[Any], contract: Contract, tool: str) -> Snapshot[Any]:
        return Snapshot(
            base._schema,  # pyright: ignore[reportPrivateUsage]
            base._values,  # pyright: ignore[reportPrivateUsage]
            base.version,
            allowed=contract.visible,
            tool=tool,
        )

    def begin(self, tool: Tool, call_id: str, args: Mapping[str, Any]) -> Pending | Refusal:
        """Check the preconditions against the current snapshot; on pass, open a draft."""
        base = self.state.snapshot()
        try:
            contract = self._bind(tool)
            args = admitted(args, tool=tool.name)
            view = self._view(base, contract, tool.name)
            verdict = contract.precondition(view, args, tool=tool.name)
        except StateError as exc:
            return self._broken(tool.name, call_id, "pre", base.version, exc)
        if not verdict.allowed:
            refusal = self._refuse(tool.name, call_id, "pre", base.version, verdict)
            return Refusal(event=refusal.event, message=refusal.message, halt=refusal.halt)
        draft = Draft(base, writes=contract.writes, reads=contract.reads, tool=tool.name)
        return Pending(
            tool=tool.name,
            call_id=call_id,
            contract=contract,
            base=base,
            draft=draft,
            args=args,
            passed=verdict.passed,
        )

    def settle(
        self, pending: Pending, *, result: Any = None, error: BaseException | None = None
    ) -> Settlement:
        """Decide the draft of a finished call, in the model's order: commit or discard."""
        if error is not None:
            if isinstance(error, StateError):
                return self._write_error(pending, error)
            return Settlement()  # the call failed on its own; its draft is simply dropped
        try:
            changes = pending.draft.changes()
        except StateError as exc:
            return self._write_error(pending, exc)
        current = self.state.snapshot()
        conflict: set[str] = set()
        if current.version != pending.base.version:
            moved = self.state.changed_since(pending.base.version)
            visible = pending.contract.visible
            conflict = moved if visible is None else moved & visible
        stage: Stage = "recheck" if conflict else "post"
        old = current if conflict else pending.base
        passed = pending.passed
        try:
            if conflict:
                verdict = pending.contract.precondition(
                    self._view(current, pending.contract, pending.tool),
                    pending.args,
                    tool=pending.tool,
                )
                if not verdict.allowed:
                    return self._reject(pending, "recheck", current.version, verdict, conflict)
                passed = verdict.passed
            new = Snapshot(
                old._schema,  # pyright: ignore[reportPrivateUsage]
                {**old._values, **changes},  # pyright: ignore[reportPrivateUsage]
                old.version,
                allowed=pending.contract.visible,
                tool=pending.tool,
            )
            verdict = pending.contract.postcondition(
                self._view(old, pending.contract, pending.tool),
                new,
                pending.args,
                result,
                tool=pending.tool,
            )
        except StateError as exc:
            refusal = self._broken(pending.tool, pending.call_id, stage, current.version, exc)
            return Settlement(event=refusal.event, error=refusal.message, halt=refusal.halt)
        if not verdict.allowed:
            return self._reject(pending, stage, current.version, verdict, conflict)
        commit = self.state._apply(  # pyright: ignore[reportPrivateUsage]
            changes,
            tool=pending.tool,
            call_id=pending.call_id,
            checks=(*passed, *verdict.passed),
            rechecked=bool(conflict),
        )
        if not commit.changes:
            return Settlement(committed=True)
        return Settlement(event=self.state.commit_event(commit), committed=True)

    # -- rejections ----------------------------------------------------------------------------

    def _reject(
        self, pending: Pending, stage: Stage, version: int, verdict: Verdict, conflict: set[str]
    ) -> Settlement:
        refusal = self._refuse(pending.tool, pending.call_id, stage, version, verdict, conflict)
        return Settlement(event=refusal.event, error=refusal.message, halt=refusal.halt)

    def _refuse(
        self,
        tool: str,
        call_id: str,
        stage: Stage,
        version: int,
        verdict: Verdict,
        conflict: set[str] | None = None,
    ) -> Refusal:
        outcome = verdict.outcome
        halted = isinstance(outcome, Halt)
        reason = outcome.reason if isinstance(outcome, Halt) else _message(outcome)
        event = StateRejected(
            tool=tool,
            call_id=call_id,
            stage=stage,
            predicate=verdict.predicate,
            message=reason,
            evidence=verdict.evidence,
            version=version,
            halted=halted,
        )
        halt = (
            ContractHalt(
                reason,
                tool=tool,
                predicate=verdict.predicate,
                evidence=dict(verdict.evidence),
            )
            if halted
            else None
        )
        return Refusal(event=event, message=_for_model(stage, reason, conflict), halt=halt)

    def _broken(
        self, tool: str, call_id: str, stage: Stage, version: int, exc: StateError
    ) -> Refusal:
        """A contract that cannot be evaluated: the run stops (fail closed)."""
        if exc.tool is None:
            exc = ContractViolation(str(exc), tool=tool)
        event = StateRejected(
            tool=tool,
            call_id=call_id,
            stage=stage,
            predicate=None,
            message=str(exc),
            evidence=_error_evidence(exc),
            version=version,
            halted=True,
        )
        return Refusal(event=event, message=str(exc), halt=exc)

    def _write_error(self, pending: Pending, exc: StateError) -> Settlement:
        """The tool wrote what it may not (undeclared key, wrong type): discard, tell the model."""
        event = StateRejected(
            tool=pending.tool,
            call_id=pending.call_id,
            stage="write",
            predicate=None,
            message=str(exc),
            evidence=_error_evidence(exc),
            version=pending.base.version,
        )
        text = f"{type(exc).__name__}: {exc}\nNothing was committed."
        return Settlement(event=event, error=text)


def admitted(args: Mapping[str, Any], *, tool: str) -> Mapping[str, Any]:
    """A private deep copy of a call's arguments, read-only at the top level.

    The tool runs on its own arguments; its pre- and postconditions see this copy, taken
    when the call is checked, so a tool that changes an argument in place (shrinks a list
    it was asked to add) cannot change what its postcondition compares against.

    Raises:
        ContractViolation: an argument cannot be copied (the call is refused, fail closed).
    """
    if not current_switches().snapshot_args:  # test twin: the tool's own objects
        return args
    try:
        return MappingProxyType({name: _private(value) for name, value in args.items()})
    except Exception as exc:
        msg = f"the arguments cannot be copied for the contract ({type(exc).__name__}: {exc})"
        raise ContractViolation(msg, tool=tool) from exc


_ATOMS = (str, int, float, bool, type(None))


def _private(value: object) -> object:
    """A deep copy; JSON-shaped values (what validated arguments mostly are) the fast way."""
    kind: type = type(value)
    if kind in _ATOMS:
        return value
    if kind is list:
        return [_private(v) for v in cast("list[object]", value)]
    if kind is dict:
        return {k: _private(v) for k, v in cast("dict[object, object]", value).items()}
    return copy.deepcopy(value)


def _message(outcome: Reject | Any) -> str:
    return outcome.message if isinstance(outcome, Reject) else str(outcome)


def _for_model(stage: Stage, reason: str, conflict: set[str] | None) -> str:
    match stage:
        case "pre":
            return f"Not run: {reason}"
        case "post" | "write":
            return f"The call ran, but its result was rejected and nothing was committed: {reason}"
        case "recheck":
            keys = ", ".join(sorted(conflict or ()))
            return (
                f"Nothing was committed: an earlier call of the same step changed {keys}, and "
                f"the call no longer checks out against the new state: {reason}"
            )


def _error_evidence(exc: StateError) -> dict[str, JsonValue]:
    evidence: dict[str, JsonValue] = {"error": type(exc).__name__}
    key = getattr(exc, "key", None)
    if isinstance(key, str):
        evidence["key"] = key
        evidence["value"] = to_jsonable_python(getattr(exc, "value", None), fallback=repr)
    return evidence


def merge_tools(tools: Sequence[Tool], session: StateSession | None) -> list[Tool]:
    """The run's tools plus `read_state` when the options ask for it.

    A tool with a contract in a run without a state is refused: its checks would be skipped;
    so is one that writes keys with no postcondition and no `unchecked_writes=True`.
    """
    if session is None:
        checked = [t.name for t in tools if t.contract is not None]
        if checked:
            msg = (
                f"tool {checked[0]!r} has a contract, but the agent has no verified state; "
                "pass Agent(state=...) (or run(..., state=...)) so its checks can run"
            )
            raise ConfigurationError(msg)
        return list(tools)
    for t in tools:
        if t.contract is not None:
            check_writes(t.contract, tool=t.name)  # decorators and Tool(contract=) too
    if not session.options.read_tool:
        return list(tools)
    if any(t.name == "read_state" for t in tools):
        msg = "a tool is named 'read_state', which StateOptions(read_tool=True) also adds"
        raise ToolDefinitionError(msg)
    return [*tools, session.read_tool()]
