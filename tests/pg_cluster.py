"""A throwaway PostgreSQL cluster for the store tests (the fixtures are in conftest.py).

The cluster is made in a temporary folder (`initdb`), listens on 127.0.0.1 on a free port,
and is stopped and deleted at the end. PostgreSQL refuses to run as root, so as root the
server runs as the `postgres` system user (`runuser`), which owns the folder. Without the
server binaries or psycopg the PostgreSQL tests are skipped — except in CI (`CI=true`),
where that is an error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from legato.store import PostgresStore, SQLiteStore

PASSWORD = "s3cret-pw-for-tests"
"""The cluster's superuser password (TCP logins use SCRAM, so a wrong one is refused)."""

AnyStore = SQLiteStore | PostgresStore


@dataclass(frozen=True, kw_only=True)
class PgServer:
    """A running throwaway cluster."""

    host: str
    port: int
    user: str

    def dsn(self, dbname: str = "postgres", *, password: str = PASSWORD) -> str:
        return f"postgresql://{self.user}:{password}@{self.host}:{self.port}/{dbname}"


def missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}: the PostgreSQL tests cannot run", pytrace=False)
    pytest.skip(reason)


def find_bindir() -> Path | None:
    explicit = os.environ.get("LEGATO_PG_BINDIR")
    if explicit:
        return Path(explicit)
    versions = [
        p for p in Path("/usr/lib/postgresql").glob("*/bin/pg_ctl") if p.parts[-3].isdigit()
    ]
    if versions:
        return max(versions, key=lambda p: int(p.parts[-3])).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses root: as root, run its programs as the `postgres` user."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def cluster(bindir: Path) -> Iterator[PgServer]:
    root = Path(tempfile.mkdtemp(prefix="legato-pg-"))
    data, pwfile = root / "data", root / "pw"
    pwfile.write_text(PASSWORD + "\n", encoding="utf-8")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    root.chmod(0o700)
    user = "legato"
    try:
        subprocess.run(
            _as_server_user(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    user,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ]
            ),
            check=True,
            capture_output=True,
        )
        port = _start(bindir, root, data)
        yield PgServer(host="127.0.0.1", port=port, user=user)
    finally:
        subprocess.run(
            _as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


def _start(bindir: Path, root: Path, data: Path) -> int:
    """Start the server on a free port (another program may take the port first: retry)."""
    failure = ""
    for _ in range(5):
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        started = subprocess.run(
            _as_server_user(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(root / "server.log"),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    options,
                    "start",
                ]
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        if started.returncode == 0:
            return port
        failure = started.stdout + started.stderr
        with contextlib.suppress(OSError):
            failure += (root / "server.log").read_text(encoding="utf-8", errors="replace")
    pytest.fail(f"the PostgreSQL test server did not start:\n{failure}", pytrace=False)


def admin(server: PgServer) -> Any:
    """An autocommit superuser connection to the cluster's `postgres` database."""
    import psycopg

    return psycopg.connect(server.dsn(), autocommit=True)
