"""Redacting forgotten memory from what the store keeps: sessions, carried views, journals.

`SQLiteMemory.forget` deletes memory items; this module removes what the rest of the
store still holds of them, in the same write transaction. It rewrites only the places
where legato itself put memory text:

- a `recall` tool result line `- [kind id] text` naming a forgotten item (the text becomes
  `[forgotten]`; the id stays, so the result still reads as a list);
- an automatic-recall line `- [kind] text` (in a run's instructions) holding a forgotten text;
- the `text` argument of a `remember` call that stored a forgotten text;
- the stub of an elided `recall` result that quoted a forgotten item;
- summaries made from any of the above: a session's carried-over compacted view is dropped
  (the next run compacts again from the redacted messages); in a journal, the summary text
  is replaced by a note, so a resumed run does not see it.

What the user or the model wrote in their own words is never rewritten: it is the
conversation, not memory. Only identifiers of forgotten items are kept (`forgotten_refs`,
for runs that were in flight); the forgotten text itself is nowhere.

The formats matched here are those of `legato.memory` (the `recall` tool and the recall
block) and of `legato.context` (elided results, summary notes); tests tie them together.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from legato.messages import JsonValue

__all__ = ["FORGOTTEN", "Redacted", "Redactor", "redact_forgotten", "redact_rows", "run_redactor"]

FORGOTTEN = "[forgotten]"
"""What replaces forgotten text."""

ELIDED_PREFIX = "[legato: result elided"
"""`legato.context.ELIDED_PREFIX`."""
SUMMARY_PREFIX = "[legato: summary of "
"""How a summary note starts (`legato.context` `SUMMARY_PREFIX`)."""
ELIDED_STUB = f"{ELIDED_PREFIX}: it quoted memory that was forgotten]"
WITHHELD = "[forgotten: this summary drew on memory that was forgotten]"

RECALL_TOOL = "recall"
REMEMBER_TOOL = "remember"

# `- [kind id] text` (a recall tool result) or `- [kind] text` (an automatic-recall block)
_LINE = re.compile(r"^(- \[\w+(?: ([^\]\s]+))?\] )(.*)$", re.MULTILINE)
# an item tag anywhere, e.g. inside the one-line preview of an elided result
_TAG = re.compile(r"\[\w+ ([^\]\s]+)\]")
# the remember tool's answer: "Remembered as <id>." / "Already remembered as <id>."
_REMEMBERED = re.compile(r"\bremembered as ([^\s.]+)", re.IGNORECASE)
_NEEDLES_PER_QUERY = 50


@dataclass(kw_only=True)
class Redactor:
    """Rewrites JSON values (stored messages and journal events) without forgotten items."""

    ids: frozenset[str]
    """Forgotten item ids."""
    texts: frozenset[str] = frozenset()
    """Their texts (known while forgetting; empty when redacting a later write)."""
    calls: set[str] = field(default_factory=lambda: set[str]())
    """Ids of `remember` calls that stored a forgotten item."""
    quoting: set[str] = field(default_factory=lambda: set[str]())
    """Ids of `recall` calls whose results quoted a forgotten item."""
    pair: bool = True
    """Find `remember` calls through their results' ids. Only within one run's writes: call
    ids are unique in a run, not across the runs a journal's history comes from (while
    forgetting, the texts are known and identify the calls instead)."""

    def collect(self, value: JsonValue) -> None:
        """Learn, from tool results, which calls quoted or stored forgotten items."""
        if isinstance(value, list):
            for v in value:
                self.collect(v)
            return
        if not isinstance(value, dict):
            return
        if value.get("kind") == "tool_result":
            call_id = value.get("call_id")
            text = _result_text(value)
            if isinstance(call_id, str):
                name = value.get("name")
                if name == REMEMBER_TOOL:
                    if self.pair and any(i in self.ids for i in _REMEMBERED.findall(text)):
                        self.calls.add(call_id)
                elif name == RECALL_TOOL and self._quotes(text):
                    self.quoting.add(call_id)
        for v in value.values():
            self.collect(v)

    def _quotes(self, text: str) -> bool:
        return any(i in self.ids for i in _TAG.findall(text)) or any(t in text for t in self.texts)

    def redact(self, value: JsonValue, *, withhold: bool = False) -> JsonValue:
        """`value` with forgotten memory replaced; `withhold` also replaces summaries."""
        if isinstance(value, str):
            return self._lines(value)
        if isinstance(value, list):
            return [self.redact(v, withhold=withhold) for v in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, JsonValue] = {k: self.redact(v, withhold=withhold) for k, v in value.items()}
        kind = out.get("kind")
        if kind == "tool_result":
            self._result(out)
        elif kind == "compacted" and withhold:
            _withhold(out)
        self._call(out)
        return out

    def batch(self, docs: Sequence[JsonValue]) -> list[JsonValue]:
        """A run's later writes: learn from all of them, then redact each (summaries too)."""
        for doc in docs:
            self.collect(doc)
        return [self.redact(doc, withhold=True) for doc in docs]

    def _lines(self, text: str) -> str:
        if "- [" not in text:
            return text

        def line(match: re.Match[str]) -> str:
            prefix, item_id, rest = match.group(1), match.group(2), match.group(3)
            if rest == FORGOTTEN:
                return match.group(0)
            if item_id is not None and item_id in self.ids:
                return prefix + FORGOTTEN
            if item_id is None and rest in self.texts:
                return prefix + FORGOTTEN
            return match.group(0)

        return _LINE.sub(line, text)

    def _result(self, result: dict[str, JsonValue]) -> None:
        content = result.get("content")
        if not isinstance(content, list):
            return
        text = _result_text(result)
        if result.get("call_id") in self.quoting and text.startswith(ELIDED_PREFIX):
            if text != ELIDED_STUB:
                result["content"] = [{"text": ELIDED_STUB, "kind": "text"}]
            return
        if result.get("name") != RECALL_TOOL or not self.texts:
            return
        parts: list[JsonValue] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                redacted = str(part["text"])
                for forgotten in self.texts:
                    redacted = redacted.replace(forgotten, FORGOTTEN)
                part = {**part, "text": redacted}
            parts.append(part)
        result["content"] = parts

    def _call(self, call: dict[str, JsonValue]) -> None:
        """A `remember` call (a message part, an admission, an edited approval) that stored one."""
        arguments = call.get("arguments")
        if not isinstance(arguments, dict):
            return
        text = arguments.get("text")
        if not isinstance(text, str) or text == FORGOTTEN:
            return
        kind = call.get("kind")
        if kind == "tool_call":
            tool, call_id = call.get("name"), call.get("id")
        else:
            tool, call_id = call.get("tool"), call.get("call_id")
        named = tool == REMEMBER_TOOL or kind == "approval_decided"
        if not named or not (text in self.texts or call_id in self.calls):
            return
        redacted: dict[str, JsonValue] = {**arguments, "text": FORGOTTEN}
        call["arguments"] = redacted
        if "raw_arguments" in call:
            call["raw_arguments"] = json.dumps(redacted, ensure_ascii=False)


