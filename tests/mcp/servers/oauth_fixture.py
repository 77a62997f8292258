"""An MCP server behind OAuth, with its own small authorization server, for tests.

One ASGI app on 127.0.0.1: `/mcp` is a legato MCP server (Streamable HTTP) that answers
401 with a `WWW-Authenticate` challenge unless the request carries an access token this
app issued; the other routes are an authorization server (RFC 9728 protected-resource
metadata, RFC 8414 metadata, RFC 7591 registration, an authorization endpoint that
approves at once by redirecting, a token endpoint that checks PKCE). Switches on the
`OAuthServer` object make it deny consent, fail the token request, or show a login page.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import secrets
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

from legato import tool
from legato.mcp.server import build_server

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

REGISTERED_SECRET = "registered-secret-4f9a1c"
"""The client secret every dynamic registration is given (tests look for it in errors)."""


@tool(side_effects="none")
def whoami() -> str:
    """Say who is calling."""
    return "an authorized client"


@dataclass
class OAuthServer:
    """The app's state and switches; `url` is set once it listens."""

    url: str = ""
    deny: bool = False
    """The authorization endpoint redirects back with `error=access_denied`."""
    login_page: bool = False
    """The authorization endpoint answers 200 with a page (a person is needed)."""
    token_error: bool = False
    """The token endpoint refuses, echoing the code and the client secret it was sent."""
    registrations: int = 0
    refreshes: int = 0
    authorizations: int = 0
    scopes: list[str | None] = field(default_factory=lambda: list[str | None]())
    """The `scope` of each authorization request."""
    token_requests: int = 0
    tokens: set[str] = field(default_factory=lambda: set[str]())
    _codes: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    _refresh: set[str] = field(default_factory=lambda: set[str]())

    # -- the protected resource -------------------------------------------------------------

    def _challenge(self) -> dict[str, str]:
        metadata = f"{self.url}/.well-known/oauth-protected-resource/mcp"
        return {"www-authenticate": f'Bearer resource_metadata="{metadata}"'}

    def _metadata(self, path: str) -> dict[str, Any] | None:
        if path == "/.well-known/oauth-protected-resource/mcp":
            return {
                "resource": f"{self.url}/mcp",
                "authorization_servers": [self.url],
                "scopes_supported": ["notes:read"],
            }
        if path == "/.well-known/oauth-authorization-server":
            return {
                "issuer": self.url,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/oauth/token",
                "registration_endpoint": f"{self.url}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
            }
        return None

    # -- the authorization server ----------------------------------------------------------

    def _register(self, body: bytes) -> tuple[int, dict[str, Any]]:
        self.registrations += 1
        request = json.loads(body)
        return 201, {
            **request,
            "client_id": f"client-{self.registrations}",
            "client_secret": REGISTERED_SECRET,
            "token_endpoint_auth_method": "client_secret_post",
        }

    def _authorize(self, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        self.authorizations += 1
        self.scopes.append(query.get("scope", [None])[0])
        if self.login_page:
            return 200, {"content-type": "text/html"}, b"<form>Sign in</form>"
        back = query["redirect_uri"][0]
        state = query.get("state", [""])[0]
        if self.deny:
            answer = {"error": "access_denied", "error_description": "the user said no"}
        else:
            code = secrets.token_urlsafe(16)
            self._codes[code] = query["code_challenge"][0]
            answer = {"code": code}
        return 302, {"location": f"{back}?{urlencode({**answer, 'state': state})}"}, b""

    def _token(self, body: bytes) -> tuple[int, dict[str, Any]]:
        self.token_requests += 1
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if self.token_error:
            return 400, {
                "error": "invalid_grant",
                "error_description": (
                    f"code={form.get('code')} rejected for client_secret={form.get('client_secret')}"
                ),
            }
        if form.get("grant_type") == "refresh_token":
            if form.get("refresh_token") not in self._refresh:
                return 400, {"error": "invalid_grant", "error_description": "unknown refresh token"}
            self.refreshes += 1
            return 200, self._issue()
        challenge = self._codes.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        if challenge is None or digest.decode().rstrip("=") != challenge:
            return 400, {"error": "invalid_grant", "error_description": "bad code or verifier"}
        return 200, self._issue()

    def _issue(self) -> dict[str, Any]:
        token, refresh = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        self.tokens.add(token)
        self._refresh.add(refresh)
        return {
            "access_token": token,
            "refresh_token": refresh,
            "token_type": "Bearer",
            "expires_in": 3600,
        }

    # -- ASGI --------------------------------------------------------------------------------

    def app(self, mcp_app: Any) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
        """The ASGI app: `/mcp` behind the bearer check, the rest the authorization server."""

        async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await mcp_app(scope, receive, send)
                return
            path: str = scope["path"]
            if path.startswith("/mcp"):
                headers = dict(scope["headers"])
                bearer = headers.get(b"authorization", b"").decode()
                if bearer.removeprefix("Bearer ") in self.tokens:
                    await mcp_app(scope, receive, send)
                    return
                await _json(send, 401, {"error": "invalid_token"}, self._challenge())
                return
            body = await _body(receive)
            metadata = self._metadata(path)
            if metadata is not None:
                await _json(send, 200, metadata)
            elif path == "/register":
                await _json(send, *self._register(body))
            elif path == "/authorize":
                query = parse_qs(scope["query_string"].decode())
                status, headers, content = self._authorize(query)
                await _send(send, status, headers, content)
            elif path == "/oauth/token":
                await _json(send, *self._token(body))
            else:
                await _json(send, 404, {"error": "not_found"})

        return asgi


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send(send: Send, status: int, headers: dict[str, str], content: bytes) -> None:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    raw.append((b"content-length", str(len(content)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": content})


async def _json(
    send: Send, status: int, data: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    content = json.dumps(data).encode()
    await _send(send, status, {"content-type": "application/json", **(headers or {})}, content)


@contextlib.asynccontextmanager
async def running(server: OAuthServer) -> AsyncGenerator[OAuthServer]:
    """Serve `server` on a free 127.0.0.1 port in this event loop until the block ends."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server.url = f"http://127.0.0.1:{port}"
    mcp_app = build_server([whoami]).streamable_http_app(
        streamable_http_path="/mcp", host="127.0.0.1"
    )
    config = uvicorn.Config(
        server.app(mcp_app), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )

    class QuietServer(uvicorn.Server):
        # Embedded in a test's event loop: leave the process's signal handlers alone (the
        # fixture's setup and teardown run in different event-loop runs, so handlers saved
        # and restored around `serve` would leak into later tests).
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None]:
            yield

    web = QuietServer(config)
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            task.result()  # a failure to start: raise it
        await asyncio.sleep(0.01)
    try:
        yield server
    finally:
        web.should_exit = True
        await task
