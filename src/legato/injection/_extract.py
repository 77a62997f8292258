"""Typed extraction from quarantined text, under the same provenance rules.

`extraction_tool(defence)` is a tool the model calls with a handle and a kind; it returns
the values of that kind found in the quarantined text, or says none was found (never a
guess). The values reach the model as a tool result, so they are untrusted like the text
they came from: used as a sink they are blocked (or asked, where the grant lets that sink
come from data). The default extractor is deterministic (patterns per kind); a
quarantined model can be plugged in as `extractor`, with no tools, for kinds patterns
cannot find.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from legato.tools import RunContext, Tool

if TYPE_CHECKING:
    from legato.injection._defence import InjectionDefence

__all__ = ["ExtractKind", "extract_values", "extraction_tool"]

ExtractKind: TypeAlias = Literal["email", "iban", "url", "amount", "date", "phone"]
"""The kinds of value the default extractor finds."""

_PATTERNS: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "iban": re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b"),
    "url": re.compile(r"https?://[^\s<>\"')\]]+"),
    "amount": re.compile(r"(?<![\w.])\d{1,9}(?:[.,]\d{2})?(?![\w.])"),
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "phone": re.compile(r"\+\d[\d ().-]{6,}\d"),
}


def extract_values(text: str, kind: str) -> list[str]:
    """The distinct values of `kind` in `text`, in order of appearance."""
    pattern = _PATTERNS.get(kind)
    if pattern is None:
        return []
    seen: dict[str, None] = {}
    for match in pattern.finditer(text):
        seen.setdefault(match.group(0).rstrip(".,;"), None)
    return list(seen)


Extractor = Callable[[str, str], list[str]]


def extraction_tool(
    defence: InjectionDefence, *, extractor: Extractor = extract_values, name: str = "extract"
) -> Tool:
    """A read-only tool that extracts typed values from a quarantine handle."""

    def extract(ctx: RunContext[Any], handle: str, kind: ExtractKind) -> str:
        """Extract values of one kind from quarantined content.

        Args:
            ctx: The run (the handle must belong to it).
            handle: The quarantine handle, e.g. `$q1`.
            kind: What to extract: email, iban, url, amount, date or phone.
        """
        text, source = defence.dereference(ctx.run_id, handle)
        values = extractor(text, kind)
        if not values:
            return f"not found: no {kind} in {handle}"
        return f"{kind} values in {handle} (untrusted, from {source.describe()}): " + ", ".join(
            values
        )

    return Tool.from_function(extract, name=name, metadata={"takes_handles": True})