def _result_text(result: Mapping[str, JsonValue]) -> str:
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _withhold(event: dict[str, JsonValue]) -> None:
    """Replace a `Compacted` event's summary, and the notes that carry it, by a note."""
    if event.get("summary") is not None:
        event["summary"] = FORGOTTEN
    messages = event.get("messages")
    if not isinstance(messages, list):
        return
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            continue
        parts = cast(list[JsonValue], message["parts"])
        for i, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            if isinstance(text, str) and text.startswith(SUMMARY_PREFIX):
                header = text.split("\n", 1)[0]
                if text != f"{header}\n{WITHHELD}":
                    parts[i] = {**part, "text": f"{header}\n{WITHHELD}"}


# -- forgetting: one pass over the store ----------------------------------------------------------


@dataclass(kw_only=True)
class Redacted:
    """What `redact_forgotten` rewrote."""

    messages: int = 0
    """Stored session messages rewritten."""
    sessions: set[str] = field(default_factory=lambda: set[str]())
    """Sessions whose messages were rewritten."""
    contexts: set[str] = field(default_factory=lambda: set[str]())
    """Sessions whose carried-over compacted view was dropped."""
    events: int = 0
    """Journal events rewritten."""
    runs: set[str] = field(default_factory=lambda: set[str]())
    """Runs whose journal was rewritten."""


def redact_forgotten(
    conn: sqlite3.Connection,
    *,
    ids: Collection[str],
    texts: Collection[str],
    calls: Mapping[str, Collection[str]] | None = None,
) -> Redacted:
    """Redact the forgotten items from sessions and journals, inside the caller's transaction.

    Args:
        conn: A connection inside a write transaction.
        ids: The forgotten items' ids.
        texts: Their texts.
        calls: Per run, the ids of the `remember` calls that stored them (their provenance);
            recorded for runs still in flight, whose later writes are redacted too.
    """
    report = Redacted()
    if not ids:
        return report
    needles = _needles(ids, texts)
    redactor = Redactor(ids=frozenset(ids), texts=frozenset(t for t in texts if t), pair=False)
    _sessions(conn, redactor, needles, report)
    _runs(conn, redactor, needles, calls or {}, report)
    return report


def _needles(ids: Iterable[str], texts: Iterable[str]) -> list[str]:
    """Substrings a stored row must contain to possibly need redaction.

    A text is looked for by its longest stretch of plain ASCII (no quote, backslash or
    control character), which appears unchanged in the stored JSON however it is escaped.
    """
    needles = set(ids)
    for text in texts:
        runs = re.findall(r"[ !#-\[\]-~]+", text)
        needles.add(max(runs, key=len) if runs else "")  # "" matches every row
    return sorted(needles)


