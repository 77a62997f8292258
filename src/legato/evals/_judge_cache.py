"""The LLM judge's cache: the same model, rubric and prompt are asked once.

A key is a SHA-256 of the judge model's name, its instructions, the rubric and the whole
prompt (question, reference answer, answer to grade). Only verdicts that parsed are kept,
so an answer that did not parse is asked again next time. In memory by default; with a
path, in a SQLite file that outlives the process (a re-run or a replay in another process
asks nothing it has asked before).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sqlite3
import threading
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path

from legato.exceptions import ConfigurationError
from legato.messages import JsonValue

__all__ = ["JudgeCache", "judge_key"]


def judge_key(model: str, instructions: str, rubric: str, prompt: str) -> str:
    """The cache key of one judge question."""
    text = json.dumps([model, instructions, rubric, prompt], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class JudgeCache:
    """Verdicts of LLM judges by question, in memory or in a SQLite file.

    One cache may be shared by several judges (the key includes the model and rubric).
    Questions with the same key asked at the same time wait for the first answer.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        """Keep verdicts in memory, or in the SQLite file `path` (made if missing)."""
        self._memory: dict[str, dict[str, JsonValue]] = {}
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._guard = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        """Questions answered from the cache (no model call)."""
        if path is not None:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(path), check_same_thread=False)
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS judge_cache (key TEXT PRIMARY KEY, verdict TEXT)"
                )
                self._db.commit()
            except (OSError, sqlite3.Error) as exc:
                msg = f"cannot open the judge cache {str(path)!r}: {exc}"
                raise ConfigurationError(msg) from exc

    def get(self, key: str) -> dict[str, JsonValue] | None:
        """The verdict stored under `key` (None when the question was never answered)."""
        with self._guard:
            found = self._memory.get(key)
            if found is None and self._db is not None:
                row = self._db.execute(
                    "SELECT verdict FROM judge_cache WHERE key = ?", (key,)
                ).fetchone()
                if row is not None:
                    found = json.loads(row[0])
                    self._memory[key] = found
            if found is not None:
                self.hits += 1
            return found

    def put(self, key: str, verdict: Mapping[str, JsonValue]) -> None:
        """Store a verdict (a parsed one: `pass`, `reason`)."""
        with self._guard:
            self._memory[key] = dict(verdict)
            if self._db is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO judge_cache (key, verdict) VALUES (?, ?)",
                    (key, json.dumps(dict(verdict), ensure_ascii=False)),
                )
                self._db.commit()

    @contextlib.asynccontextmanager
    async def asking(self, key: str) -> AsyncGenerator[None]:
        """Held while one question is asked, so the same question waits instead of asking twice."""
        loop = id(asyncio.get_running_loop())  # a lock belongs to one event loop
        lock = self._locks.setdefault((loop, key), asyncio.Lock())
        async with lock:
            yield

    def close(self) -> None:
        """Close the SQLite file (the in-memory verdicts stay usable)."""
        if self._db is not None:
            self._db.close()
            self._db = None
