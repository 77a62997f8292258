"""Running the web UI: bind (loopback unless told otherwise), print the URL, serve."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from legato.exceptions import ConfigurationError, PortInUse
from legato.web._app import create_app

if TYPE_CHECKING:
    from legato.agent import Agent
    from legato.store import Store

__all__ = ["bind", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine's loopback interface only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`; `PortInUse` when another process holds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from None
        msg = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise ConfigurationError(msg) from None
    sock.setblocking(False)
    return sock


def serve(
    agent: Agent[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    store: Store | None = None,
    allow_remote: bool = False,
    token: str | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the web UI for `agent` until interrupted (Ctrl-C ends it quietly and returns).

    Binds `host:port` (port 0: any free port); a host other than loopback needs
    `allow_remote=True` (anyone who can reach it and holds the token can approve calls).
    `announce` receives the URL to open, token included.
    """
    if not is_loopback(host) and not allow_remote:
        msg = (
            f"refusing to listen on {host!r}: the web UI can approve tool calls, so it listens "
            "on 127.0.0.1 only unless you pass --allow-remote"
        )
        raise ConfigurationError(msg)
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        from legato.exceptions import MissingDependency

        raise MissingDependency(exc.name or "uvicorn", "web") from None
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    app = create_app(agent, store=store, token=token, port=bound)
    if not is_loopback(host):
        app.allow(bound, extra={f"{host}:{bound}"})
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/?token={app.token}"
    if not is_loopback(host):
        _stderr(
            f"warning: listening on {host}, not loopback: anyone who can reach it with the "
            "token can approve tool calls"
        )

    def run() -> None:
        # every open tab holds a notices stream that never ends by itself: on Ctrl-C they
        # get a few seconds, then they are cut (the runs are cancelled at shutdown either way)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
        )
        asyncio.run(_serve_then_announce(uvicorn.Server(config), sock, url, announce))

    _until_interrupted(run)


async def _serve_then_announce(
    server: Any, sock: socket.socket, url: str, announce: Callable[[str], None] | None
) -> None:
    """Serve on `sock`; give out the address once the server has started.

    By then uvicorn handles Ctrl-C, so a Ctrl-C from someone who saw the address stops the
    server cleanly. Before, the address came out first, and a Ctrl-C right after it could land
    in uvicorn's logging setup (escaping as a `RuntimeError` from a handler lock) or in the
    event loop's setup (leaving the loop unclosed): a traceback either way.
    """
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.wait([serving], timeout=0.01)
    if server.started:
        (announce or _announce)(url)
    await serving


def _until_interrupted(run: Callable[[], None]) -> None:
    """Call `run`; a Ctrl-C once the address is out returns instead of a traceback.

    uvicorn stops on Ctrl-C, then raises it again; before uvicorn starts it is raised as is.
    """
    try:
        run()
    except KeyboardInterrupt:
        pass


def _stderr(text: str) -> None:
    import sys

    sys.stderr.write(text + "\n")


def _announce(url: str) -> None:
    _stderr(f"legato web UI: {url}")
