"""Test-wide fixtures: no test may reach the network; a PostgreSQL server on request.

`pg_server` starts a throwaway PostgreSQL cluster once per test session, only when some
test asks for it (see pg_cluster.py); `pg_dsn` is a fresh database on it for one test.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from legato.testing import block_network
from pg_cluster import PgServer, admin, cluster, find_bindir, missing

# Shared machines are noisy: hypothesis must judge correctness, never speed.
settings.register_profile("legato", deadline=None)
settings.load_profile("legato")


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("allow_network"):
        yield
        return
    with block_network():
        yield


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
