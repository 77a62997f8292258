"""Anthropic Messages wire format: `POST /v1/messages`."""

from __future__ import annotations

from typing import Any

from legato.simulator._scenario import ErrorKind, SimCitation, SimServerTool, SimTurn
from legato.simulator._wire import (
    JsonReply,
    Obj,
    Reply,
    StreamReply,
    call_id,
    dumps,
    ordered,
    sse,
)

__all__ = ["AnthropicWire"]

_ERRORS: dict[ErrorKind, tuple[int, str]] = {
    "rate_limit": (429, "rate_limit_error"),
    "overloaded": (529, "overloaded_error"),
    "server": (500, "api_error"),
    "context_length": (400, "invalid_request_error"),
    "auth": (401, "authentication_error"),
    "invalid": (400, "invalid_request_error"),
    "not_found": (404, "not_found_error"),
    "content_filter": (400, "invalid_request_error"),
}


def _stop(turn: SimTurn) -> str:
    if turn.raw_finish is not None:
        return turn.raw_finish
    if turn.finish == "length":
        return "max_tokens"
    if turn.finish == "content_filter":
        return "refusal"
    return "tool_use" if turn.calls else "end_turn"


def _citation(c: SimCitation, n: int) -> Obj:
    """A citation of a document of the request, or of a web search result."""
    if c.document is not None:
        return {
            "type": "char_location",
            "cited_text": c.cited_text,
            "document_index": c.document,
            "document_title": c.title,
            "start_char_index": 0,
            "end_char_index": len(c.cited_text),
            "file_id": None,
        }
    return {
        "type": "web_search_result_location",
        "url": c.url,
        "title": c.title,
        "cited_text": c.cited_text,
        "encrypted_index": f"enc-index-{n}",
    }


def _server_result(tool: SimServerTool, use_id: str) -> Obj:
    """The result block of a server tool: documented success or error form."""
    if tool.kind == "web_search":
        content: Any = (
            {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
            if tool.failed
            else [
                {
                    "type": "web_search_result",
                    "url": "https://example.org/source",
                    "title": "A source",
                    "encrypted_content": "enc-page-0",
                    "page_age": "April 1, 2026",
                }
            ]
        )
    elif tool.kind == "web_fetch":
        content = (
            {"type": "web_fetch_tool_result_error", "error_code": "url_not_accessible"}
            if tool.failed
            else {
                "type": "web_fetch_result",
                "url": tool.query,
                "retrieved_at": "2026-12-02T10:00:00Z",
                "content": {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "Page text."},
                    "title": "A page",
                },
            }
        )
    elif tool.kind == "code_execution":
        content = (
            {"type": "code_execution_tool_result_error", "error_code": "unavailable"}
            if tool.failed
            else {
                "type": "code_execution_result",
                "stdout": "4\n",
                "stderr": "",
                "return_code": 0,
                "content": [],
            }
        )
    else:
        msg = f"the Anthropic wire has no server tool {tool.kind!r}"
        raise ValueError(msg)
    return {"type": f"{tool.kind}_tool_result", "tool_use_id": use_id, "content": content}


def _server_input(tool: SimServerTool) -> Obj:
    key = {"web_search": "query", "web_fetch": "url", "code_execution": "code"}.get(tool.kind, "q")
    return {key: tool.query}


