"""docs/providers.md's capabilities table is the one the profiles generate."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from legato.models import anthropic
from legato.models._capabilities import END, START, capabilities_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def _documented() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(START)
    return text[start : text.index(END, start) + len(END)] + "\n"


def test_the_docs_table_matches_the_profiles() -> None:
    assert _documented() == capabilities_table(), "run: python tools/providers_table.py"


def test_twin_a_changed_flag_changes_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    before = capabilities_table()
    fewer = dataclasses.replace(anthropic.PROFILE, builtin_tools=frozenset({"web_search"}))
    monkeypatch.setattr(anthropic, "PROFILE", fewer)
    assert capabilities_table() != before
    assert _documented() != capabilities_table()
