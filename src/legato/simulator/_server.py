"""The wire simulator: a real HTTP server on 127.0.0.1 speaking five providers' wire formats.

```python
from legato.simulator import SimTurn, WireSimulator

with WireSimulator() as sim:
    sim.enqueue(SimTurn(text="Hello!"))
    # point an SDK at sim.url ("/v1" for OpenAI clients) and send a request
```

Each request takes the next scripted `SimTurn` (or asks `responder`) and gets it rendered in
the format of the endpoint it hit, streamed or not, damaged as the turn's `Fault` says.
Chat Completions under `/groq/`, `/mistral/` or `/openrouter/` (`f"{sim.url}/groq/v1"`)
speaks that server's documented variant: Groq's `x_groq.usage`, Mistral's typed content
chunks (thinking, text), OpenRouter's keep-alive comments, numeric in-stream error codes and
`cost` in usage.
Every request is recorded in `requests` with its headers and JSON body.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

from legato.simulator._anthropic import AnthropicWire
from legato.simulator._gemini import GeminiWire
from legato.simulator._ollama import OllamaWire
from legato.simulator._openai import ChatWire, Flavor, ResponsesWire
from legato.simulator._scenario import Fault, SimTurn
from legato.simulator._wire import JsonReply, Obj, StreamReply, Wire, dumps

__all__ = ["RecordedRequest", "WireSimulator"]

_GEMINI_PATH = re.compile(
    r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request the simulator received."""

    api: str
    """Which wire API: `openai_chat`, `openai_responses`, `anthropic`, `gemini` or `ollama`."""
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: Obj
    stream: bool


_FLAVOR = re.compile(r"/(?P<flavor>groq|mistral|openrouter)/")


