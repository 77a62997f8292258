"""MCP authorization: legato's part around the SDK's OAuth flow.

The flow runs for real against `servers/oauth_fixture.py` (an MCP server behind OAuth and
its authorization server, on 127.0.0.1). Checked here: token stores (round trip, file mode,
refusal of a file others can read, nothing half-written), the redirect-following and
terminal authorizers, and how failures map to `MCPAuthorizationError` without secrets.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from servers.oauth_fixture import REGISTERED_SECRET, OAuthServer, running

from legato.exceptions import ConfigurationError, MCPAuthorizationError, MCPTimeout
from legato.mcp import (
    AuthorizationCode,
    FileTokenStore,
    HTTPServer,
    MCPClient,
    MCPOAuth,
    MemoryTokenStore,
    ask_in_terminal,
    follow_redirect,
    parse_redirect,
)
from legato.messages import JsonValue, TextPart


@pytest.fixture
async def oauth_server() -> AsyncIterator[OAuthServer]:
    async with running(OAuthServer()) as server:
        yield server


def _client(server: OAuthServer, auth: MCPOAuth) -> MCPClient:
    return MCPClient(
        HTTPServer(url=f"{server.url}/mcp", auth=auth), name="protected", connect_timeout=20
    )


# -- the whole flow --------------------------------------------------------------------------


async def test_without_auth_the_error_says_what_to_configure(oauth_server: OAuthServer) -> None:
    client = MCPClient(HTTPServer(url=f"{oauth_server.url}/mcp"), name="protected")
    with pytest.raises(MCPAuthorizationError, match=r"requires authorization \(HTTP 401\)"):
        await client.connect()
    stale = HTTPServer(url=f"{oauth_server.url}/mcp", headers={"Authorization": "Bearer old"})
    with pytest.raises(MCPAuthorizationError, match=r"refused the credentials") as caught:
        await MCPClient(stale, name="protected").connect()
    assert "old" not in str(caught.value)
    assert oauth_server.token_requests == 0


async def test_authorizes_and_later_runs_reuse_the_stored_tokens(
    oauth_server: OAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "state" / "tokens.json"
    auth = MCPOAuth(authorize=follow_redirect(), store=FileTokenStore(path))
    async with _client(oauth_server, auth) as client:
        result = await client.call_tool("whoami")
    assert result.content == (TextPart(text="an authorized client"),)
    assert (oauth_server.registrations, oauth_server.authorizations) == (1, 1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    record = json.loads(path.read_text())["servers"][f"{oauth_server.url}/mcp"]
    assert record["tokens"]["access_token"] in oauth_server.tokens
    assert record["client"]["client_secret"] == REGISTERED_SECRET

    async def must_not_run(url: str) -> AuthorizationCode:
        raise AssertionError(url)

    # A new process would do this: a fresh configuration over the same file.
    again = MCPOAuth(authorize=must_not_run, store=FileTokenStore(path))
    async with _client(oauth_server, again) as client:
        assert [t.name for t in await client.list_tools()] == ["whoami"]
    assert (oauth_server.registrations, oauth_server.authorizations) == (1, 1)


async def test_an_expired_stored_token_is_refreshed_in_a_later_process(
    oauth_server: OAuthServer,
) -> None:
    store = MemoryTokenStore()
    async with _client(oauth_server, MCPOAuth(authorize=follow_redirect(), store=store)) as c:
        await c.list_tools()
    url = f"{oauth_server.url}/mcp"
    record = await store.load(url)
    assert record is not None
    assert isinstance(record["expires_at"], float)
    record["expires_at"] = 1.0  # as if the hour had passed...
    await store.save(url, record)
    oauth_server.tokens.clear()  # ...and the server no longer takes the token

    async def must_not_run(url: str) -> AuthorizationCode:
        raise AssertionError(url)

    # A fresh configuration (a later process): it knows the token expired and refreshes it
    # at the token endpoint the first flow discovered, without asking the person again.
    async with _client(oauth_server, MCPOAuth(authorize=must_not_run, store=store)) as c:
        await c.list_tools()
    assert (oauth_server.authorizations, oauth_server.refreshes) == (1, 1)
    refreshed = await store.load(url)
    assert refreshed is not None
    assert refreshed["tokens"] != record["tokens"]


async def test_revoked_token_reauthorizes_with_the_stored_registration(
    oauth_server: OAuthServer,
) -> None:
    store = MemoryTokenStore()
    async with _client(oauth_server, MCPOAuth(authorize=follow_redirect(), store=store)) as c:
        await c.call_tool("whoami")
        oauth_server.tokens.clear()  # revoked: the next request gets 401
        result = await c.call_tool("whoami")
    assert not result.is_error
    assert (oauth_server.registrations, oauth_server.authorizations) == (1, 2)


async def test_own_scopes_are_added_to_the_servers_choice(oauth_server: OAuthServer) -> None:
    auth = MCPOAuth(authorize=follow_redirect(), scopes=("notes:write", "notes:read"))
    async with _client(oauth_server, auth) as client:
        await client.list_tools()
    async with _client(oauth_server, MCPOAuth(authorize=follow_redirect())) as client:
        await client.list_tools()
    assert oauth_server.scopes == ["notes:read notes:write", "notes:read"]


async def test_pre_registered_client_skips_registration(oauth_server: OAuthServer) -> None:
    auth = MCPOAuth(
        authorize=follow_redirect(),
        client_id="pre-registered",
        client_secret="pre-secret-value",
        token_endpoint_auth="client_secret_post",
    )
    async with _client(oauth_server, auth) as client:
        await client.list_tools()
    assert (oauth_server.registrations, oauth_server.token_requests) == (0, 1)
    assert "pre-secret-value" not in repr(auth)


async def _slow_person(url: str) -> AuthorizationCode:
    await asyncio.sleep(1.0)  # a person reading the consent page
    return await follow_redirect()(url)


async def test_time_a_person_takes_does_not_count_against_connect_timeout(
    oauth_server: OAuthServer,
) -> None:
    auth = MCPOAuth(authorize=_slow_person)
    client = MCPClient(HTTPServer(url=f"{oauth_server.url}/mcp", auth=auth), connect_timeout=0.5)
    async with client:
        assert [t.name for t in await client.list_tools()] == ["whoami"]


async def test_without_the_pause_a_slow_person_would_time_out(
    oauth_server: OAuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The protection switched off: the handshake times out while the person reads."""
    from legato.mcp._connection import Connection

    def keep_counting(self: Connection, waiting: bool) -> None:
        return None

    monkeypatch.setattr(Connection, "_person_waiting", keep_counting)
    auth = MCPOAuth(authorize=_slow_person)
    client = MCPClient(HTTPServer(url=f"{oauth_server.url}/mcp", auth=auth), connect_timeout=0.5)
    with pytest.raises(MCPTimeout):
        await client.connect()


