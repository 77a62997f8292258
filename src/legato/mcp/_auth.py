"""MCP authorization: OAuth 2.1 for servers reached over HTTP.

```python
server = HTTPServer(url="https://example.com/mcp", auth=MCPOAuth(authorize=ask_in_terminal()))
```

The protocol itself (protected-resource and authorization-server metadata discovery,
dynamic client registration or a client metadata document, PKCE, the token exchange,
refresh, scope step-up) is the official SDK's `OAuthClientProvider`. legato adds what an
application decides: who the client is (`MCPOAuth`), where tokens are kept (`TokenStore`:
in memory, or a 0600 JSON file), how the person approves (an `Authorizer` that gets the
authorization URL and returns the code the server redirected back with), and one typed
error, `MCPAuthorizationError`, whose message never carries a token, code or secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import sys
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, cast
from urllib.parse import parse_qs, urljoin, urlsplit

from legato.exceptions import ConfigurationError, LegatoError, MCPAuthorizationError
from legato.messages import JsonValue

if TYPE_CHECKING:
    import httpx2
    from mcp.client.auth import AuthorizationCodeResult
    from mcp.client.auth.oauth2 import OAuthContext
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = [
    "AuthorizationCode",
    "Authorizer",
    "FileTokenStore",
    "MCPOAuth",
    "MemoryTokenStore",
    "TokenStore",
    "ask_in_terminal",
    "OAuthSession",
    "follow_redirect",
    "parse_redirect",
]

logger = logging.getLogger("legato.mcp")

TokenEndpointAuth: TypeAlias = Literal["client_secret_basic", "client_secret_post", "none"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthorizationCode:
    """What the authorization server sent back to the redirect URI."""

    code: str = field(repr=False)
    state: str | None = None
    """Checked against the state the client sent (a mismatch fails the flow)."""
    iss: str | None = None
    """The issuer (RFC 9207), when the server names itself in the redirect."""


Authorizer: TypeAlias = Callable[[str], Awaitable[AuthorizationCode]]
"""The interactive step: gets the authorization URL, returns the code the server redirected
back with. Raise to abort; the client then raises `MCPAuthorizationError`."""


def parse_redirect(url: str) -> AuthorizationCode:
    """Read the code, state and issuer from the address the server redirected to.

    Raises `ValueError` when the server refused (`error=...`) or sent no code.
    """
    query = parse_qs(urlsplit(url.strip()).query)
    error = query.get("error")
    if error:
        description = query.get("error_description", [""])[0]
        msg = f"the authorization server refused: {error[0]}" + (
            f" ({description})" if description else ""
        )
        raise ValueError(msg)
    code = query.get("code")
    if not code or not code[0]:
        msg = "the redirect carries no authorization code"
        raise ValueError(msg)
    state = query.get("state")
    iss = query.get("iss")
    return AuthorizationCode(
        code=code[0], state=state[0] if state else None, iss=iss[0] if iss else None
    )


def follow_redirect(*, timeout: float = 30.0) -> Authorizer:
    """An authorizer for servers that approve without a person (tests, headless agents).

    It sends a GET to the authorization URL, does not follow the answer, and reads the
    code from the redirect's `Location`. A server that shows a login page instead (any
    answer but a redirect) fails the flow with a message saying so.
    """

    async def authorize(url: str) -> AuthorizationCode:
        import httpx2

        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            response = await http.get(url)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            msg = (
                f"the authorization endpoint answered HTTP {response.status_code} instead of "
                "redirecting back (it needs a person: use ask_in_terminal() or your own authorizer)"
            )
            raise ValueError(msg)
        return parse_redirect(urljoin(url, location))

    return authorize


def ask_in_terminal(
    *,
    read: Callable[[str], str] = input,
    write: Callable[[str], object] | None = None,
) -> Authorizer:
    """An authorizer for command-line programs.

    It prints the authorization URL (to stderr by default), and reads the address the
    browser was sent to after approval (the page at the redirect URI need not load: copy
    the address from the browser's bar).
    """

    def show(text: str) -> None:
        if write is None:
            sys.stderr.write(f"{text}\n")
            sys.stderr.flush()
        else:
            write(text)

    async def authorize(url: str) -> AuthorizationCode:
        show(f"Open this address in a browser and approve access:\n\n  {url}\n")
        answer = await asyncio.to_thread(read, "Then paste the address you were sent to: ")
        return parse_redirect(answer)

    return authorize


# -- token stores -------------------------------------------------------------------------------


class TokenStore(Protocol):
    """Where tokens and the client registration of each server are kept.

    A record is a JSON object with the keys `tokens` and `client` (either may be absent),
    stored per server URL. Records hold secrets: never log them.
    """

    async def load(self, server_url: str) -> dict[str, JsonValue] | None:
        """The record for this server, or None."""
        ...

    async def save(self, server_url: str, record: dict[str, JsonValue]) -> None:
        """Replace the record for this server."""
        ...


def _copy(record: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return cast(dict[str, JsonValue], json.loads(json.dumps(record)))


class MemoryTokenStore:
    """Tokens kept in this process only (the default): each run authorizes again."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, JsonValue]] = {}

    def __repr__(self) -> str:
        return f"MemoryTokenStore(servers={len(self._records)})"

    async def load(self, server_url: str) -> dict[str, JsonValue] | None:
        """The record for this server, or None."""
        record = self._records.get(server_url)
        return _copy(record) if record is not None else None

    async def save(self, server_url: str, record: dict[str, JsonValue]) -> None:
        """Replace the record for this server."""
        self._records[server_url] = _copy(record)


class FileTokenStore:
    """Tokens kept in one JSON file (mode 0600), so later runs skip the browser.

    The file is replaced atomically on every change (never half-written), created with
    mode 0600 in a directory created with mode 0700. A file that others may read or
    write is refused (`ConfigurationError`), like ssh refuses a readable private key.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    def _read(self) -> dict[str, dict[str, JsonValue]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            msg = f"cannot read the token store {str(self.path)!r}: {exc.strerror}"
            raise ConfigurationError(msg) from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            msg = (
                f"the token store {str(self.path)!r} is open to other users "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); run: chmod 600 {self.path}"
            )
            raise ConfigurationError(msg)
        try:
            data: object = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            # The message names the file only: its content is secret.
            msg = f"the token store {str(self.path)!r} is not a readable JSON file"
            raise ConfigurationError(msg) from None
        servers = cast(dict[str, Any], data).get("servers") if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            msg = f"the token store {str(self.path)!r} is not a legato token store"
            raise ConfigurationError(msg)
        return {
            str(k): cast(dict[str, JsonValue], v)
            for k, v in cast(dict[Any, Any], servers).items()
            if isinstance(v, dict)
        }

    def _write(self, servers: dict[str, dict[str, JsonValue]]) -> None:
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "servers": servers}, indent=2)
        tmp = directory / f".{self.path.name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask or a stale temporary file said
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    async def load(self, server_url: str) -> dict[str, JsonValue] | None:
        """The record for this server, or None."""
        async with self._lock:
            return (await asyncio.to_thread(self._read)).get(server_url)

    async def save(self, server_url: str, record: dict[str, JsonValue]) -> None:
        """Replace the record for this server (other servers' records are kept)."""
        async with self._lock:
            servers = await asyncio.to_thread(self._read)
            servers[server_url] = _copy(record)
            await asyncio.to_thread(self._write, servers)


# -- the configuration ----------------------------------------------------------------------------


def _valid_metadata_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and bool(parts.netloc) and parts.path not in ("", "/")


@dataclass(frozen=True, kw_only=True, slots=True)
class MCPOAuth:
    """How legato's MCP client authorizes itself to an HTTP server that asks for OAuth.

    ```python
    auth = MCPOAuth(authorize=ask_in_terminal(), store=FileTokenStore("~/.legato/tokens.json"))
    client = MCPClient(HTTPServer(url="https://example.com/mcp", auth=auth), name="example")
    ```

    Without a `client_id` the client registers itself with the authorization server
    (dynamic client registration), or, when `client_metadata_url` is set and the server
    supports it, uses that URL as its client id. With a `client_id` (and a
    `client_secret` for a confidential client) it uses those pre-registered credentials.
    """

    authorize: Authorizer
    """The interactive step: `ask_in_terminal()`, `follow_redirect()`, or your own."""
    store: TokenStore = field(default_factory=MemoryTokenStore)
    client_name: str = "legato"
    redirect_uri: str = "http://127.0.0.1:33418/callback"
    """Where the authorization server sends the browser back to with the code."""
    scopes: tuple[str, ...] = ()
    """Scopes to ask for on top of those the server names. As the MCP specification
    prescribes, the server's challenge (or else its metadata) chooses the scopes; these
    are added to that choice in every authorization request."""
    client_id: str | None = None
    """A pre-registered client id (skips registration)."""
    client_secret: str | None = field(default=None, repr=False)
    """The pre-registered client's secret (confidential clients)."""
    token_endpoint_auth: TokenEndpointAuth | None = None
    """How a pre-registered client authenticates at the token endpoint (default: HTTP Basic
    with a secret, `none` without)."""
    client_metadata_url: str | None = None
    """An HTTPS URL of a client ID metadata document, used as the client id when the
    authorization server supports that (instead of registering)."""

    def __post_init__(self) -> None:
        if self.client_secret is not None and self.client_id is None:
            msg = "MCPOAuth: client_secret needs a client_id"
            raise ConfigurationError(msg)
        if self.client_id is None and self.token_endpoint_auth is not None:
            msg = "MCPOAuth: token_endpoint_auth applies to a pre-registered client_id"
            raise ConfigurationError(msg)
        if self.token_endpoint_auth in ("client_secret_basic", "client_secret_post") and (
            self.client_secret is None
        ):
            msg = (
                f"MCPOAuth: token_endpoint_auth={self.token_endpoint_auth!r} needs a client_secret"
            )
            raise ConfigurationError(msg)
        if self.client_metadata_url is not None and not _valid_metadata_url(
            self.client_metadata_url
        ):
            msg = (
                "MCPOAuth: client_metadata_url must be an https URL with a path, "
                f"got {self.client_metadata_url!r}"
            )
            raise ConfigurationError(msg)
        if any(not scope or scope.split() != [scope] for scope in self.scopes):
            msg = f"MCPOAuth: each scope must be one non-empty word, got {list(self.scopes)!r}"
            raise ConfigurationError(msg)
        redirect = urlsplit(self.redirect_uri)
        if redirect.scheme not in ("http", "https") or not redirect.netloc:
            msg = f"MCPOAuth: redirect_uri must be an http(s) URL, got {self.redirect_uri!r}"
            raise ConfigurationError(msg)


# -- redaction ---------------------------------------------------------------------------------------

_SECRET_FIELDS = (
    "access_token|refresh_token|id_token|client_secret|code|code_verifier|assertion|"
    "client_assertion|password"
)
_SECRET_PAIR = re.compile(rf"(\b(?:{_SECRET_FIELDS})\b\"?\s*[=:]\s*\"?)([^\s\"&,;}}]+)", re.I)
_SECRET_HEADER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.I)


def redact(text: str, secrets: list[str]) -> str:
    """`text` with known secrets, token-looking fields and credentials headers replaced."""
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    text = _SECRET_HEADER.sub(r"\1 [redacted]", text)
    return _SECRET_PAIR.sub(r"\1[redacted]", text)


# -- the bridge to the SDK ------------------------------------------------------------------------


class _RedactSecrets(logging.Filter):
    """Keeps secrets out of the SDK's auth log records.

    The SDK logs a failed flow with its traceback, whose message may echo what a token
    endpoint answered; the record keeps the message, redacted, without the traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        known = [secret for session in list(_SESSIONS) for secret in session.secrets]
        text = record.getMessage()
        if record.exc_info is not None and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text = f"{text}: {type(error).__name__}: {error}"
            record.exc_info = None
            record.exc_text = None
        record.msg = redact(text, known)
        record.args = None
        return True


_LOG_FILTER = _RedactSecrets()
_SDK_AUTH_LOGGERS = ("mcp.client.auth", "mcp.client.auth.oauth2", "mcp.client.auth.utils")
_SESSIONS: weakref.WeakSet[OAuthSession] = weakref.WeakSet()


def _redact_sdk_logs() -> None:
    for name in _SDK_AUTH_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if _LOG_FILTER not in sdk_logger.filters:
            sdk_logger.addFilter(_LOG_FILTER)


class _AuthorizerFailed(Exception):
    """The application's authorizer raised (wrapped to tell it from the SDK's errors)."""


class OAuthSession:
    """OAuth for one connection: the SDK provider (`auth`, an `httpx2.Auth`) and its failure."""

    def __init__(
        self,
        auth: MCPOAuth,
        server_url: str,
        server_name: str,
        *,
        on_person: Callable[[bool], None] | None = None,
    ) -> None:
        from mcp.client.auth import OAuthClientProvider
        from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
        from pydantic import AnyUrl

        self.secrets: list[str] = [auth.client_secret] if auth.client_secret else []
        """Secrets met in this session (client secret, codes, tokens), to redact."""
        self._server_name = server_name
        _SESSIONS.add(self)
        _redact_sdk_logs()
        self._authorize = auth.authorize
        self._on_person = on_person
        """Told when the authorizer starts (True) and ends (False): time a person takes."""
        self._answer: AuthorizationCode | None = None
        self.failure: MCPAuthorizationError | None = None
        """The error that ended the last flow (the transport may only report a closed stream)."""
        preregistered = None
        if auth.client_id is not None:
            method = auth.token_endpoint_auth or (
                "client_secret_basic" if auth.client_secret else "none"
            )
            preregistered = OAuthClientInformationFull(
                client_id=auth.client_id,
                client_secret=auth.client_secret,
                token_endpoint_auth_method=method,
                redirect_uris=[AnyUrl(auth.redirect_uri)],
                client_name=auth.client_name,
            )
        metadata = OAuthClientMetadata(
            client_name=auth.client_name,
            redirect_uris=[AnyUrl(auth.redirect_uri)],
            scope=" ".join(auth.scopes) if auth.scopes else None,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
        guard = self._guard

        extra = list(auth.scopes)

        class _Provider(OAuthClientProvider):
            def async_auth_flow(
                self, request: httpx2.Request
            ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
                return guard(super().async_auth_flow(request))

            async def _initialize(self) -> None:
                await super()._initialize()
                await storage.restore(self.context)

            async def _perform_authorization_code_grant(self) -> tuple[str, str]:
                # The flow has just chosen the scopes from the server's challenge or
                # metadata; the application's own are added to them.
                metadata = self.context.client_metadata
                chosen = (metadata.scope or "").split()
                metadata.scope = " ".join([*chosen, *(s for s in extra if s not in chosen)]) or None
                return await super()._perform_authorization_code_grant()

        storage = _Storage(auth.store, server_url, preregistered, self.secrets)
        provider = _Provider(
            server_url=server_url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=self._on_redirect,
            callback_handler=self._on_callback,
            client_metadata_url=auth.client_metadata_url,
        )
        storage.context = provider.context
        self.auth: httpx2.Auth = provider

    async def _on_redirect(self, url: str) -> None:
        self._answer = None
        if self._on_person is not None:
            self._on_person(True)
        try:
            answer = await self._authorize(url)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            raise _AuthorizerFailed(msg) from exc
        finally:
            if self._on_person is not None:
                self._on_person(False)
        if not isinstance(answer, AuthorizationCode):  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = f"the authorizer returned {type(answer).__name__}, not an AuthorizationCode"
            raise _AuthorizerFailed(msg)
        self.secrets.append(answer.code)
        self._answer = answer

    async def _on_callback(self) -> AuthorizationCodeResult:
        from mcp.client.auth import AuthorizationCodeResult

        answer, self._answer = self._answer, None
        if answer is None:
            msg = "no authorization code (the authorizer did not run)"
            raise _AuthorizerFailed(msg)
        return AuthorizationCodeResult(code=answer.code, state=answer.state, iss=answer.iss)

    async def _guard(
        self, flow: AsyncGenerator[httpx2.Request, httpx2.Response]
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Drive the SDK's flow; any failure of it becomes `MCPAuthorizationError` (redacted)."""
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except LegatoError:
            raise  # e.g. an unreadable token store: already typed and clear
        except Exception as exc:
            from mcp.client.auth import OAuthRegistrationError, OAuthTokenError

            if isinstance(exc, _AuthorizerFailed):
                step, detail = "the authorization step (authorizer) failed", str(exc)
            elif isinstance(exc, OAuthRegistrationError):
                step, detail = "client registration failed", str(exc)
            elif isinstance(exc, OAuthTokenError):
                step, detail = "the token request failed", str(exc)
            else:
                step, detail = "authorization failed", f"{type(exc).__name__}: {exc}"
            error = MCPAuthorizationError(
                f"{step}: {redact(detail, self.secrets)}", server=self._server_name
            )
            self.failure = error
            raise error from None
        finally:
            await flow.aclose()


