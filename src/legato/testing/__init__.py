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
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, cast

from legato.exceptions import NetworkBlocked, UnknownModel
from legato.models import ModelProfile, ModelRequest, ModelStreamEvent
from legato.testing._base import (
    Answer,
    BaseTestModel,
    ScriptedTurn,
    call,
    estimate_usage,
    reply,
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


class ScriptedModel(BaseTestModel):
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


class FunctionModel(BaseTestModel):
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
    # the obeying model lives in its own module (it builds on `BaseTestModel`, as the models above do)
    if name in ("GullibleModel", "Obey", "Step"):
        from legato.testing import _gullible

        return getattr(_gullible, name)
    msg = f"module 'legato.testing' has no attribute {name!r}"
    raise AttributeError(msg)
