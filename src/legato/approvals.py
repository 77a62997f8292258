"""Approval policies, requests, decisions, stores and handlers.

A policy maps each tool call to an action: `auto` (admit), `ask` (hold the call, and every
other side-effecting call of the run, until someone decides) or `deny` (never run; the
model is told). Rules match a tool by name (a glob) and, optionally, argument values by
glob patterns; the first matching rule wins, else the policy's default applies.

```python
policy = ApprovalPolicy(
    rules=[
        Rule("delete_file", "deny"),
        Rule("write_file", "ask", arguments={"path": "/etc/*"}),
        Rule("send_email", "ask"),
    ],
    handler=CallbackApprover(lambda request: Approve()),
)
agent = Agent(model, tools=[...], approvals=policy)
```

An `ask` creates an `ApprovalRequest` bound to one call (run, step, call id, tool, and the
hash of its canonical arguments) with a single-use decision token. The request goes into
an `ApprovalStore`. A handler may decide at once (a Python callback, the terminal prompt);
otherwise the run parks (`RunParked`), the process may exit, and whoever holds the token
decides later through the store (`ApprovalDesk` is the JSON-shaped API a web UI uses);
`agent.resume(journal)` then continues. A decision is claimed exactly once, however many
processes resume the run. `SQLiteApprovalStore` shares a project's SQLite file between
processes; `PostgresApprovalStore` shares a PostgreSQL database between machines.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hmac
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, cast, runtime_checkable

from legato._requests import ApprovalRequest, ParkedRun, arguments_hash, canonical_json
from legato._values import value_class
from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid, PolicyError
from legato.messages import JsonValue

if TYPE_CHECKING:
    from pathlib import Path

    from legato.store import (
        ApprovalRecord,
        ApprovalTable,
        ConnectionPool,
        PostgresStore,
        SQLiteStore,
    )
    from legato.tools import Tool

__all__ = [
    "Action",
    "ApprovalDesk",
    "ApprovalHandler",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStore",
    "Approve",
    "CallbackApprover",
    "Decision",
    "Edit",
    "MemoryApprovalStore",
    "ParkedRun",
    "PostgresApprovalStore",
    "Reject",
    "Rule",
    "SQLiteApprovalStore",
    "StoredApprovals",
    "TerminalApprover",
    "arguments_hash",
    "canonical_json",
]

Action: TypeAlias = Literal["auto", "ask", "deny"]
"""What a policy does with a call: admit it, hold it for a decision, or refuse it."""

_ACTIONS: frozenset[str] = frozenset({"auto", "ask", "deny"})


# -- policies ---------------------------------------------------------------------------------


@value_class(kw_only=False)
class Rule:
    """One policy line: calls of `tool` (a glob) whose `arguments` match get `action`.

    `arguments` maps an argument name to a glob pattern matched against the argument's
    value (strings as they are, anything else as canonical JSON). All must match.
    """

    tool: str
    action: Action
    arguments: Mapping[str, str] = field(default_factory=lambda: {}, kw_only=True)

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            msg = f"rule for {self.tool!r}: action must be auto, ask or deny, not {self.action!r}"
            raise PolicyError(msg)

    def matches(self, tool: str, arguments: JsonValue) -> bool:
        """Whether this rule applies to a call."""
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if not self.arguments:
            return True
        if not isinstance(arguments, dict):
            return False
        for name, pattern in self.arguments.items():
            if name not in arguments:
                return False
            value = arguments[name]
            text = value if isinstance(value, str) else canonical_json(value)
            if not fnmatch.fnmatchcase(text, pattern):
                return False
        return True

    def describe(self) -> str:
        """The rule as one line, for approvers and the journal."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.tool}({args}) -> {self.action}" if args else f"{self.tool} -> {self.action}"


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy:
    """Which calls run freely, which wait for a decision, which never run.

    Rules are tried in order; the first match decides. A call no rule matches gets
    `default` if the tool has side effects (read-only tools are admitted).
    """

    rules: Sequence[Rule] = ()
    default: Action = "auto"
    """The action for side-effecting calls no rule matches."""
    handler: ApprovalHandler | None = None
    """Decides requests as they come; None (or a handler returning None) parks the run."""
    store: ApprovalStore = field(default_factory=lambda: MemoryApprovalStore())
    wait: float = 0.0
    """Seconds to wait for a decision made elsewhere (through the store) before parking."""
    ttl: float | None = None
    """Seconds a request can be decided for; later decisions are refused (None: no expiry)."""
    reject_holds_siblings: bool = True
    """A rejection also refuses the side-effecting calls of the same response that were
    held behind it (the model is told and may call them again)."""
    within: ApprovalPolicy | None = None
    """The policy of the run this one is nested in (a child run's parent): every call gets
    the stricter of the two actions, so a child can narrow its parent's policy, never widen it."""

    def __post_init__(self) -> None:
        if self.default not in _ACTIONS:
            msg = f"default action must be auto, ask or deny, not {self.default!r}"
            raise PolicyError(msg)

    @classmethod
    def of(
        cls, spec: ApprovalPolicy | Mapping[str, Action | Sequence[Rule]] | None
    ) -> ApprovalPolicy | None:
        """A policy from shorthand: `{"send_email": "ask", "delete": "deny"}`."""
        if spec is None or isinstance(spec, ApprovalPolicy):
            return spec
        rules: list[Rule] = []
        for name, value in spec.items():
            if isinstance(value, str):
                rules.append(Rule(name, value))
            else:
                rules.extend(value)
        return cls(rules=rules)

    @classmethod
    def for_child(
        cls, parent: ApprovalPolicy | None, own: ApprovalPolicy | None
    ) -> ApprovalPolicy | None:
        """The policy a child run gets: its own nested in its parent's (`within`).

        Requests go to the parent's handler and store, so whoever decides for the parent
        decides for the whole tree, and a decision is claimed once wherever it is used.
        """
        if parent is None:
            return own
        base = own if own is not None else cls()
        return replace(
            base,
            handler=parent.handler,
            store=parent.store,
            wait=parent.wait,
            ttl=parent.ttl,
            within=parent,
        )

    def action(self, tool: Tool, arguments: JsonValue) -> tuple[Action, str]:
        """The action for a call and a description of why (the rule, or the default)."""
        action, why = self._own_action(tool, arguments)
        if self.within is not None:
            outer, outer_why = self.within.action(tool, arguments)
            if _STRICTNESS[outer] > _STRICTNESS[action]:
                return outer, f"{outer_why} (inherited from the parent run)"
        return action, why

    def _own_action(self, tool: Tool, arguments: JsonValue) -> tuple[Action, str]:
        for rule in self.rules:
            if rule.matches(tool.name, arguments):
                return rule.action, rule.describe()
        if tool.side_effects == "none":
            return "auto", "read-only"
        return self.default, f"default for {tool.side_effects} tools -> {self.default}"

    def check(self, tools: Mapping[str, Tool]) -> None:
        """Raise `PolicyError` for a rule naming no tool of the run, or an unknown argument.

        A run with a tool that starts child runs (`spawn`, `agent.as_tool`) may name its
        children's tools: the policy covers the whole tree.
        """
        has_children = any(t.metadata.get("legato.spawns_children") for t in tools.values())
        for rule in self.rules:
            matched = [t for name, t in tools.items() if fnmatch.fnmatchcase(name, rule.tool)]
            if not matched and has_children:
                continue
            if not matched:
                known = ", ".join(sorted(tools)) or "none"
                msg = f"approval rule {rule.describe()!r} names an unknown tool; tools: {known}"
                raise PolicyError(msg)
            for name in rule.arguments:
                if not any(_has_argument(t, name) for t in matched):
                    msg = f"approval rule {rule.describe()!r}: no tool {rule.tool!r} takes {name!r}"
                    raise PolicyError(msg)


