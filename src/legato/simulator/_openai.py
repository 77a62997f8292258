"""OpenAI wire formats: Chat Completions (also every OpenAI-compatible server) and Responses."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from legato.simulator._scenario import ErrorKind, SimServerTool, SimTurn
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

__all__ = ["ChatWire", "Flavor", "ResponsesWire"]

Flavor: TypeAlias = Literal["openai", "groq", "mistral", "openrouter"]
"""Which Chat Completions server is imitated (the documented differences only)."""

_ERRORS: dict[ErrorKind, tuple[int, str, str | None]] = {
    "rate_limit": (429, "rate_limit_exceeded", "rate_limit_exceeded"),
    "overloaded": (503, "server_error", "overloaded"),
    "server": (500, "server_error", None),
    "context_length": (400, "invalid_request_error", "context_length_exceeded"),
    "auth": (401, "invalid_request_error", "invalid_api_key"),
    "invalid": (400, "invalid_request_error", "invalid_value"),
    "not_found": (404, "invalid_request_error", "model_not_found"),
    "content_filter": (400, "invalid_request_error", "content_filter"),
}


def _error(kind: ErrorKind, message: str) -> tuple[int, Obj]:
    status, type_, code = _ERRORS[kind]
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _finish(turn: SimTurn) -> str:
    if turn.raw_finish is not None:
        return turn.raw_finish
    if turn.finish == "length":
        return "length"
    if turn.finish == "content_filter":
        return "content_filter"
    return "tool_calls" if turn.calls else "stop"


class ChatWire:
    """`POST /v1/chat/completions`, as OpenAI or one of the compatible servers sends it."""

    def __init__(self, flavor: Flavor = "openai") -> None:
        self.flavor: Flavor = flavor

    def error(self, kind: ErrorKind, message: str) -> tuple[int, Obj]:
        """OpenAI's error body (OpenRouter's carries the numeric status as `code`)."""
        status, body = _error(kind, message)
        if self.flavor == "openrouter":
            if kind == "context_length":
                message = (
                    "This endpoint's maximum context length is 128000 tokens. However, you "
                    f"requested about 131072 tokens. {message}"
                )
            if kind == "content_filter":  # moderation: 403 with the reasons in metadata
                meta: Obj = {
                    "reasons": ["violence"],
                    "flagged_input": "...",
                    "provider_name": "Sim",
                }
                error: Obj = {
                    "code": 403,
                    "message": f"Input was flagged for moderation. {message}",
                }
                return 403, {"error": {**error, "metadata": meta}}
            return status, {"error": {"code": status, "message": message}}
        return status, body

    def error_event(self, kind: ErrorKind, message: str) -> bytes:
        """An `error` object inside a 200 stream.

        OpenAI and Groq send the error object with its `type`/`code` strings; OpenRouter sends
        a chunk whose `error.code` is the upstream HTTP status and whose choice finishes with
        `error`.
        """
        _, body = self.error(kind, message)
        if self.flavor == "openrouter":
            choice = {"index": 0, "delta": {"content": ""}, "finish_reason": "error"}
            chunk = {"id": "gen-err", "object": "chat.completion.chunk", "created": 1700000000}
            return sse({**chunk, "model": "sim", "provider": "Sim", **body, "choices": [choice]})
        return sse(body)

    def malformed_event(self) -> bytes:
        """Broken JSON in a data line."""
        return b'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":\n\n'

    def _usage(self, turn: SimTurn) -> Obj:
        u = turn.usage
        usage: Obj = {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": u.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        if self.flavor == "groq":  # timings beside the counts
            usage.update(queue_time=0.01, prompt_time=0.002, completion_time=0.03, total_time=0.04)
        elif self.flavor == "openrouter":
            usage.update(cost=0.000123, is_byok=False)
        elif self.flavor == "mistral":  # counts only
            usage = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        return usage

    def _content(self, turn: SimTurn) -> Any:
        """The message content: a string, or Mistral's typed chunks when there is reasoning."""
        if self.flavor == "mistral" and turn.thinking:
            thinking: Obj = {
                "type": "thinking",
                "thinking": [{"type": "text", "text": turn.thinking}],
            }
            return [thinking, {"type": "text", "text": turn.text}]
        return turn.text or None

    def reply(self, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> Reply:
        """A completion, or its chunks."""
        model = turn.model or str(request.get("model", "sim"))
        head: Obj = {"id": f"chatcmpl-{seq}", "created": 1700000000, "model": model}
        if self.flavor == "openai":  # documented fields legato does not read
            head.update(system_fingerprint="fp_sim", service_tier="default")
        if not stream:
            return self._whole(turn, head, seq)
        return self._chunks(turn, request, head, seq)

    def _whole(self, turn: SimTurn, head: Obj, seq: int) -> JsonReply:
        message: Obj = {"role": "assistant", "content": self._content(turn)}
        if self.flavor == "openai":
            message.update(refusal=turn.refusal or None, annotations=_chat_annotations(turn))
        if turn.thinking and self.flavor != "mistral":
            message["reasoning_content"] = turn.thinking
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": call_id(c, seq, i),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.text},
                }
                for i, c in enumerate(turn.calls)
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(turn)}
        body = {**head, "object": "chat.completion", "choices": [choice]}
        return JsonReply(body={**body, "usage": self._usage(turn)})

    def _chunks(self, turn: SimTurn, request: Obj, head: Obj, seq: int) -> StreamReply:
        events: list[bytes] = []

        def chunk(delta: Obj, finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            events.append(sse({**head, "object": "chat.completion.chunk", "choices": [choice]}))

        if self.flavor == "openrouter":
            events.append(b": OPENROUTER PROCESSING\n\n")  # keep-alive comment
        chunk({"role": "assistant", "content": ""})
        mistral = self.flavor == "mistral"
        for piece in (turn.thinking[i : i + 6] for i in range(0, len(turn.thinking), 6)):
            if mistral:
                thought = {"type": "thinking", "thinking": [{"type": "text", "text": piece}]}
                chunk({"content": [thought]})
            else:
                chunk({"reasoning_content": piece})

        def text() -> None:
            for piece in turn.fragments:
                chunk({"content": [{"type": "text", "text": piece}] if mistral else piece})
            for delta in _after_text(turn, self.flavor):
                chunk(delta)

        def calls() -> None:
            pieces: list[tuple[int, int, str]] = [
                (n, i, fragment)
                for i, c in enumerate(turn.calls)
                for n, fragment in enumerate(c.fragments)
            ]
            if turn.interleave_calls:  # fragment 0 of every call, then fragment 1, ...
                pieces.sort(key=lambda piece: (piece[0], piece[1]))
            for n, i, fragment in pieces:
                c = turn.calls[i]
                tc: dict[str, Any] = {"index": i, "function": {"arguments": fragment}}
                if n == 0 or turn.repeat_name:
                    tc.update(id=call_id(c, seq, i), type="function")
                    tc["function"]["name"] = c.name
                chunk({"tool_calls": [tc]})

        ordered(turn, text=text, calls=calls)
        if mistral:  # usage rides on the finishing chunk, asked for or not
            choice = {"index": 0, "delta": {"content": ""}, "finish_reason": _finish(turn)}
            done = {**head, "object": "chat.completion.chunk", "choices": [choice]}
            events.append(sse({**done, "usage": self._usage(turn)}))
        else:
            chunk({}, _finish(turn) if turn.send_finish_reason else None)
        options: Obj = request.get("stream_options") or {}
        last: Obj = {**head, "object": "chat.completion.chunk", "choices": []}
        if self.flavor == "groq":  # usage rides on the last chunk, under x_groq
            events.append(sse({**last, "x_groq": {"id": f"req_{seq}", "usage": self._usage(turn)}}))
        elif options.get("include_usage") and not mistral:
            events.append(sse({**last, "usage": self._usage(turn)}))
        events.append(b"data: [DONE]\n\n")
        return StreamReply(events=events)


_BUILTIN = {
    "web_search": ("web_search_call", "ws"),
    "file_search": ("file_search_call", "fs"),
    "code_execution": ("code_interpreter_call", "ci"),
    "image_generation": ("image_generation_call", "ig"),
    "mcp": ("mcp_call", "mcp"),
}
_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
"""Server tool kind → (Responses item type, id prefix)."""


def _builtin_item(tool: SimServerTool, item_id: str) -> Obj:
    """A built-in tool's output item, as the response lists it when done."""
    if tool.kind not in _BUILTIN:
        msg = f"the Responses wire has no built-in tool {tool.kind!r}"
        raise ValueError(msg)
    type_ = _BUILTIN[tool.kind][0]
    item: Obj = {"type": type_, "id": item_id, "status": "failed" if tool.failed else "completed"}
    if tool.kind == "web_search":
        sources = [] if tool.failed else [{"type": "url", "url": "https://example.org/source"}]
        item["action"] = {"type": "search", "query": tool.query, "sources": sources}
    elif tool.kind == "file_search":
        result: Obj = {
            "file_id": "file-sim",
            "filename": "notes.txt",
            "score": 0.9,
            "text": "Legato notes.",
            "attributes": {},
        }
        item.update(queries=[tool.query], results=None if tool.failed else [result])
    elif tool.kind == "image_generation":
        item["result"] = None if tool.failed else _PIXEL_PNG
    elif tool.kind == "mcp":
        error: Obj | None = None
        if tool.failed:
            error = {"type": "http_error", "code": 502, "message": "the MCP server is down"}
        item.update(
            server_label="docs",
            name="search_docs",
            arguments=dumps({"q": tool.query}),
            output=None if tool.failed else "Legato docs: ...",
            error=error,
        )
    else:
        outputs = None if tool.failed else [{"type": "logs", "logs": "4\n"}]
        item.update(code=tool.query, container_id="cntr_sim", outputs=outputs)
    return item


class ResponsesWire:
    """`POST /v1/responses`."""

    def error(self, kind: ErrorKind, message: str) -> tuple[int, Obj]:
        """OpenAI's error body."""
        return _error(kind, message)

    def error_event(self, kind: ErrorKind, message: str) -> bytes:
        """A `response.failed` event."""
        _, body = _error(kind, message)
        failed: Obj = {"id": "resp_failed", "object": "response", "status": "failed"}
        failed["error"] = {"code": body["error"]["code"] or "server_error", "message": message}
        return sse({"type": "response.failed", "sequence_number": 0, "response": failed})

    def malformed_event(self) -> bytes:
        """Broken JSON in a data line."""
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":\n\n'

    def _usage(self, turn: SimTurn) -> Obj:
        u = turn.usage
        return {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.input_tokens + u.output_tokens,
        }

    def _items(self, turn: SimTurn, seq: int) -> list[Obj]:
        items: list[Obj] = []
        if turn.thinking:
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{seq}",
                    "summary": [{"type": "summary_text", "text": turn.thinking}],
                    "encrypted_content": turn.thinking_signature,
                }
            )
        for i, tool in enumerate(turn.server_tools):
            items.append(_builtin_item(tool, f"{_BUILTIN.get(tool.kind, ('', 'x'))[1]}_{seq}_{i}"))
        message: Obj = {
            "type": "message",
            "id": f"msg_{seq}",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": turn.text, "annotations": _annotations(turn)}
            ],
        }
        calls = [
            {
                "type": "function_call",
                "id": f"fc_{seq}_{i}",
                "call_id": call_id(c, seq, i),
                "name": c.name,
                "arguments": c.text,
                "status": "completed",
            }
            for i, c in enumerate(turn.calls)
        ]
        if turn.refusal:
            message["content"] = [{"type": "refusal", "refusal": turn.refusal}]
        text = [message] if turn.text or turn.refusal else []
        items.extend([*text, *calls] if turn.text_first else [*calls, *text])
        return items

    def _response(self, turn: SimTurn, request: Obj, seq: int, *, done: bool) -> Obj:
        status = "completed"
        details = None
        if turn.finish in ("length", "content_filter") or turn.raw_finish is not None:
            status = "incomplete"
            reason = "max_output_tokens" if turn.finish == "length" else "content_filter"
            details = {"reason": turn.raw_finish or reason}
        return {
            "id": f"resp_{seq}",
            "object": "response",
            "created_at": 1700000000,
            "model": turn.model or str(request.get("model", "sim")),
            "status": status if done else "in_progress",
            "incomplete_details": details if done else None,
            "output": self._items(turn, seq) if done else [],
            "usage": self._usage(turn) if done else None,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    def reply(self, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> Reply:
        """A response object, or its event stream."""
        if not stream:
            return JsonReply(body=self._response(turn, request, seq, done=True))
        events: list[bytes] = []

        def emit(type_: str, **fields: Any) -> None:
            events.append(sse({"type": type_, "sequence_number": len(events), **fields}, type_))

        emit("response.created", response=self._response(turn, request, seq, done=False))
        emit("response.in_progress", response=self._response(turn, request, seq, done=False))
        for index, item in enumerate(self._items(turn, seq)):
            self._stream_item(emit, turn, item, index)
        final = self._response(turn, request, seq, done=True)
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        emit(kind, response=final)
        return StreamReply(events=events)

    def _stream_item(self, emit: Any, turn: SimTurn, item: Obj, index: int) -> None:
        kind = item["type"]
        if kind == "reasoning":
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            for n in range(0, len(turn.thinking), 6):
                emit(
                    "response.reasoning_summary_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    summary_index=0,
                    delta=turn.thinking[n : n + 6],
                )
        elif kind == "message" and turn.refusal:
            self._stream_refusal(emit, turn, item, index)
        elif kind == "message":
            empty: Obj = {**item, "status": "in_progress", "content": []}
            emit("response.output_item.added", output_index=index, item=empty)
            part: Obj = {"type": "output_text", "text": "", "annotations": []}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            for piece in turn.fragments:
                emit("response.output_text.delta", **where, delta=piece, logprobs=[])
            for n, annotation in enumerate(item["content"][0]["annotations"]):
                emit(
                    "response.output_text.annotation.added",
                    **where,
                    annotation_index=n,
                    annotation=annotation,
                )
            emit("response.output_text.done", **where, text=turn.text, logprobs=[])
            emit("response.content_part.done", **where, part=item["content"][0])
        elif kind != "function_call":
            self._stream_builtin(emit, item, index)
        else:
            call = turn.calls[int(str(item["id"]).rsplit("_", 1)[1])]
            start = {**item, "arguments": "", "status": "in_progress"}
            emit("response.output_item.added", output_index=index, item=start)
            for fragment in call.fragments:
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=fragment,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=item)

    def _stream_builtin(self, emit: Any, item: Obj, index: int) -> None:
        """A built-in tool's item: added, its documented progress events, (code deltas)."""
        kind = str(item["type"]).removesuffix("_call")
        where = {"item_id": item["id"], "output_index": index}
        start: Obj = {**item, "status": "in_progress"}
        if kind == "code_interpreter":
            start.update(code="", outputs=None)
        elif kind == "file_search":
            start["results"] = None
        elif kind == "image_generation":
            start["result"] = None
        elif kind == "mcp":
            start.update(arguments="", output=None, error=None)
        emit("response.output_item.added", output_index=index, item=start)
        emit(f"response.{kind}_call.in_progress", **where)
        if kind == "code_interpreter":
            code = str(item["code"])
            for n in range(0, len(code), 5):
                emit("response.code_interpreter_call_code.delta", **where, delta=code[n : n + 5])
            emit("response.code_interpreter_call_code.done", **where, code=code)
            emit("response.code_interpreter_call.interpreting", **where)
        elif kind == "image_generation":
            emit("response.image_generation_call.generating", **where)
            if item["result"]:
                partial = {"partial_image_b64": item["result"], "partial_image_index": 0}
                emit("response.image_generation_call.partial_image", **where, **partial)
        elif kind == "mcp":
            arguments = str(item["arguments"])
            emit("response.mcp_call_arguments.delta", **where, delta=arguments)
            emit("response.mcp_call_arguments.done", **where, arguments=arguments)
        else:
            emit(f"response.{kind}_call.searching", **where)
        ending = "failed" if kind == "mcp" and item["status"] == "failed" else "completed"
        emit(f"response.{kind}_call.{ending}", **where)

    def _stream_refusal(self, emit: Any, turn: SimTurn, item: Obj, index: int) -> None:
        """A message whose content is a refusal: its part, the refusal deltas, done events."""
        emit("response.output_item.added", output_index=index, item={**item, "content": []})
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        part: Obj = {"type": "refusal", "refusal": ""}
        emit("response.content_part.added", **where, part=part)
        for n in range(0, len(turn.refusal), 6):
            emit("response.refusal.delta", **where, delta=turn.refusal[n : n + 6])
        emit("response.refusal.done", **where, refusal=turn.refusal)
        emit("response.content_part.done", **where, part=item["content"][0])


def _annotations(turn: SimTurn) -> list[Obj]:
    """`url_citation`s over the span each source supports; `file_citation`s at its end."""
    out: list[Obj] = []
    for c in turn.citations:
        start = turn.text.find(c.cited_text) if c.cited_text else -1
        start, end = (start, start + len(c.cited_text)) if start >= 0 else (0, len(turn.text))
        if c.document is not None:
            file: Obj = {"file_id": f"file-{c.document}", "filename": c.title, "index": end}
            out.append({"type": "file_citation", **file})
            continue
        out.append(
            {
                "type": "url_citation",
                "url": c.url,
                "title": c.title,
                "start_index": start,
                "end_index": end,
            }
        )
    return out


def _chat_annotations(turn: SimTurn) -> list[Obj]:
    """Chat Completions' `url_citation`s: the URL fields nested under the type's name."""
    out: list[Obj] = []
    for a in _annotations(turn):
        if a["type"] == "url_citation":
            fields = {k: a[k] for k in ("url", "title", "start_index", "end_index")}
            out.append({"type": "url_citation", "url_citation": fields})
    return out


def _after_text(turn: SimTurn, flavor: str) -> list[Obj]:
    """The deltas that follow the streamed text: citations, then a refusal in pieces."""
    deltas: list[Obj] = []
    if flavor == "openai" and turn.citations:
        deltas.append({"annotations": _chat_annotations(turn)})
    refusal = turn.refusal
    deltas.extend({"refusal": refusal[i : i + 8]} for i in range(0, len(refusal), 8))
    return deltas
