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

This module owns the policies (`Rule`, `ApprovalPolicy`: which calls run freely, which
wait for a decision, which never run, and how a child's policy nests in its parent's)
and is the one import path for the rest, which lives in parts:
`legato._approval_decisions` (approve, reject, edit), `legato._approval_stores` (where
requests wait and decisions are claimed once) and `legato._approval_handlers` (who
decides). Requests themselves (`ApprovalRequest`, `ParkedRun`) are foundation values in
`legato._requests`. A policy decides nothing about a call in flight: the effect gate
(`legato.effects`) asks it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias

from legato._approval_decisions import Approve, Decision, Edit, Reject, decision_from_json
from legato._approval_handlers import (
    ApprovalDesk,
    ApprovalHandler,
    CallbackApprover,
    TerminalApprover,
)
from legato._approval_stores import (
    ApprovalStore,
    MemoryApprovalStore,
    PostgresApprovalStore,
    SQLiteApprovalStore,
    StoredApprovals,
)
from legato._requests import ApprovalRequest, ParkedRun, arguments_hash, canonical_json
from legato._values import value_class
from legato.exceptions import PolicyError
from legato.messages import JsonValue

if TYPE_CHECKING:
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
    "decision_from_json",
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
