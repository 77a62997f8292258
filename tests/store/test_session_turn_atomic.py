"""A finished run's session turn is committed with its `RunFinished`, in one transaction.

A worker that dies right after the run's end is committed must not leave a finished run
whose conversation is missing from its session: nothing could write that turn later (a
finished run cannot be resumed). The twin writes the turn in a transaction of its own
after the run's end, as legato did before, and loses it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from legato import Agent
from legato.messages import ModelResponse
from legato.models import ModelRequest
from legato.store import PostgresStore, SQLiteStore
from legato.testing import FunctionModel, reply
from pg_cluster import AnyStore

WORKER = textwrap.dedent(
    """
    import os
    import sys

    from legato import Agent
    from legato.effects import unsafe_switches
    from legato.store import PostgresStore, SQLiteStore
    from legato.testing import FunctionModel, reply

    kind, where, twin = sys.argv[1], sys.argv[2], sys.argv[3] == "twin"
    base = SQLiteStore if kind == "sqlite" else PostgresStore


    class DiesAfterTheEnd(base):
        def append_events(self, run_id, events, **options):
            super().append_events(run_id, events, **options)
            if any(e.kind == "run_finished" for e in events):
                os._exit(0)  # killed right after the run's end was committed


    agent = Agent(FunctionModel(lambda request: reply("hello back")), store=DiesAfterTheEnd(where))
    if twin:
        with unsafe_switches(atomic_turn=False):
            agent.run_sync("hi", session="chat")
    else:
        agent.run_sync("hi", session="chat")
    sys.exit(3)  # never reached: the process died at the run's end
    """
)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, AnyStore]]:
    """Each store in turn, with what opens it again in another process."""
    if request.param == "sqlite":
        target = str(tmp_path / "legato.db")
        opened: AnyStore = SQLiteStore(target)
    else:
        target = request.getfixturevalue("pg_dsn")
        opened = PostgresStore(target)
    yield request.param, target, opened
    opened.close()


def crash_after_finish(kind: str, target: str, *, twin: bool) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, kind, target, "twin" if twin else "atomic"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_crash_after_the_runs_end_keeps_its_session_turn(
    backend: tuple[str, str, AnyStore],
) -> None:
    kind, target, store = backend
    crash_after_finish(kind, target, twin=False)
    (run,) = store.list_runs(session="chat")
    assert run.status == "finished"
    messages = store.load_session("chat")
    assert [(m.role, m.text) for m in messages] == [("user", "hi"), ("assistant", "hello back")]
    assert store.session_context("chat") is None


def test_twin_a_turn_written_after_the_runs_end_is_lost(
    backend: tuple[str, str, AnyStore],
) -> None:
    kind, target, store = backend
    crash_after_finish(kind, target, twin=True)
    (run,) = store.list_runs(session="chat")
    assert run.status == "finished"  # the run ended ...
    assert store.load_session("chat") == []  # ... and its conversation is gone


def test_the_next_turn_sees_the_previous_one(tmp_path: Path) -> None:
    """Two turns through the atomic path: the second run is sent the first's messages."""
    seen: list[int] = []

    def respond(request: ModelRequest) -> ModelResponse:
        seen.append(len(request.messages))
        return reply(f"answer {len(seen)}")

    store = SQLiteStore(tmp_path / "legato.db")
    agent = Agent(FunctionModel(respond), store=store)
    agent.run_sync("one", session="chat")
    agent.run_sync("two", session="chat")
    assert seen == [1, 3]
    assert [m.text for m in store.load_session("chat")] == ["one", "answer 1", "two", "answer 2"]
    assert [r.status for r in store.list_runs(session="chat")] == ["finished", "finished"]
    store.close()
