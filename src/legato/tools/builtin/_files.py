"""File tools bound to a `Workspace`: read, write, edit, list, glob.

Every path goes through the workspace, so a path that leads outside (`..`, an absolute
path, a symlink or hard link pointing out) fails with a tool error the model sees, and
nothing is read or written.

`write_file` and `edit_file` refuse a file that changed since the calling run last read
it through `read_file` (see `_versions.py`), so runs that share a workspace do not lose
each other's updates; `FileToolOptions(check_versions=False)` turns this off.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from legato.exceptions import SandboxViolation, ToolError
from legato.sandbox import Workspace
from legato.tools._context import RunContext
from legato.tools._tool import Tool
from legato.tools.builtin._versions import ABSENT, FileVersions

__all__ = ["FileToolOptions", "file_tools", "glob_regex", "tool_errors"]

_SNIFF = 8192


@dataclass(frozen=True, kw_only=True, slots=True)
class FileToolOptions:
    """Sizes the file tools work within."""

    max_read_chars: int = 100_000
    """Characters `read_file` returns at most; longer output ends with a note to read on."""
    max_write_bytes: int = 10 << 20
    """Largest content `write_file` and `edit_file` accept."""
    max_edit_bytes: int = 10 << 20
    """Largest file `edit_file` opens."""
    max_entries: int = 1000
    """Entries `list_dir` and `glob` return at most."""
    check_versions: bool = True
    """Refuse to write or edit a file that changed since the calling run read it (a
    lost update when runs share the workspace); the model is told to read it again."""


@contextlib.contextmanager
def tool_errors(path: str) -> Generator[None]:
    """Turn sandbox and file-system errors into `ToolError`s with a message for the model."""
    try:
        yield
    except SandboxViolation as exc:
        msg = f"refused: {exc}"
        raise ToolError(msg) from exc
    except FileNotFoundError as exc:
        msg = f"{path!r} does not exist in the workspace"
        raise ToolError(msg) from exc
    except IsADirectoryError as exc:
        msg = f"{path!r} is a directory"
        raise ToolError(msg) from exc
    except NotADirectoryError as exc:
        msg = f"{path!r}: a part of the path is not a directory"
        raise ToolError(msg) from exc
    except FileExistsError as exc:
        msg = f"{path!r} already exists"
        raise ToolError(msg) from exc
    except PermissionError as exc:
        msg = f"{path!r}: permission denied"
        raise ToolError(msg) from exc


def _refuse_binary(head: bytes, path: str, size: int) -> None:
    if b"\0" in head[:_SNIFF]:
        msg = f"{path!r} is a binary file ({size} bytes); not shown"
        raise ToolError(msg)


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _decode(data: bytes, path: str, size: int) -> str:
    _refuse_binary(data, path, size)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{path!r} is not UTF-8 text ({size} bytes); not shown"
        raise ToolError(msg) from exc


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob: `*` and `?` stay within one path segment, `**` spans any depth."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        c = pattern[i]
        close = pattern.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif close != -1:
            inner = pattern[i + 1 : close]
            inner = "^" + inner[1:] if inner.startswith("!") else inner
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def check_pattern(pattern: str) -> None:
    """Refuse glob patterns that name places outside the workspace."""
    if pattern.startswith("/") or ".." in pattern.split("/"):
        msg = (
            f"refused: the pattern {pattern!r} points outside the workspace; use a relative pattern"
        )
        raise ToolError(msg)


def file_tools(workspace: Workspace, options: FileToolOptions | None = None) -> list[Tool]:
    """The file tools for one workspace: read_file, write_file, edit_file, list_dir, glob."""
    opts = options or FileToolOptions()
    versions = FileVersions(workspace) if opts.check_versions else None
    return [
        _read(workspace, opts, versions),
        _write(workspace, opts, versions),
        _edit(workspace, opts, versions),
        _list(workspace, opts),
        _glob(workspace, opts),
    ]


@contextlib.contextmanager
def _writing(versions: FileVersions | None, ctx: RunContext[Any], path: str) -> Generator[None]:
    """The version check and write lock around a write (nothing when checks are off)."""
    if versions is None:
        yield
        return
    with versions.writing(ctx.run_id, path):
        yield


def _read(ws: Workspace, opts: FileToolOptions, versions: FileVersions | None) -> Tool:
    def read_file(
        ctx: RunContext[Any], path: str, start_line: int = 1, end_line: int | None = None
    ) -> str:
        """Read a UTF-8 text file of the workspace; lines are shown with their numbers.

        Args:
            ctx: The calling run (not shown to the model).
            path: File path relative to the workspace root.
            start_line: First line to show (1-based).
            end_line: Last line to show (inclusive); omit to read to the end.
        """
        if start_line < 1 or (end_line is not None and end_line < start_line):
            msg = "start_line must be >= 1 and end_line >= start_line"
            raise ToolError(msg)
        with tool_errors(path), _opened(ws, versions, ctx, path) as f:
            size = f.seek(0, 2)
            f.seek(0)
            _refuse_binary(f.read(_SNIFF), path, size)
            f.seek(0)
            if versions is not None:
                versions.saw(ctx.run_id, path, versions.of_file(f))
            return _numbered(f, path, size, start_line, end_line, opts.max_read_chars)

    return Tool.from_function(read_file, side_effects="none", timeout=30)


@contextlib.contextmanager
def _opened(
    ws: Workspace, versions: FileVersions | None, ctx: RunContext[Any], path: str
) -> Generator[BinaryIO]:
    """`ws.open_read`; a missing file is remembered as read absent (then raised)."""
    try:
        f = ws.open_read(path)
    except FileNotFoundError:
        if versions is not None:
            versions.saw(ctx.run_id, path, ABSENT)
        raise
    with f:
        yield f


def _write(ws: Workspace, opts: FileToolOptions, versions: FileVersions | None) -> Tool:
    def write_file(ctx: RunContext[Any], path: str, content: str) -> str:
        """Create or overwrite a text file in the workspace (parent directories are created).

        Args:
            ctx: The calling run (not shown to the model).
            path: File path relative to the workspace root.
            content: The complete new content of the file.
        """
        data = content.encode("utf-8")
        if len(data) > opts.max_write_bytes:
            msg = f"content is {len(data)} bytes; the limit is {opts.max_write_bytes}"
            raise ToolError(msg)
        with tool_errors(path), _writing(versions, ctx, path):
            rel = ws.write_bytes(path, data)
            if versions is not None:
                versions.saw(ctx.run_id, path, versions.of_bytes(data, path))
        return f"wrote {len(data)} bytes ({_line_count(content)} lines) to {rel}"

    return Tool.from_function(
        write_file, side_effects="idempotent", timeout=30, sinks={"path": "path"}
    )


def _edit(ws: Workspace, opts: FileToolOptions, versions: FileVersions | None) -> Tool:
    def edit_file(
        ctx: RunContext[Any], path: str, old_text: str, new_text: str, replace_all: bool = False
    ) -> str:
        """Replace an exact piece of text in a file of the workspace.

        `old_text` must occur exactly once (whitespace included) unless `replace_all` is set.

        Args:
            ctx: The calling run (not shown to the model).
            path: File path relative to the workspace root.
            old_text: The exact text to replace, with enough context to be unique.
            new_text: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring a unique one.
        """
        if not old_text:
            msg = "old_text is empty; give the exact text to replace"
            raise ToolError(msg)
        if old_text == new_text:
            msg = "old_text and new_text are the same; nothing to change"
            raise ToolError(msg)
        with tool_errors(path), _writing(versions, ctx, path):
            size = ws.stat(path).st_size
            if size > opts.max_edit_bytes:
                msg = f"{path!r} is {size} bytes; edit_file opens files up to {opts.max_edit_bytes}"
                raise ToolError(msg)
            text = _decode(ws.read_bytes(path), path, size)
            count = text.count(old_text)
            if count == 0:
                msg = (
                    f"old_text was not found in {path!r}; read the file and copy the text "
                    "exactly, whitespace and indentation included"
                )
                raise ToolError(msg)
            if count > 1 and not replace_all:
                lines = _occurrence_lines(text, old_text)
                msg = (
                    f"old_text occurs {count} times in {path!r} (at lines "
                    f"{', '.join(map(str, lines))}); include more surrounding text so it is "
                    "unique, or set replace_all"
                )
                raise ToolError(msg)
            first = text.count("\n", 0, text.index(old_text)) + 1
            updated = text.replace(old_text, new_text)
            data = updated.encode("utf-8")
            if len(data) > opts.max_write_bytes:
                msg = f"the edited file would be {len(data)} bytes; the limit is {opts.max_write_bytes}"
                raise ToolError(msg)
            rel = ws.write_bytes(path, data, create_dirs=False)
            if versions is not None:
                versions.saw(ctx.run_id, path, versions.of_bytes(data, path))
        where = f"from line {first}" if count == 1 else f"{count} occurrences"
        return f"edited {rel}: replaced {where}"

    return Tool.from_function(
        edit_file, side_effects="irreversible", timeout=30, sinks={"path": "path"}
    )


def _list(ws: Workspace, opts: FileToolOptions) -> Tool:
    def list_dir(path: str = ".") -> str:
        """List a directory of the workspace: one entry per line, directories end with `/`.

        Args:
            path: Directory path relative to the workspace root.
        """
        with tool_errors(path):
            entries = ws.list_dir(path)
        lines = [_describe(e.path, e.kind, e.size) for e in entries[: opts.max_entries]]
        if len(entries) > opts.max_entries:
            lines.append(f"[{len(entries) - opts.max_entries} more entries not shown]")
        return "\n".join(lines) or "(empty directory)"

    return Tool.from_function(list_dir, side_effects="none", timeout=30)


def _glob(ws: Workspace, opts: FileToolOptions) -> Tool:
    def glob(pattern: str, path: str = ".") -> str:
        """Find files whose paths match a glob pattern, e.g. `**/*.py` or `src/*.txt`.

        `*` and `?` match within one path segment; `**` matches any number of directories.

        Args:
            pattern: Glob pattern relative to `path`.
            path: Directory to search from, relative to the workspace root.
        """
        check_pattern(pattern)
        regex = glob_regex(pattern)
        found: list[str] = []
        with tool_errors(path):
            base = ws.relative(path)
            prefix = "" if base == "." else base + "/"
            for entry in ws.walk(path):
                rel = entry.path[len(prefix) :]
                if regex.match(rel):
                    found.append(entry.path + ("/" if entry.kind == "dir" else ""))
                    if len(found) > opts.max_entries:
                        break
        more = len(found) > opts.max_entries
        lines = found[: opts.max_entries] + (["[more matches not shown]"] if more else [])
        return "\n".join(lines) or f"no paths match {pattern!r}"

    return Tool.from_function(glob, side_effects="none", timeout=60)


_LONG_LINE = 1 << 16
"""Bytes of one line kept; the rest of a longer line is skipped, never held in memory."""


def _lines(f: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each cut at `_LONG_LINE` bytes (with a marker)."""
    while raw := f.readline(_LONG_LINE):
        if len(raw) == _LONG_LINE and not raw.endswith(b"\n"):
            while (rest := f.readline(_LONG_LINE)) and not rest.endswith(b"\n"):
                pass
            raw = raw[: _LONG_LINE - 4].rsplit(b" ", 1)[0] + b" [line cut]"
        yield raw