# -- failures: typed, and without secrets ---------------------------------------------------------


async def test_denied_consent_is_a_typed_error(oauth_server: OAuthServer) -> None:
    oauth_server.deny = True
    with pytest.raises(MCPAuthorizationError) as caught:
        await _client(oauth_server, MCPOAuth(authorize=follow_redirect())).connect()
    assert "access_denied" in str(caught.value)
    assert "the user said no" in str(caught.value)
    assert caught.value.server == "protected"
    assert oauth_server.token_requests == 0


async def test_login_page_tells_that_a_person_is_needed(oauth_server: OAuthServer) -> None:
    oauth_server.login_page = True
    with pytest.raises(MCPAuthorizationError, match="needs a person"):
        await _client(oauth_server, MCPOAuth(authorize=follow_redirect())).connect()


async def test_failing_authorizer_is_named(oauth_server: OAuthServer) -> None:
    async def cancelled_by_user(url: str) -> AuthorizationCode:
        msg = f"window closed before {url[:4]}"
        raise RuntimeError(msg)

    with pytest.raises(MCPAuthorizationError, match=r"authorizer\) failed: RuntimeError: window"):
        await _client(oauth_server, MCPOAuth(authorize=cancelled_by_user)).connect()


async def test_token_error_is_redacted(oauth_server: OAuthServer) -> None:
    oauth_server.token_error = True
    codes: list[str] = []
    follow = follow_redirect()

    async def remember(url: str) -> AuthorizationCode:
        answer = await follow(url)
        codes.append(answer.code)
        return answer

    with pytest.raises(MCPAuthorizationError) as caught:
        await _client(oauth_server, MCPOAuth(authorize=remember)).connect()
    message = str(caught.value)
    assert "the token request failed" in message
    assert "invalid_grant" in message
    assert REGISTERED_SECRET not in message
    assert codes
    assert codes[0] not in message


