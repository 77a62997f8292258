"""`shell` and `python`: commands run by a sandbox `Runner` (bubblewrap by default)."""

from __future__ import annotations

import shutil

from legato.sandbox import Limits, Runner, python_paths
from legato.tools._tool import Tool
from legato.tools.builtin._files import tool_errors

__all__ = ["exec_tools"]

_GRACE = 10.0
"""Seconds the loop's own timeout adds on top of the sandbox's, which kills first."""


def exec_tools(runner: Runner, *, limits: Limits, interpreter: str | None = None) -> list[Tool]:
    """The `shell` and `python` tools for a runner; `interpreter` is the Python to use."""
    shell_binary = shutil.which("bash") or "/bin/sh"
    python_binary = interpreter or python_paths()[0]
    sandboxed = (
        "in a sandbox: the workspace is writable (changes are kept when the command ends, "
        "except to VCS configuration, hooks and editor settings), unix sockets and the "
        "network are off unless granted, "
    )
    note = sandboxed if runner.kind == "bwrap" else "on the host, WITHOUT a sandbox; "

    async def shell(command: str, cwd: str = ".") -> str:
        """Run a shell command in the workspace; returns the exit code and output.

        Args:
            command: The command line (run by bash -c).
            cwd: Working directory relative to the workspace root.
        """
        with tool_errors(cwd):
            result = await runner.run([shell_binary, "-c", command], cwd=cwd, limits=limits)
        return result.render()

    async def python(code: str) -> str:
        """Run a Python program in the workspace (the working directory); returns its output.

        Args:
            code: The program's source code; print what you want to see.
        """
        with tool_errors("."):
            result = await runner.run(
                [python_binary, "-I", "-"], stdin=code.encode(), limits=limits
            )
        return result.render()

    timeout = limits.timeout + _GRACE
    hint = f"Runs {note}and stops after {limits.timeout:g} seconds."
    return [
        Tool.from_function(
            shell,
            side_effects="irreversible",
            timeout=timeout,
            sinks={"command": "command", "cwd": "path"},
        ).replace(description=f"{shell.__doc__.splitlines()[0] if shell.__doc__ else ''} {hint}"),
        Tool.from_function(
            python, side_effects="irreversible", timeout=timeout, sinks={"code": "command"}
        ).replace(description=f"{python.__doc__.splitlines()[0] if python.__doc__ else ''} {hint}"),
    ]