_STRICTNESS: dict[str, int] = {"auto": 0, "ask": 1, "deny": 2}


def _has_argument(tool: Tool, name: str) -> bool:
    props = tool.parameters.get("properties")
    return isinstance(props, dict) and name in props


# -- requests and decisions ----------------------------------------------------------------------


@value_class
class Approve:
    """Run the call once, as it was requested."""

    message: str = ""
    verdict: Literal["approve"] = "approve"


@value_class
class Reject:
    """Do not run the call; the model is told `message`."""

    message: str = "The user rejected this call."
    verdict: Literal["reject"] = "reject"


@value_class
class Edit:
    """Run the call once with these arguments instead (they are validated again)."""

    arguments: dict[str, JsonValue]
    message: str = ""
    verdict: Literal["edit"] = "edit"


Decision: TypeAlias = Approve | Reject | Edit
"""What an approver decides."""


def decision_from_json(data: Mapping[str, Any]) -> Decision:
    """A decision from its JSON form (`{"verdict": "edit", "arguments": {...}}`)."""
    verdict = data.get("verdict")
    message = str(data.get("message", ""))
    if verdict == "approve":
        return Approve(message=message)
    if verdict == "reject":
        return Reject(message=message or Reject().message)
    if verdict == "edit":
        arguments = data.get("arguments")
        if not isinstance(arguments, dict):
            msg = "an edit decision needs an 'arguments' object"
            raise DecisionTokenInvalid(msg)
        return Edit(arguments=dict(arguments), message=message)  # pyright: ignore[reportUnknownArgumentType]
    msg = f"unknown verdict {verdict!r}: expected approve, reject or edit"
    raise DecisionTokenInvalid(msg)


