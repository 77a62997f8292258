"""What only the SQLite store does: its file, WAL mode, foreign and damaged files, PRAGMAs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from legato import Agent
from legato.exceptions import SchemaTooNew, StoreCorrupted
from legato.messages import Message
from legato.store import Database, SQLiteStore, schema_version
from legato.store._schema import APPLICATION_ID
from legato.testing import ScriptedModel


def test_file_is_created_in_wal_mode_with_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "legato.db"
    store = SQLiteStore(path)
    assert path.exists()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert store.db.version == schema_version()


def test_default_path_is_dot_legato_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    agent = Agent(ScriptedModel(["hi"]))
    agent.run_sync("hello", session="s")
    assert (tmp_path / ".legato" / "legato.db").exists()


def test_random_bytes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreCorrupted, match="not a SQLite database"):
        SQLiteStore(path)
    assert path.read_bytes().startswith(b"this is not")  # untouched


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices(id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorrupted, match="another program"):
        SQLiteStore(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id=1234")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorrupted, match="not a legato database"):
        SQLiteStore(path)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("invoices",)]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={schema_version() + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew) as info:
        SQLiteStore(path)
    assert info.value.found == schema_version() + 1
    assert info.value.supported == schema_version()


def test_a_damaged_database_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    store = SQLiteStore(path)
    for i in range(200):
        store.append_turn("s", [Message.user(f"message {i} " + "x" * 500)], run_id=None)
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(page * 2, len(data), page):  # wreck every page after the schema
        data[offset : offset + 100] = b"\xff" * 100
    path.write_bytes(bytes(data))

    def reopen_and_read() -> None:
        SQLiteStore(path).load_session("s")

    with pytest.raises(StoreCorrupted, match="damaged"):
        reopen_and_read()


def test_migrations_are_applied_once_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    Database(path).close()
    Database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
