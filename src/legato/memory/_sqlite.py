"""`SQLiteMemory`: memory items in the project's SQLite file, searched with FTS5 (BM25)."""

from __future__ import annotations

import math
import re
import sqlite3
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from legato.exceptions import ConfigurationError, MemoryItemNotFound
from legato.memory._base import (
    Embedder,
    Forgotten,
    MemoryItem,
    MemoryKind,
    Provenance,
    Recalled,
    Source,
)
from legato.store import DEFAULT_PATH, Database
from legato.store._redact import redact_forgotten

__all__ = ["SQLiteMemory"]

_WORD = re.compile(r"\w+", re.UNICODE)
_COLUMNS = (
    "id, kind, text, scope, run_id, event_seq, tool_call_id, message_index, source, created_at, "
    "expires_at"
)
_RRF_K = 60
_LIVE = " AND (m.expires_at IS NULL OR m.expires_at > ?)"
_CHUNK = 500  # ids per `IN (...)`, well under SQLite's limit on bound parameters


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Open memory at `path` (or in an open `Database`, e.g. a `SQLiteStore`'s `db`).

        Args:
            path: The database file, or `":memory:"`.
            embedder: When given, items are embedded and search fuses BM25 with cosine
                similarity (reciprocal rank fusion).
            db: Share an already open database. Share the store's (`SQLiteStore.db`) so
                that `forget` also redacts the sessions and journals that quoted an item.
            clock: Unix time now; items are stamped and expire by it (injectable for tests).
        """
        self.db = db or Database(path)
        self.embedder = embedder
        self.clock = clock

    def remember(
        self,
        text: str,
        *,
        kind: MemoryKind = "fact",
        provenance: Provenance | None = None,
        derived_from: Sequence[str] = (),
        scope: str = "",
        ttl: float | None = None,
        expires_at: float | None = None,
    ) -> MemoryItem:
        """Store an item and return it.

        Args:
            text: The item, as one self-contained sentence.
            kind: `fact`, `episode` or `preference`.
            provenance: Where it came from.
            derived_from: Ids of the items it was made from; forgetting one forgets it.
            scope: Its namespace.
            ttl: Seconds from now after which it is never recalled or listed.
            expires_at: The same as a Unix time (give `ttl` or `expires_at`, not both).
                An item derived from others expires no later than the earliest of them.
        """
        if not text.strip():
            msg = "a memory item needs some text"
            raise ConfigurationError(msg)
        now = self.clock()
        expires = _expiry(now, ttl, expires_at)
        prov = provenance or Provenance()
        blob = _pack(self.embedder.embed([text])[0]) if self.embedder is not None else None
        with self.db.write() as conn:
            for source in dict.fromkeys(derived_from):
                row = conn.execute(
                    "SELECT expires_at FROM memory_items WHERE id = ?", (source,)
                ).fetchone()
                if row is None or (row[0] is not None and row[0] <= now):
                    raise MemoryItemNotFound(source)
                if row[0] is not None:
                    expires = row[0] if expires is None else min(expires, row[0])
            item = MemoryItem(
                id=uuid.uuid4().hex[:16],
                kind=kind,
                text=text,
                provenance=prov,
                derived_from=tuple(dict.fromkeys(derived_from)),
                scope=scope,
                created_at=now,
                expires_at=expires,
            )
            conn.execute(
                f"INSERT INTO memory_items({_COLUMNS}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
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
                    item.expires_at,
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
        """The best matches for `query`: BM25 over the text, fused with embeddings if set.

        Expired items are never returned.
        """
        words = _WORD.findall(query.lower())
        filters, args = _filters(kinds, scope, self.clock())
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
        """One item by id; `MemoryItemNotFound` if there is none, or it expired."""
        item = self._load([item_id]).get(item_id)
        if item is None or _expired(item.expires_at, self.clock()):
            raise MemoryItemNotFound(item_id)
        return item

    def forget(
        self,
        item_id: str | None = None,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> Forgotten:
        """Delete the selected items, everything derived from them, and their traces.

        In one transaction: the items and their provenance closure are deleted, and the
        sessions and run journals in the same database are redacted where they quote them
        (`recall` results, `remember` calls, recall blocks, and the summaries made from
        those). Expired items can be forgotten too.
        """
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
            return _forget(conn, seeds)

    def purge_expired(self) -> Forgotten:
        """Forget every expired item, as `forget` does (derived items and traces included).

        Expired items are never recalled or listed even before they are purged; purging
        deletes them from the file and redacts what quoted them.
        """
        now = self.clock()
        query = "SELECT id FROM memory_items WHERE expires_at IS NOT NULL AND expires_at <= ?"
        with self.db.read() as conn:
            if conn.execute(query + " LIMIT 1", (now,)).fetchone() is None:
                return Forgotten()
        with self.db.write() as conn:
            return _forget(conn, {r[0] for r in conn.execute(query, (now,)).fetchall()})

    def items(self, *, scope: str | None = None, limit: int = 1000) -> list[MemoryItem]:
        """Stored items that have not expired, newest first."""
        filters, args = _filters(None, scope, self.clock())
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

    def close(self) -> None:
        """Close this handle on the database (the file's connection closes with the last)."""
        self.db.close()

    def __repr__(self) -> str:
        return f"SQLiteMemory({self.db.path!r})"


def _expiry(now: float, ttl: float | None, expires_at: float | None) -> float | None:
    if ttl is not None and expires_at is not None:
        msg = "give ttl (seconds from now) or expires_at (Unix time), not both"
        raise ConfigurationError(msg)
    if ttl is not None:
        if not ttl > 0:
            msg = f"ttl must be a positive number of seconds, got {ttl}"
            raise ConfigurationError(msg)
        return now + ttl
    if expires_at is not None and not expires_at > now:
        msg = f"expires_at {expires_at} is not in the future (now is {now})"
        raise ConfigurationError(msg)
    return expires_at


def _expired(expires_at: float | None, now: float) -> bool:
    return expires_at is not None and expires_at <= now


def _forget(conn: sqlite3.Connection, seeds: set[str]) -> Forgotten:
    """Delete the seeds and their closure, and redact the store (inside `conn`'s transaction)."""
    doomed = sorted(_closure(conn, seeds))
    if not doomed:
        return Forgotten()
    texts: list[str] = []
    calls: dict[str, set[str]] = {}
    for start in range(0, len(doomed), _CHUNK):
        chunk = doomed[start : start + _CHUNK]
        marks = ",".join("?" for _ in chunk)
        for text, run_id, call_id in conn.execute(
            f"SELECT text, run_id, tool_call_id FROM memory_items WHERE id IN ({marks})", chunk
        ).fetchall():
            texts.append(text)
            if run_id is not None and call_id is not None:
                calls.setdefault(run_id, set()).add(call_id)
        conn.execute(f"DELETE FROM memory_items WHERE id IN ({marks})", chunk)
    redacted = redact_forgotten(conn, ids=doomed, texts=texts, calls=calls)
    return Forgotten(
        items=tuple(doomed),
        messages=redacted.messages,
        sessions=tuple(sorted(redacted.sessions)),
        contexts=tuple(sorted(redacted.contexts)),
        events=redacted.events,
        runs=tuple(sorted(redacted.runs)),
    )


def _filters(
    kinds: Sequence[MemoryKind] | None, scope: str | None, now: float
) -> tuple[str, list[object]]:
    sql = _LIVE
    args: list[object] = [now]
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
        rows: list[str] = []
        for start in range(0, len(frontier), _CHUNK):
            chunk = frontier[start : start + _CHUNK]
            marks = ",".join("?" for _ in chunk)
            rows += [
                r[0]
                for r in conn.execute(
                    f"SELECT item_id FROM memory_derivations WHERE source_id IN ({marks})", chunk
                ).fetchall()
            ]
        frontier = [i for i in dict.fromkeys(rows) if i not in found]
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
        expires_at=cast("float | None", row[10]),
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