async def test_sdk_log_records_of_a_failed_flow_are_redacted(
    oauth_server: OAuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    oauth_server.token_error = True
    with caplog.at_level(logging.DEBUG), pytest.raises(MCPAuthorizationError):
        await _client(oauth_server, MCPOAuth(authorize=follow_redirect())).connect()
    assert "OAuth flow error" in caplog.text  # the SDK logged the failure...
    assert "invalid_grant" in caplog.text
    assert REGISTERED_SECRET not in caplog.text  # ...without the secret it echoed


async def test_sdk_log_records_without_the_filter_would_leak(
    oauth_server: OAuthServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The protection switched off: the SDK's own record carries the secret."""
    import legato.mcp._auth as auth_module

    monkeypatch.setattr(auth_module, "_redact_sdk_logs", lambda: None)
    for name in auth_module._SDK_AUTH_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "filters", [])
    oauth_server.token_error = True
    with caplog.at_level(logging.DEBUG), pytest.raises(MCPAuthorizationError):
        await _client(oauth_server, MCPOAuth(authorize=follow_redirect())).connect()
    assert REGISTERED_SECRET in caplog.text


async def test_token_error_without_redaction_would_leak(
    oauth_server: OAuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The protection switched off: the server's echo reaches the message."""
    import legato.mcp._auth as auth_module

    def keep(text: str, secrets: list[str]) -> str:
        return text

    monkeypatch.setattr(auth_module, "redact", keep)
    oauth_server.token_error = True
    with pytest.raises(MCPAuthorizationError) as caught:
        await _client(oauth_server, MCPOAuth(authorize=follow_redirect())).connect()
    assert REGISTERED_SECRET in str(caught.value)


async def test_failure_after_connect_surfaces_as_authorization_error(
    oauth_server: OAuthServer,
) -> None:
    """The transport ends when the flow fails mid-session; the call still says why."""
    async with _client(oauth_server, MCPOAuth(authorize=follow_redirect())) as client:
        await client.list_tools()
        oauth_server.tokens.clear()
        oauth_server.deny = True
        with pytest.raises(MCPAuthorizationError, match="access_denied"):
            await client.call_tool("whoami")


def test_redact_hides_fields_headers_and_known_secrets() -> None:
    from legato.mcp._auth import redact

    text = (
        'refresh_token=abc123&x=1 {"access_token": "tok-9"} Authorization: Bearer eyJ.x.y '
        "Basic dXNlcjpwYXNz and the secret hunter22 itself"
    )
    clean = redact(text, ["hunter22"])
    for leaked in ("abc123", "tok-9", "eyJ.x.y", "dXNlcjpwYXNz", "hunter22"):
        assert leaked not in clean
    assert "x=1" in clean


# -- token stores -------------------------------------------------------------------------------


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_memory_store_round_trip_is_a_copy() -> None:
    store = MemoryTokenStore()
    record: dict[str, JsonValue] = {"tokens": {"access_token": "a"}}
    await store.save("https://s/mcp", record)
    record["tokens"] = None
    assert await store.load("https://s/mcp") == {"tokens": {"access_token": "a"}}
    assert await store.load("https://other/mcp") is None


async def test_file_store_is_private_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    old = os.umask(0)
    try:
        store = FileTokenStore(path)
        await store.save("https://a/mcp", {"tokens": {"access_token": "a"}})
        await store.save("https://b/mcp", {"tokens": {"access_token": "b"}})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fresh = FileTokenStore(path)
    assert await fresh.load("https://a/mcp") == {"tokens": {"access_token": "a"}}
    assert await fresh.load("https://b/mcp") == {"tokens": {"access_token": "b"}}
    assert _names(tmp_path) == ["tokens.json"]  # no temporary file left


async def test_file_store_refuses_a_file_others_can_read(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    await FileTokenStore(path).save("https://a/mcp", {"tokens": {"access_token": "a"}})
    path.chmod(0o644)
    with pytest.raises(ConfigurationError, match="chmod 600"):
        await FileTokenStore(path).load("https://a/mcp")
    path.chmod(0o600)
    assert await FileTokenStore(path).load("https://a/mcp") is not None


async def test_file_store_damaged_file_is_named_not_shown(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"servers": {"x": {"tokens": "s3cr3t"', encoding="utf-8")
    path.chmod(0o600)
    with pytest.raises(ConfigurationError) as caught:
        await FileTokenStore(path).load("x")
    assert "tokens.json" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)


async def test_file_store_failed_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tokens.json"
    store = FileTokenStore(path)
    await store.save("https://a/mcp", {"tokens": {"access_token": "old"}})

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        await store.save("https://a/mcp", {"tokens": {"access_token": "new"}})
    monkeypatch.undo()
    assert await store.load("https://a/mcp") == {"tokens": {"access_token": "old"}}
    assert _names(tmp_path) == ["tokens.json"]  # no temporary file left


# -- authorizers and configuration -------------------------------------------------------------------


def test_parse_redirect() -> None:
    answer = parse_redirect("http://127.0.0.1:9/cb?code=c1&state=s1&iss=https%3A%2F%2Fas")
    assert (answer.code, answer.state, answer.iss) == ("c1", "s1", "https://as")
    assert "c1" not in repr(answer)
    with pytest.raises(ValueError, match="refused: access_denied"):
        parse_redirect("http://127.0.0.1:9/cb?error=access_denied&state=s1")
    with pytest.raises(ValueError, match="no authorization code"):
        parse_redirect("http://127.0.0.1:9/cb?state=s1")


async def test_ask_in_terminal_shows_the_url_and_reads_the_redirect() -> None:
    shown: list[str] = []
    asked: list[str] = []

    def read(prompt: str) -> str:
        asked.append(prompt)
        return " http://127.0.0.1:9/cb?code=xyz&state=st \n"

    answer = await ask_in_terminal(read=read, write=shown.append)("https://as/authorize?a=1")
    assert "https://as/authorize?a=1" in shown[0]
    assert asked
    assert (answer.code, answer.state) == ("xyz", "st")


async def noop(url: str) -> AuthorizationCode:
    return AuthorizationCode(code="x")


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"client_secret": "s"}, "needs a client_id"),
        ({"token_endpoint_auth": "none"}, "pre-registered client_id"),
        ({"client_id": "c", "token_endpoint_auth": "client_secret_basic"}, "needs a client_secret"),
        ({"client_metadata_url": "http://example.com/c.json"}, "https URL with a path"),
        ({"client_metadata_url": "https://example.com/"}, "https URL with a path"),
        ({"redirect_uri": "myapp:/cb"}, "redirect_uri"),
        ({"scopes": ("a b",)}, "one non-empty word"),
    ],
)
def test_bad_configuration_is_refused(options: dict[str, str], complaint: str) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        MCPOAuth(authorize=noop, **options)  # pyright: ignore[reportArgumentType]
