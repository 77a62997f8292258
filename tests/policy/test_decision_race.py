"""A handler's decision that loses to another door: the run follows the stored decision.

One decision per request (docs/safety.md): a person deciding through another door (the CLI,
the web page, a second process) while the run's own handler is still asking wins if it is
stored first. The handler's late write is then refused by the store, and the run must go on
with the decision that was stored, not fail with the loser's error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from legato import Agent, tool
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    Reject,
    Rule,
    SQLiteApprovalStore,
)
from legato.events import ApprovalDecided
from legato.exceptions import DecisionAlreadyUsed
from legato.testing import ScriptedModel, call, reply


def _setup(tmp_path: Path) -> tuple[list[str], Agent[str], SQLiteApprovalStore]:
    sent: list[str] = []

    @tool(side_effects="irreversible")
    async def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: Recipient.
        """
        sent.append(to)
        return f"sent to {to}"

    store = SQLiteApprovalStore(tmp_path / "approvals.db")

    async def late_yes(request: ApprovalRequest) -> Approve:
        # another door decides first, while this handler is still asking
        await store.decide(request.id, request.token, Reject(message="No: decided elsewhere."))
        return Approve()

    policy = ApprovalPolicy(
        rules=[Rule("send_email", "ask")], handler=CallbackApprover(late_yes), store=store
    )
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "understood"])
    return sent, Agent(model, tools=[send_email], approvals=policy), store


def test_the_run_follows_the_decision_stored_first(tmp_path: Path) -> None:
    sent, agent, _ = _setup(tmp_path)
    result = agent.run_sync("go")
    assert sent == []  # the stored rejection holds
    (decided,) = [e for e in result.journal if isinstance(e, ApprovalDecided)]
    assert decided.verdict == "reject" and decided.message == "No: decided elsewhere."
    assert result.output == "understood"


async def test_twin_the_handlers_write_is_refused_by_the_store(tmp_path: Path) -> None:
    """What the gate meets: the handler's write loses with `DecisionAlreadyUsed` (before the
    gate handled it, that error escaped and failed the run instead of following the store)."""
    _, _, store = _setup(tmp_path)
    request = ApprovalRequest.create(
        run_id="r", step=1, call_id="c", tool="send_email", arguments={"to": "bob"}, rule="ask"
    )
    await store.put(request)
    await store.decide(request.id, request.token, Reject(message="first"))
    with pytest.raises(DecisionAlreadyUsed):
        await store.decide(request.id, request.token, Approve())
    stored = await store.decision(request.id)
    assert isinstance(stored, Reject) and stored.message == "first"
