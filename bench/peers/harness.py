"""The orchestrator's core: run one task of one framework in its own interpreter, and verify it.

`run_task` starts `agents/fw_<name>.py` in the framework's Python with a task in `argv[1]`,
reads its `RESULT` line, then takes the mock server's counts for the task's run tags and checks
every run: two model requests, the tool's output in the second only, the tool run once, the
scripted answer. Any mismatch raises `VerificationError`: the bench never reports a figure from
runs that did something else. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mockserver import MockServer

AGENTS = Path(__file__).resolve().parent / "agents"


class BenchError(Exception):
    """A framework's script failed, or its runs did not match the scripted agent."""


class VerificationError(BenchError):
    """The mock server's counts disagree with what a script says it ran."""


@dataclass(frozen=True)
class Framework:
    """A framework under test: its script and the interpreter to run it with."""

    name: str
    label: str
    python: str | None
    script: Path
    reason: str = ""
    """Why it cannot run (python is None)."""
    isolated: bool = True
    """A venv of its own: PYTHONPATH is cleared so it sees its own packages only."""


def env_for(url: str, *, isolated: bool = True) -> dict[str, str]:
    """The scripts' environment: the mock as the default endpoint, every telemetry off."""
    env = dict(os.environ)
    env.update(
        {
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_BASE_URL": url,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGSMITH_TRACING": "false",
            "OTEL_SDK_DISABLED": "true",
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "DO_NOT_TRACK": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    if isolated:
        env.pop("PYTHONPATH", None)  # each venv sees its own packages only
    return env


def run_task(
    server: MockServer, fw: Framework, task: dict[str, Any], *, timeout: float = 900
) -> dict[str, Any]:
    """Run one task in `fw`'s interpreter; returns its verified report."""
    if fw.python is None:
        raise BenchError(f"{fw.name}: cannot run: {fw.reason}")
    prefix = f"{fw.name}.{task['task']}.{uuid.uuid4().hex[:8]}/"
    payload = dict(task, url=server.url, prefix=prefix)
    untagged = server.untagged()
    server.reset_connections()
    try:
        done = subprocess.run(
            [fw.python, str(fw.script), json.dumps(payload)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env_for(server.url, isolated=fw.isolated),
            cwd=str(fw.script.parent),
        )
    except subprocess.TimeoutExpired as exc:
        server.take(prefix)
        raise BenchError(f"{fw.name} {task['task']}: timed out after {timeout:.0f} s") from exc
    counts = server.take(prefix)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-4:])
        raise BenchError(f"{fw.name} {task['task']}: exit {done.returncode}: {tail}")
    report: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    report["connections"], report["most_open"] = server.connections()
    verify(fw.name, task["task"], report, counts, server.untagged() - untagged)
    return report


def verify(
    name: str, task: str, report: dict[str, Any], counts: dict[str, Any], untagged: int
) -> None:
    """Check a script's report against the server's counts; raises VerificationError."""
    where = f"{name} {task}"
    runs = int(report.get("runs", -1))
    bad = {tag: c.problem() for tag, c in counts.items() if c.problem()}
    problems: list[str] = []
    if untagged:
        problems.append(f"{untagged} requests without a run tag")
    if len(counts) != runs:
        problems.append(f"the script reports {runs} runs, the server saw {len(counts)}")
    if bad:
        tag, why = next(iter(bad.items()))
        problems.append(f"{len(bad)} of {len(counts)} runs wrong (first: {tag}: {why})")
    if report.get("tool_calls") != runs:
        problems.append(f"the tool ran {report.get('tool_calls')} times in {runs} runs")
    if report.get("wrong_answers"):
        problems.append(f"{report['wrong_answers']} runs ended with another answer")
    if problems:
        raise VerificationError(f"{where}: " + "; ".join(problems))
