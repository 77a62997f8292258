"""The `ApprovalStore` contract, run against every store implementation.

A new store joins by adding a factory to `STORES`; PostgreSQL runs on the test server
(`pg_dsn`, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from legato.approvals import (
    ApprovalDesk,
    ApprovalRequest,
    ApprovalStore,
    Approve,
    Edit,
    MemoryApprovalStore,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
)
from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid
from legato.store import SQLiteStore


def sqlite_store() -> ApprovalStore:
    return SQLiteApprovalStore(SQLiteStore(":memory:"))


STORES: dict[str, Callable[[], ApprovalStore]] = {
    "memory": MemoryApprovalStore,
    "sqlite": sqlite_store,
}


@pytest.fixture(params=[*sorted(STORES), "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[ApprovalStore]:
    if request.param != "postgres":
        yield STORES[request.param]()
        return
    opened = PostgresApprovalStore(request.getfixturevalue("pg_dsn"))  # a real server
    yield opened
    opened.close()


def make_request(run_id: str = "run", call_id: str = "c1") -> ApprovalRequest:
    return ApprovalRequest.create(
        run_id=run_id, step=1, call_id=call_id, tool="send", arguments={"to": "x"}, rule="r"
    )


async def test_put_get_pending(store: ApprovalStore) -> None:
    assert isinstance(store, ApprovalStore)
    a, b, c = make_request(call_id="a"), make_request(call_id="b"), make_request("other", "c")
    for r in (a, b, c):
        await store.put(r)
    assert await store.get(a.id) == a
    assert await store.get("missing") is None
    assert [r.id for r in await store.pending("run")] == [a.id, b.id]
    assert len(await store.pending()) == 3


async def test_decide_then_claim_exactly_once(store: ApprovalStore) -> None:
    r = make_request()
    await store.put(r)
    assert await store.claim(r.id) is None  # undecided
    await store.decide(r.id, r.token, Edit(arguments={"to": "y"}, message="m"))
    assert await store.pending() == []
    assert await store.claim(r.id) == Edit(arguments={"to": "y"}, message="m")
    with pytest.raises(DecisionAlreadyUsed):
        await store.claim(r.id)


async def test_tokens_are_bound_and_single_use(store: ApprovalStore) -> None:
    a, b = make_request(call_id="a"), make_request(call_id="b")
    await store.put(a)
    await store.put(b)
    with pytest.raises(DecisionTokenInvalid):
        await store.decide(a.id, b.token, Approve())
    with pytest.raises(DecisionTokenInvalid):
        await store.decide(a.id, "", Approve())
    await store.decide(a.id, a.token, Reject(message="no"))
    with pytest.raises(DecisionAlreadyUsed):
        await store.decide(a.id, a.token, Approve())
    assert await store.claim(a.id) == Reject(message="no")


async def test_concurrent_claims_from_threads_yield_one_decision(store: ApprovalStore) -> None:
    r = make_request()
    await store.put(r)
    await store.decide(r.id, r.token, Approve())
    wins: list[object] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(10)

    def resumer() -> None:
        barrier.wait()
        try:
            wins.append(asyncio.run(store.claim(r.id)))
        except DecisionAlreadyUsed as exc:
            errors.append(exc)

    threads = [threading.Thread(target=resumer) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins == [Approve()] and len(errors) == 9


async def test_decision_is_a_read_that_claims_nothing(store: ApprovalStore) -> None:
    r = make_request()
    await store.put(r)
    assert await store.decision(r.id) is None
    await store.decide(r.id, r.token, Approve())
    assert await store.decision(r.id) == Approve()
    assert await store.claim(r.id) == Approve()  # still claimable once
    assert await store.decision(r.id) == Approve()


async def test_desk_speaks_json(store: ApprovalStore) -> None:
    desk = ApprovalDesk(store)
    r = make_request()
    await store.put(r)
    (item,) = await desk.pending()
    assert item["id"] == r.id and item["arguments"] == {"to": "x"} and item["token"] == r.token
    with pytest.raises(DecisionTokenInvalid, match="arguments"):
        await desk.decide(r.id, {"token": r.token, "verdict": "edit"})
    await desk.decide(r.id, {"token": r.token, "verdict": "edit", "arguments": {"to": "y"}})
    assert await store.claim(r.id) == Edit(arguments={"to": "y"})