# -- stores ------------------------------------------------------------------------------------------


@runtime_checkable
class ApprovalStore(Protocol):
    """Where requests wait and decisions land; shared by the run and the approvers.

    Implementations must make `decide` and `claim` atomic: a token is accepted once, and a
    decision is claimed by exactly one resumer, even across processes.
    """

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request."""
        ...

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, decided or not."""
        ...

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Requests without a decision (of one run, or all), oldest first."""
        ...

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Record a decision; `DecisionTokenInvalid` / `DecisionAlreadyUsed` if not acceptable."""
        ...

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision (once): None while undecided, `DecisionAlreadyUsed` if taken."""
        ...

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, claimed or not (a read; claims nothing)."""
        ...


class MemoryApprovalStore:
    """An `ApprovalStore` in this process's memory (safe to use from several threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[str, ApprovalRequest] = {}
        self._decisions: dict[str, Decision] = {}
        self._claimed: set[str] = set()

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request."""
        with self._lock:
            self._requests.setdefault(request.id, request)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id."""
        with self._lock:
            return self._requests.get(request_id)

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Undecided requests, oldest first."""
        with self._lock:
            return [
                r
                for r in self._requests.values()
                if r.id not in self._decisions and (run_id is None or r.run_id == run_id)
            ]

    def pending_now(self, run_id: str | None = None) -> int:
        """How many requests wait for a decision right now (synchronous; for probes)."""
        with self._lock:
            return sum(
                1
                for r in self._requests.values()
                if r.id not in self._decisions and (run_id is None or r.run_id == run_id)
            )

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Accept a decision presented with the request's token, once."""
        with self._lock:
            request = self._requests.get(request_id)
            if request is None or not hmac.compare_digest(request.token, token):
                msg = f"the decision token does not belong to request {request_id!r}"
                raise DecisionTokenInvalid(msg)
            if request_id in self._decisions:
                msg = f"request {request_id!r} was already decided; a token is used once"
                raise DecisionAlreadyUsed(msg)
            if request.expires_at is not None and time.time() > request.expires_at:
                msg = f"request {request_id!r} expired; the run asks again when resumed"
                raise DecisionTokenInvalid(msg)
            self._decisions[request_id] = decision

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, without claiming it."""
        with self._lock:
            return self._decisions.get(request_id)

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision exactly once."""
        with self._lock:
            if request_id in self._claimed:
                msg = f"the decision on request {request_id!r} was already applied"
                raise DecisionAlreadyUsed(msg)
            decision = self._decisions.get(request_id)
            if decision is not None:
                self._claimed.add(request_id)
            return decision


