"""The small values that travel through Temporal: references and plans, never messages.

Workflow code holds only these. Each is a frozen dataclass of strings, numbers and tuples,
so Temporal's JSON converter carries it as is, and a history stays small however large the
conversation grows: prompts, responses and tool results live in the legato store.
This module imports nothing from legato, so workflow code can import it in its sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ActivitySettings",
    "ChildLink",
    "ChildParked",
    "DecideInput",
    "DecisionInput",
    "LocalActivities",
    "Plan",
    "PollInput",
    "RecordInput",
    "Recorded",
    "RunInput",
    "RunOutcome",
    "RunRef",
    "StartInput",
    "StoredDecisions",
    "UnitInput",
]

PlanKind = Literal["model", "tool", "close", "parked", "child", "done"]

LocalActivities = Literal["none", "model", "model_and_tools"]
"""Which units run as Temporal local activities (`ActivitySettings.local_activities`)."""


@dataclass(frozen=True, kw_only=True)
class ChildLink:
    """A sub-agent's run that its own (child) workflow drives, and its parent's terms."""

    run_id: str
    """The child's run id in the store (its journal is stored and linked already)."""
    agent: str
    """The name the worker registers the child agent under."""
    parent_agent: str
    """The parent's registered name: the child decides under its approval policy too."""
    share: tuple[tuple[str, float], ...] = ()
    """What the child's budget may spend, by resource: carved from the parent's."""
    parent_workflow: str = ""
    """The parent's workflow id (a parked child tells it which requests it waits on)."""
    parent_run_id: str = ""
    parent_step: int = 0
    parent_call_id: str | None = None
    depth: int = 1
    """The child's depth in the tree (its own agent tools count from it: `max_depth`)."""


@dataclass(frozen=True, kw_only=True)
class RunRef:
    """Where a run stands in the legato store: its id, journal length and digest."""

    run_id: str
    agent: str
    """The name the worker registers the agent under."""
    offset: int = 0
    """How many journal events the store held when the reference was taken."""
    digest: str = ""
    """sha256 of those events (their JSONL), so a history names exactly what it saw."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What the run does next (`RunDriver.next_unit`), or that it waits or has ended."""

    kind: PlanKind
    ref: RunRef
    step: int = 0
    call_id: str | None = None
    """The call a `tool` unit runs (or, `parked`, the call waiting for decisions)."""
    effect_id: str | None = None
    """That call's effect id (the gate's): the tool activity's id and idempotency key."""
    request_ids: tuple[str, ...] = ()
    """`parked`: the approval requests the run waits on."""
    approval_ttl: float | None = None
    """`parked`: seconds the requests may be decided for (None: no expiry)."""
    status: Literal["running", "parked", "finished", "failed"] = "running"
    tools: str = ""
    """sha256 of the run's tool definitions when it started: fixed for the whole run."""
    child: ChildLink | None = None
    """`child`: the sub-agent run the call `call_id` waits for (a child workflow)."""
    link: ChildLink | None = None
    """In a sub-agent's own run: its link to the parent (carried by every plan)."""
    effects: str = ""
    """`tool`: the side effects its tool declares (`none`, `idempotent`, `irreversible`);
    empty for an agent tool or a tool the worker's toolset does not list (an MCP source's):
    only a `none` or `idempotent` call may run as a local activity."""


@dataclass(frozen=True, kw_only=True)
class ActivitySettings:
    """Timeouts and retries of the run's activities (every retry policy is bounded)."""

    start_to_close: float = 3600.0
    """Seconds one attempt may take."""
    heartbeat: float = 10.0
    """Seconds without a heartbeat before an attempt counts as lost (its worker died)."""
    max_attempts: int = 5
    """Attempts per activity, the first included."""
    initial_interval: float = 1.0
    """Seconds before the first retry (doubled each time, at most 30 s)."""
    parallel_tools: bool = False
    """Run all the calls of one model response in one `legato.tools` activity, concurrently
    under the gate as `agent.run` does, instead of one `legato.tool` activity per call."""
    decision_poll: float = 1.0
    """Seconds a parked run waits before it first reads the approvals store for decisions
    made through another door (`legato runs approve --store`, a handler, the web UI); the
    wait doubles after each read, up to `decision_poll_max`."""
    decision_poll_max: float = 300.0
    """The longest wait between two reads of the approvals store while parked."""
    local_activities: LocalActivities = "model_and_tools"
    """Units run as Temporal *local* activities, inside the workflow task of the worker that
    plans them (no round trip through the server per unit): `model` the run's start, its
    model calls and step closes; `model_and_tools` (the default) also the calls of tools
    declared `none` or `idempotent`; `none` every unit a regular activity. Irreversible
    calls, agent tools, tools an MCP source lists, parallel batches, decisions and approval
    reads always stay regular activities (docs/temporal.md, "Local activities")."""


@dataclass(frozen=True, kw_only=True)
class StartInput:
    """The `start` activity's input: the run's id and its prompt (checked for size)."""

    run_id: str
    agent: str
    prompt: str | None
    link: ChildLink | None = None


@dataclass(frozen=True, kw_only=True)
class RunInput:
    """A run workflow's input; continue-as-new carries the same shape with a plan."""

    run_id: str
    agent: str
    prompt: str | None = None
    """Only for the first workflow run; a continued one starts from `plan`."""
    continue_every: int = 500
    """Units per workflow run before it continues as new (or sooner when Temporal says)."""
    settings: ActivitySettings = ActivitySettings()
    plan: Plan | None = None
    units: int = 0
    """Units done by earlier workflow runs of this run."""
    link: ChildLink | None = None
    """A sub-agent's run: its parent's terms (its workflow id is `<parent run>/<call>`)."""


@dataclass(frozen=True, kw_only=True)
class UnitInput:
    """A unit activity's input: the plan to carry out."""

    plan: Plan


@dataclass(frozen=True, kw_only=True)
class DecisionInput:
    """A decision on one approval request, sent to the run workflow as an update."""

    request_id: str
    verdict: Literal["approve", "reject"]
    message: str | None = None
    """A rejection's message, which the model is shown."""


@dataclass(frozen=True, kw_only=True)
class RecordInput:
    """The `record` activity's input: one decision an update brought, for the store."""

    plan: Plan
    """The plan of the workflow the update reached (whose approvals store is written)."""
    decision: DecisionInput


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """What the approvals store holds for a request after the `record` activity.

    `outcome` is `won` (this decision is the request's one decision), `lost` (another door,
    such as `legato runs approve --store`, decided first: `decision` is that one) or
    `expired` (the store refused it as expired).
    """

    outcome: Literal["won", "lost", "expired"]
    decision: DecisionInput | None = None


@dataclass(frozen=True, kw_only=True)
class PollInput:
    """The `stored_decisions` activity's input: requests the workflow waits on."""

    plan: Plan
    request_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class StoredDecisions:
    """Decisions other doors wrote to the approvals store for the requests asked about."""

    decisions: tuple[DecisionInput, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ChildParked:
    """A signal to a parent workflow: its child (or a child below) waits on these requests."""

    workflow_id: str
    """The direct child that sends it (decisions go back down through it)."""
    request_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class DecideInput:
    """The `decide` activity's input: decisions to write to the approvals store."""

    plan: Plan
    """The parked plan the decisions answer."""
    decisions: tuple[DecisionInput, ...]


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """A run workflow's result: a reference to the ended run (its output is in the store)."""

    ref: RunRef
    status: Literal["finished", "failed"]
    units: int
