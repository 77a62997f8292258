"""The provider x feature table in docs/providers.md lists exactly the suite's cases."""

from __future__ import annotations

from pathlib import Path

from conformance_cases import CASES

DOC = Path(__file__).resolve().parents[3] / "docs" / "providers.md"


def _table_rows() -> list[list[str]]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| provider | streaming"))
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_every_case_has_a_row_and_every_row_a_case() -> None:
    names = [row[0].split(" ")[0] for row in _table_rows()]
    assert sorted(names) == sorted(c.id for c in CASES)


def test_the_table_matches_what_the_cases_declare() -> None:
    rows = {row[0].split(" ")[0]: row for row in _table_rows()}
    for case in CASES:
        deltas = rows[case.id][2]
        assert ("fragments" in deltas) is case.streams_arguments, case.id
        cost = rows[case.id][8]
        assert (cost == "free") is (case.price_provider is None), case.id
