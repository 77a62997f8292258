"""Declared edit intents: parallel edits to one file, region by region, failing closed.

Before editing a text resource (a file), a writer declares the line regions it will change,
against the version it read (its base). Intents of different holders on the same resource
are admitted only if their regions do not overlap; an overlapping one is refused (the
writers are serialised). A commit may replace text only inside declared regions: anything
else is an undeclared mutation and is refused. Commits are rebased: a region is located in
the current text (which may already hold other holders' disjoint edits) by matching the
base's unchanged lines, and a region that changed since the base is a conflict. Two
children editing different functions of one file both land; nobody's edit is lost.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from legato.coherence._resources import CommitRecord, ResourceStore
from legato.exceptions import CommitConflict

__all__ = ["EditIntents", "Intent", "Region"]

Region = tuple[int, int]
"""Lines `start` (inclusive) to `end` (exclusive) of the base text, 0-based."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Intent:
    """An admitted declaration: who edits which regions of which base version."""

    id: int
    resource: str
    holder: str
    regions: tuple[Region, ...]
    base_version: int
    base_lines: tuple[str, ...]


def _span(mapping: Mapping[int, int], start: int, end: int) -> int | None:
    """Where base lines start..end sit now, if all are unchanged and still together."""
    first = mapping.get(start)
    if first is None:
        return None
    if any(mapping.get(start + k) != first + k for k in range(end - start)):
        return None
    return first


def _overlaps(a: Region, b: Region) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _inside(inner: Region, regions: Sequence[Region]) -> bool:
    return any(r[0] <= inner[0] and inner[1] <= r[1] for r in regions)


class EditIntents:
    """Admits edit intents over the text resources of a `ResourceStore` and commits them."""

    def __init__(self, store: ResourceStore) -> None:
        self._store = store
        self._ids = itertools.count(1)
        self._open: dict[int, Intent] = {}

    def declare(self, resource: str, holder: str, regions: Sequence[Region]) -> Intent:
        """Admit an intent on the current version, or refuse one that overlaps another's."""
        for start, end in regions:
            if not 0 <= start < end:
                msg = f"invalid region {start}-{end} of {resource!r}: need 0 <= start < end"
                raise CommitConflict(resource, msg)
        for other in self._open.values():
            if other.resource != resource or other.holder == holder:
                continue
            for mine in regions:
                clash = next((r for r in other.regions if _overlaps(mine, r)), None)
                if clash is not None:
                    msg = (
                        f"lines {mine[0]}-{mine[1]} of {resource!r} overlap lines "
                        f"{clash[0]}-{clash[1]} declared by {other.holder}; wait until it "
                        "commits, or declare another region"
                    )
                    raise CommitConflict(resource, msg)
        current = self._store.read(resource)
        intent = Intent(
            id=next(self._ids),
            resource=resource,
            holder=holder,
            regions=tuple(sorted(regions)),
            base_version=current.version,
            base_lines=tuple(str(current.value or "").splitlines(keepends=True)),
        )
        self._open[intent.id] = intent
        return intent

    def release(self, intent: Intent) -> None:
        """Withdraw an intent without committing."""
        self._open.pop(intent.id, None)

    def commit(
        self, intent: Intent, replacements: Mapping[Region, str], *, token: int | None = None
    ) -> CommitRecord:
        """Replace base regions with new text, rebased onto the current version.

        Raises `CommitConflict` for an undeclared region, a region changed since the base,
        or an intent that is no longer open; `LeaseRefused` for a bad fencing token.
        """
        if intent.id not in self._open:
            msg = f"intent {intent.id} on {intent.resource!r} is not open (committed or released)"
            raise CommitConflict(intent.resource, msg)
        for region in replacements:
            if not _inside(region, intent.regions):
                msg = (
                    f"lines {region[0]}-{region[1]} of {intent.resource!r} are outside the "
                    "regions you declared: undeclared edits are refused; declare them first"
                )
                raise CommitConflict(intent.resource, msg)
        txn = self._store.begin(author=intent.holder)
        current = str(txn.read(intent.resource) or "").splitlines(keepends=True)
        mapping = self._locate(intent, current)
        lines = list(current)
        for (start, end), text in sorted(replacements.items(), reverse=True):
            first = _span(mapping, start, end)
            if first is None:
                msg = (
                    f"lines {start}-{end} of {intent.resource!r} changed since you read version "
                    f"{intent.base_version}; read it again and declare anew"
                )
                raise CommitConflict(intent.resource, msg)
            new = text.splitlines(keepends=True)
            if new and not new[-1].endswith("\n") and first + end - start < len(lines):
                new[-1] += "\n"
            lines[first : first + end - start] = new
        txn.write(intent.resource, "".join(lines), token=token)
        record = txn.commit()
        del self._open[intent.id]
        return record

    @staticmethod
    def _locate(intent: Intent, current: list[str]) -> dict[int, int]:
        """Base line number -> current line number, for base lines that are unchanged."""
        matcher = difflib.SequenceMatcher(a=intent.base_lines, b=current, autojunk=False)
        mapping: dict[int, int] = {}
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                mapping[block.a + k] = block.b + k
        return mapping