def _numbered(f: BinaryIO, path: str, size: int, start: int, end: int | None, budget: int) -> str:
    out: list[str] = []
    used = 0
    last = start - 1
    more = False
    for number, raw in enumerate(_lines(f), 1):
        if number < start:
            continue
        if end is not None and number > end:
            break
        line = _decode(raw, path, size).rstrip("\n")
        entry = f"{number:>6}\t{line}"
        if used + len(entry) + 1 > budget and out:
            more = True
            break
        out.append(entry)
        used += len(entry) + 1
        last = number
    if not out:
        return f"{path!r} has no line {start}" if size else f"{path!r} is empty"
    if more:
        out.append(f"[output truncated at line {last}; read on with start_line={last + 1}]")
    return "\n".join(out)


def _occurrence_lines(text: str, needle: str, limit: int = 10) -> list[int]:
    lines: list[int] = []
    at = text.find(needle)
    while at != -1 and len(lines) < limit:
        lines.append(text.count("\n", 0, at) + 1)
        at = text.find(needle, at + 1)
    return lines


def _describe(path: str, kind: str, size: int) -> str:
    name = path.rsplit("/", 1)[-1]
    if kind == "dir":
        return f"{name}/"
    if kind == "symlink":
        return f"{name}@ (symlink)"
    if kind == "other":
        return f"{name} (special file)"
    return f"{name}  {size} bytes"