class _Storage:
    """The SDK's `TokenStorage` over a legato `TokenStore` (records kept as plain JSON).

    Besides tokens and the registration, a record keeps when the access token expires and
    the metadata the flow discovered, so a later process knows that a stored token has
    expired and refreshes it at the right token endpoint instead of asking the person again.
    """

    context: OAuthContext | None = None
    """The provider's state, read when tokens are saved."""

    def __init__(
        self,
        store: TokenStore,
        server_url: str,
        preregistered: OAuthClientInformationFull | None,
        seen: list[str],
    ) -> None:
        self._store = store
        self._url = server_url
        self._preregistered = preregistered
        self._seen = seen  # secrets met so far, for redaction

    async def _record(self) -> dict[str, JsonValue]:
        return await self._store.load(self._url) or {}

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens (unusable ones are ignored: the flow authorizes again)."""
        from mcp.shared.auth import OAuthToken
        from pydantic import ValidationError

        raw = (await self._record()).get("tokens")
        if raw is None:
            return None
        try:
            tokens = OAuthToken.model_validate(raw)
        except ValidationError:
            logger.warning("MCP OAuth: the stored tokens for %s are unusable; ignored", self._url)
            return None
        self._note(tokens.access_token, tokens.refresh_token)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens (with their expiry and the metadata they came from)."""
        self._note(tokens.access_token, tokens.refresh_token)
        record = await self._record()
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record.pop("expires_at", None)
        context = self.context
        if context is not None:
            if context.token_expiry_time is not None:
                record["expires_at"] = context.token_expiry_time
            if context.oauth_metadata is not None:
                record["authorization_server"] = context.oauth_metadata.model_dump(
                    mode="json", exclude_none=True
                )
            if context.protected_resource_metadata is not None:
                record["protected_resource"] = context.protected_resource_metadata.model_dump(
                    mode="json", exclude_none=True
                )
        await self._store.save(self._url, record)

    async def restore(self, context: OAuthContext) -> None:
        """Put a stored expiry and discovered metadata back into a fresh provider."""
        from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
        from pydantic import ValidationError

        record = await self._record()
        expires_at = record.get("expires_at")
        if context.current_tokens is not None and isinstance(expires_at, int | float):
            context.token_expiry_time = float(expires_at)
        try:
            if context.oauth_metadata is None and isinstance(
                record.get("authorization_server"), dict
            ):
                context.oauth_metadata = OAuthMetadata.model_validate(
                    record["authorization_server"]
                )
            if context.protected_resource_metadata is None and isinstance(
                record.get("protected_resource"), dict
            ):
                resource = ProtectedResourceMetadata.model_validate(record["protected_resource"])
                context.protected_resource_metadata = resource
                context.auth_server_url = str(resource.authorization_servers[0])
        except (ValidationError, IndexError):
            logger.warning("MCP OAuth: the stored metadata for %s is unusable; ignored", self._url)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The pre-registered client, else the stored registration."""
        from mcp.shared.auth import OAuthClientInformationFull
        from pydantic import ValidationError

        if self._preregistered is not None:
            return self._preregistered
        raw = (await self._record()).get("client")
        if raw is None:
            return None
        try:
            info = OAuthClientInformationFull.model_validate(raw)
        except ValidationError:
            logger.warning("MCP OAuth: the stored client for %s is unusable; ignored", self._url)
            return None
        self._note(info.client_secret)
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a new registration."""
        self._note(client_info.client_secret)
        record = await self._record()
        record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._store.save(self._url, record)

    def _note(self, *values: str | None) -> None:
        self._seen.extend(v for v in values if v)
