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
import hashlib
import hmac
import json
import secrets
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, cast, runtime_checkable

from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid, PolicyError
from legato.messages import JsonValue

if TYPE_CHECKING:
    from pathlib import Path

    from legato.events import Journal
    from legato.store import ConnectionPool, PostgresStore, SQLiteStore
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
    "TerminalApprover",
    "arguments_hash",
    "canonical_json",
]

Action: TypeAlias = Literal["auto", "ask", "deny"]
"""What a policy does with a call: admit it, hold it for a decision, or refuse it."""

_ACTIONS: frozenset[str] = frozenset({"auto", "ask", "deny"})


def canonical_json(value: JsonValue) -> str:
    """The one JSON text of a value: sorted keys, no whitespace (hashes are taken of this)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_hash(arguments: JsonValue) -> str:
    """SHA-256 (hex) of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


# -- policies ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
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

    def action(self, tool: Tool, arguments: JsonValue) -> tuple[Action, str]:
        """The action for a call and a description of why (the rule, or the default)."""
        for rule in self.rules:
            if rule.matches(tool.name, arguments):
                return rule.action, rule.describe()
        if tool.side_effects == "none":
            return "auto", "read-only"
        return self.default, f"default for {tool.side_effects} tools -> {self.default}"

    def check(self, tools: Mapping[str, Tool]) -> None:
        """Raise `PolicyError` for a rule naming no tool of the run, or an unknown argument."""
        for rule in self.rules:
            matched = [t for name, t in tools.items() if fnmatch.fnmatchcase(name, rule.tool)]
            if not matched:
                known = ", ".join(sorted(tools)) or "none"
                msg = f"approval rule {rule.describe()!r} names an unknown tool; tools: {known}"
                raise PolicyError(msg)
            for name in rule.arguments:
                if not any(_has_argument(t, name) for t in matched):
                    msg = f"approval rule {rule.describe()!r}: no tool {rule.tool!r} takes {name!r}"
                    raise PolicyError(msg)


def _has_argument(tool: Tool, name: str) -> bool:
    props = tool.parameters.get("properties")
    return isinstance(props, dict) and name in props


