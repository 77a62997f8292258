"""An evaluation on each store: SQLite and PostgreSQL keep, resume and replay it alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from legato import Agent
from legato.evals import Case, Dataset, contains, evaluate_sync, replay
from legato.models import ModelRequest
from legato.store import PostgresStore, SQLiteStore
from legato.testing import FunctionModel
from pg_cluster import AnyStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AnyStore]:
    if request.param == "sqlite":
        opened: AnyStore = SQLiteStore(tmp_path / "legato.db")
    else:
        opened = PostgresStore(request.getfixturevalue("pg_dsn"))
    yield opened
    opened.close()


def test_evaluate_resume_and_replay_on_each_store(store: AnyStore) -> None:
    calls: list[str] = []

    def answer(request: ModelRequest) -> str:
        calls.append(request.messages[-1].text)
        return f"answer {request.messages[-1].text}"

    dataset = Dataset(cases=tuple(Case(id=f"c{i}", input=f"q{i}") for i in range(3)))
    agent = Agent(FunctionModel(answer))
    first = evaluate_sync(agent, dataset, eval_id="s", store=store, evaluators=[contains("q")])
    again = evaluate_sync(agent, dataset, eval_id="s", store=store, evaluators=[contains("q")])
    assert first.counts["passed"] == again.counts["passed"] == 3
    assert len(calls) == 3 and all(r.reused for r in again.results)
    scored = asyncio.run(replay(dataset, eval_id="s", store=store, evaluators=[contains("q1")]))
    assert [r.passed for r in scored.results] == [False, True, False] and len(calls) == 3
