"""Forgetting reaches what the store derived from an item: recall results, summaries, journals.

The scenario: a fact is remembered; sessions recall it (automatically, into the
instructions, and with the `recall` tool) and get summarized, so the summary carried over
to the next run quotes it; then it is forgotten. The next run's model request must hold
no trace of it. Each test has a twin that forgets the way `forget` did before (deleting
the items only) and shows the text coming back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from pydantic import TypeAdapter

from legato import Agent, tool
from legato.context import CharCounter, ContextPolicy, Summarize
from legato.events import Compacted, RunStarted
from legato.memory import Forgotten, Memory, MemoryItem, SQLiteMemory
from legato.messages import ModelResponse
from legato.models import ModelProfile, ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, call, reply

SECRET = "The vault door code is QUOKKA-4417-ZETA."
TRACE = "QUOKKA"
"""A part of the secret that must not come back. Letters, not digits: a run of digits can
turn up by chance in a stored timestamp or id (this test was flaky with "4417")."""

Answer = ModelResponse | str


@tool
def read_log(day: int) -> str:
    """Read one day's server log (large).

    Args:
        day: Day number.
    """
    return "\n".join(f"day {day} line {i}: request served in {i % 97} ms" for i in range(80))


def script(request: ModelRequest) -> Answer:
    """The agent's model: it recalls when asked about the vault and never quotes memory."""
    last = request.messages[-1]
    if last.role == "tool":
        return "Done."
    text = last.text
    if "vault" in text:
        return reply(call("recall", {"query": "vault door code"}))
    if text.startswith("Read day"):
        return reply(call("read_log", {"day": int(text.rsplit(" ", 1)[-1])}))
    if text.startswith("Forget"):
        return reply(call("forget", {"item_id": text.rsplit(" ", 1)[-1]}))
    return "OK."


def summarizer(request: ModelRequest) -> str:
    """A faithful summarizer: it keeps every line that mentions a code, verbatim."""
    transcript = request.messages[0].text
    kept = [line for line in transcript.splitlines() if "code" in line.lower()]
    return "Earlier: " + " | ".join(kept)


def request_json(request: ModelRequest) -> str:
    """Everything a provider would be sent: instructions, messages, tool calls and results."""
    return TypeAdapter(ModelRequest).dump_json(request).decode()


def stored_text(path: Path) -> str:
    """Every stored message, carried-over view and journal event, as one string."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT message FROM session_messages UNION ALL "
        "SELECT context FROM sessions WHERE context IS NOT NULL UNION ALL "
        "SELECT data FROM events"
    ).fetchall()
    conn.close()
    return "\n".join(r[0] for r in rows)


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "legato.db"
        self.store = SQLiteStore(self.path)
        self.memory = SQLiteMemory(db=self.store.db)  # one file: forget reaches the sessions
        self.queue: list[Answer] = []
        """Answers given before the script's (in order)."""
        self.model = FunctionModel(self.answer, profile=ModelProfile(context_window=4000))
        policy = ContextPolicy(
            strategy=Summarize(model=FunctionModel(summarizer)), counter=CharCounter()
        )
        self.agent = Agent(
            self.model,
            tools=[read_log],
            context=policy,
            memory=Memory(store=self.memory),
            store=self.store,
        )

    def answer(self, request: ModelRequest) -> Answer:
        return self.queue.pop(0) if self.queue else script(request)

    def run(self, prompt: str) -> ModelRequest:
        """Run one turn of the session; return the first request the model got."""
        before = len(self.model.requests)
        self.agent.run_sync(prompt, session="ops")
        return self.model.requests[before]


def recalled_and_summarized(tmp_path: Path) -> tuple[Setup, MemoryItem]:
    """A session that recalled the secret, summarized it, and recalled it again."""
    s = Setup(tmp_path)
    item = s.memory.remember(SECRET, kind="fact")
    first = s.run("What is the vault door code?")
    assert SECRET in (first.instructions or "")  # recalled automatically ...
    for day in range(6):
        s.run(f"Read day {day}")
    context = s.store.session_context("ops")
    assert context is not None and TRACE in (context.summary or "")  # ... and summarized
    s.run("And the vault, once more?")  # a recall result kept verbatim in the history
    return s, item


def naive_forget(memory: SQLiteMemory, item_id: str) -> None:
    """What `forget` did before: delete the item (and what was derived from it), nothing else."""
    with memory.db.write() as conn:
        conn.execute("DELETE FROM memory_items WHERE id = ?", (item_id,))


def test_the_next_run_sees_no_trace_of_a_forgotten_item(tmp_path: Path) -> None:
    s, item = recalled_and_summarized(tmp_path)
    forgotten = s.memory.forget(item.id)

    assert forgotten.items == (item.id,)
    assert forgotten.sessions == ("ops",)
    assert forgotten.messages == 2  # the two recall results
    assert forgotten.contexts == ("ops",)  # the carried-over summary is dropped
    assert forgotten.events > 0
    assert len(forgotten.runs) == len(s.store.list_runs(session="ops"))
    assert s.memory.recall("vault door code") == []

    following = s.run("Read day 99")
    sent = request_json(following)
    assert TRACE not in sent
    assert "[forgotten]" in sent  # the recall result still reads as one, without the text
    # the session compacted again, from the redacted messages: a new summary, without it
    latest = s.store.load_run(s.store.list_runs()[0].run_id)
    summaries = [e.summary for e in latest if isinstance(e, Compacted) and e.summary]
    assert summaries and all(TRACE not in text for text in summaries)
    assert TRACE not in stored_text(s.path)  # nor in any stored message, view or journal


