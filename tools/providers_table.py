"""Rewrite the capabilities table in docs/providers.md from the providers' profiles.

Run from the repository root: `python tools/providers_table.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from legato.models._capabilities import END, START, capabilities_table

DOCS = Path(__file__).resolve().parent.parent / "docs" / "providers.md"


def main() -> int:
    """Replace the text between the markers (inclusive) with the generated table."""
    text = DOCS.read_text(encoding="utf-8")
    before, found, rest = text.partition(START)
    if not found:
        sys.stderr.write(f"{DOCS}: no capabilities table marker\n")
        return 1
    _, _, after = rest.partition(END + "\n")
    DOCS.write_text(before + capabilities_table() + after, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