# -- requests and decisions ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A call waiting for a decision, bound to exactly that call."""

    id: str
    token: str = field(repr=False)
    """The single-use decision token; whoever decides must present it."""
    run_id: str
    step: int
    call_id: str
    tool: str
    arguments: JsonValue
    arguments_hash: str
    rule: str
    """Why approval is needed (the policy rule or the hook that asked)."""
    created_at: float = field(default_factory=time.time)
    expires_at: float | None = None
    """Unix time after which no decision is accepted (None: never)."""

    @classmethod
    def create(
        cls,
        *,
        run_id: str,
        step: int,
        call_id: str,
        tool: str,
        arguments: JsonValue,
        rule: str,
        ttl: float | None = None,
    ) -> ApprovalRequest:
        """A new request with a fresh id and token."""
        now = time.time()
        return cls(
            created_at=now,
            expires_at=None if ttl is None else now + ttl,
            id=f"apr_{secrets.token_hex(8)}",
            token=secrets.token_urlsafe(24),
            run_id=run_id,
            step=step,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            arguments_hash=arguments_hash(arguments),
            rule=rule,
        )

    def to_json(self) -> str:
        """The request as JSON (the token included: keep it where approvers can reach it)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ApprovalRequest:
        """Load a request written by `to_json`."""
        data: dict[str, Any] = json.loads(text)
        return cls(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class Approve:
    """Run the call once, as it was requested."""

    message: str = ""
    verdict: Literal["approve"] = "approve"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reject:
    """Do not run the call; the model is told `message`."""

    message: str = "The user rejected this call."
    verdict: Literal["reject"] = "reject"


@dataclass(frozen=True, slots=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class ParkedRun:
    """A run stopped for decisions: its journal and the requests it waits on."""

    run_id: str
    journal: Journal
    requests: tuple[ApprovalRequest, ...]

    def request_for(self, tool: str) -> ApprovalRequest:
        """The pending request for a call of `tool` (the first, if several)."""
        for request in self.requests:
            if request.tool == tool:
                return request
        msg = f"no pending request for tool {tool!r}"
        raise KeyError(msg)


def pending_ids(requests: Iterable[ApprovalRequest]) -> tuple[str, ...]:
    """The ids of requests, in order."""
    return tuple(r.id for r in requests)


class SQLiteApprovalStore:
    """An `ApprovalStore` in a legato SQLite database (`legato.store.SQLiteStore`).

    Requests wait in the store's `approvals` table, so a run can park in one process and be
    decided and resumed from another. `decide` accepts a token once and `claim` hands the
    decision to exactly one resumer, each as one conditional `UPDATE` whose row count says
    who won, so the guarantees hold across processes.
    """

    def __init__(self, store: SQLiteStore | str | Path = ".legato/legato.db") -> None:
        """Use an open `SQLiteStore`, or open one at a path."""
        from legato.store import SQLiteStore

        self._store = store if isinstance(store, SQLiteStore) else SQLiteStore(store)

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request (recording the same request again changes nothing)."""
        with self._store.db.write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO approvals(request_id, run_id, payload, created_at) "
                "VALUES (?, ?, ?, ?)",
                (request.id, request.run_id, request.to_json(), time.time()),
            )

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, decided or not."""
        with self._store.db.read() as conn:
            row = conn.execute(
                "SELECT payload FROM approvals WHERE request_id = ?", (request_id,)
            ).fetchone()
        return ApprovalRequest.from_json(row[0]) if row is not None else None

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Undecided requests (of one run, or all), oldest first."""
        query = "SELECT payload FROM approvals WHERE state = 'parked'"
        args: tuple[str, ...] = ()
        if run_id is not None:
            query += " AND run_id = ?"
            args = (run_id,)
        with self._store.db.read() as conn:
            rows = conn.execute(query + " ORDER BY created_at, rowid", args).fetchall()
        return [ApprovalRequest.from_json(r[0]) for r in rows]

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Accept a decision presented with the request's token, once (across processes)."""
        request = await self.get(request_id)
        if request is None or not hmac.compare_digest(request.token, token):
            msg = f"the decision token does not belong to request {request_id!r}"
            raise DecisionTokenInvalid(msg)
        if request.expires_at is not None and time.time() > request.expires_at:
            msg = f"request {request_id!r} expired; the run asks again when resumed"
            raise DecisionTokenInvalid(msg)
        if not self._store.decide_approval(request_id, cast(JsonValue, asdict(decision))):
            msg = f"request {request_id!r} was already decided; a token is used once"
            raise DecisionAlreadyUsed(msg)

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, without claiming it."""
        with self._store.db.read() as conn:
            row = conn.execute(
                "SELECT decision FROM approvals WHERE request_id = ?", (request_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return decision_from_json(json.loads(row[0]))

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision exactly once: one conditional update decides who gets it."""
        with self._store.db.write() as conn:
            claimed = conn.execute(
                "UPDATE approvals SET state = 'claimed' WHERE request_id = ? AND state = 'decided'",
                (request_id,),
            ).rowcount
            row = conn.execute(
                "SELECT state, decision FROM approvals WHERE request_id = ?", (request_id,)
            ).fetchone()
        if row is None or row[1] is None:
            return None
        if claimed != 1:
            msg = f"the decision on request {request_id!r} was already applied"
            raise DecisionAlreadyUsed(msg)
        return decision_from_json(json.loads(row[1]))


