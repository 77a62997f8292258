"""Store fixtures: a PostgreSQL cluster per test session, a database per test, and a
`store` that is each backend in turn (so the protocol tests run against both)."""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_cluster import AnyStore, PgServer, admin, cluster, find_bindir, missing

from legato.store import PostgresStore, SQLiteStore


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL cluster of its own for this test session."""
    if importlib.util.find_spec("psycopg") is None:
        missing("psycopg is not installed (the `postgres` extra)")
    bindir = find_bindir()
    if bindir is None or not (bindir / "initdb").exists():
        missing("the PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    assert bindir is not None
    yield from cluster(bindir)


_numbers = itertools.count()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    """The DSN of a fresh, empty database, dropped after the test."""
    name = f"t{os.getpid()}_{next(_numbers)}"
    with admin(pg_server) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield pg_server.dsn(name)
    with admin(pg_server) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AnyStore]:
    """Each store in turn: the protocol tests run against SQLite and PostgreSQL."""
    if request.param == "sqlite":
        opened: AnyStore = SQLiteStore(tmp_path / "legato.db")
    else:
        opened = PostgresStore(request.getfixturevalue("pg_dsn"))
    yield opened
    opened.close()
