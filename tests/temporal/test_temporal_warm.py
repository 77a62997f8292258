"""A fresh worker builds the event schemas when it starts, not in its first activity."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"

FRESH = """
import asyncio, sys
from temporalio.client import Client
from legato import Agent
from legato.events import _event_adapter
from legato.store import SQLiteStore
from legato.store._codec import event_adapter
from legato.temporal import LegatoActivities, legato_worker

if sys.argv[3] == "off":  # the twin: the worker does not warm up
    LegatoActivities.warm = staticmethod(lambda: None)

async def main() -> None:
    client = await Client.connect(sys.argv[1])
    agent = Agent("test:echo", store=SQLiteStore(sys.argv[2]))
    legato_worker(client, task_queue="warm", agents={"echo": agent})
    print(event_adapter.cache_info().currsize, _event_adapter.cache_info().currsize)

asyncio.run(main())
"""


def built(address: str, tmp_path: Path, *, warm: bool) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    args = [
        sys.executable,
        "-c",
        FRESH,
        address,
        str(tmp_path / "runs.db"),
        "on" if warm else "off",
    ]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


def test_a_fresh_worker_has_built_the_event_schemas_before_any_activity(
    temporal_address: str, tmp_path: Path
) -> None:
    assert built(temporal_address, tmp_path, warm=True) == "1 1"


def test_twin_without_the_warm_up_the_first_activity_would_build_them(
    temporal_address: str, tmp_path: Path
) -> None:
    assert built(temporal_address, tmp_path, warm=False) == "0 0"