class AnthropicWire:
    """Messages API, streamed as typed SSE events or as one message."""

    def error(self, kind: ErrorKind, message: str) -> tuple[int, Obj]:
        """Anthropic's error body."""
        status, type_ = _ERRORS[kind]
        if kind == "context_length":
            message = f"prompt is too long: 210000 tokens > 200000 maximum ({message})"
        return status, {"type": "error", "error": {"type": type_, "message": message}}

    def error_event(self, kind: ErrorKind, message: str) -> bytes:
        """An `error` event inside the stream."""
        return sse(self.error(kind, message)[1], "error")

    def malformed_event(self) -> bytes:
        """Broken JSON in a data line."""
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{\n\n'

    def _usage(self, turn: SimTurn) -> Obj:
        u = turn.usage
        return {
            "input_tokens": u.input_tokens - u.cached_tokens - u.cache_write_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cached_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": u.cache_write_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
            "server_tool_use": self._server_usage(turn),
            "service_tier": "standard",
        }

    def _server_usage(self, turn: SimTurn) -> Obj | None:
        if not turn.server_tools:
            return None
        count = {
            k: sum(t.kind == k for t in turn.server_tools) for k in ("web_search", "web_fetch")
        }
        return {
            "web_search_requests": count["web_search"],
            "web_fetch_requests": count["web_fetch"],
        }

    def _server_blocks(self, turn: SimTurn, seq: int) -> list[tuple[Obj, Obj]]:
        """(server_tool_use, its result) for each server tool of the turn."""
        pairs: list[tuple[Obj, Obj]] = []
        for i, tool in enumerate(turn.server_tools):
            use_id = f"srvtoolu_{seq}_{i}"
            use: Obj = {
                "type": "server_tool_use",
                "id": use_id,
                "name": tool.kind,
                "input": _server_input(tool),
            }
            pairs.append((use, _server_result(tool, use_id)))
        return pairs

    def _text_block(self, turn: SimTurn) -> Obj:
        block: Obj = {"type": "text", "text": turn.text}
        if turn.citations:
            block["citations"] = [_citation(c, n) for n, c in enumerate(turn.citations)]
        return block

    def _blocks(self, turn: SimTurn, seq: int) -> list[Obj]:
        blocks: list[Obj] = []
        if turn.thinking:
            sig = turn.thinking_signature or ""
            blocks.append({"type": "thinking", "thinking": turn.thinking, "signature": sig})
        for use, result in self._server_blocks(turn, seq):
            blocks.extend((use, result))
        text = [self._text_block(turn)] if turn.text else []
        calls: list[Obj] = [
            {
                "type": "tool_use",
                "id": call_id(c, seq, i, "toolu"),
                "name": c.name,
                "input": c.value,
            }
            for i, c in enumerate(turn.calls)
        ]
        blocks.extend([*text, *calls] if turn.text_first else [*calls, *text])
        return blocks

    def reply(self, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> Reply:
        """A message, or its event stream."""
        message: Obj = {
            "id": f"msg_{seq}",
            "type": "message",
            "role": "assistant",
            "model": turn.model or str(request.get("model", "sim")),
            "content": self._blocks(turn, seq),
            "stop_reason": _stop(turn),
            "stop_sequence": None,
            "usage": self._usage(turn),
        }
        if not stream:
            return JsonReply(body=message)
        events: list[bytes] = []

        def emit(type_: str, **fields: Any) -> None:
            events.append(sse({"type": type_, **fields}, type_))

        start_usage = {**self._usage(turn), "output_tokens": 1}
        emit(
            "message_start",
            message={**message, "content": [], "stop_reason": None, "usage": start_usage},
        )
        emit("ping")  # documented keep-alive, sent at any point of the stream
        index = 0

        def block(start: Obj, deltas: list[Obj]) -> None:
            nonlocal index
            emit("content_block_start", index=index, content_block=start)
            for delta in deltas:
                emit("content_block_delta", index=index, delta=delta)
            emit("content_block_stop", index=index)
            index += 1

        if turn.thinking:
            deltas = [
                {"type": "thinking_delta", "thinking": turn.thinking[n : n + 6]}
                for n in range(0, len(turn.thinking), 6)
            ]
            if turn.thinking_signature:
                deltas.append({"type": "signature_delta", "signature": turn.thinking_signature})
            block({"type": "thinking", "thinking": "", "signature": ""}, deltas)

        for use, result in self._server_blocks(turn, seq):
            partial = dumps(use["input"])
            pieces = [
                {"type": "input_json_delta", "partial_json": partial[n : n + 7]}
                for n in range(0, len(partial), 7)
            ]
            block({**use, "input": {}}, pieces)
            block(result, [])  # a result block arrives whole in its start event

        def text() -> None:
            if turn.text:
                cites: list[Obj] = [
                    {"type": "citations_delta", "citation": _citation(c, n)}
                    for n, c in enumerate(turn.citations)
                ]
                pieces = [{"type": "text_delta", "text": p} for p in turn.fragments]
                start: Obj = {"type": "text", "text": ""}
                if turn.citations:
                    start["citations"] = []
                block(start, [*cites, *pieces])

        def calls() -> None:
            for i, c in enumerate(turn.calls):
                start = {"type": "tool_use", "id": call_id(c, seq, i, "toolu"), "name": c.name}
                pieces = [{"type": "input_json_delta", "partial_json": f} for f in c.fragments]
                block({**start, "input": {}}, pieces)

        ordered(turn, text=text, calls=calls)
        emit(
            "message_delta",
            delta={"stop_reason": _stop(turn), "stop_sequence": None},
            usage={"output_tokens": turn.usage.output_tokens},
        )
        emit("message_stop")
        return StreamReply(events=events)
