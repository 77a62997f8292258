"""`GateRecord`: what a run's effect gate decided, as a projection of its journal.

The gate keeps no decision of its own outside this record, and the record changes only
when a journal event is applied to it. A gate built on a resumed or forked journal
therefore decides exactly what the original gate would have: an effect admitted stays
admitted (its result is reused, or its unknown outcome reconciled), a call the gate
refused stays refused with the same reason and message, a rejected approval keeps holding
back the side-effecting calls of its response, and a decision is never claimed twice.
"""

from __future__ import annotations

from legato._effects_parts import LedgerEntry
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    JournalEvent,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
)

__all__ = ["UNKNOWN_OUTCOME", "GateRecord"]


UNKNOWN_OUTCOME = (
    "outcome unknown: this irreversible call was admitted before the run was interrupted and "
    "never finished, so it may have taken effect. Approve to run it again (same idempotency "
    "key); reject to not run it, saying what happened (e.g. 'it ran' or 'it did not run')."
)
"""The rule of the request a person answers for an effect whose outcome is unknown."""


class GateRecord:
    """The gate's decisions so far, rebuilt from the journal's events (see the module)."""

    __slots__ = (
        "_asked",
        "decided",
        "effect_of",
        "ledger",
        "refused",
        "rejected_steps",
        "requests",
    )

    def __init__(self) -> None:
        """An empty record (a run with no events yet)."""
        self.ledger: dict[str, LedgerEntry] = {}
        """Effect id -> what is known of the admitted effect (finished, outcome, result)."""
        self.effect_of: dict[str, str] = {}
        """Call id -> the effect id its admission recorded."""
        self.requests: dict[str, str] = {}
        """Call id -> id of its approval request not decided yet."""
        self.decided: dict[str, ApprovalDecided] = {}
        """Call id -> the decision applied to it (never claimed twice)."""
        self.refused: dict[tuple[int, str], ToolCallRefused] = {}
        """(step, call id) -> the gate's refusal of that call, re-applied as it was. A
        `duplicate` refusal is not kept: its result comes from the ledger each time."""
        self.rejected_steps: set[int] = set()
        """Steps with a rejected approval: they hold back their other side-effecting calls
        (a rejection of an unknown outcome's request holds nothing back)."""
        self._asked: dict[str, tuple[int, str]] = {}
        """Call id -> (step, rule) of its latest approval request."""

    def apply(self, event: JournalEvent, *, remember: bool = True) -> None:
        """Advance the record by one journal event.

        `remember=False` (a test twin only): the refusals and rejections of `event` are
        not kept, as if they lived only in the memory of the process that made them.
        """
        match event:
            case ToolCallAdmitted():
                self.ledger[event.effect_id] = LedgerEntry(call_id=event.call_id)
                self.effect_of[event.call_id] = event.effect_id
            case ToolCallFinished():
                eid = self.effect_of.get(event.call.id)
                entry = self.ledger.get(eid) if eid is not None else None
                if entry is not None:
                    entry.finished, entry.outcome, entry.result = True, event.outcome, event.result
                    if entry.done is not None:
                        entry.done.set()
            case ToolCallRefused():
                if event.reason != "duplicate" and remember:
                    self.refused[(event.step, event.call_id)] = event
            case ApprovalRequested():
                self.requests[event.call.id] = event.request_id
                self._asked[event.call.id] = (event.step, event.rule)
            case ApprovalDecided():
                self.requests.pop(event.call_id, None)
                self.decided[event.call_id] = event
                asked = self._asked.get(event.call_id)
                if (
                    event.verdict == "reject"
                    and asked is not None
                    and asked[1] != UNKNOWN_OUTCOME
                    and remember
                ):
                    self.rejected_steps.add(asked[0])
            case _:
                pass  # nothing else is a decision of the gate

    def refusal(self, step: int, call_id: str, tool: str) -> ToolCallRefused | None:
        """The gate's recorded refusal of this call, if it refused it."""
        found = self.refused.get((step, call_id))
        return found if found is not None and found.tool == tool else None