def _route(path: str, body: Obj) -> tuple[str, Wire, bool, Obj] | None:
    bare = path.split("?", 1)[0]
    if bare.endswith("/chat/completions"):
        flavor = _FLAVOR.search(bare)
        wire = ChatWire(flavor=cast(Flavor, flavor["flavor"]) if flavor else "openai")
        return "openai_chat", wire, bool(body.get("stream")), body
    if bare.endswith("/responses"):
        return "openai_responses", ResponsesWire(), bool(body.get("stream")), body
    if bare.endswith("/messages"):
        return "anthropic", AnthropicWire(), bool(body.get("stream")), body
    if bare.endswith("/api/chat"):
        return "ollama", OllamaWire(), bool(body.get("stream", True)), body
    match = _GEMINI_PATH.search(bare)
    if match:
        stream = match["method"] == "streamGenerateContent"
        return "gemini", GeminiWire(), stream, {**body, "_model": match["model"]}
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet."""

    def _quickack(self) -> None:
        # ACK at once: a client that sends headers and body in two writes (Nagle on) would
        # otherwise wait for the delayed ACK (up to 40 ms) before the body leaves.
        quickack = getattr(socket, "TCP_QUICKACK", None)
        if quickack is not None:
            self.connection.setsockopt(socket.IPPROTO_TCP, quickack, 1)

    def handle_one_request(self) -> None:
        self._quickack()
        super().handle_one_request()

    def do_POST(self) -> None:
        self._quickack()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = cast(Obj, json.loads(raw or b"{}"))
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        route = _route(self.path, body)
        if route is None:
            self._json(404, {"error": {"message": f"simulator: no endpoint {self.path}"}})
            return
        api, wire, stream, view = route
        headers = {k.lower(): v for k, v in self.headers.items()}
        sim = cast(_Server, self.server).simulator
        request = RecordedRequest(
            api=api, path=self.path, headers=headers, body=body, stream=stream
        )
        turn = sim.next_turn(request)
        if turn is None:
            self._json(500, {"error": {"message": "simulator: no scripted turn left"}})
            return
        try:
            self._answer(wire, turn, view, stream=stream, seq=len(sim.requests))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _json(self, status: int, body: Obj, headers: dict[str, str] | None = None) -> None:
        data = dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, wire: Wire, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> None:
        fault = turn.fault or Fault()
        if fault.delay:
            time.sleep(fault.delay)
        if fault.error is not None:
            status, body = wire.error(fault.error, fault.message)
            headers: dict[str, str] = {}
            if fault.retry_after is not None and isinstance(wire, GeminiWire):
                body = wire.with_retry_delay(body, fault.retry_after)
            elif fault.retry_after is not None:
                headers["retry-after"] = f"{fault.retry_after:g}"
            self._json(fault.status or status, body, headers)
            return
        reply = wire.reply(turn, request, stream=stream, seq=seq)
        if isinstance(reply, JsonReply):
            self._whole(reply, fault)
        else:
            self._stream(wire, reply, fault)

    def _whole(self, reply: JsonReply, fault: Fault) -> None:
        data = dumps(reply.body).encode()
        if fault.malformed_after is not None:
            data = data[: max(1, len(data) // 2)]
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if fault.disconnect_after is not None:
            self.wfile.write(data[: fault.disconnect_after])
            self.close_connection = True
            return
        self.wfile.write(data)

    def _stream(self, wire: Wire, reply: StreamReply, fault: Fault) -> None:
        events = [] if fault.empty else list(reply.events)
        if fault.error_event_after is not None:
            n = fault.error_event_after
            events = [*events[:n], wire.error_event(fault.event_error, fault.message)]
        if fault.malformed_after is not None:
            n = fault.malformed_after
            events = [*events[:n], wire.malformed_event(), *events[n:]]
        if fault.raw_event is not None:
            n = fault.raw_after
            events = [*events[:n], fault.raw_event, *events[n:]]
        cut = fault.disconnect_after is not None
        if fault.disconnect_after is not None:
            events = events[: fault.disconnect_after]
        writes: Iterable[bytes] = events
        if fault.byte_split:
            blob = b"".join(events)
            size = fault.byte_split
            writes = [blob[i : i + size] for i in range(0, len(blob), size)]
        self.send_response(200)
        self.send_header("content-type", reply.content_type)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for piece in writes:
            if fault.delay:
                time.sleep(fault.delay)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        if cut:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, simulator: WireSimulator) -> None:
        self.simulator = simulator
        self.connections: set[socket.socket] = set()
        self.accepted = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections.add(request)
            self.accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, cancelled streams) are normal here; stay quiet."""
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | OSError):
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.lock:
            live = list(self.connections)
        for conn in live:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class WireSimulator:
    """A scripted provider server on an ephemeral 127.0.0.1 port (use as a context manager)."""

    def __init__(self, responder: Callable[[RecordedRequest], SimTurn] | None = None) -> None:
        self.responder = responder
        """Computes the turn for a request when the script queue is empty."""
        self.requests: list[RecordedRequest] = []
        """Every request received, in order."""
        self._turns: deque[SimTurn] = deque()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------

    def enqueue(self, *turns: SimTurn) -> WireSimulator:
        """Queue turns; each request takes the next one."""
        with self._lock:
            self._turns.extend(turns)
        return self

    def next_turn(self, request: RecordedRequest) -> SimTurn | None:
        """Record `request` and return the turn that answers it."""
        with self._lock:
            self.requests.append(request)
            if self._turns:
                return self._turns.popleft()
        return self.responder(request) if self.responder is not None else None

    @property
    def connections(self) -> int:
        """TCP connections accepted so far (clients that reuse connections open few)."""
        return self._server.accepted if self._server is not None else 0

    @property
    def pending(self) -> int:
        """Scripted turns not yet used."""
        with self._lock:
            return len(self._turns)

    def assert_complete(self) -> None:
        """Fail unless every scripted turn was requested."""
        if self.pending:
            msg = f"WireSimulator: {self.pending} scripted turns were never requested"
            raise AssertionError(msg)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>` (add `/v1` for OpenAI-style clients)."""
        if self._server is None:
            msg = "the simulator is not running; use it as a context manager or call start()"
            raise RuntimeError(msg)
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> WireSimulator:
        """Start serving in a background thread."""
        if self._server is None:
            self._server = _Server(self)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="legato-wire-simulator",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop every open connection."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        thread.join()

    def __enter__(self) -> WireSimulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
