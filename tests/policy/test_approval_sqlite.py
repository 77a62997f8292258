"""Approvals in SQLite: park in one process, decide in another, resume; one claim wins."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path

import pytest

from legato import Agent, tool
from legato.approvals import ApprovalDesk, ApprovalPolicy, Rule, SQLiteApprovalStore
from legato.exceptions import DecisionAlreadyUsed, RunParked
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply

SENT: list[str] = []


@tool(side_effects="irreversible")
def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: The recipient.
    """
    SENT.append(to)
    return f"sent to {to}"


def _decide_elsewhere(path: str, request_id: str, token: str) -> None:
    """Runs in another process: the approver sees the request and approves it."""

    async def decide() -> None:
        desk = ApprovalDesk(SQLiteApprovalStore(path))
        assert [item["id"] for item in await desk.pending()] == [request_id]
        await desk.decide(request_id, {"token": token, "verdict": "approve"})

    asyncio.run(decide())


def _claim_elsewhere(path: str, request_id: str, results: multiprocessing.Queue[str]) -> None:
    async def claim() -> str:
        try:
            decision = await SQLiteApprovalStore(path).claim(request_id)
        except DecisionAlreadyUsed:
            return "already used"
        return "claimed" if decision is not None else "undecided"

    results.put(asyncio.run(claim()))


def agent_on(path: Path) -> Agent:
    model = ScriptedModel([reply(call("send_email", {"to": "ann@example.com"})), "Sent."])
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=SQLiteApprovalStore(path))
    return Agent(model, tools=[send_email], approvals=policy)


async def test_a_run_parks_here_is_decided_in_another_process_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    SENT.clear()
    with pytest.raises(RunParked) as stopped:
        await agent_on(path).run("Greet Ann.")
    parked = stopped.value.parked
    assert SENT == []  # nothing ran while the decision was pending
    saved = parked.journal.to_jsonl()
    request = parked.requests[0]
    context = multiprocessing.get_context("fork")
    approver = context.Process(
        target=_decide_elsewhere, args=(str(path), request.id, request.token)
    )
    approver.start()
    approver.join(60)
    assert approver.exitcode == 0
    # a fresh agent (as a new process would build it) resumes from the saved journal
    result = await agent_on(path).resume(saved)
    assert result.output == "Sent."
    assert SENT == ["ann@example.com"]
    with pytest.raises(DecisionAlreadyUsed):  # the decision was consumed by the resume
        await SQLiteApprovalStore(path).claim(request.id)


async def test_concurrent_resumers_in_separate_processes_claim_once(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    SENT.clear()
    with pytest.raises(RunParked) as stopped:
        await agent_on(path).run("Greet Ann.")
    request = stopped.value.parked.requests[0]
    store = SQLiteApprovalStore(SQLiteStore(path))
    await ApprovalDesk(store).decide(request.id, {"token": request.token, "verdict": "approve"})
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[str] = context.Queue()
    claimers = [
        context.Process(target=_claim_elsewhere, args=(str(path), request.id, results))
        for _ in range(8)
    ]
    for process in claimers:
        process.start()
    for process in claimers:
        process.join(60)
    outcomes = sorted(results.get(timeout=10) for _ in claimers)
    assert outcomes == ["already used"] * 7 + ["claimed"]
