"""The options `run`, `chat` and `serve` share, with one wording and one default each."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["AskOption", "AutoOption", "BaseUrlOption", "ModelOption", "ToolsOption"]

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="A 'provider:model' string (default: LEGATO_MODEL, else the first provider whose "
        "key is set, else the local model).",
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option("--base-url", help="Send the model's requests to this server instead."),
]
ToolsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        "-t",
        metavar="MODULE:OBJECT",
        help="Tools to load, as module:object (repeatable).",
    ),
]
AskOption = Annotated[
    list[str] | None,
    typer.Option(
        "--ask",
        metavar="TOOL",
        help="Ask before every call of this tool, even a read-only one (repeatable; side-effecting "
        "tools ask anyway).",
    ),
]
AutoOption = Annotated[
    list[str] | None,
    typer.Option(
        "--auto",
        metavar="TOOL",
        help="Run this side-effecting tool without asking (repeatable; the default is to ask).",
    ),
]
