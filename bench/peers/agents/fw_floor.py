"""The floor: the same two requests by a minimal hand-written HTTP/1.1 client, no SDK.

Standard library only: blocking sockets for the sync modes, asyncio streams for the awaited ones,
keep-alive connections reused from a pool, JSON built and read with `json`, SSE read line by line.
It handles exactly what the mock sends (a Content-Length on every response): what the machine
can do, against which every framework's time is read.
"""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

import asyncio
import json
import socket
from typing import Any
from urllib.parse import urlsplit

IMPORTED = time.perf_counter()

TOOLS = _common.WIRE_TOOLS


class Endpoint:
    """Where to post, and the idle keep-alive connections (sync and async)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path.rstrip("/") + "/chat/completions"
        self.idle_sync: list[tuple[socket.socket, Any]] = []
        self.idle_async: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    def head(self, size: int) -> bytes:
        return (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n"
            f"Content-Length: {size}\r\n\r\n"
        ).encode()


def _body(messages: list[Any], stream: bool) -> bytes:
    payload: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "tools": TOOLS}
    if stream:
        payload["stream"] = True
    return json.dumps(payload).encode()


def _length(head: bytes) -> int:
    status = head.split(b" ", 2)[1]
    if status != b"200":
        raise RuntimeError(f"HTTP {status.decode()}")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise RuntimeError("the floor client reads Content-Length bodies only")


def _from_message(data: bytes) -> tuple[str, str, str]:
    message = json.loads(data)["choices"][0]["message"]
    calls = message.get("tool_calls") or [{"id": "", "function": {"arguments": ""}}]
    return message.get("content") or "", calls[0]["function"]["arguments"], calls[0]["id"]


class _Deltas:
    """Accumulates streamed text and tool-call arguments from SSE `data:` lines."""

    def __init__(self) -> None:
        self.text = ""
        self.args = ""
        self.call_id = ""

    def feed(self, line: bytes) -> None:
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            return
        for choice in json.loads(line[6:])["choices"]:
            delta = choice["delta"]
            self.text += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                self.call_id = call.get("id") or self.call_id
                self.args += call.get("function", {}).get("arguments") or ""


def _post_sync(ep: Endpoint, messages: list[Any], stream: bool) -> tuple[str, str, str]:
    if ep.idle_sync:
        sock, rfile = ep.idle_sync.pop()
    else:
        sock = socket.create_connection((ep.host, ep.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = sock.makefile("rb")
    body = _body(messages, stream)
    sock.sendall(ep.head(len(body)) + body)
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += rfile.readline()
    size = _length(head)
    if not stream:
        out = _from_message(rfile.read(size))
    else:
        deltas = _Deltas()
        while size > 0:
            line = rfile.readline()
            size -= len(line)
            deltas.feed(line)
        out = deltas.text, deltas.args, deltas.call_id
    ep.idle_sync.append((sock, rfile))
    return out


async def _post_async(ep: Endpoint, messages: list[Any], stream: bool) -> tuple[str, str, str]:
    if ep.idle_async:
        reader, writer = ep.idle_async.pop()
    else:
        reader, writer = await asyncio.open_connection(ep.host, ep.port, limit=1 << 20)
    body = _body(messages, stream)
    writer.write(ep.head(len(body)) + body)
    size = _length(await reader.readuntil(b"\r\n\r\n"))
    if not stream:
        out = _from_message(await reader.readexactly(size))
    else:
        deltas = _Deltas()
        while size > 0:
            line = await reader.readuntil(b"\n")
            size -= len(line)
            deltas.feed(line)
        out = deltas.text, deltas.args, deltas.call_id
    ep.idle_async.append((reader, writer))
    return out


class Floor(_common.Adapter):
    """Blocking sockets for sync, asyncio streams for async; pooled keep-alive connections."""

    name = "floor"

    def model(self, url: str, streamed: bool = False) -> Any:
        return Endpoint(url)

    def agent(self, model: Any) -> Any:
        return model

    def _sync(self, ep: Endpoint, text: str, stream: bool) -> str:
        content, args, call_id = _post_sync(ep, [{"role": "user", "content": text}], stream)
        follow = _common.follow_up(text, content, call_id, args)
        answer = _post_sync(ep, follow, stream)[0]
        follow.append({"role": "assistant", "content": answer})
        return follow  # the conversation: the session a caller keeps

    async def _async(self, ep: Endpoint, text: str, stream: bool) -> str:
        first = [{"role": "user", "content": text}]
        content, args, call_id = await _post_async(ep, first, stream)
        follow = _common.follow_up(text, content, call_id, args)
        answer = (await _post_async(ep, follow, stream))[0]
        follow.append({"role": "assistant", "content": answer})
        return follow

    def run_sync(self, agent: Any, text: str) -> Any:
        return self._sync(agent, text, False)

    async def run_async(self, agent: Any, text: str) -> Any:
        return await self._async(agent, text, False)

    def stream_sync(self, agent: Any, text: str) -> Any:
        return self._sync(agent, text, True)

    async def stream_async(self, agent: Any, text: str) -> Any:
        return await self._async(agent, text, True)

    def answer(self, result: Any) -> str:
        return str(result[-1]["content"])

    async def aclose(self, model: Any) -> None:
        for _, writer in model.idle_async:
            writer.close()
        model.idle_async.clear()


if __name__ == "__main__":
    _common.main(Floor(), IMPORTED)