# -- handlers ----------------------------------------------------------------------------------------


@runtime_checkable
class ApprovalHandler(Protocol):
    """Decides a request now, or returns None to park the run until someone does."""

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """The decision on `request`, or None."""
        ...


class CallbackApprover:
    """A handler from a Python function (sync or async) of the request."""

    def __init__(
        self, function: Callable[[ApprovalRequest], Decision | None | Awaitable[Decision | None]]
    ) -> None:
        self._function = function

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """Call the function."""
        result = self._function(request)
        if isinstance(result, Awaitable):
            return await result
        return result


class TerminalApprover:
    """Asks on the terminal: approve (y), reject (n) or edit (e, then JSON arguments)."""

    def __init__(
        self,
        *,
        ask: Callable[[str], str] = input,
        show: Callable[[str], None] | None = None,
    ) -> None:
        self._ask = ask
        self._show = show or _to_stderr

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """Prompt until the answer is y, n or a valid edit; end of input is a rejection."""
        self._show(
            f"approval needed: {request.tool}({canonical_json(request.arguments)})\n"
            f"  because: {request.rule}"
        )
        try:
            return await self._prompt()
        except EOFError:
            self._show("end of input: rejected")
            return Reject(message="The user closed the input instead of answering; not run.")

    async def _prompt(self) -> Decision:
        while True:
            answer = await asyncio.to_thread(self._ask, "approve? [y]es / [n]o / [e]dit: ")
            answer = answer.strip().lower()
            if answer in ("y", "yes"):
                return Approve()
            if answer in ("n", "no"):
                reason = await asyncio.to_thread(self._ask, "reason (told to the model): ")
                return Reject(message=reason.strip() or Reject().message)
            if answer in ("e", "edit"):
                text = await asyncio.to_thread(self._ask, "arguments as JSON: ")
                try:
                    edited = json.loads(text)
                except json.JSONDecodeError as exc:
                    self._show(f"not JSON: {exc}")
                    continue
                if isinstance(edited, dict):
                    return Edit(arguments=edited)  # pyright: ignore[reportUnknownArgumentType]
                self._show("the arguments must be a JSON object")


def _to_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")


# -- the API a UI uses -----------------------------------------------------------------------------


