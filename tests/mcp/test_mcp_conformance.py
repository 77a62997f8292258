"""The official MCP conformance suite against legato's client and server.

Client: the suite starts a mock server per scenario and runs tests/mcp/conformance_client.py
(built on `legato.mcp.MCPClient`) against it. Server: the suite runs every server scenario
against `legato mcp serve tests.mcp.servers.everything_fixture:server --http`.
Each scenario's checks are read from the suite's own checks.json; the table is printed
at the end of the pytest run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LOOPBACK = HERE / "servers" / "loopback.cjs"
CONFORMANCE = ROOT / ".mcp-node/node_modules/@modelcontextprotocol/conformance/dist/index.js"
EXPECTED = HERE / "conformance-expected-failures.yml"
SPEC = "2025-11-25"
"""The protocol revision legato speaks; the suite's draft (2026-07-28) and extension
scenarios are out of scope."""
Results = list[tuple[str, str, int, int, int]]

pytestmark = pytest.mark.slow


def _expected(side: str) -> list[str]:
    names: list[str] = []
    current = None
    for line in EXPECTED.read_text(encoding="utf-8").splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if stripped.endswith(":") and not stripped.startswith(" "):
            current = stripped[:-1]
        elif stripped.strip().startswith("- ") and current == side:
            names.append(stripped.strip()[2:].strip())
    return names


def _env(node: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "NODE_OPTIONS": f"--require {LOOPBACK}",
    }


def _conformance(node: Path, *args: str, out: Path, timeout: float = 240) -> str:
    proc = subprocess.run(
        [str(node), str(CONFORMANCE), *args, "-o", str(out)],
        env=_env(node),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        check=False,
    )
    return proc.stdout + proc.stderr


def _scenarios(node: Path, side: str) -> list[str]:
    listing = subprocess.run(
        [str(node), str(CONFORMANCE), "list", f"--{side}", "--spec-version", SPEC],
        env=_env(node),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [
        line.strip()[2:].split(" [")[0]
        for line in listing.splitlines()
        if line.strip().startswith("- ")
    ]


def _checks(out: Path) -> dict[str, tuple[int, int, int, list[str]]]:
    """Per scenario directory name: passed, failed, warnings, failure messages."""
    found: dict[str, tuple[int, int, int, list[str]]] = {}
    for checks in out.rglob("checks.json"):
        data = json.loads(checks.read_text(encoding="utf-8"))
        passed = sum(1 for c in data if c["status"] == "SUCCESS")
        warnings = sum(1 for c in data if c["status"] == "WARNING")
        failures = [f"{c['id']}: {c.get('errorMessage')}" for c in data if c["status"] == "FAILURE"]
        found[str(checks.parent.relative_to(out))] = (passed, len(failures), warnings, failures)
    return found


def test_every_scenario_is_run_or_listed_as_expected_failure(node: Path) -> None:
    client = set(_scenarios(node, "client"))
    expected = set(_expected("client"))
    assert expected <= client, f"stale expected failures: {expected - client}"
    run = client - expected
    assert {s for s in client if s.startswith("auth/")} <= run, "every OAuth scenario runs"
    assert len(run) >= 19


@pytest.mark.timeout(600)
def test_client_scenarios(node: Path, tmp_path: Path, conformance_results: Results) -> None:
    scenarios = [s for s in _scenarios(node, "client") if s not in set(_expected("client"))]
    driver = f"{sys.executable} {HERE / 'conformance_client.py'}"
    failures: list[str] = []
    for scenario in scenarios:
        out = tmp_path / scenario.replace("/", "_")
        log = _conformance(
            node,
            "client",
            "--command",
            driver,
            "--scenario",
            scenario,
            "--spec-version",
            SPEC,
            "--expected-failures",
            str(EXPECTED),
            out=out,
        )
        results = _checks(out)
        passed = sum(r[0] for r in results.values())
        failed = sum(r[1] for r in results.values())
        conformance_results.append(
            ("client", scenario, passed, failed, sum(r[2] for r in results.values()))
        )
        if failed or not passed:
            messages = [m for r in results.values() for m in r[3]]
            failures.append(f"{scenario}: {messages or log[-2000:]}")
    assert not failures, "\n".join(failures)


@pytest.mark.timeout(600)
async def test_server_scenarios(
    node: Path,
    tmp_path: Path,
    conformance_results: Results,
    free_port: int,
    http_process: Callable[..., AbstractAsyncContextManager[object]],
) -> None:
    port = free_port
    serve = [
        str(Path(sys.executable).parent / "legato"),
        "mcp",
        "serve",
        "tests.mcp.servers.everything_fixture:server",
        "--http",
        "--port",
        str(port),
    ]
    import asyncio

    async with http_process(*serve, port=port, env={"PYTHONPATH": str(ROOT)}):
        log = await asyncio.to_thread(
            _conformance,
            node,
            "server",
            "--url",
            f"http://localhost:{port}/mcp",
            "--suite",
            "all",
            "--spec-version",
            SPEC,
            "--expected-failures",
            str(EXPECTED),
            out=tmp_path / "server",
        )
    results = _checks(tmp_path / "server")
    listed = _scenarios(node, "server")
    for scenario in listed:
        mine = [v for k, v in results.items() if k.startswith(f"server-{scenario}-")]
        passed, failed, warned = (
            sum(r[0] for r in mine),
            sum(r[1] for r in mine),
            sum(r[2] for r in mine),
        )
        conformance_results.append(("server", scenario, passed, failed, warned))
    # A scenario may end with warnings only (server-sse-polling: the suite speaks
    # protocol 2025-03-26 there, where SSE polling does not apply); failures fail the test.
    bad = [f"{k}: {r[3]}" for k, r in results.items() if r[1]]
    assert len(results) == len(listed), log[-3000:]
    assert not bad, "\n".join(bad)
