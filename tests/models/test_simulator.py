"""The wire simulator, checked with the official SDKs' own parsers (no legato translator)."""

from __future__ import annotations

import httpx
import openai
import pytest

from legato.simulator import Fault, SimCall, SimTurn, WireSimulator

TURN = SimTurn(
    text="Grüße aus 東京",
    calls=(SimCall(name="get_weather", arguments={"city": "Zürich"}),),
)


def _client(sim: WireSimulator) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key="sk-test", max_retries=0)


def _streamed(sim: WireSimulator) -> tuple[str, str, str | None]:
    text, args, name = "", "", None
    with _client(sim) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        for chunk in stream:
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for tc in delta.tool_calls or []:
                assert tc.function is not None
                name = name or tc.function.name
                args += tc.function.arguments or ""
    return text, args, name


def test_byte_split_stream_parses_the_same_as_whole_events(sim: WireSimulator) -> None:
    sim.enqueue(TURN, SimTurn(text=TURN.text, calls=TURN.calls, fault=Fault(byte_split=3)))
    whole = _streamed(sim)
    split = _streamed(sim)
    assert whole == split == ("Grüße aus 東京", '{"city": "Zürich"}', "get_weather")


def test_requests_are_recorded_with_headers_and_body(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="ok"))
    with _client(sim) as client:
        client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
    (request,) = sim.requests
    assert request.api == "openai_chat" and not request.stream
    assert request.body["model"] == "m1"
    assert request.headers["authorization"] == "Bearer sk-test"
    sim.assert_complete()


def test_error_status_and_retry_after(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(fault=Fault(error="rate_limit", retry_after=7)))
    with _client(sim) as client, pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="m", messages=[])
    assert info.value.response.headers["retry-after"] == "7"


def test_disconnect_mid_stream_breaks_the_body(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="abcdefghijkl", fault=Fault(disconnect_after=2)))
    body: dict[str, object] = {"model": "m", "messages": [], "stream": True}

    def read() -> None:
        with client.stream("POST", f"{sim.url}/v1/chat/completions", json=body) as response:
            for _ in response.iter_bytes():
                pass

    with httpx.Client() as client, pytest.raises(httpx.RemoteProtocolError):
        read()


def test_empty_200_sends_no_events(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="never sent", fault=Fault(empty=True)))
    with _client(sim) as client:
        chunks = list(client.chat.completions.create(model="m", messages=[], stream=True))
    assert chunks == []


def test_unscripted_request_and_unknown_path_fail_loudly(sim: WireSimulator) -> None:
    with httpx.Client() as client:
        assert client.post(f"{sim.url}/v1/chat/completions", json={}).status_code == 500
        assert client.post(f"{sim.url}/nowhere", json={}).status_code == 404
    sim.enqueue(SimTurn(text="unused"))
    with pytest.raises(AssertionError, match="never requested"):
        sim.assert_complete()


def test_responder_computes_turns_from_the_request() -> None:
    def echo(request: object) -> SimTurn:
        return SimTurn(text=f"seen {len(sim.requests)}")

    with WireSimulator(responder=echo) as sim, _client(sim) as client:
        out = [
            client.chat.completions.create(model="m", messages=[]).choices[0].message.content
            for _ in range(2)
        ]
    assert out == ["seen 1", "seen 2"]
