"""A tamper-evident audit chain over a run's journal.

Each journal event becomes one line `{"seq": n, "prev": h(n-1), "hash": h(n), "event": {...}}`
where `h(n) = sha256(h(n-1) + canonical JSON of event n)` and `h(0)` is 64 zeros. Editing
an event changes its hash; deleting or inserting one breaks the next line's `prev`.
Deleting lines at the *end* leaves a valid shorter chain: keep the last hash (the head)
elsewhere and pass it to `verify_audit(..., head=...)` to detect truncation.

`AuditLog(path)` is a hook that appends each event to the chain file as it is recorded;
`legato audit verify FILE` checks a file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from legato.events import Journal, JournalEvent
from legato.exceptions import AuditChainBroken
from legato.security._hooks import Hook, HookContext

__all__ = ["GENESIS", "AuditLog", "AuditReport", "audit_lines", "verify_audit"]

GENESIS = "0" * 64
"""The `prev` of the first line."""


def _event_json(event: JournalEvent) -> Any:
    from pydantic import TypeAdapter

    from legato.events import JournalEvent as Event

    return TypeAdapter(Event).dump_python(event, mode="json")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _link(prev: str, event: Any) -> str:
    return hashlib.sha256((prev + _canonical(event)).encode()).hexdigest()


def audit_lines(
    events: Iterable[JournalEvent], *, prev: str = GENESIS, seq: int = 1
) -> Iterator[str]:
    """The chain lines (with trailing newlines) for `events`."""
    for event in events:
        data = _event_json(event)
        digest = _link(prev, data)
        yield _canonical({"seq": seq, "prev": prev, "hash": digest, "event": data}) + "\n"
        prev, seq = digest, seq + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReport:
    """A verified chain: how many events, and the head hash to keep elsewhere."""

    events: int
    head: str
    journal: Journal


def verify_audit(text: str, *, head: str | None = None) -> AuditReport:
    """Check a chain; raise `AuditChainBroken` at the first line that does not verify."""
    from pydantic import TypeAdapter, ValidationError

    from legato.events import JournalEvent as Event

    adapter: TypeAdapter[JournalEvent] = TypeAdapter(Event)
    prev, count = GENESIS, 0
    events: list[JournalEvent] = []
    # Lines end at "\n" only: the canonical JSON keeps U+2028, U+0085 and the like as they
    # are inside strings, and `str.splitlines` would cut an event there.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            raw: object = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AuditChainBroken(number, f"not JSON ({exc.msg})") from exc
        if not isinstance(raw, dict):
            raise AuditChainBroken(number, "not an audit record (seq, prev, hash, event)")
        record = cast(dict[str, Any], raw)
        if not {"seq", "prev", "hash", "event"} <= record.keys():
            raise AuditChainBroken(number, "not an audit record (seq, prev, hash, event)")
        if record["prev"] != prev:
            raise AuditChainBroken(
                number,
                "its prev hash does not match the line before: an event was deleted, inserted or reordered",
            )
        if record["seq"] != count + 1:
            raise AuditChainBroken(number, f"sequence number {record['seq']}, expected {count + 1}")
        if _link(prev, record["event"]) != record["hash"]:
            raise AuditChainBroken(
                number, "its hash does not match its event: the event was edited"
            )
        try:
            events.append(adapter.validate_python(record["event"]))
        except ValidationError as exc:
            raise AuditChainBroken(
                number, f"not a journal event: {exc.errors()[0]['msg']}"
            ) from exc
        prev, count = str(record["hash"]), count + 1
    if head is not None and head != prev:
        raise AuditChainBroken(
            count + 1, "the chain ends before the expected head: events were deleted at the end"
        )
    return AuditReport(events=count, head=prev, journal=Journal(events))


class AuditLog(Hook):
    """Appends every journal event of the run to a chain file as it is recorded.

    An existing file is verified and continued. One file per run is the simple layout;
    several runs may share one file, their events interleaved in one chain.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._prev, self._seq = GENESIS, 1
        if self.path.exists():
            report = verify_audit(self.path.read_text(encoding="utf-8"))
            self._prev, self._seq = report.head, report.events + 1

    @property
    def head(self) -> str:
        """The hash of the last line written."""
        return self._prev

    def on_event(self, event: JournalEvent, ctx: HookContext) -> None:
        """Append one line to the chain file."""
        (line,) = audit_lines([event], prev=self._prev, seq=self._seq)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(line)
        self._prev = json.loads(line)["hash"]
        self._seq += 1
