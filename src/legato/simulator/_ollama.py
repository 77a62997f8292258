"""Ollama's native wire format: `POST /api/chat`, streamed as NDJSON."""

from __future__ import annotations

from legato.simulator._scenario import ErrorKind, SimTurn
from legato.simulator._wire import JsonReply, Obj, Reply, StreamReply, ndjson, ordered

__all__ = ["OllamaWire"]

_STATUS: dict[ErrorKind, int] = {
    "rate_limit": 429,
    "overloaded": 503,
    "server": 500,
    "context_length": 400,
    "auth": 401,
    "invalid": 400,
    "not_found": 404,
    "content_filter": 400,
}


class OllamaWire:
    """Ollama `/api/chat`: one JSON object per line, the last with `done: true`."""

    def error(self, kind: ErrorKind, message: str) -> tuple[int, Obj]:
        """Ollama's error body."""
        if kind == "not_found":
            message = f"model not found, try pulling it first ({message})"
        if kind == "context_length":
            message = f"the input length exceeds the context length ({message})"
        return _STATUS[kind], {"error": message}

    def error_event(self, kind: ErrorKind, message: str) -> bytes:
        """An error line inside the stream."""
        return ndjson(self.error(kind, message)[1])

    def malformed_event(self) -> bytes:
        """A truncated JSON line."""
        return b'{"model":"x","message":{"role":"assistant","content":\n'

    def _line(self, model: str, message: Obj, *, done: bool = False) -> Obj:
        return {
            "model": model,
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": "", **message},
            "done": done,
        }

    def _final(self, turn: SimTurn, model: str, message: Obj) -> Obj:
        line = self._line(model, message, done=True)
        line["done_reason"] = turn.raw_finish or ("length" if turn.finish == "length" else "stop")
        line["prompt_eval_count"] = turn.usage.input_tokens
        line["eval_count"] = turn.usage.output_tokens
        line.update(
            total_duration=1000, load_duration=100, prompt_eval_duration=300, eval_duration=600
        )
        return line

    def _calls(self, turn: SimTurn) -> list[Obj]:
        out: list[Obj] = []
        for i, c in enumerate(turn.calls):
            entry: Obj = {"function": {"index": i, "name": c.name, "arguments": c.value}}
            if c.id is not None:
                entry["id"] = c.id
            out.append(entry)
        return out

    def reply(self, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> Reply:
        """A chat response, or its NDJSON lines."""
        model = turn.model or str(request.get("model", "sim"))
        if not stream:
            message: Obj = {"content": turn.text}
            if turn.thinking:
                message["thinking"] = turn.thinking
            if turn.calls:
                message["tool_calls"] = self._calls(turn)
            return JsonReply(body=self._final(turn, model, message))
        lines: list[bytes] = []
        if turn.thinking:
            lines.append(ndjson(self._line(model, {"thinking": turn.thinking})))

        def text() -> None:
            lines.extend(ndjson(self._line(model, {"content": p})) for p in turn.fragments)

        def calls() -> None:
            if turn.calls:
                lines.append(ndjson(self._line(model, {"tool_calls": self._calls(turn)})))

        ordered(turn, text=text, calls=calls)
        lines.append(ndjson(self._final(turn, model, {})))
        return StreamReply(events=lines, content_type="application/x-ndjson")
