"""The shipped test doubles and the network guard."""

from __future__ import annotations

import socket

import httpx
import pytest

from legato import Agent
from legato.exceptions import NetworkBlocked, UnknownModel
from legato.models import infer_model, known_providers, register_provider
from legato.testing import FunctionModel, ScriptedModel, block_network, model_from_name


def test_scripted_model_records_requests_and_checks_completion() -> None:
    model = ScriptedModel(["one", "two"])
    Agent(model).run_sync("hi")
    assert len(model.requests) == 1
    with pytest.raises(AssertionError, match="1 of 2 scripted turns"):
        model.assert_complete()
    Agent(model).run_sync("again")
    model.assert_complete()
    with pytest.raises(AssertionError, match="only 2 turns"):
        Agent(model).run_sync("too many")


async def test_function_model_may_be_async() -> None:
    async def answer(request: object) -> str:
        return "async answer"

    result = await Agent(FunctionModel(answer)).run("go")
    assert result.output == "async answer"


def test_test_provider_resolves_by_name() -> None:
    assert "test" in known_providers()
    result = Agent("test:echo").run_sync("ping")
    assert result.output == "echo: ping"
    with pytest.raises(UnknownModel):
        model_from_name("nope")


def test_register_provider() -> None:
    register_provider("fake", lambda name: ScriptedModel([f"model {name}"], name=f"fake:{name}"))
    model = infer_model("fake:x1")
    assert model.name == "fake:x1"
    with pytest.raises(ValueError, match="invalid provider name"):
        register_provider("a:b", lambda name: model)


def test_network_guard_blocks_remote_hosts_but_not_loopback() -> None:
    # tests/conftest.py applies the guard to every test; this one checks it directly too.
    with block_network():
        with pytest.raises(NetworkBlocked):
            socket.getaddrinfo("example.com", 443)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with sock, pytest.raises(NetworkBlocked):
            sock.connect(("93.184.215.14", 80))
        with pytest.raises(NetworkBlocked, match="example.com"):
            httpx.get("https://example.com", timeout=2)
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            client = socket.create_connection(server.getsockname(), timeout=2)
            client.close()


def test_guard_is_off_outside_the_context_manager() -> None:
    # the autouse fixture is active here; after leaving a nested guard it must still be active
    with block_network():
        pass
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("example.com", 443)
