"""What Ollama's chat API cannot take is refused before sending; what it can take arrives.

A message of Ollama's `/api/chat` has a role, text content, thinking, inline images
(`images`, base64), tool calls and a tool name, and nothing else (Ollama's API reference,
`docs/api.md` in the ollama repository). Before this, an image given
by URL or a document was dropped from the request without a word, and so was an image a
tool returned: the model answered as if it had never been given them. Now the first two
raise `UnsupportedFeature` (nothing is sent), and a tool's images follow its results in a
user message of their own. Each check runs against the wire simulator's Ollama endpoint;
the twin puts the old translation back and shows the parts vanish.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterable

import pytest

import legato.models.ollama as ollama
from legato import Agent, tool
from legato.exceptions import UnsupportedFeature
from legato.messages import DocumentPart, ImagePart, Message, TextPart
from legato.models import ModelRequest
from legato.models._provider import ProviderSettings
from legato.models.ollama import OllamaModel
from legato.models.retry import RetryPolicy
from legato.simulator import SimCall, SimTurn, WireSimulator

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _model(sim: WireSimulator) -> OllamaModel:
    settings = ProviderSettings(stream=True, retry=RetryPolicy(max_attempts=1))
    return OllamaModel("qwen3:0.6b", base_url=sim.url, settings=settings)


async def _ask(model: OllamaModel, *parts: TextPart | ImagePart | DocumentPart) -> str:
    request = ModelRequest(messages=(Message.user(list(parts)),))
    try:
        async for event in model.stream(request):
            response = getattr(event, "response", None)
            if response is not None:
                return response.message.text
    finally:
        await model.aclose()
    raise AssertionError("no response")


async def test_an_image_by_url_is_refused_before_anything_is_sent() -> None:
    with WireSimulator() as sim:
        image = ImagePart(url="https://example.invalid/cat.png")
        with pytest.raises(UnsupportedFeature, match="image by URL") as caught:
            await _ask(_model(sim), TextPart(text="What is this?"), image)
        assert sim.requests == []
    assert caught.value.provider == "ollama"


async def test_a_document_is_refused_before_anything_is_sent() -> None:
    with WireSimulator() as sim:
        document = DocumentPart(data=b"%PDF-1.4 ...", title="report")
        with pytest.raises(UnsupportedFeature, match=r"document \(application/pdf\)"):
            await _ask(_model(sim), TextPart(text="Summarise this."), document)
        assert sim.requests == []


async def test_an_inline_image_still_goes_in_the_messages_images() -> None:
    with WireSimulator() as sim:
        sim.enqueue(SimTurn(text="One pixel."))
        image = ImagePart(data=PIXEL, media_type="image/png")
        assert await _ask(_model(sim), TextPart(text="What is this?"), image) == "One pixel."
        (request,) = sim.requests
    (user,) = [m for m in request.body["messages"] if m["role"] == "user"]
    assert user["images"] == [base64.b64encode(PIXEL).decode()]


@tool
def snapshot() -> ImagePart:
    """Take a picture of the screen."""
    return ImagePart(data=PIXEL, media_type="image/png")


def test_an_image_a_tool_returned_reaches_the_model() -> None:
    with WireSimulator() as sim:
        sim.enqueue(SimTurn(calls=(SimCall(name="snapshot", arguments={}),)))
        sim.enqueue(SimTurn(text="The screen is one pixel."))
        agent = Agent(_model(sim), tools=[snapshot])
        assert agent.run_sync("What is on the screen?").output == "The screen is one pixel."
        second = sim.requests[1].body["messages"]
    roles = [m["role"] for m in second]
    assert roles[-2:] == ["tool", "user"], roles
    assert second[-1]["images"] == [base64.b64encode(PIXEL).decode()]
    assert "image" in second[-1]["content"]


def test_twin_the_old_translation_drops_the_document_unseen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the check (images kept only when inline, the rest skipped), nothing is raised
    and the document is simply not in what Ollama receives."""

    def old(parts: Iterable[object]) -> list[str]:
        return [p.base64 or "" for p in parts if isinstance(p, ImagePart) and p.data is not None]

    monkeypatch.setattr(ollama, "_images", old)
    with WireSimulator() as sim:
        sim.enqueue(SimTurn(text="Here is a summary."))
        document = DocumentPart(data=b"%PDF-1.4 secret figures", title="report")
        text = asyncio.run(_ask(_model(sim), TextPart(text="Summarise this."), document))
        assert text == "Here is a summary."
        body = json.dumps(sim.requests[0].body)
    assert base64.b64encode(b"%PDF-1.4 secret figures").decode() not in body
    assert "report" not in body
