"""`SQLiteMemory`: memory items in the project's SQLite file, searched with FTS5 (BM25)."""

from __future__ import annotations

import math
import re
import sqlite3
import struct
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from legato.exceptions import ConfigurationError, MemoryItemNotFound
from legato.memory._base import Embedder, MemoryItem, MemoryKind, Provenance, Recalled, Source
from legato.store import DEFAULT_PATH, Database

__all__ = ["SQLiteMemory"]

_WORD = re.compile(r"\w+", re.UNICODE)
_COLUMNS = (
    "id, kind, text, scope, run_id, event_seq, tool_call_id, message_index, source, created_at"
)
_RRF_K = 60


class SQLiteMemory:
    """Long-term memory in SQLite: full-text search with BM25, optional embeddings.

    ```python
    memory = SQLiteMemory(":memory:")
    item = memory.remember("The user's name is Ada.", kind="fact")
    memory.recall("what is the user called")[0].item.text
    ```
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        embedder: Embedder | None = None,
        db: Database | None = None,
    ) -> None:
        """Open memory at `path` (or in an open `Database`, e.g. a `SQLiteStore`'s `db`).

        Args:
            path: The database file, or `":memory:"`.
            embedder: When given, items are embedded and search fuses BM25 with cosine
                similarity (reciprocal rank fusion).
            db: Share an already open database.
        """
        self.db = db or Database(path)
        self.embedder = embedder

    def remember(
        self,
        text: str,
        *,
        kind: MemoryKind = "fact",
        provenance: Provenance | None = None,
        derived_from: Sequence[str] = (),
        scope: str = "",
    ) -> MemoryItem:
        """Store an item and return it."""
        if not text.strip():
            msg = "a memory item needs some text"
            raise ConfigurationError(msg)
        prov = provenance or Provenance()
        item = MemoryItem(
            id=uuid.uuid4().hex[:16],
            kind=kind,
            text=text,
            provenance=prov,
            derived_from=tuple(derived_from),
            scope=scope,
            created_at=time.time(),
        )
        blob = _pack(self.embedder.embed([text])[0]) if self.embedder is not None else None
        with self.db.write() as conn:
            for source in item.derived_from:
                if (
                    conn.execute("SELECT 1 FROM memory_items WHERE id = ?", (source,)).fetchone()
                    is None
                ):
                    raise MemoryItemNotFound(source)
            conn.execute(
                f"INSERT INTO memory_items({_COLUMNS}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    item.id,
                    kind,
                    text,
                    scope,
                    prov.run_id,
                    prov.event_seq,
                    prov.tool_call_id,
                    prov.message_index,
                    prov.source,
                    item.created_at,
                    blob,
                ),
            )
            conn.executemany(
                "INSERT INTO memory_derivations(item_id, source_id) VALUES (?, ?)",
                [(item.id, s) for s in item.derived_from],
            )
        return item

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        kinds: Sequence[MemoryKind] | None = None,
        scope: str | None = None,
    ) -> list[Recalled]:
        """The best matches for `query`: BM25 over the text, fused with embeddings if set."""
        words = _WORD.findall(query.lower())
        filters, args = _filters(kinds, scope)
        lexical: list[tuple[str, float]] = []
        if words:
            match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
            sql = (
                "SELECT m.id, bm25(memory_fts) FROM memory_fts "
                "JOIN memory_items m ON m.rowid = memory_fts.rowid "
                f"WHERE memory_fts MATCH ?{filters} ORDER BY bm25(memory_fts) LIMIT ?"
            )
            with self.db.read() as conn:
                rows = conn.execute(sql, (match, *args, limit * 4)).fetchall()
            lexical = [(r[0], -float(r[1])) for r in rows]
        if self.embedder is None:
            ranked = lexical[:limit]
        else:
            ranked = self._fuse(query, lexical, filters, args)[:limit]
        items = self._load([i for i, _ in ranked])
        return [Recalled(item=items[i], score=s) for i, s in ranked if i in items]

    def _fuse(
        self, query: str, lexical: list[tuple[str, float]], filters: str, args: list[object]
    ) -> list[tuple[str, float]]:
        embedder = self.embedder
        if embedder is None:
            return lexical
        vector = embedder.embed([query])[0]
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT m.id, m.embedding FROM memory_items m WHERE m.embedding IS NOT NULL{filters}",
                args,
            ).fetchall()
        semantic = sorted(
            ((r[0], _cosine(vector, _unpack(r[1]))) for r in rows), key=lambda p: -p[1]
        )[: max(len(lexical), 20)]
        scores: dict[str, float] = {}
        for ranking in (lexical, semantic):
            for rank, (item_id, _) in enumerate(ranking):
                scores[item_id] = scores.get(item_id, 0.0) + 1.0 / (_RRF_K + rank + 1)
        return sorted(scores.items(), key=lambda p: -p[1])

    def get(self, item_id: str) -> MemoryItem:
        """One item by id."""
        found = self._load([item_id])
        if item_id not in found:
            raise MemoryItemNotFound(item_id)
        return found[item_id]

    def forget(
        self,
        item_id: str | None = None,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> list[str]:
        """Delete the selected items and everything derived from them; return their ids."""
        if item_id is None and run_id is None and tool_call_id is None:
            msg = "forget needs an item id, a run_id or a tool_call_id"
            raise ConfigurationError(msg)
        with self.db.write() as conn:
            seeds: set[str] = set()
            if item_id is not None:
                if (
                    conn.execute("SELECT 1 FROM memory_items WHERE id = ?", (item_id,)).fetchone()
                    is None
                ):
                    raise MemoryItemNotFound(item_id)
                seeds.add(item_id)
            if run_id is not None:
                seeds.update(_ids(conn, "SELECT id FROM memory_items WHERE run_id = ?", run_id))
            if tool_call_id is not None:
                seeds.update(
                    _ids(conn, "SELECT id FROM memory_items WHERE tool_call_id = ?", tool_call_id)
                )
            doomed = _closure(conn, seeds)
            conn.executemany("DELETE FROM memory_items WHERE id = ?", [(i,) for i in doomed])
        return sorted(doomed)

    def items(self, *, scope: str | None = None, limit: int = 1000) -> list[MemoryItem]:
        """Stored items, newest first."""
        filters, args = _filters(None, scope)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT m.id FROM memory_items m WHERE 1=1{filters} "
                "ORDER BY m.created_at DESC, m.rowid DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        ids = [r[0] for r in rows]
        loaded = self._load(ids)
        return [loaded[i] for i in ids]

    def _load(self, ids: Sequence[str]) -> dict[str, MemoryItem]:
        if not ids:
            return {}
        marks = ",".join("?" for _ in ids)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE id IN ({marks})", list(ids)
            ).fetchall()
            derivations = conn.execute(
                f"SELECT item_id, source_id FROM memory_derivations WHERE item_id IN ({marks})",
                list(ids),
            ).fetchall()
        sources: dict[str, list[str]] = {}
        for item_id, source_id in derivations:
            sources.setdefault(item_id, []).append(source_id)
        return {r[0]: _item(r, tuple(sorted(sources.get(r[0], [])))) for r in rows}

    def __repr__(self) -> str:
        return f"SQLiteMemory({self.db.path!r})"


def _filters(kinds: Sequence[MemoryKind] | None, scope: str | None) -> tuple[str, list[object]]:
    sql = ""
    args: list[object] = []
    if kinds:
        sql += f" AND m.kind IN ({','.join('?' for _ in kinds)})"
        args.extend(kinds)
    if scope is not None:
        sql += " AND m.scope = ?"
        args.append(scope)
    return sql, args


def _ids(conn: sqlite3.Connection, sql: str, value: str) -> set[str]:
    return {r[0] for r in conn.execute(sql, (value,)).fetchall()}


def _closure(conn: sqlite3.Connection, seeds: set[str]) -> set[str]:
    """The seeds and every item derived from them, transitively."""
    found = set(seeds)
    frontier = list(seeds)
    while frontier:
        marks = ",".join("?" for _ in frontier)
        rows = conn.execute(
            f"SELECT item_id FROM memory_derivations WHERE source_id IN ({marks})", frontier
        ).fetchall()
        frontier = [r[0] for r in rows if r[0] not in found]
        found.update(frontier)
    return found


def _item(row: tuple[object, ...], derived_from: tuple[str, ...]) -> MemoryItem:
    return MemoryItem(
        id=cast(str, row[0]),
        kind=cast(MemoryKind, row[1]),
        text=cast(str, row[2]),
        scope=cast(str, row[3]),
        provenance=Provenance(
            run_id=cast("str | None", row[4]),
            event_seq=cast("int | None", row[5]),
            tool_call_id=cast("str | None", row[6]),
            message_index=cast("int | None", row[7]),
            source=cast(Source, row[8]),
        ),
        created_at=cast(float, row[9]),
        derived_from=derived_from,
    )


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
