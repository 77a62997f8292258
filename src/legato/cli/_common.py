"""What the commands share: loading objects and tools, choosing the model, reading the prompt."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from legato.agent_file import load_object, load_tools
from legato.exceptions import ConfigurationError, UnknownModel
from legato.models import Model, infer_model

if TYPE_CHECKING:
    from legato.store import SQLiteStore

__all__ = [
    "DEFAULT_STORE",
    "INSTALL_HINT",
    "load_object",
    "load_tools",
    "open_sqlite",
    "read_prompt",
    "resolve_model",
]

DEFAULT_STORE = ".legato/legato.db"
"""Where `chat`, `serve` and `runs` keep runs, sessions and approvals unless told otherwise."""

INSTALL_HINT = "pip install 'legato[{extra}]' (from a legato checkout: pip install -e '.[{extra}]')"
"""How to install an extra, for both a user of the wheel and a user of a checkout."""


def _with_base_url(provider: str, name: str, base_url: str) -> Model:
    """`provider:name` talking to `base_url` instead of the provider's default server."""
    if provider in ("openai", "openai-responses"):
        from legato.models.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, base_url=base_url)
    if provider == "openai-chat":
        from legato.models.openai_chat import OpenAIChatModel

        return OpenAIChatModel(name, base_url=base_url)
    if provider == "anthropic":
        from legato.models.anthropic import AnthropicModel

        return AnthropicModel(name, base_url=base_url)
    if provider in ("gemini", "google"):
        from legato.models.gemini import GeminiModel

        return GeminiModel(name, base_url=base_url)
    if provider == "ollama":
        from legato.models.ollama import OllamaModel

        return OllamaModel(name, base_url=base_url)
    from legato.models.openai_compatible import PROFILES, compatible_model

    if provider in PROFILES:
        return compatible_model(provider, name, base_url=base_url)
    msg = f"--base-url does not apply to {provider}: models"
    raise ConfigurationError(msg)


def resolve_model(
    spec: str | None, *, base_url: str | None = None, environ: Mapping[str, str] | None = None
) -> Model:
    """The model a command uses: `spec`, else `LEGATO_MODEL`, else one whose key is set.

    `base_url` points a provider at another server (a proxy, a local OpenAI-compatible one).
    """
    from legato.models import default_model

    chosen = spec or default_model(os.environ if environ is None else environ)
    if base_url is None:
        return infer_model(chosen)
    provider, sep, name = chosen.partition(":")
    if not sep or not name:
        from legato.models import known_providers

        raise UnknownModel(chosen, known_providers())
    return _with_base_url(provider, name, base_url)


def read_prompt(argument: str | None, stdin: TextIO | None = None) -> str:
    """The prompt: the argument, or standard input when it is `-` or missing and piped."""
    source = sys.stdin if stdin is None else stdin
    if argument is not None and argument != "-":
        if not argument.strip():
            msg = "no prompt: the prompt argument is empty"
            raise ConfigurationError(msg)
        return argument
    if argument is None and source.isatty():
        msg = "no prompt: pass it as an argument, or pipe it on standard input ('-')"
        raise ConfigurationError(msg)
    text = source.read().strip()
    if not text:
        msg = "no prompt: standard input was empty"
        raise ConfigurationError(msg)
    return text


def open_sqlite(target: str | Path) -> SQLiteStore:
    """The SQLite store at `target` (its folder made if missing); a clear error if it cannot be.

    `:memory:` is a store that lives as long as the process.
    """
    from legato.store import SQLiteStore

    path = Path(target)
    if str(target) != ":memory:":
        if path.is_dir():
            msg = f"--store {str(target)!r} is a directory; give the path of a SQLite file in it"
            raise ConfigurationError(msg)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            msg = f"--store {str(target)!r}: cannot make its folder: {exc.strerror}"
            raise ConfigurationError(msg) from None
    try:
        return SQLiteStore(path if str(target) != ":memory:" else ":memory:")
    except sqlite3.Error as exc:
        msg = f"--store {str(target)!r} is not a usable SQLite file: {exc}"
        raise ConfigurationError(msg) from None