class ApprovalDesk:
    """JSON-shaped access to a store, for a web UI or another process."""

    def __init__(self, store: ApprovalStore) -> None:
        self.store = store

    async def pending(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Pending requests as JSON objects (with their tokens)."""
        return [json.loads(r.to_json()) for r in await self.store.pending(run_id)]

    async def decide(self, request_id: str, body: Mapping[str, Any]) -> None:
        """Apply `{"token": ..., "verdict": "approve"|"reject"|"edit", ...}`."""
        token = body.get("token")
        if not isinstance(token, str):
            msg = "a decision needs the request's 'token'"
            raise DecisionTokenInvalid(msg)
        await self.store.decide(request_id, token, decision_from_json(body))


# -- parked runs ---------------------------------------------------------------------------------------


def pending_ids(requests: Iterable[ApprovalRequest]) -> tuple[str, ...]:
    """The ids of requests, in order."""
    return tuple(r.id for r in requests)


class StoredApprovals:
    """An `ApprovalStore` over the approvals table of a legato store (`ApprovalTable`).

    The rules live here once: a decision is accepted only with the request's token and
    before it expires, once; it is claimed by exactly one resumer. Each state change is one
    conditional update in the store (parked → decided → claimed), so the guarantees hold
    across processes and machines; the SQLite and PostgreSQL stores differ only in SQL.
    """

    def __init__(self, table: ApprovalTable, *, in_thread: bool = False) -> None:
        """Keep approvals in `table`; `in_thread` runs its calls off the event loop."""
        self._table = table
        self._in_thread = in_thread

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._in_thread:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request (recording the same request again changes nothing)."""
        if await self._run(self._table.approval, request.id) is not None:
            return
        payload = cast(JsonValue, asdict(request))
        await self._run(
            lambda: self._table.park_approval(request.id, run_id=request.run_id, payload=payload)
        )

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, decided or not."""
        record: ApprovalRecord | None = await self._run(self._table.approval, request_id)
        return _request_of(record.payload) if record is not None else None

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Undecided requests (of one run, or all), oldest first."""
        records: list[ApprovalRecord] = await self._run(
            lambda: self._table.approvals(run_id=run_id)
        )
        return [_request_of(r.payload) for r in records if r.state == "parked"]

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Accept a decision presented with the request's token, once (across processes)."""
        request = await self.get(request_id)
        if request is None or not hmac.compare_digest(request.token, token):
            msg = f"the decision token does not belong to request {request_id!r}"
            raise DecisionTokenInvalid(msg)
        if request.expires_at is not None and time.time() > request.expires_at:
            msg = f"request {request_id!r} expired; the run asks again when resumed"
            raise DecisionTokenInvalid(msg)
        verdict = cast(JsonValue, asdict(decision))
        if not await self._run(self._table.decide_approval, request_id, verdict):
            record: ApprovalRecord | None = await self._run(self._table.approval, request_id)
            if record is not None and record.state == "parked":  # its run has ended
                msg = (
                    f"request {request_id!r} belongs to run {request.run_id}, which has ended; "
                    "a decision for it is refused (nothing was run)"
                )
                raise DecisionTokenInvalid(msg)
            msg = f"request {request_id!r} was already decided; a token is used once"
            raise DecisionAlreadyUsed(msg)

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, without claiming it."""
        record: ApprovalRecord | None = await self._run(self._table.approval, request_id)
        if record is None or record.decision is None:
            return None
        return decision_from_json(cast(Mapping[str, Any], record.decision))

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision exactly once: one conditional update decides who gets it."""
        won: bool = await self._run(self._table.claim_approval, request_id)
        decision = await self.decision(request_id)
        if decision is None:
            return None
        if not won:
            msg = f"the decision on request {request_id!r} was already applied"
            raise DecisionAlreadyUsed(msg)
        return decision


def _request_of(payload: JsonValue) -> ApprovalRequest:
    if isinstance(payload, str):  # written by an older legato as JSON text
        return ApprovalRequest.from_json(payload)
    return ApprovalRequest(**cast(dict[str, Any], payload))


class SQLiteApprovalStore(StoredApprovals):
    """Approvals in a legato SQLite database (`legato.store.SQLiteStore`).

    A run parks in one process and is decided and resumed from another.
    """

    def __init__(self, store: SQLiteStore | str | Path = ".legato/legato.db") -> None:
        """Use an open `SQLiteStore`, or open one at a path."""
        from legato.store import SQLiteStore

        self.store = store if isinstance(store, SQLiteStore) else SQLiteStore(store)
        super().__init__(self.store)


class PostgresApprovalStore(StoredApprovals):
    """Approvals in a legato PostgreSQL database (`legato.store.PostgresStore`).

    A run parks on one machine and is decided and resumed from another. Database calls run
    in a worker thread, off the event loop.
    """

    def __init__(self, store: PostgresStore | str | ConnectionPool) -> None:
        """Use an open `PostgresStore`, or open one from a DSN or a connection pool."""
        from legato.store import PostgresStore

        self.store = store if isinstance(store, PostgresStore) else PostgresStore(store)
        super().__init__(self.store, in_thread=True)

    def close(self) -> None:
        """Close the store's connection."""
        self.store.close()
