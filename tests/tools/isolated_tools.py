"""Module-level tools for the isolation tests (a worker process imports them by name)."""

from __future__ import annotations

import os
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
