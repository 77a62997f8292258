"""docs/contracts.md: its python blocks run as written, top to bottom (like tests/test_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_contracts_doc_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = FENCE.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "docs_contracts"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"contracts.md[block {number}]", "exec", dont_inherit=True), namespace)
