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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from legato._effects_parts import (
    Cleared,
    GateTree,
    Plan,
    StepState,
    Switches,
    current_switches,
    decision_of,
    expired,
    parked_message,
    reap,
    unsafe_switches,
)
from legato._gate_record import UNKNOWN_OUTCOME, GateRecord
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalStore,
    Decision,
    Edit,
    ParkedRun,
    Reject,
    arguments_hash,
    canonical_json,
)
from legato.budgets import Budget, Reservation, Spend
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Compacted,
    ContextSliced,
    HookApplied,
    Journal,
    JournalEvent,
    ModelRequested,
    ModelResponded,
    Parked,
    RefusalReason,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    SpawnDecided,
    SpawnFinished,
    SpawnStarted,
    StateCommitted,
    StateLoaded,
    StateRejected,
    StepFinished,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
    ToolCallStarted,
    ToolOutcome,
    UserPrompt,
)
from legato.exceptions import (
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    RunCancelled,
    RunParked,
    ToolArgumentsInvalid,
)
from legato.messages import ModelResponse, ToolCallPart, ToolResultPart
from legato.models import Model, ModelRequest
from legato.security._hooks import Ask, Block, Hook, HookContext, HookRunner, Modify, ToolAdmission
from legato.tools import Tool, to_content
from legato.tools._reconcile import reconcile_call

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