def test_twin_deleting_only_the_item_leaves_it_in_the_next_request(tmp_path: Path) -> None:
    s, item = recalled_and_summarized(tmp_path)
    naive_forget(s.memory, item.id)
    assert s.memory.recall("vault door code") == []  # gone from memory ...

    following = s.run("Read day 99")
    sent = request_json(following)
    assert TRACE in sent  # ... but not from what the model is sent:
    texts = [m.text for m in following.messages]
    assert any(TRACE in t and t.startswith("[legato: summary of") for t in texts)  # the summary
    results = [r.text for m in following.messages for r in m.tool_results]
    assert any(TRACE in r for r in results)  # and the recall result in the history


def test_forget_removes_remember_calls_and_journaled_recall_blocks(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "legato.db")
    memory = SQLiteMemory(db=store.db)
    model = FunctionModel(
        lambda r: reply(call("remember", {"text": SECRET})) if len(r.messages) == 1 else "Noted."
    )
    agent = Agent(model, memory=Memory(store=memory), store=store)
    agent.run_sync("Remember the vault code.", session="s")
    [item] = memory.items()
    recalled = agent.run_sync("Open the vault door with the code.", session="s")
    assert SECRET in (model.requests[-1].instructions or "")

    forgotten = memory.forget(item.id)
    assert forgotten.messages == 1  # the remember call's arguments
    assert set(forgotten.runs) == {item.provenance.run_id, recalled.run_id}
    assert TRACE not in stored_text(tmp_path / "legato.db")
    [message] = [m for m in store.load_session("s") if m.tool_calls]
    assert message.tool_calls[0].arguments == {"text": "[forgotten]"}
    assert "[forgotten]" in message.tool_calls[0].raw_arguments
    started = store.load_run(recalled.run_id).events[0]
    assert isinstance(started, RunStarted)
    assert "- [fact] [forgotten]" in (started.instructions or "")  # the recall block


def test_a_summary_in_a_journal_is_withheld_for_a_resumed_run(tmp_path: Path) -> None:
    s, item = recalled_and_summarized(tmp_path)
    summarized = [
        info.run_id
        for info in s.store.list_runs(session="ops")
        if any(
            isinstance(e, Compacted) and TRACE in (e.summary or "")
            for e in s.store.load_run(info.run_id)
        )
    ]
    assert summarized
    s.memory.forget(item.id)
    for run_id in summarized:
        for event in s.store.load_run(run_id):
            if isinstance(event, Compacted) and event.summary is not None:
                assert event.summary == "[forgotten]"
                notes = [m.text for m in event.messages if m is not None]
                assert any("drew on memory that was forgotten" in n for n in notes)


# -- forgetting while a run is in flight ---------------------------------------------------------


def forget_mid_run(tmp_path: Path, after_forget: Callable[[SQLiteMemory], None]) -> str:
    """The model forgets through its tool in the middle of a run, which then summarizes.

    Returns the next run's first request, as JSON.
    """
    s = Setup(tmp_path)
    item = s.memory.remember(SECRET, kind="fact")
    s.run("What is the vault door code?")  # the recall result is in the session

    forgetting = Memory(store=ForgetHook(s.memory, after_forget))
    agent = Agent(
        s.model, tools=[read_log], context=s.agent.context, memory=forgetting, store=s.store
    )
    s.queue = [
        reply(call("forget", {"item_id": item.id})),
        *(reply(call("read_log", {"day": d})) for d in range(6)),
        "Done.",
    ]
    result = agent.run_sync("Forget the vault code, then read six days.", session="ops")
    assert any(isinstance(e, Compacted) and TRACE in (e.summary or "") for e in result.journal)
    assert not s.queue

    return request_json(s.run("Read day 99"))


class ForgetHook(SQLiteMemory):
    """The same memory; `after_forget` runs once `forget` has committed."""

    def __init__(self, memory: SQLiteMemory, after_forget: Callable[[SQLiteMemory], None]) -> None:
        super().__init__(db=memory.db, clock=memory.clock)
        self.after_forget = after_forget

    def forget(
        self,
        item_id: str | None = None,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> Forgotten:
        forgotten = super().forget(item_id, run_id=run_id, tool_call_id=tool_call_id)
        self.after_forget(self)
        return forgotten


def test_a_run_that_forgets_does_not_store_what_it_summarized_before(tmp_path: Path) -> None:
    sent = forget_mid_run(tmp_path, lambda memory: None)
    assert TRACE not in sent
    assert TRACE not in stored_text(tmp_path / "legato.db")


def test_twin_without_redacting_the_in_flight_run_its_summary_comes_back(tmp_path: Path) -> None:
    def lose_the_marks(memory: SQLiteMemory) -> None:  # as if in-flight runs were not marked
        with memory.db.write() as conn:
            conn.execute("DELETE FROM forgotten_refs")

    sent = forget_mid_run(tmp_path, lose_the_marks)
    assert TRACE in sent


def test_the_documented_recipe_scrubs_the_bytes_on_disk(tmp_path: Path) -> None:
    """`forget` deletes rows; SQLite keeps their bytes until the documented recipe runs."""
    path = tmp_path / "legato.db"
    memory = SQLiteMemory(path)
    for i in range(50):
        memory.remember(f"Filler item number {i}.")
    item = memory.remember("The word is zanzibarquux.")
    memory.forget(item.id)
    memory.db.close()

    def on_disk() -> bool:
        return any(b"zanzibarquux" in f.read_bytes() for f in tmp_path.iterdir())

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert on_disk()  # deleted, yet still in the file (the full-text index keeps the term)
    conn.execute("INSERT INTO memory_fts(memory_fts) VALUES('optimize')")
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not on_disk()
