"""The workspace tools: files, search, shell and Python, alone and through the agent loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from legato import Agent, ToolError
from legato.events import ToolCallFinished
from legato.exceptions import MissingDependency
from legato.sandbox import Limits, Workspace
from legato.testing import ScriptedModel, call, reply
from legato.tools import RunContext, Toolset
from legato.tools.builtin import find_ripgrep, workspace_tools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def main():\n    print('hello')\n\nmain()\n")
    (ws / "README.md").write_text("# Demo\nhello world\n")
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0rest")
    (tmp_path / "secret.txt").write_text("TOP-SECRET hello\n")
    return ws


@pytest.fixture
def tools(root: Path) -> Toolset:
    return workspace_tools(Workspace(root), limits=Limits(timeout=20))


async def use(toolset: Toolset, name: str, **arguments: Any) -> str:
    tool = toolset.get(name)
    assert tool is not None
    ctx: RunContext[None] = RunContext(deps=None, run_id="t", tool_name=name)
    return str(await tool.invoke(tool.validate(arguments), ctx))


def test_side_effects_and_timeouts_are_declared(tools: Toolset) -> None:
    declared = {t.name: t.side_effects for t in tools}
    assert declared == {
        "read_file": "none",
        "write_file": "idempotent",
        "edit_file": "irreversible",
        "list_dir": "none",
        "glob": "none",
        "grep": "none",
        "shell": "irreversible",
        "python": "irreversible",
    }
    assert all(t.timeout is not None for t in tools)
    shell = tools.get("shell")
    assert shell is not None and "in a sandbox" in shell.description
    read_only = workspace_tools(Workspace("/"), read_only=True)
    assert {t.side_effects for t in read_only} == {"none"}


async def test_read_file_with_line_ranges(tools: Toolset) -> None:
    assert await use(tools, "read_file", path="src/app.py") == (
        "     1\tdef main():\n     2\t    print('hello')\n     3\t\n     4\tmain()"
    )
    assert await use(tools, "read_file", path="src/app.py", start_line=2, end_line=2) == (
        "     2\t    print('hello')"
    )
    assert "has no line 99" in await use(tools, "read_file", path="src/app.py", start_line=99)
    with pytest.raises(ToolError, match="start_line"):
        await use(tools, "read_file", path="src/app.py", start_line=3, end_line=1)


async def test_read_file_refuses_binary_and_limits_size(root: Path) -> None:
    from legato.tools.builtin import FileToolOptions

    small = workspace_tools(
        Workspace(root), commands=False, options=FileToolOptions(max_read_chars=30)
    )
    with pytest.raises(ToolError, match="binary file"):
        await use(small, "read_file", path="logo.png")
    (root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ToolError, match="not UTF-8"):
        await use(small, "read_file", path="latin1.txt")
    out = await use(small, "read_file", path="src/app.py")
    assert out == "     1\tdef main():\n[output truncated at line 1; read on with start_line=2]"
    with pytest.raises(ToolError, match="does not exist"):
        await use(small, "read_file", path="nope.txt")
    with pytest.raises(ToolError, match="is a directory"):
        await use(small, "read_file", path="src")


async def test_read_file_cuts_very_long_lines(tools: Toolset, root: Path) -> None:
    (root / "minified.js").write_bytes(b"var a = 1; " * 20_000 + b"\nsecond line\n")
    out = await use(tools, "read_file", path="minified.js", start_line=1)
    first, second = out.split("\n")
    assert first.endswith("[line cut]") and len(first) < 70_000
    assert second == "     2\tsecond line"


async def test_write_and_edit(tools: Toolset, root: Path) -> None:
    assert await use(tools, "write_file", path="docs/a.txt", content="one\ntwo\n") == (
        "wrote 8 bytes (2 lines) to docs/a.txt"
    )
    assert (root / "docs" / "a.txt").read_text() == "one\ntwo\n"
    out = await use(tools, "edit_file", path="docs/a.txt", old_text="two", new_text="2")
    assert out == "edited docs/a.txt: replaced from line 2"
    assert (root / "docs" / "a.txt").read_text() == "one\n2\n"


async def test_edit_errors_are_clear_and_change_nothing(tools: Toolset, root: Path) -> None:
    (root / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"occurs 2 times in 'dup.txt' \(at lines 1, 3\)"):
        await use(tools, "edit_file", path="dup.txt", old_text="x = 1", new_text="x = 3")
    with pytest.raises(ToolError, match="was not found"):
        await use(tools, "edit_file", path="dup.txt", old_text="z = 1", new_text="z = 3")
    with pytest.raises(ToolError, match="empty"):
        await use(tools, "edit_file", path="dup.txt", old_text="", new_text="a")
    with pytest.raises(ToolError, match="the same"):
        await use(tools, "edit_file", path="dup.txt", old_text="y", new_text="y")
    assert (root / "dup.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    out = await use(
        tools, "edit_file", path="dup.txt", old_text="x = 1", new_text="x = 3", replace_all=True
    )
    assert out == "edited dup.txt: replaced 2 occurrences"
    assert (root / "dup.txt").read_text() == "x = 3\ny = 2\nx = 3\n"


async def test_list_and_glob(tools: Toolset, root: Path) -> None:
    assert await use(tools, "list_dir") == "README.md  19 bytes\nlogo.png  15 bytes\nsrc/"
    (root / "src" / "pkg").mkdir()
    (root / "src" / "pkg" / "mod.py").write_text("")
    assert await use(tools, "glob", pattern="**/*.py") == "src/app.py\nsrc/pkg/mod.py"
    assert await use(tools, "glob", pattern="*.py", path="src") == "src/app.py"
    assert await use(tools, "glob", pattern="src/[a-m]*") == "src/app.py"
    assert "no paths match" in await use(tools, "glob", pattern="*.rs")
    with pytest.raises(ToolError, match="refused"):
        await use(tools, "glob", pattern="/etc/*")


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_grep(root: Path, engine: str) -> None:
    if engine == "ripgrep" and find_ripgrep() is None:
        pytest.skip("ripgrep is not installed")
    toolset = workspace_tools(Workspace(root), commands=False, ripgrep=engine == "ripgrep")
    assert await use(toolset, "grep", pattern="hello") == (
        "README.md:2:hello world\nsrc/app.py:2:    print('hello')"
    )
    assert await use(toolset, "grep", pattern="HELLO", glob="*.py", ignore_case=True) == (
        "src/app.py:2:    print('hello')"
    )
    assert await use(toolset, "grep", pattern="main", path="src") == (
        "src/app.py:1:def main():\nsrc/app.py:4:main()"
    )
    assert "no matches" in await use(toolset, "grep", pattern="nothing-like-this")
    with pytest.raises(ToolError, match="refused"):
        await use(toolset, "grep", pattern="SECRET", path="..")
    with pytest.raises(ToolError, match="refused"):
        await use(toolset, "grep", pattern="SECRET", glob="../*")
    with pytest.raises(ToolError):
        await use(toolset, "grep", pattern="(unclosed")


def test_asking_for_ripgrep_when_missing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import legato.tools.builtin as builtin

    monkeypatch.setattr(builtin, "find_ripgrep", lambda: None)
    with pytest.raises(MissingDependency):
        workspace_tools(Workspace(root), commands=False, ripgrep=True)


async def test_shell_and_python_run_in_the_sandbox(tools: Toolset, root: Path) -> None:
    out = await use(tools, "shell", command="ls; echo made > made.txt")
    assert out.startswith("exit code 0") and "README.md" in out
    assert (root / "made.txt").read_text() == "made\n"
    out = await use(tools, "shell", command="pwd", cwd="src")
    assert str(root / "src") in out
    out = await use(tools, "python", code="import os; print(sorted(os.listdir('.')))")
    assert "'README.md'" in out and "'src'" in out
    out = await use(tools, "shell", command="exit 4")
    assert out == "exit code 4"
    with pytest.raises(ToolError, match="refused"):
        await use(tools, "shell", command="touch pwned", cwd="../")
    assert not (root.parent / "pwned").exists()


async def test_unsandboxed_tools_are_labelled(root: Path) -> None:
    toolset = workspace_tools(Workspace(root), sandbox="none")
    shell = toolset.get("shell")
    assert shell is not None and "WITHOUT a sandbox" in shell.description
    out = await use(toolset, "shell", command="echo $HOME")
    assert str(root) in out


def test_smuggled_paths_reach_the_model_as_errors_and_nothing_runs(root: Path) -> None:
    """Through the real loop: every refused call is an error result the model sees."""
    toolset = workspace_tools(Workspace(root))
    model = ScriptedModel(
        [
            reply(
                call("read_file", {"path": "../secret.txt"}, id="c1"),
                call("write_file", {"path": "/tmp/pwned-by-legato.txt", "content": "x"}, id="c2"),
                call("shell", {"command": "touch pwned", "cwd": "/"}, id="c3"),
                call(
                    "edit_file",
                    {"path": "src/app.py", "old_text": "hello", "new_text": "bye"},
                    id="c4",
                ),
            ),
            "done",
        ]
    )
    agent = Agent(model, tools=[toolset])
    result = agent.run_sync("try to escape")
    finished = [e for e in result.journal.events if isinstance(e, ToolCallFinished)]
    by_id = {e.call.id: e for e in finished}
    for call_id in ("c1", "c2", "c3"):
        assert by_id[call_id].outcome == "error"
        assert by_id[call_id].result.is_error
        assert "refused" in by_id[call_id].result.text
    assert by_id["c4"].outcome == "ok"
    assert not Path("/tmp/pwned-by-legato.txt").exists()
    assert not (root / "pwned").exists() and not Path("/pwned").exists()
    assert "bye" in (root / "src" / "app.py").read_text()
