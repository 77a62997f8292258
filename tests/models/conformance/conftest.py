"""The conformance suite's transport twin: the tests that touch the wire's edges run twice.

Every provider whose SDK has an aiohttp transport uses it by default when aiohttp is
installed (`ProviderSettings.transport="auto"`). The tests named below also run with
aiohttp hidden, so `auto` falls back to the SDK's httpx2 transport: the same scenarios, the
same typed errors, on both.
"""

from __future__ import annotations

import pytest

from legato.models import _transport

BOTH_TRANSPORTS = frozenset(
    {
        "test_plain_text",
        "test_one_tool_call",
        "test_http_errors_map_to_the_exception_tree",
        "test_mid_stream_disconnect_is_stream_interrupted",
        "test_empty_200_is_an_error_not_an_empty_answer",
        "test_malformed_json_is_a_parse_error_with_the_payload",
        "test_error_event_inside_the_stream",
        "test_slow_chunks_still_arrive",
        "test_timeout",
        "test_settings_headers_and_extra_body_reach_the_wire",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function.__name__ in BOTH_TRANSPORTS:
        metafunc.fixturenames.append("http_transport")
        metafunc.parametrize("http_transport", ["aiohttp", "httpx"], indirect=True)


@pytest.fixture
def http_transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """`aiohttp`: the default (aiohttp installed); `httpx`: aiohttp hidden, `auto` falls back."""
    transport: str = request.param
    if transport == "httpx":
        monkeypatch.setattr(_transport, "aiohttp_installed", lambda: False)
    else:
        assert _transport.aiohttp_installed(), "the provider extras install aiohttp"
    return transport
