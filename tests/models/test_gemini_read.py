"""Gemini's whole answers read once, from their JSON (the SDK's `should_return_http_response`).

One recorded-shape answer (thinking, signatures on text and calls, code execution parts,
grounding and URL context metadata, usage with thoughts and cache) goes through the raw path,
the SDK's typed path and the streamed path (still typed: the SDK refuses the raw option for
streams); the messages, provider details and usage are equal. Bodies that are malformed,
truncated or of the wrong shape are the same typed errors on the raw and the typed path, on
both HTTP transports. A local server on 127.0.0.1 answers with exactly the bytes given.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

import pytest

from legato.exceptions import (
    ContentFiltered,
    ModelError,
    ProviderServerError,
    RateLimited,
    ResponseParseError,
    StreamInterrupted,
)
from legato.messages import Message, StopReason
from legato.models import _gemini_read
from legato.models._base import ModelRequest, ModelResponse, ResponseCompleted
from legato.models._provider import ProviderSettings
from legato.models.gemini import GeminiModel
from legato.models.retry import RetryPolicy
from legato.simulator import ErrorKind, Fault, SimTurn, WireSimulator


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


ANSWER: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Six sevens.", "thought": True, "thoughtSignature": _b64(b"think")},
                    {"text": "Let me compute."},
                    {"executableCode": {"language": "PYTHON", "code": "print(6 * 7)"}},
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}},
                    {"text": "It is 42.", "thoughtSignature": _b64(b"text")},
                    {
                        "functionCall": {
                            "id": "fc1",
                            "name": "record",
                            "args": {"value": 42, "extraInfo": {"camelKey": [1, None]}},
                        },
                        "thoughtSignature": _b64(b"call"),
                    },
                    {"text": "", "thoughtSignature": _b64(b"tail")},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
            "safetyRatings": [
                {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}
            ],
            "groundingMetadata": {
                "webSearchQueries": ["six times seven"],
                "searchEntryPoint": {
                    "renderedContent": "<div>six times seven</div>",
                    "sdkBlob": _b64(b"blob"),
                },
                "groundingChunks": [{"web": {"uri": "https://x.example/42", "title": "x"}}],
                "groundingSupports": [
                    {
                        "segment": {"startIndex": 0, "endIndex": 9, "text": "It is 42."},
                        "groundingChunkIndices": [0],
                        "confidenceScores": [0.9],
                    }
                ],
                "someFutureField": {"a": 1},
            },
            "urlContextMetadata": {
                "urlMetadata": [
                    {
                        "retrievedUrl": "https://x.example/42",
                        "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
                    }
                ]
            },
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 9,
        "candidatesTokenCount": 12,
        "thoughtsTokenCount": 5,
        "cachedContentTokenCount": 4,
        "totalTokenCount": 26,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "resp-42",
}


@dataclass(slots=True)
class _Reply:
    body: bytes
    length: int | None = None
    """The Content-Length to announce (more than the body: the line drops after it)."""


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = cast(_Server, self.server)
        server.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        reply = server.replies.pop(0) if server.replies else server.reply
        if "streamGenerateContent" in self.path:  # the same answer as one stream event
            data = b"data: " + reply.body + b"\r\n\r\n"
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(reply.length or len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)
        if reply.length is not None:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    reply = _Reply(b"{}")
    """The answer to every request (after `replies`, which go out first, in order)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: list[_Reply] = []
        self.bodies: list[Any] = []


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


Transport = Literal["auto", "aiohttp", "httpx"]


def _model(server: _Server, *, stream: bool = False, transport: Transport = "auto") -> GeminiModel:
    settings = ProviderSettings(
        stream=stream, retry=RetryPolicy(max_attempts=1), transport=transport
    )
    return GeminiModel(
        "gemini-2.5-flash", base_url=_url(server), api_key="AIza-t", settings=settings
    )


async def _answer(model: GeminiModel) -> ModelResponse:
    try:
        async for event in model.stream(ModelRequest(messages=(Message.user("6 x 7?"),))):
            if isinstance(event, ResponseCompleted):
                return event.response
    finally:
        await model.aclose()
    raise AssertionError("no response")