def effect_id(run_id: str, call: ToolCallPart) -> str:
    """The stable id of a call's effect: same run, call id, tool and arguments -> same id."""
    text = "\x00".join((run_id, call.id, call.name, canonical_json(call.arguments)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# -- admission results ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """The call may run, with `arguments` (edited ones, if an approver edited them)."""

    arguments: dict[str, Any]
    effect_id: str
    epoch: int
    pending_decision: asyncio.Task[Decision] | None = None
    """Only with `enforce_decisions` off (tests): the decision still being made."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """The call does not run; the model sees `result`."""

    reason: RefusalReason
    outcome: ToolOutcome
    result: ToolResultPart


def _refused(call: ToolCallPart, reason: RefusalReason, message: str) -> Refused:
    return Refused(
        reason=reason,
        outcome="cancelled" if reason == "cancelled" else "refused",
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=message, is_error=True
        ),
    )


class EffectGate:
    """Admits a run's tool calls and model calls; see the module documentation."""

    def __init__(
        self,
        *,
        journal: Journal | None = None,
        record: Callable[[JournalEvent], object] | None = None,
        policy: ApprovalPolicy | None = None,
        budget: Budget | None = None,
        hooks: Sequence[Hook] = (),
        agent: str = "",
        stream: Callable[[JournalEvent], object] | None = None,
        tree: GateTree | None = None,
    ) -> None:
        """Make the gate of one run.

        Args:
            journal: The run's journal (a resumed run's gate learns its past from it).
            record: Appends an event to the journal *now* (write-ahead: an admission is
                journaled before its effect runs). Default: `journal.append`.
            policy: The approval policy (None: admit everything).
            budget: The budget model and tool calls draw from.
            hooks: Security hooks.
            agent: The agent's name, for hooks.
            stream: Also receives each event the gate records, for the run's stream
                (default: nowhere; the journal has it).
            tree: The hold shared with the other runs of a tree (a child gets its
                parent's; default: a tree of this run alone).
        """
        self._journal = journal if journal is not None else Journal()
        self._record_fn = record or self._record_standalone
        self.policy = policy
        self.budget = budget
        self.switches = current_switches()
        self.tree = tree if tree is not None else GateTree()
        """The hold this gate shares with the other runs of its tree."""
        self.sole_driver = False
        """The run's journal is written ahead to a store it has claimed: no other process
        drives it, so a decision this run claimed before a crash is its own to apply."""
        self.epoch = 0
        self.fenced: str | None = None
        """The reason the run was fenced, once it is."""
        self._stream = stream
        """Also gets the events the gate recorded, for the stream (the journal has them)."""
        self.ctx = HookContext(run_id="", agent=agent)
        self.hooks = HookRunner(hooks, self.ctx, self._record) if hooks else None
        self.record = GateRecord()
        """What the gate decided: a projection of the journal, and nothing else."""
        self._step = StepState()
        self._serial = asyncio.Lock()
        self._clear = asyncio.Event()
        self._clear.set()
        self._checked: frozenset[str] | None = None
        self._fallback: ApprovalPolicy | None = None
        """Used when a hook asks in a run without a policy (made on first need)."""
        remember = self.switches.project_decisions
        for event in self._journal:
            self.observe(event, remember=remember)

    # -- the journal -------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.ctx.run_id

    def _record_standalone(self, event: JournalEvent) -> None:
        self._journal.append(event)
        self.observe(event)

    def _record(self, event: JournalEvent) -> None:
        self._record_fn(event)
        if self._stream is not None:
            self._stream(event)

    def observe(self, event: JournalEvent, *, remember: bool = True) -> None:
        """Learn from a journal event (the driver calls this for every event it records).

        `remember=False` only for the `project_decisions` twin (see `GateRecord.apply`).
        """
        self.record.apply(event, remember=remember)
        match event:
            case RunStarted():
                self.ctx.run_id = event.run_id
            case CancelRequested():
                self.epoch = max(self.epoch, event.epoch)
                self.fenced = event.reason
            case HookApplied():
                self.ctx.flags.update(event.flags)
            case (
                ToolCallAdmitted()
                | ToolCallFinished()
                | ApprovalRequested()
                | ApprovalDecided()
                | UserPrompt()
                | ModelRequested()
                | ModelResponded()
                | ToolCallStarted()
                | StepFinished()
                | RunFinished()
                | RunFailed()
                | StateLoaded()
                | StateCommitted()
                | StateRejected()
                | SpawnStarted()
                | SpawnFinished()
                | ContextSliced()
                | SpawnDecided()
                | Compacted()
                | ToolCallRefused()
                | Parked()
                | RunResumed()
            ):
                pass  # in the record, or nothing the gate keeps
            case _:
                assert_never(event)
        if self.hooks is not None:
            self.hooks.on_event(event)

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

    def _update_clear(self) -> None:
        state = self._step
        if not state.open or state.park is not None or self.fenced is not None:
            self._clear.set()
        else:
            self._clear.clear()
        tree = self.tree
        if state.park is not None and tree.park is None:
            tree.park = state.park
        if state.failed is not None and tree.failed is None:
            tree.failed = state.failed
        settled = state.park is not None or self.fenced is not None
        tree.report(self, frozenset() if settled else frozenset(state.open))

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
            return _refused(call, refused.reason, refused.message)
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

    def _cancelled(self, call: ToolCallPart, eid: str) -> Refused:
        return self._refuse(
            call, eid, "cancelled", f"Not run: the run was cancelled ({self.fenced})."
        )

    def _refuse(self, call: ToolCallPart, eid: str, reason: RefusalReason, message: str) -> Refused:
        self._record(
            ToolCallRefused(
                step=self._step.step,
                call_id=call.id,
                tool=call.name,
                effect_id=eid,
                reason=reason,
                message=message,
            )
        )
        return _refused(call, reason, message)

    async def _deduplicate(
        self, call: ToolCallPart, tool: Tool, eid: str, arguments: dict[str, Any]
    ) -> Refused | Literal["ask"] | None:
        """An effect admitted before: reuse its result, or reconcile an unknown outcome.

        None: the call may be admitted (first time, or safe to run again); "ask": a person
        must say what happened to an irreversible effect whose outcome is unknown.
        """
        entry = self.record.ledger.get(eid)
        if entry is None:
            return None
        if not entry.finished and entry.done is not None:
            await entry.done.wait()  # the same effect is running in this process: share its result
        unknown = not entry.finished or entry.outcome in ("cancelled", "timeout")
        if unknown:
            if tool.side_effects != "irreversible":
                return None  # idempotent: run again, with the same idempotency key
            if tool.reconcile is not None:
                found = await reconcile_call(tool.reconcile, eid, arguments)
                if found is not None and not found.ran:
                    return None  # it did not take effect: run it (same key)
                if found is not None:
                    result = ToolResultPart(
                        call_id=call.id, name=call.name, content=to_content(found.result)
                    )
                    self._record(
                        ToolCallRefused(
                            step=self._step.step,
                            call_id=call.id,
                            tool=call.name,
                            effect_id=eid,
                            reason="duplicate",
                            message="reconciled: the tool's reconcile hook says it already ran",
                        )
                    )
                    return Refused(reason="duplicate", outcome="ok", result=result)
            return "ask"
        result = entry.result or ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=""
        )
        self._record(
            ToolCallRefused(
                step=self._step.step,
                call_id=call.id,
                tool=call.name,
                effect_id=eid,
                reason="duplicate",
                message="already ran; the recorded result is reused",
            )
        )
        return Refused(reason="duplicate", outcome=entry.outcome, result=result)

    async def _hold(self) -> str | None:
        """Wait while an ask is open in the step or the tree; a refusal if the call must not run."""
        tree = self.tree
        while True:
            if not self._clear.is_set():
                await self._clear.wait()
            elif tree.held_for(self) and self.fenced is None and self.switches.hold_tree:
                await tree.changed()
            else:
                break
        park = self._step.park or (tree.park if self.switches.hold_tree else None)
        if park is not None and self.fenced is None:
            raise RunParked(park, parked_message(park))
        failed = self._step.failed or (tree.failed if self.switches.hold_tree else None)
        if failed is not None and self.switches.hold_on_failure:
            return (
                f"Not run: it was held behind an approval that ended without a decision ({failed})."
            )
        return None

    # -- approvals -----------------------------------------------------------------------------------

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

    # -- after the call -------------------------------------------------------------------------------

    def may_commit(self, admitted: Admitted) -> bool:
        """Whether an admitted call's result may still be applied (the run was not fenced).

        A commit stage (e.g. a contract committing a state draft) checks this last, with
        no await between the check and the commit.
        """
        return admitted.epoch == self.epoch or not self.switches.fence

    async def settle(
        self, admitted: Admitted, result: ToolResultPart, outcome: ToolOutcome
    ) -> tuple[ToolResultPart, ToolOutcome]:
        """The result the model sees: fenced if the run was cancelled meanwhile, then hooked."""
        if admitted.pending_decision is not None:
            with contextlib.suppress(Exception):
                await admitted.pending_decision
        if not self.may_commit(admitted):
            text = "Cancelled: the run was cancelled while this call ran; its result was discarded."
            late = ToolResultPart.text_result(
                call_id=result.call_id, name=result.name, text=text, is_error=True
            )
            return late, "cancelled"
        if self.hooks is not None:
            result = await self.hooks.after_tool_result(result)
        return result, outcome

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