class PostgresApprovalStore:
    """An `ApprovalStore` in a legato PostgreSQL database (`legato.store.PostgresStore`).

    Requests wait in the database's `legato.approvals` table: a run parks on one machine
    and is decided and resumed from another. `decide` locks the request's row while it
    checks the token, and `claim` is one `UPDATE ... WHERE state = 'decided' RETURNING`:
    a second claimer waits on the row lock, then finds the decision taken. So a token is
    accepted once and a decision is claimed by exactly one resumer, across machines.
    Database calls run in a worker thread, off the event loop.
    """

    def __init__(self, store: PostgresStore | str | ConnectionPool) -> None:
        """Use an open `PostgresStore`, or open one from a DSN or a connection pool."""
        from legato.store import PostgresStore

        self._store = store if isinstance(store, PostgresStore) else PostgresStore(store)

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request (recording the same request again changes nothing)."""
        await asyncio.to_thread(self._put, request)

    def _put(self, request: ApprovalRequest) -> None:
        with self._store.db.write() as conn:
            conn.execute(
                "INSERT INTO legato.approvals(request_id, run_id, payload, created_at) "
                "VALUES (%s, %s, %s, extract(epoch from clock_timestamp())::double precision) "
                "ON CONFLICT (request_id) DO NOTHING",
                (request.id, request.run_id, request.to_json()),
            )

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, decided or not."""
        return await asyncio.to_thread(self._get, request_id)

    def _get(self, request_id: str) -> ApprovalRequest | None:
        with self._store.db.read() as conn:
            row = conn.execute(
                "SELECT payload FROM legato.approvals WHERE request_id = %s", (request_id,)
            ).fetchone()
        return ApprovalRequest.from_json(row[0]) if row is not None else None

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Undecided requests (of one run, or all), oldest first."""
        return await asyncio.to_thread(self._pending, run_id)

    def _pending(self, run_id: str | None) -> list[ApprovalRequest]:
        with self._store.db.read() as conn:
            rows = conn.execute(
                "SELECT payload FROM legato.approvals WHERE state = 'parked' "
                "AND (%s::text IS NULL OR run_id = %s) ORDER BY created_at, ord",
                (run_id, run_id),
            ).fetchall()
        return [ApprovalRequest.from_json(r[0]) for r in rows]

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Accept a decision presented with the request's token, once (across machines)."""
        await asyncio.to_thread(self._decide, request_id, token, decision)

    def _decide(self, request_id: str, token: str, decision: Decision) -> None:
        with self._store.db.write() as conn:
            row = conn.execute(
                "SELECT payload, state FROM legato.approvals WHERE request_id = %s FOR UPDATE",
                (request_id,),
            ).fetchone()
            request = ApprovalRequest.from_json(row[0]) if row is not None else None
            if request is None or not hmac.compare_digest(request.token, token):
                msg = f"the decision token does not belong to request {request_id!r}"
                raise DecisionTokenInvalid(msg)
            if row is not None and row[1] != "parked":
                msg = f"request {request_id!r} was already decided; a token is used once"
                raise DecisionAlreadyUsed(msg)
            if request.expires_at is not None and time.time() > request.expires_at:
                msg = f"request {request_id!r} expired; the run asks again when resumed"
                raise DecisionTokenInvalid(msg)
            conn.execute(
                "UPDATE legato.approvals SET state = 'decided', decision = %s, "
                "decided_at = extract(epoch from clock_timestamp())::double precision "
                "WHERE request_id = %s",
                (json.dumps(asdict(decision)), request_id),
            )

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, without claiming it."""
        return await asyncio.to_thread(self._decision, request_id)

    def _decision(self, request_id: str) -> Decision | None:
        with self._store.db.read() as conn:
            row = conn.execute(
                "SELECT decision FROM legato.approvals WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return decision_from_json(json.loads(row[0]))

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision exactly once: one `UPDATE ... RETURNING` decides who gets it."""
        return await asyncio.to_thread(self._claim, request_id)

    def _claim(self, request_id: str) -> Decision | None:
        with self._store.db.write() as conn:
            won = conn.execute(
                "UPDATE legato.approvals SET state = 'claimed' "
                "WHERE request_id = %s AND state = 'decided' RETURNING decision",
                (request_id,),
            ).fetchone()
            if won is not None:
                return decision_from_json(json.loads(won[0]))
            row = conn.execute(
                "SELECT decision FROM legato.approvals WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        msg = f"the decision on request {request_id!r} was already applied"
        raise DecisionAlreadyUsed(msg)

    def close(self) -> None:
        """Close the store's connection."""
        self._store.close()