def _typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old path: whole answers parsed into the SDK's types, then read."""
    monkeypatch.setattr(GeminiModel, "_raw_answers", False)


def _kept_as_sent(model: object, value: object) -> object:
    return value


def _unchecked(value: object) -> object:
    return value


def _any_count(value: object) -> object:
    return 0 if value is None else value


# -- one answer, three paths -----------------------------------------------------------------


async def test_one_answer_reads_the_same_raw_typed_and_streamed(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.reply = _Reply(json.dumps(ANSWER).encode())
    raw = await _answer(_model(server))
    streamed = await _answer(_model(server, stream=True))
    _typed(monkeypatch)
    typed = await _answer(_model(server))
    for other in (typed, streamed):
        assert raw.message == other.message
        assert raw.message.provider_details == other.message.provider_details
        assert (raw.usage, raw.stop_reason, raw.model_name, raw.provider_response_id) == (
            other.usage,
            other.stop_reason,
            other.model_name,
            other.provider_response_id,
        )
    details: Any = raw.message.provider_details
    grounding = details["gemini_grounding"]
    assert grounding["grounding_metadata"]["search_entry_point"]["sdk_blob"] == _b64(b"blob")
    assert "some_future_field" not in grounding["grounding_metadata"]  # as the SDK drops it
    assert grounding["url_context_metadata"]["url_metadata"][0]["retrieved_url"]
    assert [e["part"] for e in details["gemini_builtin_parts"]] == [
        {"executable_code": {"language": "PYTHON", "code": "print(6 * 7)"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "42\n"}},
    ]
    assert details["gemini_signatures"] == {"fc1": _b64(b"call")}
    (call,) = raw.message.tool_calls
    assert call.arguments == {"value": 42, "extraInfo": {"camelKey": [1, None]}}  # as sent
    assert raw.usage.input_tokens == 9 and raw.usage.output_tokens == 17
    assert raw.usage.cache_read_tokens == 4 and raw.usage.reasoning_tokens == 5
    assert raw.usage.web_searches == 1
    assert raw.stop_reason is StopReason.TOOL_CALLS
    assert raw.model_name == "gemini-2.5-flash" and raw.provider_response_id == "resp-42"


async def test_twin_without_renaming_the_kept_blobs_the_raw_path_would_store_wire_keys(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.reply = _Reply(json.dumps(ANSWER).encode())
    typed = await _answer(_model(server, stream=True))
    monkeypatch.setattr(_gemini_read, "_snake", _kept_as_sent)
    raw = await _answer(_model(server))
    assert raw.message.parts == typed.message.parts
    assert raw.message.provider_details != typed.message.provider_details
    details: Any = raw.message.provider_details
    assert "searchEntryPoint" in details["gemini_grounding"]["grounding_metadata"]


async def test_the_raw_path_does_not_parse_into_the_sdk_types(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.genai import types

    def refuse(cls: object, **kwargs: object) -> object:
        raise AssertionError("parsed into the SDK's types")

    refusing: classmethod[Any, ..., object] = classmethod(refuse)
    monkeypatch.setattr(types.GenerateContentResponse, "_from_response", refusing)
    server.reply = _Reply(json.dumps(ANSWER).encode())
    assert (await _answer(_model(server))).message.text == "Let me compute.It is 42."
    _typed(monkeypatch)  # the twin: the old path goes through them
    with pytest.raises(AssertionError, match="SDK's types"):
        await _answer(_model(server))


async def test_the_sdk_refuses_the_raw_option_for_streams() -> None:
    """Why the streamed path stays on the SDK's types."""
    genai: Any = importlib.import_module("google.genai")
    client = genai.Client(api_key="AIza-t", http_options={"base_url": "http://127.0.0.1:9"})
    try:
        chunks = await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="x", config={"should_return_http_response": True}
        )
        with pytest.raises(ValueError, match="not supported in streaming"):
            async for _ in chunks:
                pass
    finally:
        await client.aio.aclose()


@pytest.mark.parametrize("path", ["raw", "typed"])
async def test_a_blocked_prompt_is_content_filtered_with_its_reason_on_both_paths(
    server: _Server, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "typed":
        _typed(monkeypatch)
    body = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {}}
    server.reply = _Reply(json.dumps(body).encode())
    with pytest.raises(ContentFiltered, match=r"withheld the answer \(PROHIBITED_CONTENT\)"):
        await _answer(_model(server))


async def test_token_counts_sent_as_digit_strings_read_as_the_sdk_reads_them(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = json.loads(_with_part({"text": "ok"}))
    answer["usageMetadata"] = {"promptTokenCount": "9", "candidatesTokenCount": "3"}
    server.reply = _Reply(json.dumps(answer).encode())
    raw = await _answer(_model(server))
    _typed(monkeypatch)
    assert (await _answer(_model(server))).usage == raw.usage
    assert (raw.usage.input_tokens, raw.usage.output_tokens) == (9, 3)


# -- an answer Gemini continues over several requests ----------------------------------------


def _hop(text: str, finish: str, prompt: int, out: int, token: bytes | None = None) -> _Reply:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": finish,
    }
    if token is not None:
        candidate["continuationToken"] = _b64(token)
    usage = {"promptTokenCount": prompt, "candidatesTokenCount": out}
    body = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-x"}
    return _Reply(json.dumps(body).encode())


HOPS = [
    _hop("Part one, ", "CONTINUATION", 5, 3, b"tok-1"),
    _hop("part two, ", "CONTINUATION", 5, 3, b"tok-2"),
    _hop("the end.", "STOP", 5, 2),
]


async def test_a_continued_answer_is_followed_and_read_as_one(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.replies = list(HOPS)
    raw = await _answer(_model(server))
    assert [b.get("continuationToken") for b in server.bodies] == [
        None,
        _b64(b"tok-1"),
        _b64(b"tok-2"),
    ]
    assert raw.message.text == "Part one, part two, the end."
    assert raw.stop_reason is StopReason.END_TURN
    assert (raw.usage.input_tokens, raw.usage.output_tokens, raw.usage.requests) == (15, 8, 3)
    server.replies, server.bodies = list(HOPS), []
    _typed(monkeypatch)  # the SDK follows the tokens itself on its typed path: the same answer
    typed = await _answer(_model(server))
    assert len(server.bodies) == 3
    assert typed.message == raw.message
    assert dataclasses.replace(typed.usage, requests=3) == raw.usage


async def test_twin_without_following_the_token_the_answer_stops_at_the_first_hop(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_gemini_read, "_token", _no_token)
    server.replies = list(HOPS)
    raw = await _answer(_model(server))
    assert len(server.bodies) == 1
    assert raw.message.text == "Part one, "
    assert raw.stop_reason is StopReason.OTHER


async def test_a_token_already_followed_is_not_followed_again(server: _Server) -> None:
    a, b = (_hop("Again. ", "CONTINUATION", 5, 1, token) for token in (b"a", b"b"))
    server.replies = [a, b]
    server.reply = a  # and from then on, token "a" again: a cycle
    raw = await _answer(_model(server))
    assert [x.get("continuationToken") for x in server.bodies] == [None, _b64(b"a"), _b64(b"b")]
    assert raw.message.text == "Again. " * 3


def _no_token(value: object) -> None:
    return None


# -- bad bodies: the same typed errors on both paths and both transports ---------------------


def _with_part(part: dict[str, Any]) -> bytes:
    body = {"candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}
    return json.dumps(body).encode()


WHOLE = json.dumps(ANSWER).encode()
_MANY = json.dumps(
    {**json.loads(_with_part({"text": "ok"})), "usageMetadata": {"promptTokenCount": "many"}}
).encode()
BAD: list[tuple[str, _Reply, type[ModelError], type[ModelError]]] = [
    # (case, body, the error on the raw path, the error on the SDK's typed path)
    (
        "malformed",
        _Reply(b'{"candidates": [{"content": {"parts": [{"text": '),
        ResponseParseError,
        ResponseParseError,
    ),
    (
        "truncated",
        _Reply(WHOLE[: len(WHOLE) // 2], length=len(WHOLE)),
        StreamInterrupted,
        StreamInterrupted,
    ),
    # The SDK reads a string of candidates as a list of its characters (each an empty
    # candidate), so it only notices that no finish reason came; the raw reading names the shape.
    (
        "candidates-not-a-list",
        _Reply(b'{"candidates": "no"}'),
        ResponseParseError,
        StreamInterrupted,
    ),
    (
        "parts-not-a-list",
        _Reply(b'{"candidates": [{"content": {"parts": 7}}]}'),
        ResponseParseError,
        ResponseParseError,
    ),
    ("text-not-a-string", _Reply(_with_part({"text": 5})), ResponseParseError, ResponseParseError),
    (
        "args-not-an-object",
        _Reply(_with_part({"functionCall": {"name": "f", "args": [1]}})),
        ResponseParseError,
        ResponseParseError,
    ),
    ("empty", _Reply(b""), StreamInterrupted, StreamInterrupted),
    ("count-not-a-number", _Reply(_MANY), ResponseParseError, ResponseParseError),
    (
        "no-finish",
        _Reply(b'{"candidates": [{"content": {"parts": [{"text": "hi"}]}}]}'),
        StreamInterrupted,
        StreamInterrupted,
    ),
]


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
@pytest.mark.parametrize("path", ["raw", "typed"])
@pytest.mark.parametrize(("case", "reply", "raw", "typed"), BAD, ids=[b[0] for b in BAD])
async def test_a_bad_body_is_the_same_typed_error_on_both_paths(
    server: _Server,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    reply: _Reply,
    raw: type[ModelError],
    typed: type[ModelError],
    path: str,
    transport: Transport,
) -> None:
    expected = raw
    if path == "typed":
        _typed(monkeypatch)
        expected = typed
    server.reply = reply
    with pytest.raises(ModelError) as info:
        await _answer(_model(server, transport=transport))
    assert type(info.value) is expected, repr(info.value)
    if expected is ResponseParseError:
        assert info.value.body is not None  # the payload, for the report


async def test_twin_without_the_count_check_a_word_breaks_the_cost_untyped(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_gemini_read, "_count", _any_count)
    server.reply = _Reply(_MANY)
    with pytest.raises(TypeError, match="unsupported operand"):  # a bare error, later on
        await _answer(_model(server))


async def test_twin_without_the_args_check_a_list_becomes_the_call_arguments(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (A text that is not a string needs no check of its own: the assembler refuses it.)
    monkeypatch.setattr(_gemini_read, "_args", _unchecked)
    server.reply = _Reply(_with_part({"functionCall": {"name": "f", "args": [1]}}))
    (call,) = (await _answer(_model(server))).message.tool_calls
    assert call.arguments == [1]  # read without complaint: not an object of arguments


@pytest.mark.parametrize("path", ["raw", "typed"])
@pytest.mark.parametrize(
    ("kind", "expected"), [("rate_limit", RateLimited), ("server", ProviderServerError)]
)
async def test_http_errors_are_still_the_sdks_to_raise_on_the_raw_path(
    sim: WireSimulator,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    kind: ErrorKind,
    expected: type[ModelError],
) -> None:
    if path == "typed":
        _typed(monkeypatch)
    sim.enqueue(SimTurn(fault=Fault(error=kind, retry_after=7)))
    settings = ProviderSettings(stream=False, retry=RetryPolicy(max_attempts=1))
    model = GeminiModel("gemini-2.5-flash", base_url=sim.url, api_key="AIza-t", settings=settings)
    with pytest.raises(ModelError) as info:
        await _answer(model)
    assert type(info.value) is expected
    if kind == "rate_limit":
        assert getattr(info.value, "retry_after", None) == 7  # Google's RetryInfo in the body
