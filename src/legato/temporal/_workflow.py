"""`LegatoRun`: the Temporal workflow that drives one legato run, one activity per unit.

Workflow code decides only the order: it holds references and plans (`_types`), asks the
activities to advance the run one unit each (a model call, a tool call, a step's close),
waits on approvals, and continues as new. It reads no clock, random, uuid, environment
or store: everything it knows came back from an activity, so a replay decides the same.
`tests/temporal/test_temporal_determinism.py` scans this module's source for such reads.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from legato.temporal._types import (
        ActivitySettings,
        DecideInput,
        DecisionInput,
        Plan,
        RunInput,
        RunOutcome,
        StartInput,
        UnitInput,
    )

__all__ = ["LegatoRun"]

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

    @workflow.run
    async def run(self, run: RunInput) -> RunOutcome:
        """Advance the run unit by unit to its end."""
        settings = run.settings
        plan = run.plan
        if plan is None:
            start = StartInput(run_id=run.run_id, agent=run.agent, prompt=run.prompt)
            plan = await self._activity("legato.start", start, settings, activity_id="start")
        units = 0
        while plan.kind != "done":
            self._plan = plan
            if plan.kind == "parked":
                plan = await self._wait_for_decisions(plan, settings)
                continue
            if units >= run.continue_every or workflow.info().is_continue_as_new_suggested():
                workflow.continue_as_new(
                    replace(run, prompt=None, plan=plan, units=run.units + units)
                )
            plan = await self._advance(plan, settings)
            units += 1
        self._plan = plan
        status = "failed" if plan.status == "failed" else "finished"
        return RunOutcome(ref=plan.ref, status=status, units=run.units + units)

    async def _advance(self, plan: Plan, settings: ActivitySettings) -> Plan:
        if plan.kind == "tool":
            key = plan.effect_id or plan.call_id or "tool"
            attempt = self._attempts.get(key, 0) + 1  # a call parked runs again after decisions
            self._attempts[key] = attempt
            activity_id = key if attempt == 1 else f"{key}.{attempt}"
            return await self._activity("legato.tool", UnitInput(plan=plan), settings, activity_id)
        name = "legato.model" if plan.kind == "model" else "legato.close"
        return await self._activity(name, UnitInput(plan=plan), settings)

    async def _wait_for_decisions(self, plan: Plan, settings: ActivitySettings) -> Plan:
        """Wait for a decision on each request (updates), or their expiry; then record them."""
        self._open = plan.request_ids
        timeout = None if plan.approval_ttl is None else timedelta(seconds=plan.approval_ttl)
        try:
            await workflow.wait_condition(
                lambda: all(r in self._decisions for r in self._open), timeout=timeout
            )
        except TimeoutError:
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

    @workflow.update(name="decide")
    async def decide(self, decision: DecisionInput) -> str:
        """Decide one open approval request (exactly one decision per request gets in)."""
        # recorded before any await: the validator of a concurrent update sees it
        self._decisions[decision.request_id] = decision
        return decision.verdict

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
        if request_id not in self._open:
            msg = f"the run waits on no approval request {request_id}"
            raise ApplicationError(msg, type="DecisionTokenInvalid")

    @workflow.query(name="plan")
    def plan(self) -> Plan | None:
        """What the run does next (its reference names the stored journal's length)."""
        return self._plan

    @workflow.query(name="open_requests")
    def open_requests(self) -> list[str]:
        """The approval requests the run waits on now."""
        return [r for r in self._open if r not in self._decisions]

    async def _activity(
        self,
        name: str,
        arg: object,
        settings: ActivitySettings,
        activity_id: str | None = None,
    ) -> Plan:
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=settings.initial_interval),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=settings.max_attempts,
            non_retryable_error_types=NON_RETRYABLE,
        )
        try:
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