def _matching(
    conn: sqlite3.Connection, select: str, column: str, needles: Sequence[str]
) -> list[tuple[object, ...]]:
    """Rows of `select` (which ends in a WHERE clause) whose `column` holds a needle."""
    rows: dict[tuple[object, ...], None] = {}
    for start in range(0, len(needles), _NEEDLES_PER_QUERY):
        chunk = needles[start : start + _NEEDLES_PER_QUERY]
        where = " OR ".join(f"instr({column}, ?) > 0" for _ in chunk)
        for row in conn.execute(f"{select} ({where})", chunk).fetchall():
            rows[tuple(row)] = None
    return list(rows)


def _dump(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _sessions(
    conn: sqlite3.Connection, redactor: Redactor, needles: Sequence[str], report: Redacted
) -> None:
    first: dict[str, int] = {}  # per session, the first position rewritten
    rows = _matching(
        conn, "SELECT session, position, message FROM session_messages WHERE", "message", needles
    )
    for session, position, data in sorted(rows, key=lambda r: (str(r[0]), cast(int, r[1]))):
        doc = cast(JsonValue, json.loads(cast(str, data)))
        new = redactor.redact(doc)
        if new == doc:
            continue
        conn.execute(
            "UPDATE session_messages SET message = ? WHERE session = ? AND position = ?",
            (_dump(new), session, position),
        )
        name = cast(str, session)
        first.setdefault(name, cast(int, position))
        report.messages += 1
        report.sessions.add(name)
    contexts: dict[str, str] = {
        cast(str, r[0]): cast(str, r[1])
        for r in _matching(
            conn,
            "SELECT name, context FROM sessions WHERE context IS NOT NULL AND",
            "context",
            needles,
        )
    }
    if first:
        marks = ",".join("?" for _ in first)
        contexts.update(
            conn.execute(
                "SELECT name, context FROM sessions "
                f"WHERE context IS NOT NULL AND name IN ({marks})",
                list(first),
            ).fetchall()
        )
    for name, data in contexts.items():
        doc = cast(JsonValue, json.loads(data))
        upto = doc.get("upto", 0) if isinstance(doc, dict) else 0
        covers = name in first and first[name] < cast(int, upto)
        if covers or redactor.redact(doc) != doc:
            conn.execute("UPDATE sessions SET context = NULL WHERE name = ?", (name,))
            report.contexts.add(name)


def _runs(
    conn: sqlite3.Connection,
    redactor: Redactor,
    needles: Sequence[str],
    calls: Mapping[str, Collection[str]],
    report: Redacted,
) -> None:
    runs = {r[0] for r in _matching(conn, "SELECT run_id FROM events WHERE", "data", needles)}
    for run_id in sorted(cast(set[str], runs)):
        rows = conn.execute(
            "SELECT seq, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        docs = [cast(JsonValue, json.loads(r[1])) for r in rows]
        run = Redactor(ids=redactor.ids, texts=redactor.texts, pair=False)
        for doc in docs:
            run.collect(doc)
        exposed = False  # the run's conversation has held a forgotten item
        changed = 0
        for (seq, _), doc in zip(rows, docs, strict=True):
            new = run.redact(doc, withhold=exposed)
            if new != doc and not exposed:
                new = run.redact(doc, withhold=True)  # a view that quoted it: its summary too
            if new == doc:
                continue
            conn.execute(
                "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (_dump(new), run_id, seq)
            )
            changed += 1
            exposed = exposed or _beyond_instructions(doc, new)
        if not changed:
            continue
        report.events += changed
        report.runs.add(run_id)
        status = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if status is not None and status[0] == "running":
            refs = [f"item:{i}" for i in redactor.ids] + [
                f"call:{c}" for c in calls.get(run_id, ())
            ]
            conn.executemany(
                "INSERT OR IGNORE INTO forgotten_refs(run_id, ref) VALUES (?, ?)",
                [(run_id, ref) for ref in refs],
            )


def _beyond_instructions(old: JsonValue, new: JsonValue) -> bool:
    """Whether a rewrite touched more than a run's instructions (its recall block)."""
    if isinstance(old, dict) and isinstance(new, dict) and old.get("kind") == "run_started":
        return {k: v for k, v in old.items() if k != "instructions"} != {
            k: v for k, v in new.items() if k != "instructions"
        }
    return True


# -- runs in flight: their later writes ------------------------------------------------------------


def run_redactor(conn: sqlite3.Connection, run_id: str | None) -> Redactor | None:
    """The redactor for a run that was in flight when memory it had seen was forgotten."""
    if run_id is None:
        return None
    rows = conn.execute("SELECT ref FROM forgotten_refs WHERE run_id = ?", (run_id,)).fetchall()
    if not rows:
        return None
    refs = [cast(str, r[0]) for r in rows]
    return Redactor(
        ids=frozenset(r.removeprefix("item:") for r in refs if r.startswith("item:")),
        calls={r.removeprefix("call:") for r in refs if r.startswith("call:")},
    )


def redact_rows(redactor: Redactor, data: Sequence[str]) -> list[str]:
    """Stored JSON texts of one write, redacted (summaries withheld)."""
    docs = [cast(JsonValue, json.loads(d)) for d in data]
    return [
        d if new == old else _dump(new)
        for d, old, new in zip(data, docs, redactor.batch(docs), strict=True)
    ]
