"""Asking a person: the effect gate's approval requests, decisions and parking.

`GateApprovals` is the part of `legato.effects.EffectGate` that turns a planned `ask` into
a decision: it registers the request (`ApprovalRequested`, the store's copy bound to the
run, call, tool and arguments hash), claims the decision exactly once from the approvals
store (the policy's handler may decide it first), waits up to the policy's `wait`, asks
again with a fresh token when a request expired, and parks the run with every open ask
of its step when no decision comes. A decision journaled before a resume is applied again
only if the store confirms it for this very call.

It must not admit or refuse a call itself (admission in `legato.effects` does, with the
decision returned here), and it records nothing but `ApprovalRequested` and
`ApprovalDecided`. Policy layer: imports nothing from the runtime or the interfaces.
"""

from __future__ import annotations

import asyncio
import time

from legato._effects_parts import Plan, decision_of, expired, parked_message
from legato._gate_record import UNKNOWN_OUTCOME
from legato._gate_state import GateState
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalStore,
    Decision,
    Edit,
    ParkedRun,
    arguments_hash,
)
from legato.events import ApprovalDecided, ApprovalRequested
from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid, RunParked
from legato.messages import ToolCallPart

__all__ = ["GateApprovals"]


class GateApprovals(GateState):
    """The gate's approvals: request, claim once, wait, park (see the module)."""

    async def _decide(self, call: ToolCallPart, plan: Plan) -> Decision:
        if self.policy is None and self._fallback is None:
            self._fallback = ApprovalPolicy()
        policy = self.policy or self._fallback
        assert policy is not None
        state = self._step
        earlier = self.record.decided.get(call.id)
        if plan.rule == UNKNOWN_OUTCOME:
            earlier = None  # a decision made before the crash never covers running it again
        if earlier is not None and await self._confirmed(earlier, call, plan, policy):
            # decided before the run was resumed: apply it, never claim it again
            state.open.discard(call.id)
            self._update_clear()
            return decision_of(earlier)
        async with self._serial:
            try:
                if state.park is not None:
                    raise RunParked(state.park, parked_message(state.park))
                request = await self._request(call, plan, policy)
                decision = await self._obtain(request, policy)
                if decision is None and expired(request):  # ask again, with a new token
                    request = await self._request(call, plan, policy, fresh=True)
                    decision = await self._obtain(request, policy)
                if decision is None:
                    park = await self._park(request, policy)
                    raise RunParked(park, parked_message(park))
                self._record(
                    ApprovalDecided(
                        request_id=request.id,
                        call_id=call.id,
                        verdict=decision.verdict,
                        arguments=decision.arguments if isinstance(decision, Edit) else None,
                        message=decision.message,
                    )
                )
                return decision
            except RunParked:
                raise
            except BaseException as exc:
                # no decision: whatever this ask held must not run now
                if state.failed is None and self.switches.hold_on_failure:
                    state.failed = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                state.open.discard(call.id)
                self._update_clear()

    async def _request(
        self, call: ToolCallPart, plan: Plan, policy: ApprovalPolicy, *, fresh: bool = False
    ) -> ApprovalRequest:
        existing = self.record.requests.get(call.id)
        if existing is not None and not fresh:
            found = await policy.store.get(existing)
            if found is not None and self._binds(found, call, plan):
                return found
        request = ApprovalRequest.create(
            run_id=self.run_id,
            step=self._step.step,
            call_id=call.id,
            tool=call.name,
            arguments=plan.arguments,
            rule=plan.rule,
            ttl=policy.ttl,
        )
        await policy.store.put(request)
        self._record(
            ApprovalRequested(
                step=self._step.step,
                request_id=request.id,
                call=call,
                arguments_hash=request.arguments_hash,
                rule=plan.rule,
            )
        )
        return request

    def _binds(self, request: ApprovalRequest, call: ToolCallPart, plan: Plan) -> bool:
        """Whether a stored request is for exactly this call (a journal edited since fails)."""
        return (
            request.run_id == self.run_id
            and request.call_id == call.id
            and request.tool == call.name
            and request.arguments_hash == arguments_hash(plan.arguments)
        )

    async def _confirmed(
        self, event: ApprovalDecided, call: ToolCallPart, plan: Plan, policy: ApprovalPolicy
    ) -> bool:
        """A journaled decision counts only if the store has that decision for this call."""
        request = await policy.store.get(event.request_id)
        if request is None or not self._binds(request, call, plan):
            return False
        return await policy.store.decision(event.request_id) == decision_of(event)

    async def _claim(self, request: ApprovalRequest, store: ApprovalStore) -> Decision | None:
        """Claim the request's decision.

        A run that alone drives its stored journal takes back a decision it claimed before
        a crash and never journaled.
        """
        try:
            return await store.claim(request.id)
        except DecisionAlreadyUsed:
            if not self.sole_driver or self.record.decided.get(request.call_id) is not None:
                raise
            decision = await store.decision(request.id)
            if decision is None:
                raise
            return decision

    async def _obtain(self, request: ApprovalRequest, policy: ApprovalPolicy) -> Decision | None:
        store = policy.store
        decision = await self._claim(request, store)
        if decision is None and policy.handler is not None:
            verdict = await policy.handler(request)
            if verdict is not None:
                try:
                    await store.decide(request.id, request.token, verdict)
                except DecisionTokenInvalid:  # decided after the request expired
                    return None
                except DecisionAlreadyUsed:
                    pass  # another door decided first: the stored decision is the one
                decision = await self._claim(request, store)
        deadline = time.monotonic() + policy.wait
        while decision is None and time.monotonic() < deadline:
            await asyncio.sleep(min(0.05, policy.wait))
            decision = await self._claim(request, store)
        return decision

    async def _park(self, first: ApprovalRequest, policy: ApprovalPolicy) -> ParkedRun:
        """Register every other open ask of the step, so the parked run lists them all."""
        state = self._step
        requests = [first]
        for call_id in sorted(state.open - {first.call_id}, key=list(state.plans).index):
            call = state.calls[call_id]
            requests.append(await self._request(call, state.plans[call_id], policy))
        state.park = ParkedRun(run_id=self.run_id, journal=self._journal, requests=tuple(requests))
        self._update_clear()
        return state.park
