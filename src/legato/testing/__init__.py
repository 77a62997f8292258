"""Test doubles for agents: scripted and function-backed models, and a network guard.

```python
from legato import Agent
from legato.testing import ScriptedModel, call, reply

model = ScriptedModel([reply(call("get_weather", {"city": "Paris"})), "It is sunny."])
agent = Agent(model, tools=[get_weather])
assert agent.run_sync("Weather in Paris?").output == "It is sunny."
model.assert_complete()
```

Users test their own agents with the same doubles.
"""

from __future__ import annotations

import contextlib
import inspect
import ipaddress
import itertools
import socket
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from legato.exceptions import NetworkBlocked, UnknownModel
from legato.messages import (
    JsonValue,
    Message,
    ModelResponse,
    Part,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from legato.models import (
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    ResponseCompleted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from legato.testing._gullible import GullibleModel, Obey, Step

__all__ = [
    "FunctionModel",
    "GullibleModel",
    "Obey",
    "ScriptedModel",
    "ScriptedTurn",
    "Step",
    "block_network",
    "call",
    "estimate_usage",
    "model_from_name",
    "reply",
]

Answer: TypeAlias = ModelResponse | Message | str
"""A model's answer in test form: a full response, an assistant message, or plain text."""
ScriptedTurn: TypeAlias = Answer | Callable[[ModelRequest], Answer]
"""One scripted answer, or a function computing it from the request."""


def call(
    name: str,
    arguments: Mapping[str, JsonValue] | None = None,
    *,
    id: str | None = None,
    raw: str | None = None,
) -> ToolCallPart:
    """A tool call for a scripted answer; `raw` gives the argument text verbatim (even invalid JSON)."""
    call_id = id or ""
    if raw is not None:
        return ToolCallPart.from_raw(id=call_id, name=name, raw_arguments=raw)
    return ToolCallPart.from_arguments(id=call_id, name=name, arguments=arguments or {})


def reply(
    *parts: str | Part, usage: Usage | None = None, cost: float | None = None
) -> ModelResponse:
    """An assistant response made of text (str) and parts, in order."""
    built = tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts)
    has_calls = any(isinstance(p, ToolCallPart) for p in built)
    return ModelResponse(
        message=Message(role="assistant", parts=built),
        usage=usage or Usage(),
        stop_reason=StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN,
        cost=cost,
    )


def estimate_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    """Deterministic token counts for test responses (about four characters a token)."""
    prompt = sum(len(text) for text in _request_texts(request))
    answer = sum(
        len(p.text) if isinstance(p, TextPart) else len(getattr(p, "raw_arguments", ""))
        for p in response.message.parts
    )
    return Usage(input_tokens=max(1, prompt // 4), output_tokens=max(1, answer // 4), requests=1)


def _request_texts(request: ModelRequest) -> Iterator[str]:
    if request.instructions:
        yield request.instructions
    for message in request.messages:
        for part in message.parts:
            yield getattr(part, "text", "") or getattr(part, "raw_arguments", "")
    for t in request.tools:
        yield t.name + t.description


class _TestModel:
    """Shared behaviour: turn an answer into a streamed response."""

    def __init__(self, *, name: str, profile: ModelProfile | None, chunk_size: int) -> None:
        self._name = name
        self._profile = profile or ModelProfile()
        self._chunk_size = max(1, chunk_size)
        self._ids = itertools.count(1)
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def profile(self) -> ModelProfile:
        """The capabilities this double claims."""
        return self._profile

    def _response(self, request: ModelRequest, answer: Answer) -> ModelResponse:
        if isinstance(answer, str):
            answer = reply(answer)
        elif isinstance(answer, Message):
            answer = ModelResponse(message=answer)
        parts: list[Part] = []
        for part in answer.message.parts:
            if isinstance(part, ToolCallPart) and not part.id:
                part = replace(part, id=f"call_{next(self._ids)}")
            parts.append(part)
        message = replace(answer.message, parts=tuple(parts))
        response = replace(answer, message=message, model_name=answer.model_name or self._name)
        if response.usage == Usage():
            response = replace(response, usage=estimate_usage(request, response))
        return response

    def _chunks(self, text: str) -> Iterator[str]:
        for start in range(0, len(text), self._chunk_size):
            yield text[start : start + self._chunk_size]

    def _events(self, response: ModelResponse) -> Iterator[ModelStreamEvent]:
        index = 0
        for part in response.message.parts:
            if isinstance(part, TextPart):
                yield from (TextDelta(text=c) for c in self._chunks(part.text))
            elif isinstance(part, ThinkingPart):
                yield from (ThinkingDelta(text=c) for c in self._chunks(part.text))
            elif isinstance(part, ToolCallPart):
                yield ToolCallDelta(index=index, id=part.id, name=part.name)
                yield from (
                    ToolCallDelta(index=index, arguments_delta=c)
                    for c in self._chunks(part.raw_arguments)
                )
                index += 1
        yield ResponseCompleted(response=response)


class ScriptedModel(_TestModel):
    """Answers with a fixed list of turns, one per request, and records the requests.

    A turn is a `ModelResponse` (see `reply`), an assistant `Message`, plain text, or a
    function of the request returning one of those. Responses are streamed in chunks of
    `chunk_size` characters, so streaming code paths are exercised.
    """

    def __init__(
        self,
        turns: Sequence[ScriptedTurn],
        *,
        name: str = "test:scripted",
        profile: ModelProfile | None = None,
        chunk_size: int = 8,
    ) -> None:
        super().__init__(name=name, profile=profile, chunk_size=chunk_size)
        self._turns = list(turns)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Turns not yet used."""
        return len(self._turns) - self._next

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Answer with the next scripted turn."""
        self.requests.append(request)
        if self._next >= len(self._turns):
            msg = f"ScriptedModel: request {len(self.requests)} but only {len(self._turns)} turns were scripted"
            raise AssertionError(msg)
        turn = self._turns[self._next]
        self._next += 1
        answer = turn(request) if callable(turn) else turn
        for event in self._events(self._response(request, answer)):
            yield event

    def assert_complete(self) -> None:
        """Fail unless every scripted turn was used."""
        if self.remaining:
            msg = f"ScriptedModel: {self.remaining} of {len(self._turns)} scripted turns were never requested"
            raise AssertionError(msg)


class FunctionModel(_TestModel):
    """Computes each answer from the request with a function (sync or async)."""

    def __init__(
        self,
        function: Callable[[ModelRequest], Answer | Awaitable[Answer]],
        *,
        name: str = "test:function",
        profile: ModelProfile | None = None,
        chunk_size: int = 8,
    ) -> None:
        super().__init__(name=name, profile=profile, chunk_size=chunk_size)
        self._function = function

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Answer with the function's result for this request."""
        self.requests.append(request)
        answer = self._function(request)
        if inspect.isawaitable(answer):
            answer = await answer
        for event in self._events(self._response(request, answer)):
            yield event


def _echo(request: ModelRequest) -> Answer:
    last_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    return f"echo: {last_user.text if last_user else ''}"


def model_from_name(name: str) -> FunctionModel:
    """The `test:` provider: `test:echo` answers with the last user message."""
    if name == "echo":
        return FunctionModel(_echo, name="test:echo")
    model = f"test:{name}"
    raise UnknownModel(model, ["test:echo"])


# -- the network guard -------------------------------------------------------------------------

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def _is_local(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def block_network() -> Generator[None]:
    """Refuse every connection and name lookup that is not to this machine.

    Loopback addresses and Unix sockets stay usable, so local servers (wire simulators,
    MCP servers) work; anything else raises `NetworkBlocked`.
    """
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host: object = (
                cast(tuple[object, ...], address)[0] if isinstance(address, tuple) else address
            )
            if not _is_local(host):
                msg = f"network access to {address!r} is blocked in tests"
                raise NetworkBlocked(msg)

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        original_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return original_connect_ex(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_local(host.decode() if isinstance(host, bytes) else host):
            msg = f"name lookup of {host!r} is blocked in tests"
            raise NetworkBlocked(msg)
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.socket.connect = original_connect
        socket.socket.connect_ex = original_connect_ex
        socket.getaddrinfo = original_getaddrinfo


def __getattr__(name: str) -> Any:
    # the obeying model lives in its own module (it builds on `_TestModel` above)
    if name in ("GullibleModel", "Obey", "Step"):
        from legato.testing import _gullible

        return getattr(_gullible, name)
    msg = f"module 'legato.testing' has no attribute {name!r}"
    raise AttributeError(msg)
