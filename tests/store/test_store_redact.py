"""The redaction `forget` applies to stored JSON: what it rewrites, and what it leaves alone."""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter

from legato import Agent
from legato.context import ELIDED_PREFIX, elide_tool_results, is_summary
from legato.events import ApprovalDecided, Compacted, JournalEvent
from legato.memory import Memory, SQLiteMemory
from legato.messages import JsonValue, Message, ToolCallPart, ToolResultPart
from legato.store import SQLiteStore
from legato.store._redact import (
    ELIDED_STUB,
    FORGOTTEN,
    SUMMARY_PREFIX,
    WITHHELD,
    Redactor,
    redact_rows,
)
from legato.testing import ScriptedModel, call, reply

GONE = "f0f0f0f0f0f0f0f0"
KEPT = "a1a1a1a1a1a1a1a1"
TEXT = "The backup key is stored in locker 12."

events = TypeAdapter(JournalEvent)
messages = TypeAdapter(Message)


def as_json(message: Message) -> JsonValue:
    return messages.dump_python(message, mode="json")


def recall_result(call_id: str, text: str) -> Message:
    return Message(
        role="tool",
        parts=(ToolResultPart.text_result(call_id=call_id, name="recall", text=text),),
    )


def test_the_formats_match_those_of_memory_and_context() -> None:
    assert ELIDED_STUB.startswith(ELIDED_PREFIX)  # elision and recall_result treat it as a stub
    assert is_summary(Message.user(f"{SUMMARY_PREFIX}3 earlier messages]\n{WITHHELD}"))


def test_recall_lines_are_redacted_by_id_and_other_items_are_left() -> None:
    redactor = Redactor(ids=frozenset({GONE}), texts=frozenset({TEXT}))
    result = recall_result("c1", f"- [fact {GONE}] {TEXT}\n- [preference {KEPT}] Tea, not coffee.")
    out = redactor.redact(as_json(result))
    text = messages.validate_python(out).tool_results[0].text
    assert text == f"- [fact {GONE}] {FORGOTTEN}\n- [preference {KEPT}] Tea, not coffee."
    assert redactor.redact(out) == out  # redacting twice changes nothing


def test_the_users_own_words_are_not_rewritten() -> None:
    redactor = Redactor(ids=frozenset({GONE}), texts=frozenset({TEXT}))
    said = as_json(Message.user(f"Note this: {TEXT}"))
    assert redactor.redact(said) == said
    answer = as_json(Message.assistant(f"Sure. {TEXT}"))
    assert redactor.redact(answer) == answer


def test_a_remember_call_loses_its_text_and_its_raw_arguments_are_rebuilt() -> None:
    remember = ToolCallPart.from_raw(
        id="c9", name="remember", raw_arguments=f'{{"text": "{TEXT}", "kind": "fact"}}'
    )
    other = ToolCallPart.from_arguments(id="c8", name="send_note", arguments={"text": TEXT})
    message = Message(role="assistant", parts=(remember, other))
    out = messages.validate_python(
        Redactor(ids=frozenset({GONE}), texts=frozenset({TEXT})).redact(as_json(message))
    )
    calls = out.tool_calls
    assert calls[0].arguments == {"text": FORGOTTEN, "kind": "fact"}
    assert TEXT not in calls[0].raw_arguments
    assert calls[1].arguments == {"text": TEXT}  # another tool's call is the conversation


def test_a_later_write_pairs_a_remember_call_with_its_result_by_id() -> None:
    """Without texts (they are gone), a remember call is found through its result's id."""
    call_part = ToolCallPart.from_arguments(id="c1", name="remember", arguments={"text": TEXT})
    result = ToolResultPart.text_result(
        call_id="c1", name="remember", text=f"Remembered as {GONE}."
    )
    batch = [
        messages.dump_json(Message(role="assistant", parts=(call_part,))).decode(),
        messages.dump_json(Message(role="tool", parts=(result,))).decode(),
    ]
    out = redact_rows(Redactor(ids=frozenset({GONE})), batch)
    assert TEXT not in out[0]
    assert out[1] == batch[1]


