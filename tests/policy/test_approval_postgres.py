"""Approvals in PostgreSQL: park in one process, decide in another, resume; one claim wins.

Runs on the test session's PostgreSQL server (`pg_dsn`, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Iterator

import pytest

from legato import Agent, tool
from legato.approvals import ApprovalDesk, ApprovalPolicy, PostgresApprovalStore, Rule
from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid, RunParked
from legato.store import PostgresStore
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


def _decide_elsewhere(dsn: str, request_id: str, token: str) -> None:
    """Runs in another process: the approver sees the request and approves it."""

    async def decide() -> None:
        store = PostgresApprovalStore(dsn)
        desk = ApprovalDesk(store)
        assert [item["id"] for item in await desk.pending()] == [request_id]
        await desk.decide(request_id, {"token": token, "verdict": "approve"})
        store.close()

    asyncio.run(decide())


def _claim_elsewhere(dsn: str, request_id: str, results: multiprocessing.Queue[str]) -> None:
    async def claim() -> str:
        store = PostgresApprovalStore(dsn)
        try:
            decision = await store.claim(request_id)
        except DecisionAlreadyUsed:
            return "already used"
        finally:
            store.close()
        return "claimed" if decision is not None else "undecided"

    results.put(asyncio.run(claim()))


@pytest.fixture
def stores(pg_dsn: str) -> Iterator[list[PostgresApprovalStore]]:
    """Approval stores this process opens (as separate programs would), closed at the end."""
    opened: list[PostgresApprovalStore] = []
    yield opened
    for store in opened:
        store.close()


def agent_on(dsn: str, stores: list[PostgresApprovalStore]) -> Agent:
    stores.append(PostgresApprovalStore(dsn))
    model = ScriptedModel([reply(call("send_email", {"to": "ann@example.com"})), "Sent."])
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=stores[-1])
    return Agent(model, tools=[send_email], approvals=policy)


async def test_a_run_parks_here_is_decided_in_another_process_and_resumes(
    pg_dsn: str, stores: list[PostgresApprovalStore]
) -> None:
    SENT.clear()
    with pytest.raises(RunParked) as stopped:
        await agent_on(pg_dsn, stores).run("Greet Ann.")
    parked = stopped.value.parked
    assert SENT == []  # nothing ran while the decision was pending
    saved = parked.journal.to_jsonl()
    request = parked.requests[0]
    context = multiprocessing.get_context("fork")
    approver = context.Process(target=_decide_elsewhere, args=(pg_dsn, request.id, request.token))
    approver.start()
    approver.join(60)
    assert approver.exitcode == 0
    # a fresh agent (as a new process would build it) resumes from the saved journal
    result = await agent_on(pg_dsn, stores).resume(saved)
    assert result.output == "Sent."
    assert SENT == ["ann@example.com"]
    with pytest.raises(DecisionAlreadyUsed):  # the decision was consumed by the resume
        await stores[0].claim(request.id)


async def test_concurrent_resumers_in_separate_processes_claim_once(
    pg_dsn: str, stores: list[PostgresApprovalStore]
) -> None:
    SENT.clear()
    with pytest.raises(RunParked) as stopped:
        await agent_on(pg_dsn, stores).run("Greet Ann.")
    request = stopped.value.parked.requests[0]
    store = PostgresApprovalStore(PostgresStore(pg_dsn))
    stores.append(store)
    await ApprovalDesk(store).decide(request.id, {"token": request.token, "verdict": "approve"})
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[str] = context.Queue()
    claimers = [
        context.Process(target=_claim_elsewhere, args=(pg_dsn, request.id, results))
        for _ in range(8)
    ]
    for process in claimers:
        process.start()
    for process in claimers:
        process.join(60)
    outcomes = sorted(results.get(timeout=10) for _ in claimers)
    assert outcomes == ["already used"] * 7 + ["claimed"]


async def test_racing_deciders_in_separate_processes_are_accepted_once(
    pg_dsn: str, stores: list[PostgresApprovalStore]
) -> None:
    with pytest.raises(RunParked) as stopped:
        await agent_on(pg_dsn, stores).run("Greet Ann.")
    request = stopped.value.parked.requests[0]
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[str] = context.Queue()

    def decide() -> None:
        async def attempt() -> str:
            store = PostgresApprovalStore(pg_dsn)
            try:
                await ApprovalDesk(store).decide(
                    request.id, {"token": request.token, "verdict": "approve"}
                )
            except DecisionAlreadyUsed:
                return "refused"
            finally:
                store.close()
            return "accepted"

        results.put(asyncio.run(attempt()))

    deciders = [context.Process(target=decide) for _ in range(6)]
    for process in deciders:
        process.start()
    for process in deciders:
        process.join(60)
    outcomes = sorted(results.get(timeout=10) for _ in deciders)
    assert outcomes == ["accepted"] + ["refused"] * 5
    with pytest.raises(DecisionTokenInvalid):  # and a wrong token never is
        await ApprovalDesk(stores[0]).decide(request.id, {"token": "x", "verdict": "approve"})
