"""A tree of runs is one run: children inherit the gate, store their journals beside the
parent's, and a child's park parks the parent (resuming the parent resumes the child)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from legato import Agent, Tool, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import ApprovalPolicy, Approve, Rule, SQLiteApprovalStore
from legato.events import ApprovalRequested, Parked, RunFinished, SpawnStarted
from legato.exceptions import RunParked
from legato.security import SecretRedactor
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply


class Outbox:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def tool(self) -> Tool:
        @tool(side_effects="irreversible")
        async def send_email(to: str) -> str:
            """Send an e-mail.

            Args:
                to: Recipient.
            """
            self.sent.append(to)
            return f"sent to {to}"

        return send_email


ASK = reply(call("ask_mailer", {"task": "mail bob@example.com the secret sk-live-123456789"}))


def _tree(
    outbox: Outbox,
    db: Path | None,
    approvals: ApprovalPolicy | None,
    child_turns: list[object],
    parent_turns: list[object] | None = None,
) -> tuple[Agent, ScriptedModel]:
    child_model = ScriptedModel(child_turns)  # type: ignore[arg-type]
    helper = Agent(child_model, name="mailer", tools=[outbox.tool()])
    parent = ScriptedModel(parent_turns or [ASK, "all done"])  # type: ignore[arg-type]
    store = SQLiteStore(db) if db is not None else None
    agent = Agent(
        parent,
        name="boss",
        tools=[helper.as_tool(name="ask_mailer", description="Ask the mailer")],
        approvals=approvals,
        store=store,
        hooks=[SecretRedactor(values=["sk-live-123456789"], environ={})],
    )
    return agent, child_model


def test_a_child_asks_where_its_parent_policy_says_ask() -> None:
    outbox = Outbox()
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")])
    agent, _ = _tree(outbox, None, policy, [reply(call("send_email", {"to": "bob"})), "sent"])
    with pytest.raises(RunParked) as parked:
        agent.run_sync("mail bob")
    assert outbox.sent == []
    assert [r.tool for r in parked.value.parked.requests] == ["send_email"]
    journal = parked.value.parked.journal
    assert parked.value.parked.run_id == journal.run_id  # the parent parks, with the child
    assert isinstance(journal.events[-1], Parked)


def test_twin_without_inheritance_the_child_sends_what_the_parent_must_ask_about() -> None:
    outbox = Outbox()
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")])
    agent, _ = _tree(outbox, None, policy, [reply(call("send_email", {"to": "bob"})), "sent"])
    with unsafe_switches(inherit_gate=False):
        agent.run_sync("mail bob")
    assert outbox.sent == ["bob"]


def test_a_child_policy_can_narrow_never_widen() -> None:
    outbox = Outbox()
    parent_policy = ApprovalPolicy(rules=[Rule("send_email", "ask")])
    child_model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "sent"])
    wide = Agent(child_model, tools=[outbox.tool()], approvals={"send_email": "auto"}, name="wide")
    parent = ScriptedModel([reply(call("ask_wide", {"task": "mail bob"})), "done"])
    agent = Agent(
        parent, tools=[wide.as_tool(name="ask_wide", description="d")], approvals=parent_policy
    )
    with pytest.raises(RunParked):
        agent.run_sync("go")
    assert outbox.sent == []
    # narrowing: the parent allows, the child denies
    outbox2 = Outbox()
    narrow_model = ScriptedModel([reply(call("send_email", {"to": "eve"})), "refused"])
    narrow = Agent(narrow_model, tools=[outbox2.tool()], approvals={"send_email": "deny"})
    parent2 = ScriptedModel([reply(call("ask_narrow", {"task": "mail eve"})), "done"])
    agent2 = Agent(parent2, tools=[narrow.as_tool(name="ask_narrow", description="d")])
    assert agent2.run_sync("go").output == "done"
    assert outbox2.sent == []


def test_the_parent_hooks_redact_what_the_child_model_sees() -> None:
    outbox = Outbox()
    agent, child_model = _tree(outbox, None, None, ["nothing to send"])
    agent.run_sync("go")
    seen = " ".join(m.text for r in child_model.requests for m in r.messages)
    assert "sk-live-123456789" not in seen
    assert "[REDACTED]" in seen
    with unsafe_switches(inherit_gate=False):
        outbox2 = Outbox()
        agent2, child2 = _tree(outbox2, None, None, ["nothing to send"])
        agent2.run_sync("go")
    assert "sk-live-123456789" in " ".join(m.text for r in child2.requests for m in r.messages)


def test_children_journals_go_to_the_parent_store_and_the_tree_resumes_as_a_tree(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tree.db"
    approvals = SQLiteApprovalStore(db)
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=approvals)
    outbox = Outbox()
    agent, _ = _tree(outbox, db, policy, [reply(call("send_email", {"to": "bob"}))])
    with pytest.raises(RunParked) as parked:
        agent.run_sync("mail bob")
    root = parked.value.parked.run_id
    store = SQLiteStore(db)
    runs = {r.run_id: r for r in store.list_runs()}
    child_ids = [e.lineage.run_id for e in store.load_run(root) if isinstance(e, SpawnStarted)]
    assert len(child_ids) == 1 and child_ids[0] in runs
    assert runs[root].status == "parked" and runs[child_ids[0]].status == "parked"

    async def approve() -> None:
        for event in store.load_run(child_ids[0]):
            if isinstance(event, ApprovalRequested):
                request = await approvals.get(event.request_id)
                assert request is not None
                await approvals.decide(request.id, request.token, Approve())

    asyncio.run(approve())
    # a fresh process would build the same agents; the child picks up where it stopped
    outbox2 = Outbox()
    resumer, child_model = _tree(outbox2, db, policy, ["mail sent"], ["all done"])
    result = resumer.resume_sync(root)
    assert result.output == "all done"
    assert outbox.sent + outbox2.sent == ["bob"]
    assert isinstance(SQLiteStore(db).load_run(child_ids[0]).events[-1], RunFinished)
    assert SQLiteStore(db).run_info(root).status == "finished"  # type: ignore[union-attr]
    assert len(child_model.requests) == 1  # the child continued, not restarted


def _held_tree(outbox: Outbox) -> tuple[Agent, list[str], list[list[str]]]:
    """The parent approves its `ship` only once the child's ask is open; the child's
    approver looks at what had shipped while its own request was pending."""
    shipped: list[str] = []
    during: list[list[str]] = []
    child_asked = asyncio.Event()

    @tool(side_effects="irreversible")
    async def ship(order: str) -> str:
        """Ship.

        Args:
            order: Which order.
        """
        shipped.append(order)
        return "shipped"

    async def handler(request: object) -> Approve:
        if getattr(request, "tool", "") == "ship":
            await child_asked.wait()
        else:
            child_asked.set()
            for _ in range(20):  # let anything that is not held run now
                await asyncio.sleep(0)
            await asyncio.sleep(0.05)
            during.append(list(shipped))
        return Approve()

    policy = ApprovalPolicy(
        rules=[Rule("ship", "ask"), Rule("send_email", "ask")],
        handler=handler,
    )
    child = Agent(
        ScriptedModel([reply(call("send_email", {"to": "bob"})), "sent"]),
        tools=[outbox.tool()],
        name="mailer",
    )
    parent = ScriptedModel(
        [reply(call("ask_mailer", {"task": "mail bob"}), call("ship", {"order": "X"})), "done"]
    )
    agent = Agent(
        parent,
        tools=[child.as_tool(name="ask_mailer", description="d"), ship],
        approvals=policy,
    )
    return agent, shipped, during


def test_an_ask_open_in_a_child_holds_the_parents_side_effects() -> None:
    outbox = Outbox()
    agent, shipped, during = _held_tree(outbox)
    assert agent.run_sync("go").output == "done"
    assert during == [[]]  # nothing shipped while the child's request was pending
    assert shipped == ["X"] and outbox.sent == ["bob"]


def test_twin_without_the_tree_hold_the_parent_ships_during_the_childs_ask() -> None:
    outbox = Outbox()
    agent, shipped, during = _held_tree(outbox)
    with unsafe_switches(hold_tree=False):
        assert agent.run_sync("go").output == "done"
    assert during == [["X"]]
    assert shipped == ["X"]


def test_a_wider_child_policy_needs_the_explicit_logged_opt_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outbox = Outbox()
    child_model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "sent"])
    wide = Agent(child_model, tools=[outbox.tool()], approvals={"send_email": "auto"}, name="wide")
    parent = ScriptedModel([reply(call("ask_wide", {"task": "mail bob"})), "done"])
    agent = Agent(
        parent,
        tools=[wide.as_tool(name="ask_wide", description="d", own_policy=True)],
        approvals=ApprovalPolicy(rules=[Rule("send_email", "ask")]),
    )
    with caplog.at_level("WARNING", logger="legato.spawn"):
        assert agent.run_sync("go").output == "done"
    assert outbox.sent == ["bob"]
    assert any("own approval policy" in r.getMessage() for r in caplog.records)
