"""The benchmark's model: a local OpenAI Chat Completions mock that counts and checks every run.

Standard library only (asyncio streams, HTTP/1.1 with keep-alive), 127.0.0.1 only. Every agent
run carries a tag, `[run:<id>]`, in its prompt; the server keys its counts by that tag. The first
request of a run gets a `get_weather(city="Paris")` tool call; the second, which must carry the
tool's output (its mark, `TOOL_MARK`), gets the answer. A framework that ends its runs with a
`final_answer` tool (smolagents) gets the answer as that call. Plain JSON or SSE (`"stream": true`),
with a usage chunk when `stream_options.include_usage` asks for one. A run is verified when the
server saw exactly two requests for its tag, the tool's output absent from the first and present
in the second (`RunCount.problem`).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

ANSWER = "It is sunny in Paris, 24 degrees."
TOOL_MARK = "toolmark-7f3a"
"""Part of the tool's output; the second request of a run must carry it."""
TAG = re.compile(rb"\[run:([A-Za-z0-9_./-]+)\]")


@dataclass
class RunCount:
    """What the server saw for one run tag."""

    requests: int = 0
    with_tool_output: int = 0
    """Requests that carried the tool's output (1 expected: the second)."""
    first_had_output: bool = False

    def problem(self) -> str | None:
        """Why this run does not match "two model calls and one tool call", or None."""
        if self.requests != 2:
            return f"{self.requests} model requests (expected 2)"
        if self.first_had_output:
            return "the tool's output was in the first request"
        if self.with_tool_output != 1:
            return "the second request did not carry the tool's output"
        return None


@dataclass
class _Stats:
    runs: dict[str, RunCount] = field(default_factory=dict[str, RunCount])
    untagged: int = 0
    connections: int = 0
    """TCP connections accepted since the server started."""
    open_now: int = 0
    most_open: int = 0
    """The most connections open at once since `reset_connections`."""


def _completion(kind: str, *, final_tool: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if kind == "call":
        message["tool_calls"] = [_call("call_1", "get_weather", {"city": "Paris"})]
        finish = "tool_calls"
    elif final_tool:
        message["tool_calls"] = [_call("call_2", "final_answer", {"answer": ANSWER})]
        finish = "tool_calls"
    else:
        message["content"] = ANSWER
        finish = "stop"
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1764633600,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def _call(call_id: str, name: str, args: dict[str, str]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1764633600,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def _stream(kind: str, *, final_tool: bool, usage: bool) -> bytes:
    done = _completion(kind, final_tool=final_tool)
    message = done["choices"][0]["message"]
    chunks = [_chunk({"role": "assistant", "content": ""})]
    for i, call in enumerate(message.get("tool_calls") or ()):
        args: str = call["function"]["arguments"]
        head = {"index": i, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        chunks.append(_chunk({"tool_calls": [head]}))
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            part = {"index": i, "function": {"arguments": piece}}
            chunks.append(_chunk({"tool_calls": [part]}))
    if message["content"]:
        words = message["content"].split(" ")
        for j, word in enumerate(words):
            chunks.append(_chunk({"content": word if j == 0 else " " + word}))
    chunks.append(_chunk({}, done["choices"][0]["finish_reason"]))
    if usage:
        tail = _chunk({})
        tail["choices"] = []
        tail["usage"] = done["usage"]
        chunks.append(tail)
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


_CACHE: dict[tuple[str, bool, bool, bool], bytes] = {}


def _response(kind: str, *, stream: bool, final_tool: bool, usage: bool) -> bytes:
    key = (kind, stream, final_tool, usage)
    found = _CACHE.get(key)
    if found is None:
        if stream:
            body, ctype = _stream(kind, final_tool=final_tool, usage=usage), "text/event-stream"
        else:
            body, ctype = json.dumps(_completion(kind, final_tool=final_tool)).encode(), "json"
            ctype = "application/json"
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
        found = _CACHE[key] = head.encode() + body
    return found


def _plain(status: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    return head.encode() + b"\r\n" + data


class MockServer:
    """The mock on 127.0.0.1, on its own event loop in a daemon thread; a context manager."""

    def __init__(self) -> None:
        self._stats = _Stats()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> MockServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096, limit=1 << 20)
            )
            self._server = server
            port = server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}/v1"
            ready.set()
            loop.run_forever()
            server.close()
            pending = asyncio.all_tasks(loop)  # connections clients left open
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending))
            loop.close()

        self._thread = threading.Thread(target=serve, name="peers-mock", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def take(self, prefix: str) -> dict[str, RunCount]:
        """Remove and return the counts of every run whose tag starts with `prefix`."""
        with self._lock:
            mine = {t: c for t, c in self._stats.runs.items() if t.startswith(prefix)}
            for tag in mine:
                del self._stats.runs[tag]
        return mine

    def untagged(self) -> int:
        """Requests that carried no run tag (a broken agent script)."""
        return self._stats.untagged

    def connections(self) -> tuple[int, int]:
        """(connections accepted, the most open at once) since the last reset."""
        with self._lock:
            return self._stats.connections, self._stats.most_open

    def reset_connections(self) -> None:
        """Start counting connections afresh (the ones open now stay counted as open)."""
        with self._lock:
            self._stats.connections = 0
            self._stats.most_open = self._stats.open_now

    def _opened(self, delta: int) -> None:
        with self._lock:
            stats = self._stats
            stats.open_now += delta
            if delta > 0:
                stats.connections += 1
                stats.most_open = max(stats.most_open, stats.open_now)

    def _count(self, body: bytes) -> tuple[str, int]:
        """Record one request; returns (its tag, how many requests that tag has now)."""
        match = TAG.search(body)
        with self._lock:
            if match is None:
                self._stats.untagged += 1
                return "", 1
            tag = match.group(1).decode()
            count = self._stats.runs.get(tag)
            if count is None:
                count = self._stats.runs[tag] = RunCount()
            count.requests += 1
            if TOOL_MARK.encode() in body:
                count.with_tool_output += 1
                if count.requests == 1:
                    count.first_had_output = True
            return tag, count.requests

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._opened(1)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await _read_body(reader, headers)
                writer.write(self._answer(method, path, body))
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:  # the server is shutting down: end quietly
            return
        finally:
            self._opened(-1)
            writer.close()

    def _answer(self, method: str, path: str, body: bytes) -> bytes:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return _plain(
                "200 OK", {"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}
            )
        if method != "POST" or not path.split("?")[0].endswith("/chat/completions"):
            return _plain("404 Not Found", {"error": {"message": f"no route {method} {path}"}})
        _, nth = self._count(body)
        try:
            request = json.loads(body)
        except ValueError:
            return _plain("400 Bad Request", {"error": {"message": "body is not JSON"}})
        tools = [t.get("function", {}).get("name") for t in request.get("tools") or ()]
        stream = bool(request.get("stream"))
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        kind = "call" if nth == 1 else "answer"
        return _response(kind, stream=stream, final_tool="final_answer" in tools, usage=usage)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    return b""
