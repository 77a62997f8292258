"""Google Gemini wire format: `models/{model}:generateContent` and `:streamGenerateContent`."""

from __future__ import annotations

from legato.simulator._scenario import ErrorKind, SimTurn
from legato.simulator._wire import JsonReply, Obj, Reply, StreamReply, call_id, ordered, sse

__all__ = ["GeminiWire"]

_ERRORS: dict[ErrorKind, tuple[int, str]] = {
    "rate_limit": (429, "RESOURCE_EXHAUSTED"),
    "overloaded": (503, "UNAVAILABLE"),
    "server": (500, "INTERNAL"),
    "context_length": (400, "INVALID_ARGUMENT"),
    "auth": (401, "UNAUTHENTICATED"),
    "invalid": (400, "INVALID_ARGUMENT"),
    "not_found": (404, "NOT_FOUND"),
    "content_filter": (400, "INVALID_ARGUMENT"),
}


def _finish(turn: SimTurn) -> str:
    if turn.raw_finish is not None:
        return turn.raw_finish
    if turn.finish == "length":
        return "MAX_TOKENS"
    if turn.finish == "content_filter":
        return "SAFETY"
    return "STOP"


class GeminiWire:
    """Gemini API; streaming is SSE with one `GenerateContentResponse` per event."""

    def error(self, kind: ErrorKind, message: str) -> tuple[int, Obj]:
        """Google's error body."""
        status, name = _ERRORS[kind]
        if kind == "context_length":
            message = f"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576). {message}"
        error: Obj = {"code": status, "message": message, "status": name}
        if kind == "rate_limit":
            quota = {"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests"}
            error["details"] = [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [quota]}
            ]
        return status, {"error": error}

    def with_retry_delay(self, body: Obj, seconds: float) -> Obj:
        """Google says when to retry in the body (`google.rpc.RetryInfo`), not in a header."""
        error: Obj = dict(body["error"])
        info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds:g}s"}
        error["details"] = [*error.get("details", []), info]
        return {"error": error}

    def error_event(self, kind: ErrorKind, message: str) -> bytes:
        """An error object as a stream event."""
        return sse(self.error(kind, message)[1])

    def malformed_event(self) -> bytes:
        """Broken JSON in a data line."""
        return b'data: {"candidates": [{"content": {"parts": [{"text": \n\n'

    def _usage(self, turn: SimTurn) -> Obj:
        u = turn.usage
        return {
            "promptTokenCount": u.input_tokens,
            "candidatesTokenCount": u.output_tokens - u.reasoning_tokens,
            "thoughtsTokenCount": u.reasoning_tokens,
            "cachedContentTokenCount": u.cached_tokens,
            "totalTokenCount": u.input_tokens + u.output_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input_tokens}],
            "trafficType": "ON_DEMAND",
        }

    def _chunk(self, turn: SimTurn, request_model: str, seq: int, parts: list[Obj]) -> Obj:
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": turn.model or request_model,
            "responseId": f"gem_{seq}",
            "createTime": "2026-12-02T10:00:00.000000Z",
        }

    def _calls(self, turn: SimTurn, seq: int) -> list[Obj]:
        parts: list[Obj] = [
            {"functionCall": {"id": call_id(c, seq, i), "name": c.name, "args": c.value}}
            for i, c in enumerate(turn.calls)
        ]
        if parts and turn.thinking_signature and not turn.thinking:
            # Gemini 3 signs the first function call of a turn when thoughts stay hidden.
            parts[0]["thoughtSignature"] = turn.thinking_signature
        return parts

    def reply(self, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> Reply:
        """A response, or a stream of partial responses."""
        model = str(request.get("_model", "sim"))
        thought: list[Obj] = []
        if turn.thinking:
            thought = [{"text": turn.thinking, "thought": True}]
            if turn.thinking_signature:
                thought[0]["thoughtSignature"] = turn.thinking_signature
        if not stream:
            answer: list[Obj] = [{"text": turn.text}] if turn.text else []
            if turn.text_signature:
                if not answer:
                    answer = [{"text": ""}]
                answer[-1]["thoughtSignature"] = turn.text_signature
            called = self._calls(turn, seq)
            parts = [*thought, *(answer + called if turn.text_first else called + answer)]
            body = self._chunk(turn, model, seq, parts)
            body["candidates"][0]["finishReason"] = _finish(turn)
            return JsonReply(body={**body, "usageMetadata": self._usage(turn)})
        chunks: list[Obj] = []
        if thought:
            chunks.append(self._chunk(turn, model, seq, thought))

        def text() -> None:
            chunks.extend(self._chunk(turn, model, seq, [{"text": p}]) for p in turn.fragments)

        def calls() -> None:
            if turn.calls:
                chunks.append(self._chunk(turn, model, seq, self._calls(turn, seq)))

        ordered(turn, text=text, calls=calls)
        if turn.text_signature:
            chunks.append(
                self._chunk(
                    turn, model, seq, [{"text": "", "thoughtSignature": turn.text_signature}]
                )
            )
        if not chunks:
            chunks.append(self._chunk(turn, model, seq, [{"text": ""}]))
        chunks[-1]["candidates"][0]["finishReason"] = _finish(turn)
        chunks[-1]["usageMetadata"] = self._usage(turn)
        return StreamReply(events=[sse(c) for c in chunks])
