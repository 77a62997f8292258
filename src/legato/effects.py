"""The effect gate: the one admission point for every side-effecting tool call of a run.

Each run has one `EffectGate`. The tool executor asks it to `admit` every call after the
call's arguments are validated (and its preconditions hold) and before the function is
invoked; nothing with `side_effects` other than `none` runs without being admitted. The
gate enforces four properties:

- **hold-until-decided** (run-wide): while an approval request of the run is pending, no
  other side-effecting call of the run is admitted; read-only calls go on.
- **reject-cancels**: a rejected call never runs; the model is told. Side-effecting calls
  of the same response held behind it are refused too (`reject_holds_siblings`).
- **dedup-on-replay**: each admitted effect has a stable id (a hash of run id, call id,
  tool and canonical arguments). Re-delivering or replaying a call whose effect was
  already admitted reuses the recorded result; an irreversible effect whose outcome is
  unknown (admitted, never finished: a crash) is not run again.
- **fence-on-cancel**: `fence()` bumps the run's epoch; nothing is admitted afterwards,
  and a result that arrives from an older epoch is recorded as cancelled, never applied.

The gate also reserves budget for model and tool calls (`legato.budgets`) and runs the
security hooks (`legato.security`). Its decisions are journal events
(`ToolCallAdmitted`, `ToolCallRefused`, `ApprovalRequested`, `ApprovalDecided`,
`CancelRequested`), which are the audit record and what a resumed run is rebuilt from: the
gate remembers its past only as `GateRecord`, a projection of those events, so a gate built
on a resumed or forked journal decides exactly what the original did (a refused call stays
refused, a rejection keeps holding back its response's other side-effecting calls).

The gate is read in four parts, each owning one concern (this module is its public face):

- `legato._gate_state`: what the gate knows (learnt only from journal events), how it
  records, and the hold (open asks of the step and of the tree of runs);
- this module: admission (plan each call of a step, then admit or refuse it) and the
  model calls' budget and hooks, and the fence;
- `legato._gate_approvals`: asking a person (request, claim once, wait, park);
- `legato._gate_outcomes`: an effect admitted before (reuse, reconcile) and a result that
  arrives (fenced or settled).

`legato._effects_parts` has the test-only protection switches and the gate's small
records; `legato._gate_record` the projection of the journal. The gate is policy: it
imports nothing from the runtime or the interfaces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from legato._effects_parts import Cleared, Plan, StepState, Switches, reap, unsafe_switches
from legato._gate_approvals import GateApprovals
from legato._gate_outcomes import GateOutcomes
from legato._gate_record import UNKNOWN_OUTCOME
from legato._gate_state import Admitted, Refused, effect_id, refused_result
from legato.approvals import Edit, ParkedRun, Reject
from legato.budgets import Reservation, Spend
from legato.events import CancelRequested, ToolCallAdmitted
from legato.exceptions import RunCancelled, ToolArgumentsInvalid
from legato.messages import ModelResponse, ToolCallPart
from legato.models import Model, ModelRequest
from legato.security._hooks import Ask, Block, Modify, ToolAdmission
from legato.tools import Tool

__all__ = [
    "UNKNOWN_OUTCOME",
    "Admitted",
    "EffectGate",
    "Refused",
    "Switches",
    "effect_id",
    "reap",
    "unsafe_switches",
]


class EffectGate(GateApprovals, GateOutcomes):
    """Admits a run's tool calls and model calls; see the module documentation.

    Made with `GateState`'s arguments (journal, record, policy, budget, hooks, agent,
    stream, tree).
    """

    # -- tools of the run ----------------------------------------------------------------------------

    def bind(self, tools: Mapping[str, Tool]) -> None:
        """Check the policy against the run's tools (`PolicyError` for unknown names)."""
        names = frozenset(tools)
        if self.policy is not None and names != self._checked:
            self.policy.check(tools)
            self._checked = names

    async def begin_step(
        self, step: int, calls: Sequence[ToolCallPart], tools: Mapping[str, Tool]
    ) -> None:
        """Decide, in the model's order and before any call starts, what each call needs.

        Registering every `ask` first is what makes the hold run-wide: a sibling cannot be
        admitted in the moment before its neighbour's request exists.
        """
        state = StepState(step=step)
        self.ctx.step = step
        for call in calls:
            tool = tools.get(call.name)
            if tool is None:
                continue
            plan = await self._plan(call, tool)
            state.plans[call.id] = plan
            state.calls[call.id] = call
            if plan.action == "ask":
                state.open.add(call.id)
        self._step = state
        self._update_clear()

    async def _plan(self, call: ToolCallPart, tool: Tool) -> Plan:
        if self.policy is not None:
            action, rule = self.policy.action(tool, call.arguments)
        else:
            action, rule = "auto", "no approval policy"
        plan = Plan(action=action, rule=rule, arguments=call.arguments)
        if self.hooks is not None:
            outcome = await self.hooks.before_tool_admission(
                ToolAdmission(
                    call=call, side_effects=tool.side_effects, arguments=call.arguments, tool=tool
                )
            )
            if isinstance(outcome, Block):
                plan.blocked = outcome.reason
            elif isinstance(outcome, Ask) and plan.action == "auto":
                plan.action, plan.rule = "ask", outcome.reason
            elif isinstance(outcome, Modify):
                plan.arguments, plan.modified = outcome.value, True
        return plan

    # -- admission ---------------------------------------------------------------------------------

    async def admit(
        self, call: ToolCallPart, tool: Tool, arguments: dict[str, Any]
    ) -> Admitted | Refused:
        """Admit one validated call, or refuse it; may raise `RunParked` or `BudgetExceeded`."""
        try:
            return await self._admit(call, tool, arguments)
        finally:
            # however this call ended (admitted, refused early, failed), it no longer holds
            # its siblings
            if call.id in self._step.open and self.switches.enforce_decisions:
                self._step.open.discard(call.id)
                self._update_clear()

    async def _admit(
        self, call: ToolCallPart, tool: Tool, arguments: dict[str, Any]
    ) -> Admitted | Refused:
        effectful = tool.side_effects != "none"
        eid = effect_id(self.run_id, call) if effectful else ""
        decided = self._decided_before(call, eid)
        if decided is not None:
            return decided
        if self.budget is not None:
            self.budget.charge(Spend(tool_calls=1))
        plan = self._step.plans.get(call.id) or await self._plan(call, tool)
        if effectful and self.switches.dedup:
            duplicate = await self._deduplicate(call, tool, eid, arguments)
            if duplicate == "ask":  # its outcome is unknown: a person says what happened
                plan = Plan(action="ask", rule=UNKNOWN_OUTCOME, arguments=plan.arguments)
                self._step.plans[call.id] = plan
                self._step.calls[call.id] = call
                self._step.open.add(call.id)
                self._update_clear()
            elif duplicate is not None:
                return duplicate
        if plan.blocked is not None:
            return self._refuse(
                call, eid, "hook", f"Not run: blocked by a security hook: {plan.blocked}"
            )
        if plan.action == "deny":
            return self._refuse(
                call,
                eid,
                "denied",
                f"Not run: the approval policy forbids this call ({plan.rule}).",
            )
        if plan.action == "ask":
            go = await self._asked(call, tool, eid, plan, arguments)
        else:
            go = await self._auto(call, eid, effectful, arguments)
        if isinstance(go, Refused):
            return go
        if plan.modified and go.via != "edit":
            try:
                go.arguments = tool.validate(plan.arguments)
            except ToolArgumentsInvalid as exc:
                text = f"Not run: a hook's rewrite of the arguments is invalid: {exc}"
                return self._refuse(call, eid, "hook", text)
            go.edited = plan.arguments
        # re-checked after every wait, with no await between this check and the admission
        if self.fenced is not None and self.switches.fence:
            return self._cancelled(call, eid)
        if effectful or go.via != "policy":
            self._record(
                ToolCallAdmitted(
                    step=self._step.step,
                    call_id=call.id,
                    tool=call.name,
                    effect_id=eid,
                    epoch=self.epoch,
                    via=go.via,
                    arguments=go.edited,
                )
            )
            entry = self.record.ledger.get(eid)
            if entry is not None:
                entry.done = asyncio.Event()
        return Admitted(
            arguments=go.arguments, effect_id=eid, epoch=self.epoch, pending_decision=go.pending
        )

    def _decided_before(self, call: ToolCallPart, eid: str) -> Refused | None:
        """A refusal the journal already holds (before a resume or a fork), or the fence's."""
        refused = self.record.refusal(self._step.step, call.id, call.name)
        if refused is not None:  # decided the same way again, and not recorded twice
            return refused_result(call, refused.reason, refused.message)
        if self.fenced is not None and self.switches.fence:
            return self._cancelled(call, eid)
        return None

    async def _asked(
        self, call: ToolCallPart, tool: Tool, eid: str, plan: Plan, arguments: dict[str, Any]
    ) -> Cleared | Refused:
        if not self.switches.enforce_decisions:
            pending = asyncio.ensure_future(self._decide(call, plan))
            return Cleared(arguments=arguments, pending=pending)
        decision = await self._decide(call, plan)
        if isinstance(decision, Reject):  # its `ApprovalDecided` holds the siblings back
            return self._refuse(call, eid, "rejected", f"Not run: {decision.message}")
        if tool.side_effects != "none" and self.switches.hold_run_wide:
            # approved, but other requests of the run are still pending
            held = await self._hold()
            if held is not None:
                return self._refuse(call, eid, "held", held)
        if isinstance(decision, Edit):
            try:
                edited = tool.validate(decision.arguments)
            except ToolArgumentsInvalid as exc:
                text = f"Not run: the approver's edited arguments are invalid: {exc}"
                return self._refuse(call, eid, "rejected", text)
            return Cleared(arguments=edited, via="edit", edited=decision.arguments)
        return Cleared(arguments=arguments, via="approval")

    async def _auto(
        self, call: ToolCallPart, eid: str, effectful: bool, arguments: dict[str, Any]
    ) -> Cleared | Refused:
        if effectful:
            if self.switches.hold_run_wide:
                held = await self._hold()
                if held is not None:
                    return self._refuse(call, eid, "held", held)
            holds = self.policy is None or self.policy.reject_holds_siblings
            if self._step.step in self.record.rejected_steps and holds:
                text = (
                    "Not run: another call of the same response was rejected; "
                    "call this again if it is still wanted."
                )
                return self._refuse(call, eid, "held", text)
        return Cleared(arguments=arguments)

    # -- model calls -----------------------------------------------------------------------------------

    async def before_model(
        self, request: ModelRequest, model: Model
    ) -> tuple[ModelRequest, Reservation | None]:
        """Hooks, then the budget reservation of the call's worst case."""
        if self.fenced is not None:
            raise RunCancelled(self.fenced)
        if self.hooks is not None:
            request = await self.hooks.before_model_request(request)
        reservation = None
        if self.budget is not None:  # the request carries the output cap it reserved
            request, reservation = self.budget.reserve_model_call(request, model)
        return request, reservation

    async def after_model(
        self, response: ModelResponse, reservation: Reservation | None
    ) -> ModelResponse:
        """Settle the reservation with the actual usage, then run the hooks."""
        if reservation is not None and self.budget is not None:
            reservation.settle(self.budget.model_call_actual(response.usage, response.cost))
        if self.hooks is not None:
            response = await self.hooks.after_model_response(response)
        return response

    # -- cancellation ------------------------------------------------------------------------------------

    def fence(self, reason: str) -> bool:
        """Bump the epoch: admit nothing more, discard results of calls in flight."""
        if self.fenced is not None:
            return False
        self._record(CancelRequested(reason=reason, epoch=self.epoch + 1))
        self._update_clear()
        return True

    @property
    def parked(self) -> ParkedRun | None:
        """The requests the run stopped for, once it parked."""
        return self._step.park