def test_an_elided_recall_result_and_a_summary_are_withheld() -> None:
    long = f"- [fact {GONE}] {TEXT}\n" + "\n".join(
        f"- [fact {KEPT}] filler {i}" for i in range(200)
    )
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            parts=(ToolCallPart.from_arguments(id="c1", name="recall", arguments={}),),
        ),
        recall_result("c1", long),
        Message.assistant("a"),
        Message.user("q2"),
    ]
    elided = elide_tool_results(history, keep_last_rounds=0)
    assert elided.elided == ("c1",)
    view = Compacted(
        strategy="chain",
        reason="threshold",
        upto=5,
        messages=(
            Message.user(f"{SUMMARY_PREFIX}2 earlier messages]\nIt mentioned locker 12."),
            *elided.messages[1:],
        ),
        sources=(-1, 1, 2, 3, 4),
        removed=(0,),
        elided=("c1",),
        summary="It mentioned locker 12.",
    )
    redactor = Redactor(ids=frozenset({GONE}), texts=frozenset({TEXT}))
    doc = events.dump_python(view, mode="json")
    redactor.collect([as_json(m) for m in history])
    out = events.validate_python(redactor.redact(doc, withhold=True))
    assert isinstance(out, Compacted)
    assert out.summary == FORGOTTEN
    first = out.messages[0]
    assert first is not None and is_summary(first) and WITHHELD in first.text
    stub = out.messages[2]
    assert stub is not None and stub.tool_results[0].text == ELIDED_STUB


def test_an_edited_approval_of_a_remember_call_is_redacted() -> None:
    decided = ApprovalDecided(
        request_id="r", call_id="c1", verdict="edit", arguments={"text": TEXT}, message="ok"
    )
    out = Redactor(ids=frozenset({GONE}), texts=frozenset({TEXT})).redact(
        events.dump_python(decided, mode="json")
    )
    assert isinstance(out, dict) and out["arguments"] == {"text": FORGOTTEN}


def test_a_text_without_plain_ascii_is_still_found(tmp_path: Path) -> None:
    """Needles are ASCII stretches of the text; a text with none scans every row."""
    store = SQLiteStore(tmp_path / "legato.db")
    memory = SQLiteMemory(db=store.db)
    secret = "金庫の暗証番号は四四一七"
    memory.remember(secret)
    model = ScriptedModel([reply(call("recall", {"query": secret})), "ok"])
    Agent(model, memory=Memory(store=memory), store=store).run_sync(secret, session="s")
    forgotten = memory.forget(memory.items()[0].id)
    assert forgotten.messages == 1
    stored = [r.text for m in store.load_session("s") for r in m.tool_results]
    assert stored and all(secret not in t for t in stored)
    assert "[forgotten]" in stored[0]


def test_a_call_id_reused_by_another_run_keeps_its_own_text(tmp_path: Path) -> None:
    """Two runs of a session whose models both number their calls from `call_1`."""
    store = SQLiteStore(tmp_path / "legato.db")
    memory = SQLiteMemory(db=store.db)
    for text in (TEXT, "The spare key is under the mat."):
        model = ScriptedModel([reply(call("remember", {"text": text})), "Noted."])
        Agent(model, memory=Memory(store=memory), store=store).run_sync("note it", session="s")
    gone = next(i for i in memory.items() if i.text == TEXT)
    forgotten = memory.forget(gone.id)
    assert len(forgotten.runs) == 2  # the run that stored it, and the next one's history
    calls = [c for m in store.load_session("s") for c in m.tool_calls]
    assert [c.id for c in calls] == ["call_1", "call_1"]
    assert [c.arguments for c in calls] == [
        {"text": FORGOTTEN},
        {"text": "The spare key is under the mat."},
    ]
    second = store.load_run(store.list_runs(session="s")[0].run_id)
    assert "The spare key is under the mat." in str(second.events)
