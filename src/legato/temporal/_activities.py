"""The activities: each loads the run from the legato store and advances it one unit.

Every activity resolves its agent by name from the worker's registry, loads the run by id
from that agent's store, claims it (`RunResumed`, owner `temporal:<workflow>:<activity>#n`),
advances one unit (`RunDriver.advance`), and returns a `Plan`: a reference (run id,
journal length, digest) and what comes next. Messages never leave the store.

Temporal runs an activity at least once (a worker killed mid-call: the next attempt runs
the body again; a local activity whose workflow task never completed runs again even when
it had finished). The legato store makes effects exactly once: a finished unit is not run
again (`next_unit` no longer plans it), a call admitted and never finished is reconciled
by its tool's declared kind, and a second attempt racing the first loses its claim
(`JournalConflict`) before it admits anything. Temporal is the lease: activities take the
run over from a dead attempt (`takeover=True`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from legato.agent import Agent
from legato.effects import effect_id
from legato.events import Journal, JournalEvent, Lineage, RunEvent, RunFailed, RunFinished
from legato.exceptions import (
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    EngineInputInvalid,
    RunNotResumable,
    RunParked,
    StoreError,
)
from legato.messages import JsonValue
from legato.run._loop import RunDriver, Unit
from legato.spawn._as_tool import agent_of
from legato.spawn._child import defer_children
from legato.store import RunStore
from legato.temporal._types import (
    ChildLink,
    DecideInput,
    DecisionInput,
    Plan,
    PollInput,
    Recorded,
    RecordInput,
    RunRef,
    StartInput,
    StoredDecisions,
    UnitInput,
)

__all__ = ["MAX_PROMPT_BYTES", "LegatoActivities", "journal_digest"]

MAX_PROMPT_BYTES = 256 * 1024
"""The largest prompt a run may start with: it is the one message that travels through
Temporal (in the workflow's input); everything later stays in the store."""


def journal_digest(events: Sequence[JournalEvent], *, after: str = "") -> str:
    """The digest a `RunRef` names: a sha256 chain over the journal's events.

    Each event's JSON is hashed with the digest before it, so the digest of a longer
    journal is computed from a shorter one's (`after`) and the new events alone.
    """
    digest = after
    for line in Journal(list(events)).to_jsonl().splitlines():
        digest = hashlib.sha256(f"{digest}{line}".encode()).hexdigest()
    return digest


@dataclass(slots=True)
class _Cached:
    """A run's journal as this worker last stored it, and its digest."""

    events: list[JournalEvent]
    digest: str


async def tools_digest(agent: Agent[Any]) -> str:
    """sha256 of the tool definitions the agent's sources list now (names, schemas)."""
    from legato._requests import canonical_json

    definitions: list[JsonValue] = []
    for source in agent.tool_sources:
        definitions += [cast(JsonValue, asdict(t.definition)) for t in await source.list_tools()]
    definitions.sort(key=lambda d: canonical_json(d))
    return hashlib.sha256(canonical_json(definitions).encode()).hexdigest()


def _owner() -> str:
    info = activity.info()
    return f"temporal:{info.workflow_id}:{info.activity_id}#{info.attempt}"


async def _heartbeating(events: AsyncIterator[RunEvent]) -> None:
    """Drain `events`, heartbeating meanwhile (a dead worker's attempt is then retried).

    A local activity has no heartbeat: the worker's workflow task stands for it.
    """
    info = activity.info()
    if info.is_local:
        async for _ in events:
            pass
        return
    timeout = info.heartbeat_timeout
    interval = timeout.total_seconds() / 3 if timeout else 5.0

    async def drain() -> None:
        async for _ in events:
            pass

    task = asyncio.ensure_future(drain())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                task.result()
                return
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class LegatoActivities:
    """The activities of the agents a worker serves (registered by name)."""

    def __init__(self, agents: Mapping[str, Agent[Any]], *, cache_runs: int = 256) -> None:
        """Serve `agents`, each by its key; every one needs a store shared by the workers.

        `cache_runs`: journals of that many recent runs kept in memory. An activity uses
        the cached journal only when the store holds exactly as many events (a journal is
        append-only, so the same count is the same journal); otherwise it loads the run.
        """
        for name, agent in agents.items():
            if agent.store is None:
                msg = (
                    f"agent {name!r} has no store: on Temporal the journal lives in a store "
                    "every worker reaches (SQLiteStore on one host, PostgresStore across hosts)"
                )
                raise EngineInputInvalid(msg)
        self.agents = dict(agents)
        self._names: dict[int, str] = {id(a): k for k, a in reversed(list(agents.items()))}
        for name, agent in agents.items():
            self._register_children(name, agent)
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_runs = cache_runs

    def _register_children(self, name: str, agent: Agent[Any]) -> None:
        """Register the agents `agent`'s tools run as children (`<name>/<tool>`), if new."""
        for tool in agent.toolset.tools:
            found = agent_of(tool)
            if not isinstance(found, Agent):  # None for other tools
                continue
            child = cast("Agent[Any]", found)
            known = self._name_of(child)
            if known is not None and self.agents[known].store is agent.store:
                continue  # registered already, with its parent's store
            key = f"{name}/{tool.name}"
            self._names[id(child)] = key
            if child.store is not agent.store:  # a child's journal sits beside its parent's
                child = copy.copy(child)
                child.store = agent.store
            self.agents[key] = child
            self._register_children(key, child)

    def _name_of(self, agent: Agent[Any]) -> str | None:
        """The name a (child) agent is registered under."""
        return self._names.get(id(agent))

    @staticmethod
    def warm() -> None:
        """Build the event schemas a fresh worker's first activity would otherwise build.

        The journal's and the store's event adapters: pydantic schemas of every event type,
        about 0.2 s each on a loaded machine.
        """
        from legato.store._codec import event_adapter  # the store's, not exported

        Journal.from_jsonl("")
        event_adapter()

    def all(self) -> list[Callable[..., Any]]:
        """The activity functions, to register with a worker."""
        return [
            self.start,
            self.model,
            self.tool,
            self.tools,
            self.close,
            self.decide,
            self.record,
            self.stored_decisions,
        ]

    def agent(self, name: str) -> Agent[Any]:
        """The agent registered as `name` (`EngineInputInvalid`, not retried, if none)."""
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            msg = f"no agent {name!r} is registered with this worker (registered: {known})"
            raise ApplicationError(msg, type="EngineInputInvalid", non_retryable=True)
        return agent

    @staticmethod
    def _store(agent: Agent[Any]) -> RunStore:
        store = agent.store
        assert store is not None  # checked when the activities were made
        return store

    # -- activities ---------------------------------------------------------------------------

    @activity.defn(name="legato.start")
    async def start(self, start: StartInput) -> Plan:
        """Record the run's start (`RunStarted`, the prompt); a retry finds it stored."""
        agent = self.agent(start.agent)
        store = self._store(agent)
        tools = await tools_digest(agent)
        if store.run_info(start.run_id) is None:
            if start.prompt is not None and len(start.prompt.encode()) > MAX_PROMPT_BYTES:
                msg = f"the prompt is larger than {MAX_PROMPT_BYTES} bytes"
                raise ApplicationError(msg, type="EngineInputInvalid", non_retryable=True)
            try:
                driver = agent.new_driver(start.prompt, run_id=start.run_id, owner=_owner())
                driver.flush()
                return replace(self._plan(driver, agent=start.agent), tools=tools, link=start.link)
            except StoreError:
                if store.run_info(start.run_id) is None:
                    raise
                # another attempt stored the start first: plan from what it stored
        plan = self._stored_plan(agent, start.agent, start.run_id)
        return replace(plan, tools=tools, link=start.link)

    @activity.defn(name="legato.model")
    async def model(self, unit: UnitInput) -> Plan:
        """One model call (streamed inside the activity); the response goes to the store."""
        return await self._advance(unit.plan)

    @activity.defn(name="legato.tool")
    async def tool(self, unit: UnitInput) -> Plan:
        """One tool call, under the gate (approvals, budget, dedup by its effect id)."""
        return await self._advance(unit.plan)

    @activity.defn(name="legato.tools")
    async def tools(self, unit: UnitInput) -> Plan:
        """All the step's unfinished calls, concurrently under the gate, and the step's end."""
        return await self._advance(unit.plan, kind="tools")

    @activity.defn(name="legato.close")
    async def close(self, unit: UnitInput) -> Plan:
        """A step's end: the output tool's calls, failure limits, the final answer."""
        return await self._advance(unit.plan)

    @activity.defn(name="legato.decide")
    async def decide(self, decide: DecideInput) -> Plan:
        """Write the decisions the workflow accepted to the approvals store, once each."""
        from legato.approvals import Approve, Reject

        agent = self.agent(decide.plan.ref.agent)
        policy = self._approvals(agent, decide.plan.link)
        if policy is None:
            msg = f"agent {decide.plan.ref.agent!r} has no approval policy to decide in"
            raise ApplicationError(msg, type="EngineInputInvalid", non_retryable=True)
        store = policy.store
        for decision in decide.decisions:
            request = await store.get(decision.request_id)
            if request is None:
                msg = f"no approval request {decision.request_id} in the approvals store"
                raise ApplicationError(msg, type="DecisionTokenInvalid", non_retryable=True)
            verdict = (
                Approve()
                if decision.verdict == "approve"
                else Reject(message=decision.message or "The user rejected this call.")
            )
            # a retried attempt finds its decision stored; an expired request is asked again
            with contextlib.suppress(DecisionAlreadyUsed, DecisionTokenInvalid):
                await store.decide(request.id, request.token, verdict)
        return replace(decide.plan, kind="tool", request_ids=(), status="running")

    @activity.defn(name="legato.record")
    async def record(self, record: RecordInput) -> Recorded:
        """Write one decision an update brought to the approvals store, before it returns.

        The store's conditional write (decided only if still undecided) is the one arbiter
        of every door: when another door (`legato runs approve --store`, a handler, the web
        UI) decided the request first, this one lost and the workflow follows that decision.
        """
        from legato._effects_parts import current_switches
        from legato.approvals import Approve, Reject

        decision = record.decision
        if not current_switches().decide_once:
            return Recorded(outcome="won")  # the twin: the store is written after the wait
        found = await self._request_store(record.plan, decision.request_id)
        if found is None:
            msg = f"no approval request {decision.request_id} in the approvals store"
            raise ApplicationError(msg, type="DecisionTokenInvalid", non_retryable=True)
        store, request = found
        verdict = (
            Approve(message=decision.message or "")
            if decision.verdict == "approve"
            else Reject(message=decision.message or "The user rejected this call.")
        )
        try:
            await store.decide(request.id, request.token, verdict)
        except DecisionTokenInvalid:
            return Recorded(outcome="expired")
        except DecisionAlreadyUsed:
            stored = await store.decision(request.id)
            if stored is None:  # claimed and gone: an older legato's row; nothing to follow
                raise
            mine = stored.verdict == verdict.verdict and stored.message == verdict.message
            if mine and activity.info().attempt > 1:  # an earlier attempt of this one wrote it
                return Recorded(outcome="won")
            return Recorded(outcome="lost", decision=_decision_input(request.id, stored))
        return Recorded(outcome="won")

    @activity.defn(name="legato.stored_decisions")
    async def stored_decisions(self, poll: PollInput) -> StoredDecisions:
        """Decisions another door wrote to the approvals store for requests the run waits on."""
        found: list[DecisionInput] = []
        for request_id in poll.request_ids:
            located = await self._request_store(poll.plan, request_id)
            stored = await located[0].decision(request_id) if located is not None else None
            if stored is not None:
                found.append(_decision_input(request_id, stored))
        return StoredDecisions(decisions=tuple(found))

    async def _request_store(self, plan: Plan, request_id: str) -> tuple[Any, Any] | None:
        """The approvals store holding a request, and the request.

        The run's own policy's store first, else that of any agent the worker serves (a
        request asked in a child run).
        """
        policies = [self._approvals(self.agent(plan.ref.agent), plan.link)]
        policies += [a.approvals for a in self.agents.values()]
        seen: set[int] = set()
        for policy in policies:
            if policy is None or id(policy.store) in seen:
                continue
            seen.add(id(policy.store))
            request = await policy.store.get(request_id)
            if request is not None:
                return policy.store, request
        return None

    # -- helpers ------------------------------------------------------------------------------

    async def _advance(self, plan: Plan, *, kind: Literal["tools"] | None = None) -> Plan:
        planned = await self._advance_unit(plan, kind=kind)
        return replace(planned, tools=plan.tools, link=plan.link)

    def _approvals(self, agent: Agent[Any], link: ChildLink | None) -> Any:
        """The run's approval policy: a child's is nested in its parent's (`for_child`)."""
        from legato._effects_parts import current_switches

        if link is None or not current_switches().inherit_gate:
            return agent.approvals
        from legato.approvals import ApprovalPolicy

        parent = self.agent(link.parent_agent).approvals
        if parent is None:
            return agent.approvals
        return ApprovalPolicy.for_child(parent, agent.approvals)

    def _options(self, agent: Agent[Any], link: ChildLink | None) -> dict[str, Any]:
        """A child run's terms: its parent's approval policy, its carved budget share."""
        if link is None:
            return {}
        from legato.budgets import BudgetLimits

        own = agent.budget if isinstance(agent.budget, BudgetLimits) else BudgetLimits()
        limits: dict[str, Any] = {}
        for resource, amount in link.share:
            mine = getattr(own, resource)
            value = amount if mine is None else min(mine, amount)
            limits[resource] = value if resource == "dollars" else int(value)
        parent = self.agent(link.parent_agent).budget
        if own.prices is None and isinstance(parent, BudgetLimits):
            limits["prices"] = parent.prices
        options: dict[str, Any] = {"approvals": self._approvals(agent, link)}
        if limits or agent.budget is not None:
            options["budget"] = replace(own, **limits)
        return options

    async def _advance_unit(self, plan: Plan, *, kind: Literal["tools"] | None = None) -> Plan:
        agent = self.agent(plan.ref.agent)
        run_id = plan.ref.run_id
        ended = self._ended(agent, plan.ref.agent, run_id)
        if ended is not None:
            return ended
        if plan.tools and await tools_digest(agent) != plan.tools:
            msg = (
                f"the tools of agent {plan.ref.agent!r} changed while run {run_id} was in "
                "flight; a run keeps the tool list it started with (deploy changed tools "
                "under a new agent name, or let the old runs finish first)"
            )
            raise ApplicationError(msg, type="EngineInputInvalid", non_retryable=True)
        cached = self._cache.pop(run_id, None)
        options = self._options(agent, plan.link)
        try:
            if cached is not None:
                try:
                    driver = agent.resumed_driver(
                        run_id, stored=cached.events, takeover=True, owner=_owner(), **options
                    )
                except RunNotResumable:  # another worker stored more: load it
                    cached = None
                    driver = agent.resumed_driver(run_id, takeover=True, owner=_owner(), **options)
            else:
                driver = agent.resumed_driver(run_id, takeover=True, owner=_owner(), **options)
        except StoreError:
            raise  # another attempt claimed it first: retried, it reloads what that one stored
        except Exception as exc:
            raise _fatal(run_id, exc) from exc
        unit = Unit(
            kind=kind if kind is not None else _unit_kind(plan),
            step=plan.step,
            call_id=plan.call_id,
        )
        lineage = _lineage(plan, agent)
        with defer_children(lineage) as deferred:  # a sub-agent's run: a child workflow
            try:
                await _heartbeating(driver.advance(unit))
            except RunParked as exc:
                if deferred:
                    child = deferred[0]
                    name = self._name_of(child.agent)
                    if name is None:
                        msg = f"run {run_id}: the agent of call {plan.call_id} is not registered"
                        raise _fatal(run_id, EngineInputInvalid(msg)) from exc
                    link = ChildLink(
                        run_id=child.lineage.run_id,
                        agent=name,
                        parent_agent=plan.ref.agent,
                        share=child.share,
                        parent_run_id=child.lineage.parent_run_id,
                        parent_step=child.lineage.parent_step,
                        parent_call_id=child.lineage.parent_call_id,
                        depth=child.lineage.depth,
                    )
                    return replace(
                        self._plan(driver, agent=plan.ref.agent, cached=cached),
                        kind="child",
                        call_id=child.lineage.parent_call_id or plan.call_id,
                        effect_id=plan.effect_id,
                        child=link,
                        status="parked",
                    )
                requests = tuple(r.id for r in exc.parked.requests)
                policy = self._approvals(agent, plan.link)
                return replace(
                    self._plan(driver, agent=plan.ref.agent, cached=cached),
                    kind="parked",
                    call_id=plan.call_id,
                    effect_id=plan.effect_id,
                    request_ids=requests,
                    approval_ttl=policy.ttl if policy is not None else None,
                    status="parked",
                )
            except StoreError:
                raise  # retried: the next attempt resumes from what was stored
            except Exception as exc:
                raise _fatal(run_id, exc) from exc
            return self._plan(driver, agent=plan.ref.agent, cached=cached)

    def _ended(self, agent: Agent[Any], name: str, run_id: str) -> Plan | None:
        """The plan of a run the store shows ended (a retried attempt after the end)."""
        store = self._store(agent)
        info = store.run_info(run_id)
        if info is None:
            msg = f"the store has no run {run_id}"
            raise ApplicationError(msg, type="RunNotResumable", non_retryable=True)
        if info.status not in ("finished", "failed"):
            return None
        events = list(store.load_run(run_id).events)
        failed = next((e for e in events if isinstance(e, RunFailed)), None)
        if failed is not None:
            raise ApplicationError(failed.message, type=failed.error_type, non_retryable=True)
        ref = RunRef(run_id=run_id, agent=name, offset=len(events), digest=journal_digest(events))
        return Plan(kind="done", ref=ref, status="finished")

    def _stored_plan(self, agent: Agent[Any], name: str, run_id: str) -> Plan:
        ended = self._ended(agent, name, run_id)
        if ended is not None:
            return ended
        events = list(self._store(agent).load_run(run_id).events)
        driver = RunDriver(agent.run_config(), journal=Journal(events), saved=len(events))
        return self._plan(driver, agent=name)

    def _plan(self, driver: RunDriver[Any], *, agent: str, cached: _Cached | None = None) -> Plan:
        events = list(driver.journal.events)
        state = driver.state
        if cached is not None and events[: len(cached.events)] == cached.events:
            digest = journal_digest(events[len(cached.events) :], after=cached.digest)
        else:
            digest = journal_digest(events)
        if driver.recorder.saved == len(events) and driver.recorder.broken is None:
            self._cache[state.run_id] = _Cached(events=events, digest=digest)
            while len(self._cache) > self._cache_runs:
                self._cache.popitem(last=False)
        ref = RunRef(run_id=state.run_id, agent=agent, offset=len(events), digest=digest)
        unit = driver.next_unit()
        if unit.kind == "done":
            finished = any(isinstance(e, RunFinished) for e in events)
            return Plan(kind="done", ref=ref, status="finished" if finished else "failed")
        eid = None
        effects = ""
        if unit.call_id is not None:
            call = next(c for c in state.pending_calls if c.id == unit.call_id)
            eid = effect_id(state.run_id, call)
            effects = self._effects(agent, call.name)
        kind = "tool" if unit.kind == "tools" else unit.kind  # never planned: one call each
        return Plan(
            kind=kind, ref=ref, step=unit.step, call_id=unit.call_id, effect_id=eid, effects=effects
        )

    def _effects(self, name: str, tool_name: str) -> str:
        """The side effects a call's tool declares; empty for an agent tool or an unlisted one."""
        registered = self.agents.get(name)
        found = registered.toolset.get(tool_name) if registered is not None else None
        if found is None or agent_of(found) is not None:
            return ""
        return found.side_effects


def _lineage(plan: Plan, agent: Agent[Any]) -> Lineage | None:
    """A child run's place in the tree (None for a root run)."""
    link = plan.link
    if link is None:
        return None
    return Lineage(
        run_id=link.run_id,
        parent_run_id=link.parent_run_id,
        parent_step=link.parent_step,
        parent_call_id=link.parent_call_id,
        agent=agent.name,
        depth=link.depth,
    )


def _unit_kind(plan: Plan) -> Any:
    if plan.kind in ("model", "tool", "close"):
        return plan.kind
    msg = f"a {plan.kind!r} plan is not a unit to run"
    raise ApplicationError(msg, type="EngineInputInvalid", non_retryable=True)


def _fatal(run_id: str, exc: Exception) -> ApplicationError:
    """The run failed (its journal ends with `RunFailed`): the workflow fails, no retry."""
    return ApplicationError(f"run {run_id}: {exc}", type=type(exc).__name__, non_retryable=True)


def _decision_input(request_id: str, decision: Any) -> DecisionInput:
    """A stored decision as the workflow holds it (approve or reject, with its message)."""
    verdict: Literal["approve", "reject"] = "reject" if decision.verdict == "reject" else "approve"
    return DecisionInput(request_id=request_id, verdict=verdict, message=decision.message or None)
