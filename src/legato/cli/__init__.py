"""The `legato` command line (extra `cli`: typer and rich)."""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Entry point of the `legato` command."""
    try:
        from legato.cli._app import app
    except ModuleNotFoundError as exc:  # typer or rich missing
        from legato.exceptions import MissingDependency

        raise SystemExit(str(MissingDependency(exc.name or "typer", "cli"))) from None
    app()
