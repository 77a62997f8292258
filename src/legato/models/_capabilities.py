"""The table of what each provider supports, generated from the code's capability flags.

docs/providers.md holds its output between two markers; `tests/models/test_capabilities.py`
checks that the two agree, and `tools/providers_table.py` rewrites the docs from it.
"""

from __future__ import annotations

from collections.abc import Iterator

from legato.models._base import ModelProfile
from legato.models.builtin import BUILTIN_KINDS

__all__ = ["START", "END", "capabilities_table", "provider_profiles"]

START = "<!-- capabilities table: generated from the profiles, do not edit by hand -->"
END = "<!-- end of the capabilities table -->"


def provider_profiles() -> Iterator[tuple[str, ModelProfile, str, bool]]:
    """(provider prefix, model profile, how reasoning goes back, priced) for every provider."""
    from legato.models import anthropic, gemini, ollama, openai_chat, openai_responses
    from legato.models.openai_compatible import PROFILES

    yield "openai", openai_responses.PROFILE, "encrypted items; clear `reasoning_text` items", True
    yield "anthropic", anthropic.PROFILE, "signed thinking blocks", True
    yield "gemini", gemini.PROFILE, "thought signatures", True
    yield "ollama", ollama.PROFILE, "—", False
    for server in (openai_chat.OPENAI, *PROFILES.values()):
        if server.reasoning_field is not None:
            scope = "every turn" if server.reasoning_back == "always" else "its tool loop"
            back = f"`{server.reasoning_field}` ({scope})"
        elif server.reasoning_chunks:
            back = "`thinking` chunks (its tool loop)"
        else:
            back = "—"
        yield server.name, server.model, back, server.price_provider is not None


def _yes(flag: bool) -> str:
    return "yes" if flag else "—"


def capabilities_table() -> str:
    """The Markdown table, between its markers."""
    head = [
        "provider",
        "tools",
        "parallel calls",
        "structured output",
        "images",
        "documents",
        "thinking budget",
        "reasoning sent back",
        *(f"`{kind}`" for kind in BUILTIN_KINDS),
        "tool search",
        "priced",
    ]
    lines = [START, "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, profile, back, priced in provider_profiles():
        row = [
            f"`{name}`",
            _yes(profile.supports_tools),
            _yes(profile.parallel_tool_calls),
            "native" if profile.native_structured_output else "via a tool",
            _yes(profile.supports_images),
            _yes(profile.supports_documents),
            _yes(profile.supports_thinking),
            back,
            *(_yes(kind in profile.builtin_tools) for kind in BUILTIN_KINDS),
            "provider's" if profile.tool_search else "legato's catalog",
            "yes" if priced else "free / unpriced",
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines.append(END)
    return "\n".join(lines) + "\n"
