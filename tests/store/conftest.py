"""`store`: each backend in turn, so the protocol tests run against SQLite and PostgreSQL.

The PostgreSQL server (`pg_server`, `pg_dsn`) comes from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from legato.store import PostgresStore, SQLiteStore
from pg_cluster import AnyStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AnyStore]:
    """Each store in turn: the protocol tests run against SQLite and PostgreSQL."""
    if request.param == "sqlite":
        opened: AnyStore = SQLiteStore(tmp_path / "legato.db")
    else:
        opened = PostgresStore(request.getfixturevalue("pg_dsn"))
    yield opened
    opened.close()
