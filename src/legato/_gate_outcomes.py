"""Outcomes: what the effect gate does with an effect admitted before, and with a result.

`GateOutcomes` is the part of `legato.effects.EffectGate` that owns an effect after its
admission:

- **dedup-on-replay** (`_deduplicate`): an effect the journal shows admitted and finished
  has its recorded result reused; one whose outcome is unknown (admitted, never finished;
  cancelled; timed out) runs again if it is idempotent (same idempotency key), and if it is
  irreversible is reconciled by the tool's `reconcile` hook or put to a person;
- **fence-on-cancel** for results (`may_commit`, `settle`): a result from an epoch older
  than the run's is discarded as cancelled, never applied; the security hooks see the
  result that stands.

It must not run a tool (the executor does) nor decide whether a call may run (admission
in `legato.effects`). Policy layer: imports nothing from the runtime or the interfaces.
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

from legato._gate_state import Admitted, GateState, Refused
from legato.events import ToolOutcome
from legato.messages import ToolCallPart, ToolResultPart
from legato.tools import Tool, to_content
from legato.tools._reconcile import reconcile_call

__all__ = ["GateOutcomes"]


class GateOutcomes(GateState):
    """The gate's outcomes: reuse, reconcile, fence, settle (see the module)."""

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
                    said = "reconciled: the tool's reconcile hook says it already ran"
                    self._record_refusal(call, eid, "duplicate", said)
                    return Refused(reason="duplicate", outcome="ok", result=result)
            return "ask"
        result = entry.result or ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=""
        )
        self._record_refusal(call, eid, "duplicate", "already ran; the recorded result is reused")
        return Refused(reason="duplicate", outcome=entry.outcome, result=result)

    # -- after the call ------------------------------------------------------------------------------

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
