"""`LegatoRun`: the Temporal workflow that drives one legato run, one activity per unit.

Workflow code decides only the order: it holds references and plans (`_types`), asks the
activities to advance the run one unit each (a model call, a tool call, a step's close),
waits on approvals, and continues as new. By default the start, model calls, closes and
calls of `none`/`idempotent` tools are local activities (`ActivitySettings.local_activities`). It reads no clock, random, uuid, environment
or store: everything it knows came back from an activity, so a replay decides the same.
`tests/temporal/test_temporal_determinism.py` scans this module's source for such reads.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from legato.temporal._types import (
        ActivitySettings,
        ChildParked,
        DecideInput,
        DecisionInput,
        Plan,
        PollInput,
        Recorded,
        RecordInput,
        RunInput,
        RunOutcome,
        StartInput,
        StoredDecisions,
        UnitInput,
    )

__all__ = ["LegatoRun"]

DECISIONS_FROM_STORE = "legato-decisions-through-the-store"
"""The patch under which a decision is written to the approvals store before its update
returns, and a parked run reads the store for decisions made through other doors (histories
recorded before it replay as they ran)."""

LOCAL_ACTIVITIES = "legato-local-activities"
"""The patch under which starts, model calls, closes and calls of `none`/`idempotent` tools
run as local activities (`ActivitySettings.local_activities`); histories recorded before it
replay their regular activities."""

LOCAL_EFFECTS = ("none", "idempotent")
"""The declared side effects of a tool whose calls may run as local activities."""

NON_RETRYABLE = ["PayloadsTooLarge", "LegatoRunFailed"]
"""Error types no activity retries: an oversized payload, a run the store shows failed."""


@workflow.defn(name="legato.run")
class LegatoRun:
    """One legato run as a workflow (its id derives from the run id; see `TemporalRuns`)."""

    def __init__(self) -> None:
        self._open: tuple[str, ...] = ()
        self._decisions: dict[str, DecisionInput] = {}
        self._expired: set[str] = set()
        self._plan: Plan | None = None
        self._attempts: dict[str, int] = {}
        self._below: dict[str, str] = {}
        """Requests a sub-agent's workflow waits on -> the child workflow to decide them in."""
        self._parent: str | None = None
        self._recording: set[str] = set()
        """Requests whose decision an update is writing to the approvals store now."""

    @workflow.run
    async def run(self, run: RunInput) -> RunOutcome:
        """Advance the run unit by unit to its end."""
        settings = run.settings
        plan = run.plan
        self._parent = run.link.parent_workflow if run.link is not None else None
        if plan is None:
            start = StartInput(run_id=run.run_id, agent=run.agent, prompt=run.prompt, link=run.link)
            local = self._local(settings, "start")
            plan = await self._activity(
                "legato.start", start, settings, activity_id="start", local=local
            )
        units = 0
        while plan.kind != "done":
            self._plan = plan
            if plan.kind == "parked":
                plan = await self._wait_for_decisions(plan, settings)
                continue
            if plan.kind == "child":
                plan = await self._child(plan, run, settings)
                units += 1
                continue
            if units >= run.continue_every or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    replace(run, prompt=None, plan=plan, units=run.units + units)
                )
            plan = await self._advance(plan, settings)
            units += 1
        self._plan = plan
        # a decision still being written to the store gets its answer before the run ends
        await workflow.wait_condition(workflow.all_handlers_finished)
        status = "failed" if plan.status == "failed" else "finished"
        return RunOutcome(ref=plan.ref, status=status, units=run.units + units)

    async def _advance(self, plan: Plan, settings: ActivitySettings) -> Plan:
        if plan.kind == "tool" and settings.parallel_tools:
            key = f"tools-{plan.step}"  # every call of the step's response, concurrently
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
            activity_id = key if attempt == 1 else f"{key}.{attempt}"
            return await self._activity("legato.tools", UnitInput(plan=plan), settings, activity_id)
        if plan.kind == "tool":
            key = plan.effect_id or plan.call_id or "tool"
            attempt = self._attempts.get(key, 0) + 1  # a call parked runs again after decisions
            self._attempts[key] = attempt
            activity_id = key if attempt == 1 else f"{key}.{attempt}"
            local = self._local(settings, "tool", plan.effects)
            return await self._activity(
                "legato.tool", UnitInput(plan=plan), settings, activity_id, local=local
            )
        name = "legato.model" if plan.kind == "model" else "legato.close"
        local = self._local(settings, plan.kind)
        return await self._activity(name, UnitInput(plan=plan), settings, local=local)

    @staticmethod
    def _local(settings: ActivitySettings, kind: str, effects: str = "") -> bool:
        """Whether this unit runs as a local activity (see `ActivitySettings.local_activities`).

        A start, model call or close in modes `model` and `model_and_tools`; a tool call in
        `model_and_tools` when its tool declares `none` or `idempotent` side effects. After
        a worker dies, Temporal runs a local activity again whose result it had not yet
        recorded, finished or not: the store makes that re-run a no-op for a finished unit,
        and an idempotent call runs again with the same key.
        """
        mode = settings.local_activities
        if mode == "none":
            return False
        if kind == "tool" and (mode != "model_and_tools" or effects not in LOCAL_EFFECTS):
            return False
        if kind not in ("start", "model", "close", "tool"):
            return False
        return workflow.patched(LOCAL_ACTIVITIES)

    async def _child(self, plan: Plan, run: RunInput, settings: ActivitySettings) -> Plan:
        """Run a sub-agent's call as a child workflow `<run id>/<call id>`, then record its end.

        The child's journal start and the parent's `SpawnStarted` are stored already. Its id
        is deterministic: a parent replayed (or re-run after a lost workflow task) finds the
        child it started, never a second one. Its end, failed included, is in its journal:
        the call's activity, run again, reads the child's outcome back from there.
        """
        child = plan.child
        assert child is not None
        link = replace(child, parent_workflow=workflow.info().workflow_id)
        child_input = RunInput(run_id=child.run_id, agent=child.agent, settings=settings, link=link)
        child_id = f"{run.run_id}/{plan.call_id}"
        try:
            await workflow.execute_child_workflow(
                LegatoRun.run,
                child_input,
                id=child_id,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            pass  # started (and ended) before: its journal tells the outcome
        except ChildWorkflowError:
            pass  # it failed: its journal ends with RunFailed, the call's result says why
        # requests the child left undecided (expired there) are no longer this run's to decide
        self._below = {r: w for r, w in self._below.items() if w != child_id}
        again = await self._advance(replace(plan, kind="tool", child=None), settings)
        if again.kind == "child" and again.call_id == plan.call_id:
            msg = f"child run {child.run_id} did not end, and its workflow cannot start again"
            raise ApplicationError(msg, type="ChildFailed", non_retryable=True)
        return again

    async def _wait_for_decisions(self, plan: Plan, settings: ActivitySettings) -> Plan:
        """Wait for a decision on each request (updates), or their expiry; then record them."""
        self._open = plan.request_ids
        if self._parent is not None:  # a parked child parks its parent
            parked = ChildParked(workflow_id=workflow.info().workflow_id, request_ids=self._open)
            await workflow.get_external_workflow_handle(self._parent).signal("child_parked", parked)
        if not await self._wait(plan, settings):
            for request_id in self._open:
                if request_id not in self._decisions:
                    self._expired.add(request_id)
                    self._decisions[request_id] = DecisionInput(
                        request_id=request_id,
                        verdict="reject",
                        message=f"expired: no decision within {plan.approval_ttl:g} seconds",
                    )
        decisions = tuple(self._decisions[r] for r in self._open)
        self._open = ()
        decide = DecideInput(plan=plan, decisions=decisions)
        return await self._activity("legato.decide", decide, settings)

    async def _wait(self, plan: Plan, settings: ActivitySettings) -> bool:
        """Wait for the decisions (True) or the approval TTL's end (False).

        A history recorded before decisions were read from the store replays the old wait.
        """
        if workflow.patched(DECISIONS_FROM_STORE):
            return await self._wait_or_poll(plan, settings)
        ttl = plan.approval_ttl
        timeout = None if ttl is None else timedelta(seconds=ttl)
        try:
            await workflow.wait_condition(self._all_decided, timeout=timeout)
        except TimeoutError:
            return False
        return True

    async def _wait_or_poll(self, plan: Plan, settings: ActivitySettings) -> bool:
        """Wait until every open request is decided (True) or the approval TTL ends (False).

        Decisions come as updates, or through another door straight to the approvals store:
        the store is read after `decision_poll` seconds, then at doubling intervals.
        """
        ttl = plan.approval_ttl
        deadline = None if ttl is None else workflow.time() + ttl
        interval = max(settings.decision_poll, 0.01)
        while True:
            wait = interval
            if deadline is not None:
                wait = min(wait, deadline - workflow.time())
                if wait <= 0:
                    return False
            try:
                await workflow.wait_condition(self._all_decided, timeout=timedelta(seconds=wait))
            except TimeoutError:
                pass
            else:
                return True
            undecided = tuple(r for r in self._open if r not in self._decisions)
            if undecided:
                found = await self._stored(plan, undecided, settings)
                for decision in found.decisions:
                    self._decisions.setdefault(decision.request_id, decision)
            if self._all_decided():
                return True
            interval = min(interval * 2, max(settings.decision_poll_max, interval))

    def _all_decided(self) -> bool:
        """Every open request has its decision, and none is being written to the store."""
        return not self._recording and all(r in self._decisions for r in self._open)

    async def _stored(
        self, plan: Plan, request_ids: tuple[str, ...], settings: ActivitySettings
    ) -> StoredDecisions:
        return await workflow.execute_activity(
            "legato.stored_decisions",
            PollInput(plan=plan, request_ids=request_ids),
            result_type=StoredDecisions,
            start_to_close_timeout=timedelta(seconds=settings.start_to_close),
            retry_policy=RetryPolicy(maximum_attempts=settings.max_attempts),
        )

    @workflow.update(name="decide")
    async def decide(self, decision: DecisionInput) -> str:
        """Decide one open approval request (exactly one decision per request gets in).

        The decision is written to the approvals store before the update returns, by the
        conditional write every door goes through: when another door decided the request
        first, this update fails with `DecisionAlreadyUsed` and the run follows that one.
        """
        # recorded before any await: the validator of a concurrent update sees it
        self._decisions[decision.request_id] = decision
        plan = self._plan
        if plan is not None and workflow.patched(DECISIONS_FROM_STORE):
            self._recording.add(decision.request_id)
            try:
                recorded = await workflow.execute_activity(
                    "legato.record",
                    RecordInput(plan=plan, decision=decision),
                    result_type=Recorded,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=RetryPolicy(
                        maximum_attempts=5, non_retryable_error_types=["DecisionTokenInvalid"]
                    ),
                )
            except ActivityError as exc:
                # not stored: the request stays open for a decision that can be
                del self._decisions[decision.request_id]
                cause = exc.cause
                text = cause.message if isinstance(cause, ApplicationError) else str(exc)
                msg = f"the decision on {decision.request_id} could not be stored: {text}"
                raise ApplicationError(msg, type="DecisionTokenInvalid") from exc
            finally:
                self._recording.discard(decision.request_id)
            if recorded.outcome == "lost" and recorded.decision is not None:
                self._decisions[decision.request_id] = recorded.decision
                await self._forward(recorded.decision)
                msg = (
                    f"approval request {decision.request_id} was already decided "
                    f"({recorded.decision.verdict}) through another door"
                )
                raise ApplicationError(msg, type="DecisionAlreadyUsed")
            if recorded.outcome == "expired":
                self._expired.add(decision.request_id)
                expired = DecisionInput(
                    request_id=decision.request_id,
                    verdict="reject",
                    message="expired: no decision before the request's expiry",
                )
                self._decisions[decision.request_id] = expired
                await self._forward(expired)
                msg = f"approval request {decision.request_id} expired before it was decided"
                raise ApplicationError(msg, type="DecisionTokenInvalid")
        await self._forward(decision)
        return decision.verdict

    @workflow.signal(name="child_parked")
    async def child_parked(self, parked: ChildParked) -> None:
        """A child's workflow waits on requests: this run waits on them too (and its parent)."""
        for request_id in parked.request_ids:
            self._below[request_id] = parked.workflow_id
        if self._parent is not None:
            here = ChildParked(
                workflow_id=workflow.info().workflow_id, request_ids=parked.request_ids
            )
            await workflow.get_external_workflow_handle(self._parent).signal("child_parked", here)

    @workflow.signal(name="decision")
    async def decision(self, decision: DecisionInput) -> None:
        """A decision the parent's workflow accepted, for a request of this run or below."""
        if decision.request_id in self._decisions:
            return
        self._decisions[decision.request_id] = decision
        await self._forward(decision)

    async def _forward(self, decision: DecisionInput) -> None:
        """Send a decision on to the child workflow whose request it answers."""
        child = self._below.pop(decision.request_id, None)
        if child is not None:
            await workflow.get_external_workflow_handle(child).signal("decision", decision)

    @decide.validator
    def _check_decision(self, decision: DecisionInput) -> None:
        self._admit(decision)

    def _admit(self, decision: DecisionInput) -> None:
        """Refuse a decision on an unknown, decided or expired request (consume-once)."""
        request_id = decision.request_id
        if request_id in self._expired:
            msg = f"approval request {request_id} expired before it was decided"
            raise ApplicationError(msg, type="DecisionTokenInvalid")
        if request_id in self._decisions:
            msg = f"approval request {request_id} was already decided"
            raise ApplicationError(msg, type="DecisionAlreadyUsed")
        if request_id not in self._open and request_id not in self._below:
            msg = f"the run waits on no approval request {request_id}"
            raise ApplicationError(msg, type="DecisionTokenInvalid")

    @workflow.query(name="plan")
    def plan(self) -> Plan | None:
        """What the run does next (its reference names the stored journal's length)."""
        return self._plan

    @workflow.query(name="open_requests")
    def open_requests(self) -> list[str]:
        """The approval requests the run waits on now."""
        waiting = [*self._open, *self._below]
        return [r for r in waiting if r not in self._decisions]

    async def _activity(
        self,
        name: str,
        arg: object,
        settings: ActivitySettings,
        activity_id: str | None = None,
        *,
        local: bool = False,
    ) -> Plan:
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=settings.initial_interval),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=settings.max_attempts,
            non_retryable_error_types=NON_RETRYABLE,
        )
        try:
            if local:  # run by this worker, recorded as a marker when the workflow task ends
                result = await workflow.execute_local_activity(
                    name,
                    arg,
                    activity_id=activity_id,
                    result_type=Plan,
                    start_to_close_timeout=timedelta(seconds=settings.start_to_close),
                    retry_policy=retry,
                )
            else:
                result = await workflow.execute_activity(
                    name,
                    arg,
                    activity_id=activity_id,
                    result_type=Plan,
                    start_to_close_timeout=timedelta(seconds=settings.start_to_close),
                    heartbeat_timeout=timedelta(seconds=settings.heartbeat),
                    retry_policy=retry,
                )
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError):
                # the run failed (the store shows why), or retries ran out: the workflow fails
                raise ApplicationError(cause.message, type=cause.type, non_retryable=True) from exc
            raise
        return result
