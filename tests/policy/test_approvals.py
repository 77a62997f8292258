"""Approval policies, decisions, parking and resuming, through real agent runs."""

from __future__ import annotations

import asyncio
import json

import pytest

from legato import Agent, Tool, tool
from legato.approvals import (
    ApprovalDesk,
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    Edit,
    MemoryApprovalStore,
    Reject,
    Rule,
    TerminalApprover,
    arguments_hash,
)
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    Journal,
    Parked,
    RunFinished,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
    is_journal_event,
)
from legato.exceptions import (
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    PolicyError,
    RunParked,
)
from legato.testing import ScriptedModel, call, reply


class World:
    """Records what the tools did."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.deleted: list[str] = []

    def tools(self) -> list[Tool]:
        @tool(side_effects="irreversible")
        async def send_email(to: str, body: str = "") -> str:
            """Send an email.

            Args:
                to: Recipient.
                body: Text.
            """
            self.sent.append(to)
            return f"sent to {to}"

        @tool(side_effects="irreversible")
        async def delete_file(path: str) -> str:
            """Delete a file.

            Args:
                path: Which file.
            """
            self.deleted.append(path)
            return f"deleted {path}"

        @tool
        async def search(query: str) -> str:
            """Search (read-only).

            Args:
                query: What to look for.
            """
            return f"results for {query}"

        return [send_email, delete_file, search]


def results(journal: object) -> dict[str, ToolCallFinished]:
    return {e.call.name: e for e in journal if isinstance(e, ToolCallFinished)}  # type: ignore[attr-defined]


# -- policies -------------------------------------------------------------------------------------


def test_rules_match_tool_and_argument_globs_first_match_wins() -> None:
    world = World()
    tools = {t.name: t for t in world.tools()}
    policy = ApprovalPolicy(
        rules=[
            Rule("delete_file", "deny", arguments={"path": "/etc/*"}),
            Rule("delete_file", "ask"),
            Rule("send_*", "auto"),
        ],
        default="ask",
    )
    policy.check(tools)
    assert policy.action(tools["delete_file"], {"path": "/etc/passwd"})[0] == "deny"
    assert policy.action(tools["delete_file"], {"path": "/tmp/x"})[0] == "ask"
    assert policy.action(tools["send_email"], {"to": "a"})[0] == "auto"
    # read-only tools no rule names are admitted even with a default of ask
    assert policy.action(tools["search"], {"query": "q"}) == ("auto", "read-only")


def test_policy_naming_an_unknown_tool_fails_before_anything_runs() -> None:
    world = World()
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "done"])
    agent = Agent(model, tools=world.tools(), approvals={"send_mail": "ask"})
    with pytest.raises(PolicyError, match="send_mail"):
        agent.run_sync("go")
    assert world.sent == []
    assert model.requests == []  # stopped before the first model call


def test_policy_naming_an_unknown_argument_is_refused() -> None:
    world = World()
    policy = ApprovalPolicy(rules=[Rule("delete_file", "ask", arguments={"file": "*"})])
    agent = Agent(ScriptedModel(["x"]), tools=world.tools(), approvals=policy)
    with pytest.raises(PolicyError, match="'file'"):
        agent.run_sync("go")


def test_bad_action_is_a_policy_error() -> None:
    with pytest.raises(PolicyError):
        Rule("x", "maybe")  # type: ignore[arg-type]


def test_deny_never_runs_and_the_model_is_told() -> None:
    world = World()
    model = ScriptedModel([reply(call("delete_file", {"path": "/etc/passwd"})), "ok"])
    agent = Agent(model, tools=world.tools(), approvals={"delete_file": "deny"})
    result = agent.run_sync("go")
    assert world.deleted == []
    finished = results(result.journal)["delete_file"]
    assert finished.outcome == "refused"
    assert "forbids" in finished.result.text
    assert "forbids" in model.requests[1].messages[-1].tool_results[0].text


# -- deciding with a handler -------------------------------------------------------------------------


def test_callback_approve_runs_once_and_is_journaled() -> None:
    world = World()
    seen: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> Approve:
        seen.append(request)
        return Approve()

    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], handler=CallbackApprover(decide))
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "done"])
    result = Agent(model, tools=world.tools(), approvals=policy).run_sync("go")
    assert world.sent == ["bob"]
    (request,) = seen
    assert request.tool == "send_email"
    assert request.arguments_hash == arguments_hash({"to": "bob"})
    assert request.run_id == result.run_id and request.step == 1
    kinds = [type(e).__name__ for e in result.journal]
    assert kinds.index("ApprovalRequested") < kinds.index("ApprovalDecided")
    assert kinds.index("ApprovalDecided") < kinds.index("ToolCallAdmitted")
    admitted = next(e for e in result.journal if isinstance(e, ToolCallAdmitted))
    assert admitted.via == "approval"


def test_reject_never_runs_and_the_model_is_told_why() -> None:
    world = World()
    policy = ApprovalPolicy(
        rules=[Rule("send_email", "ask")],
        handler=CallbackApprover(lambda r: Reject(message="Not to Bob, please.")),
    )
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "understood"])
    result = Agent(model, tools=world.tools(), approvals=policy).run_sync("go")
    assert world.sent == []
    told = model.requests[1].messages[-1].tool_results[0]
    assert told.is_error and "Not to Bob, please." in told.text
    assert results(result.journal)["send_email"].outcome == "refused"


def test_edit_runs_with_the_edited_arguments_once() -> None:
    world = World()
    policy = ApprovalPolicy(
        rules=[Rule("send_email", "ask")],
        handler=CallbackApprover(lambda r: Edit(arguments={"to": "alice"})),
    )
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "done"])
    result = Agent(model, tools=world.tools(), approvals=policy).run_sync("go")
    assert world.sent == ["alice"]
    admitted = next(e for e in result.journal if isinstance(e, ToolCallAdmitted))
    assert admitted.via == "edit" and admitted.arguments == {"to": "alice"}


def test_edit_with_invalid_arguments_is_revalidated_and_refused() -> None:
    world = World()
    policy = ApprovalPolicy(
        rules=[Rule("send_email", "ask")],
        handler=CallbackApprover(lambda r: Edit(arguments={"recipient": "alice"})),
    )
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "done"])
    result = Agent(model, tools=world.tools(), approvals=policy).run_sync("go")
    assert world.sent == []
    assert "edited arguments are invalid" in results(result.journal)["send_email"].result.text


def test_run_override_replaces_the_agents_policy() -> None:
    world = World()
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "done"])
    agent = Agent(model, tools=world.tools(), approvals={"send_email": "deny"})
    agent.run_sync("go", approvals={"send_email": "auto"})
    assert world.sent == ["bob"]


# -- hold-until-decided is run-wide ---------------------------------------------------------------------


async def test_sibling_effect_waits_while_approval_pending_and_read_only_goes_on() -> None:
    world = World()
    decided = asyncio.Event()
    observed: dict[str, object] = {}

    async def approver(request: ApprovalRequest) -> Reject:
        await asyncio.sleep(0.02)  # the human takes a while
        observed["deleted_during_pause"] = list(world.deleted)
        observed["searched"] = searched.is_set()
        decided.set()
        return Reject()

    searched = asyncio.Event()

    @tool
    async def search(query: str) -> str:
        """Read-only."""
        searched.set()
        return "r"

    tools = [t for t in world.tools() if t.name != "search"] + [search]
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], handler=CallbackApprover(approver))
    model = ScriptedModel(
        [
            reply(
                call("delete_file", {"path": "a"}),
                call("send_email", {"to": "bob"}),
                call("search", {"query": "q"}),
            ),
            "done",
        ]
    )
    result = await Agent(model, tools=tools, approvals=policy).run("go")
    assert observed == {"deleted_during_pause": [], "searched": True}
    # rejection also refuses the sibling held behind it: it never ran
    assert world.deleted == [] and world.sent == []
    refusals = {e.tool: e.reason for e in result.journal if isinstance(e, ToolCallRefused)}
    assert refusals == {"send_email": "rejected", "delete_file": "held"}


async def test_sibling_runs_after_approval_when_not_rejected() -> None:
    world = World()
    policy = ApprovalPolicy(
        rules=[Rule("send_email", "ask")], handler=CallbackApprover(lambda r: Approve())
    )
    model = ScriptedModel(
        [reply(call("delete_file", {"path": "a"}), call("send_email", {"to": "bob"})), "done"]
    )
    await Agent(model, tools=world.tools(), approvals=policy).run("go")
    assert world.deleted == ["a"] and world.sent == ["bob"]


async def test_requests_are_decided_one_at_a_time_in_model_order() -> None:
    world = World()
    active = 0
    order: list[str] = []

    async def approver(request: ApprovalRequest) -> Approve:
        nonlocal active
        active += 1
        assert active == 1
        order.append(str(request.arguments))
        await asyncio.sleep(0.005)
        active -= 1
        return Approve()

    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], handler=CallbackApprover(approver))
    model = ScriptedModel([reply(*(call("send_email", {"to": f"p{i}"}) for i in range(4))), "done"])
    await Agent(model, tools=world.tools(), approvals=policy).run("go")
    assert order == [str({"to": f"p{i}"}) for i in range(4)]
    assert sorted(world.sent) == ["p0", "p1", "p2", "p3"]


# -- parking and resuming ----------------------------------------------------------------------------------


def parked_agent(world: World, store: MemoryApprovalStore) -> tuple[Agent, ScriptedModel]:
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=store)
    model = ScriptedModel(
        [reply(call("send_email", {"to": "bob"}), call("delete_file", {"path": "x"})), "done"]
    )
    return Agent(model, tools=world.tools(), approvals=policy), model


async def test_park_then_resume_from_serialized_journal_with_a_decision() -> None:
    world, store = World(), MemoryApprovalStore()
    agent, _ = parked_agent(world, store)
    with pytest.raises(RunParked) as info:
        await agent.run("go")
    parked = info.value.parked
    assert world.sent == [] and world.deleted == []  # nothing side-effecting ran
    assert isinstance(list(parked.journal)[-1], Parked)
    request = parked.request_for("send_email")
    # the request survives serialization, as it would in another process
    assert ApprovalRequest.from_json(request.to_json()) == request
    text = parked.journal.to_jsonl()
    await ApprovalDesk(store).decide(request.id, {"token": request.token, "verdict": "approve"})
    result = await agent.resume(text)
    assert result.output == "done"
    assert world.sent == ["bob"] and world.deleted == ["x"]
    decided = [e for e in result.journal if isinstance(e, ApprovalDecided)]
    assert [d.verdict for d in decided] == ["approve"]


async def test_resume_without_a_decision_parks_again_without_a_second_request() -> None:
    world, store = World(), MemoryApprovalStore()
    agent, _ = parked_agent(world, store)
    with pytest.raises(RunParked) as first:
        await agent.run("go")
    with pytest.raises(RunParked) as second:
        await agent.resume(first.value.parked)
    assert second.value.parked.requests == first.value.parked.requests
    requested = [e for e in second.value.parked.journal if isinstance(e, ApprovalRequested)]
    assert len(requested) == 1
    assert world.sent == []


async def test_concurrent_resumers_run_the_effect_exactly_once() -> None:
    world, store = World(), MemoryApprovalStore()
    agent, _ = parked_agent(world, store)
    with pytest.raises(RunParked) as info:
        await agent.run("go")
    parked = info.value.parked
    request = parked.requests[0]
    await store.decide(request.id, request.token, Approve())
    text = parked.journal.to_jsonl()
    # ten resumers of the same parked run, each from its own copy of the journal
    agent.model  # noqa: B018 - resolve once
    outcomes = await asyncio.gather(
        *(agent.resume(text) for _ in range(10)), return_exceptions=True
    )
    assert world.sent == ["bob"]
    assert sum(isinstance(o, DecisionAlreadyUsed) for o in outcomes) == 9


async def test_decision_token_rules() -> None:
    world, store = World(), MemoryApprovalStore()
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=store)
    model = ScriptedModel([reply(call("send_email", {"to": "a"}), call("send_email", {"to": "b"}))])
    with pytest.raises(RunParked) as info:
        await Agent(model, tools=world.tools(), approvals=policy).run("go")
    first, second = info.value.parked.requests
    with pytest.raises(DecisionTokenInvalid):  # a token for another call
        await store.decide(first.id, second.token, Approve())
    with pytest.raises(DecisionTokenInvalid):
        await store.decide("apr_unknown", first.token, Approve())
    await store.decide(first.id, first.token, Approve())
    with pytest.raises(DecisionAlreadyUsed):  # a token used twice
        await store.decide(first.id, first.token, Reject())
    assert await store.claim(first.id) == Approve()
    with pytest.raises(DecisionAlreadyUsed):
        await store.claim(first.id)
    assert [r.id for r in await store.pending()] == [second.id]
    with pytest.raises(DecisionTokenInvalid):
        await ApprovalDesk(store).decide(second.id, {"verdict": "approve"})
    with pytest.raises(DecisionTokenInvalid):
        await ApprovalDesk(store).decide(second.id, {"token": second.token, "verdict": "maybe"})
    assert world.sent == []


async def test_decision_from_another_thread_while_the_run_waits() -> None:
    world, store = World(), MemoryApprovalStore()
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=store, wait=5.0)
    model = ScriptedModel([reply(call("send_email", {"to": "bob"})), "done"])
    handle = Agent(model, tools=world.tools(), approvals=policy).start("go")

    def approver_process() -> None:
        async def decide() -> None:
            while not (pending := await store.pending()):  # noqa: ASYNC110 - polling another process's store
                await asyncio.sleep(0.005)
            desk = ApprovalDesk(store)
            (item,) = await desk.pending()
            json.dumps(item)  # what a web UI receives
            await desk.decide(item["id"], {"token": item["token"], "verdict": "approve"})
            assert pending

        asyncio.run(decide())

    await asyncio.to_thread(approver_process)
    result = await handle.result()
    assert result.output == "done" and world.sent == ["bob"]


async def test_terminal_approver_reads_answers() -> None:
    request = ApprovalRequest.create(
        run_id="r", step=1, call_id="c", tool="send_email", arguments={"to": "x"}, rule="r"
    )
    shown: list[str] = []
    answers = iter(["maybe", "e", "not json", "e", '{"to": "y"}'])
    terminal = TerminalApprover(ask=lambda prompt: next(answers), show=shown.append)
    assert await terminal(request) == Edit(arguments={"to": "y"})
    assert any("send_email" in s for s in shown) and any("not JSON" in s for s in shown)
    answers = iter(["n", "too risky"])
    assert await TerminalApprover(ask=lambda p: next(answers), show=shown.append)(
        request
    ) == Reject(message="too risky")
    assert await TerminalApprover(ask=lambda p: "y", show=shown.append)(request) == Approve()


async def test_stream_of_an_approval_run_is_the_journal_in_order() -> None:
    world = World()
    policy = ApprovalPolicy(
        rules=[Rule("send_email", "ask")], handler=CallbackApprover(lambda r: Approve())
    )
    model = ScriptedModel(
        [
            reply(
                call("send_email", {"to": "a"}),
                call("delete_file", {"path": "p"}),
                call("search", {"query": "q"}),
                call("send_email", {"to": "b"}),
            ),
            "done",
        ]
    )
    agent = Agent(model, tools=world.tools(), approvals=policy)
    streamed = [e async for e in agent.stream("go")]
    journal_events = [e for e in streamed if is_journal_event(e)]
    kinds = [type(e).__name__ for e in journal_events]
    assert kinds.count("ApprovalRequested") == 2 and kinds.count("ToolCallAdmitted") == 3
    assert isinstance(journal_events[-1], RunFinished)
    # a second run's journal, collected via the result, has the same shape
    model2 = ScriptedModel([reply(call("send_email", {"to": "c"})), "done"])
    result = await Agent(model2, tools=world.tools(), approvals=policy).run("go")
    assert [type(e).__name__ for e in result.journal].count("ApprovalDecided") == 1


async def test_a_journaled_decision_is_applied_on_resume_without_claiming_again() -> None:
    world, store = World(), MemoryApprovalStore()
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=store)
    model = ScriptedModel(
        [reply(call("send_email", {"to": "a"}), call("send_email", {"to": "b"})), "done"]
    )
    agent = Agent(model, tools=world.tools(), approvals=policy)
    with pytest.raises(RunParked) as info:
        await agent.run("go")
    first, second = info.value.parked.requests
    await store.decide(first.id, first.token, Approve())
    with pytest.raises(RunParked) as again:  # the first is applied (journaled), the second waits
        await agent.resume(info.value.parked)
    assert [r.id for r in again.value.parked.requests] == [second.id]
    assert world.sent == []  # hold: nothing runs while a request of the run is pending
    await store.decide(second.id, second.token, Reject())
    result = await agent.resume(again.value.parked)
    assert world.sent == ["a"]
    decided = [e.verdict for e in result.journal if isinstance(e, ApprovalDecided)]
    assert decided == ["approve", "reject"]


async def test_expired_requests_refuse_decisions_and_are_asked_again() -> None:
    world, store = World(), MemoryApprovalStore()
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=store, ttl=0.0)
    model = ScriptedModel([reply(call("send_email", {"to": "a"})), "done"])
    agent = Agent(model, tools=world.tools(), approvals=policy)
    with pytest.raises(RunParked) as info:
        await agent.run("go")
    (old,) = info.value.parked.requests
    await asyncio.sleep(0.01)
    with pytest.raises(DecisionTokenInvalid, match="expired"):
        await store.decide(old.id, old.token, Approve())
    with pytest.raises(RunParked) as again:
        await agent.resume(info.value.parked)
    (new,) = again.value.parked.requests
    assert new.id != old.id and new.call_id == old.call_id
    assert world.sent == []


async def test_ask_rule_on_a_read_only_tool_holds_side_effects_until_decided() -> None:
    world = World()
    order: list[str] = []

    async def slow_approver(request: ApprovalRequest) -> Approve:
        await asyncio.sleep(0.01)
        order.append(f"decided {request.tool}")
        return Approve()

    policy = ApprovalPolicy(rules=[Rule("search", "ask")], handler=CallbackApprover(slow_approver))
    model = ScriptedModel(
        [reply(call("search", {"query": "q"}), call("delete_file", {"path": "p"})), "done"]
    )
    result = await Agent(model, tools=world.tools(), approvals=policy).run("go")
    assert world.deleted == ["p"]
    assert order == ["decided search"]
    # the ask still holds side effects until it is decided (hold is run-wide)
    kinds = [type(e).__name__ for e in result.journal]
    assert kinds.index("ApprovalDecided") < max(
        i for i, e in enumerate(result.journal) if isinstance(e, ToolCallAdmitted)
    )


async def test_an_edited_journal_cannot_reuse_an_approval_for_other_arguments() -> None:
    world, store = World(), MemoryApprovalStore()
    agent, _ = parked_agent(world, store)
    with pytest.raises(RunParked) as info:
        await agent.run("go")
    request = info.value.parked.request_for("send_email")
    await store.decide(request.id, request.token, Approve())
    tampered = info.value.parked.journal.to_jsonl().replace("bob", "mallory")
    with pytest.raises(RunParked) as again:
        await agent.resume(tampered)
    assert world.sent == []  # the approval was for bob, not for mallory
    (fresh,) = again.value.parked.requests
    assert fresh.id != request.id and fresh.arguments == {"to": "mallory"}


async def test_a_forged_decision_in_the_journal_is_not_honoured() -> None:
    world, store = World(), MemoryApprovalStore()
    agent, _ = parked_agent(world, store)
    with pytest.raises(RunParked) as info:
        await agent.run("go")
    request = info.value.parked.request_for("send_email")
    forged = Journal(
        [
            *info.value.parked.journal,
            ApprovalDecided(request_id=request.id, call_id=request.call_id, verdict="approve"),
        ]
    )
    with pytest.raises(RunParked):
        await agent.resume(forged)
    assert world.sent == []
