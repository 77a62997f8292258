"""The door of `legato serve`: Host allow-list, Origin check and a per-start token.

A local web UI is reachable by every page the user's browser opens. So every request —
the page, its scripts, the API and the event streams — must name an allowed `Host`
(DNS rebinding sends a foreign one), must not come from a foreign `Origin` (a page on
another site posting to 127.0.0.1), and must carry the token printed at start: first in
the URL (`/?token=...`), which is traded for an HttpOnly, SameSite=Strict cookie, or as
`Authorization: Bearer <token>` for programs.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

__all__ = ["COOKIE", "Guard", "loopback_hosts"]

COOKIE = "legato_token"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def loopback_hosts(port: int) -> set[str]:
    """The `Host` values a browser sends for this machine's loopback addresses."""
    return {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}


@dataclass(kw_only=True)
class Guard:
    """ASGI middleware: refuse a foreign Host (403), a foreign Origin (403), no token (401)."""

    app: ASGIApp
    token: str
    hosts: set[str] = field(default_factory=lambda: set())
    """Allowed `Host` header values (`host:port`); the server fills them in once bound."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then hand it to the app."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if host not in self.hosts:
            await _refuse(send, 403, f"Host {host!r} is not allowed (DNS rebinding protection)")
            return
        origin = headers.get("origin")
        if origin is not None and origin not in {f"http://{h}" for h in self.hosts}:
            await _refuse(send, 403, f"requests from Origin {origin!r} are not allowed")
            return
        if headers.get("sec-fetch-site") == "cross-site":
            await _refuse(send, 403, "cross-site requests are not allowed")
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        offered = query.get("token", [None])[0]
        if scope["path"] == "/" and offered is not None:
            await self._login(send, offered)
            return
        if not self._authorized(headers):
            await _refuse(
                send, 401, "missing or wrong token: open the URL that `legato serve` printed"
            )
            return
        await self.app(scope, receive, send)

    def _valid(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.token.encode())

    def _authorized(self, headers: dict[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer ") and self._valid(bearer[7:].strip()):
            return True
        for item in headers.get("cookie", "").split(";"):
            name, _, value = item.strip().partition("=")
            if name == COOKIE and self._valid(value):
                return True
        return False

    async def _login(self, send: Send, offered: str) -> None:
        """Trade the token in the URL for a cookie, and drop it from the address bar."""
        if not self._valid(offered):
            await _refuse(send, 401, "wrong token: open the URL that `legato serve` printed")
            return
        cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", b"/"),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"cache-control", b"no-store"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps(
        {"error": "forbidden" if status == 403 else "unauthorized", "message": message}
    )
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body.encode())).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})
