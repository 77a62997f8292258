"""What one connection per database file per process costs, and what it saves.

Run: `python bench/store_connections.py [--opens N] [--writes N]`.

1. Opening a legato object on a file this process already has open (`SQLiteStore(path)`
   beside another): a new handle on the shared connection, against what each object did
   before 2026-12-06 (a plain `open()` of the file to read its header, then a connection
   of its own, WAL and identity checks), median and p95 over `--opens` opens.
2. One write transaction (`append_turn`, one message) through a handle, alternating two
   objects on the file (they share one connection), against one object alone: the
   bookkeeping a shared connection adds to every transaction (a handle's busy timeout).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from legato.messages import Message
from legato.store import SQLiteStore


def _times(fn: Callable[[], object], n: int) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _show(label: str, times: list[float]) -> None:
    times = sorted(times)
    p95 = times[int(len(times) * 0.95) - 1]
    print(f"{label:<58} median {statistics.median(times) * 1e6:8.1f} µs  p95 {p95 * 1e6:8.1f} µs")


def _old_open(path: Path) -> None:
    """What opening an object cost before: the header read, then a connection of its own."""
    with path.open("rb") as fh:
        fh.read(16)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA application_id").fetchone()
    conn.execute("PRAGMA user_version").fetchone()
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--opens", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=2000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="legato-bench-"))
    path = folder / "legato.db"
    keeper = SQLiteStore(path)
    print(f"SQLite {sqlite3.sqlite_version}; {args.opens} opens, {args.writes} writes each\n")
    _show("open a second object on the file (shared connection)", _times(
        lambda: SQLiteStore(path).close(), args.opens
    ))  # fmt: skip
    _show("before: header open() + a connection of its own", _times(
        lambda: _old_open(path), args.opens
    ))  # fmt: skip
    other = SQLiteStore(path)
    message = [Message.user("hello")]
    one: list[float] = []
    two: list[float] = []
    for i in range(args.writes):  # interleaved: both see the same, growing session
        start = time.perf_counter()
        keeper.append_turn("s", message, run_id=None)
        one.append(time.perf_counter() - start)
        start = time.perf_counter()
        (other if i % 2 else keeper).append_turn("s", message, run_id=None)
        two.append(time.perf_counter() - start)
    _show("a write through one object", one)
    _show("a write alternating two objects on the file", two)
    other.close()
    keeper.close()


if __name__ == "__main__":
    main()
