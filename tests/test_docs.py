"""Every ```python block in README.md, docs/*.md runs as written, top to bottom per file.

Blocks fenced as ```py (not ```python) are shown but not run — for snippets that need a
provider key or a network. Examples in examples/ run in their own tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def python_blocks(path: Path) -> list[str]:
    return FENCE.findall(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_doc_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    for number, block in enumerate(python_blocks(path), start=1):
        code = compile(block, f"{path.name}[block {number}]", "exec", dont_inherit=True)
        exec(code, namespace)


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
