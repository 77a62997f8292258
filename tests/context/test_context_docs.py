"""The python blocks of docs/context.md and docs/memory.md run as written, in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("name", ["context.md", "memory.md"])
def test_doc_blocks_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = FENCE.findall((ROOT / "docs" / name).read_text(encoding="utf-8"))
    assert blocks
    namespace: dict[str, object] = {"__name__": f"docs_{name}"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{name}[block {number}]", "exec", dont_inherit=True), namespace)
    if name == "memory.md":
        assert (tmp_path / ".legato" / "legato.db").exists()
