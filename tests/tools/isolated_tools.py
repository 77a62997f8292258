"""Module-level tools for the isolation tests (a worker process imports them by name)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from legato import ToolError, tool

GATE_SECONDS = 60.0
"""How long a gated tool waits for its gate before giving up (never reached in a test)."""


def _wait_for(gate: Path) -> None:
    deadline = time.monotonic() + GATE_SECONDS
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.005)


@tool(side_effects="irreversible", isolation="process")
def transfer(ledger: str, amount: int) -> str:
    """Move money: announce the start, wait for the gate, then write the ledger.

    Args:
        ledger: Path of the ledger file; `<ledger>.started` and `<ledger>.gate` beside it.
        amount: How much.
    """
    Path(ledger + ".pid").write_text(str(os.getpid()))
    Path(ledger + ".pid").replace(ledger + ".started")  # appears with its content
    _wait_for(Path(ledger + ".gate"))
    Path(ledger).write_text(str(amount))
    return f"moved {amount}"


transfer_in_thread = transfer.replace(name="transfer_in_thread", isolation="thread")
transfer_by_default = transfer.replace(name="transfer_by_default", isolation=None)
"""Isolation left to the agent's default."""


@tool(isolation="process")
def echo_pid(value: list[int]) -> dict[str, Any]:
    """Return the worker's pid, its parent's, and the value, doubled."""
    return {"pid": os.getpid(), "parent": os.getppid(), "value": [v * 2 for v in value]}


@tool(isolation="process")
def refuse(reason: str) -> str:
    """Fail with a tool error."""
    raise ToolError(reason)


@tool(isolation="process")
def unpicklable_result() -> object:
    """Return something that cannot cross back."""
    return lambda: None


@tool(isolation="process")
def die() -> str:
    """End the worker without answering."""
    os._exit(3)


def plain(value: object) -> str:
    """A module-level function, for direct calls."""
    return repr(value)


def _announce(ledger: str) -> None:
    Path(ledger + ".pid").write_text(str(os.getpid()))
    Path(ledger + ".pid").replace(ledger + ".started")  # appears with its content


@tool(side_effects="irreversible", isolation="process")
async def async_transfer(ledger: str, amount: int) -> str:
    """A coroutine tool whose effect comes from a thread it starts (which cancelling it misses).

    Args:
        ledger: Path of the ledger file; `<ledger>.started` and `<ledger>.gate` beside it.
        amount: How much.
    """
    _announce(ledger)

    def move() -> None:
        _wait_for(Path(ledger + ".gate"))
        Path(ledger + ".tmp").write_text(str(amount))
        Path(ledger + ".tmp").replace(ledger)  # appears with its content

    mover = threading.Thread(target=move)
    mover.start()
    while mover.is_alive():  # noqa: ASYNC110 - cancelling this wait leaves the thread running
        await asyncio.sleep(0.005)
    return f"moved {amount}"


async_transfer_in_loop = async_transfer.replace(name="async_transfer_in_loop", isolation="thread")
"""The same coroutine on the run's own loop."""


@tool(side_effects="irreversible", isolation="process")
def transfer_with_helper(ledger: str, amount: int) -> str:
    """Start a helper process (in the call's process group) that does the work, and wait.

    Args:
        ledger: Path of the ledger file; `<ledger>.helper` gets the helper's pid.
        amount: How much.
    """
    script = (
        "import pathlib, sys, time\n"
        "gate = pathlib.Path(sys.argv[1] + '.gate')\n"
        "while not gate.exists():\n"
        "    time.sleep(0.005)\n"
        "pathlib.Path(sys.argv[1] + '.tmp').write_text(sys.argv[2])\n"
        "pathlib.Path(sys.argv[1] + '.tmp').replace(sys.argv[1])\n"
    )
    helper = subprocess.Popen([sys.executable, "-c", script, ledger, str(amount)])
    Path(ledger + ".pid").write_text(str(helper.pid))
    Path(ledger + ".pid").replace(ledger + ".helper")
    Path(ledger + ".started").touch()
    helper.wait()
    return f"moved {amount}"


@tool(isolation="process")
def first_line() -> dict[str, Any]:
    """When the tool's first line ran (the system's monotonic clock), where, and its import."""
    now = time.monotonic()
    return {"at": now, "pid": os.getpid(), "parent": os.getppid(), "imported_in": IMPORTED_IN}


IMPORTED_IN = os.getpid()
"""The process that imported this module (the zygote, when it imported it before forking)."""
