"""The one stream-reading loop every provider uses (`ProviderModel._read_stream`).

Each provider gives it an event translator and a state that says whether its answer ended
as its API requires; the loop maps what breaks a stream off, closes the answer however the
reading ends, and refuses an empty or unfinished stream. The conformance suites check every
provider's behaviour through it; these tests check the loop itself, and that no provider
module keeps a reading loop of its own.
"""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from legato.exceptions import ResponseParseError, StreamInterrupted
from legato.messages import TextDelta
from legato.models._base import ModelProfile, ModelStreamEvent
from legato.models._provider import ProviderModel, ProviderSettings

MODELS = Path(__file__).resolve().parents[2] / "src" / "legato" / "models"


@dataclass
class _State:
    seen: bool = False
    ended: bool = False
    check_end: bool = True

    def unfinished(self) -> str | None:
        return "before the end event" if self.check_end and not self.ended else None


def _translate(event: Any, state: _State) -> list[ModelStreamEvent]:
    if event == "end":
        state.ended = True
        return []
    return [TextDelta(text=event["text"])]


class _Model(ProviderModel):
    provider = "fake"

    def __init__(self) -> None:
        super().__init__("m", settings=ProviderSettings(), profile=ModelProfile())


async def _events(*items: Any, fail: Exception | None = None) -> AsyncIterator[Any]:
    for item in items:
        yield item
    if fail is not None:
        raise fail


async def _read(events: AsyncIterator[Any], state: _State, closed: list[int]) -> list[str]:
    async def close() -> None:
        closed.append(1)

    model = _Model()
    out: list[str] = []
    async for event in model._read_stream(events, _translate, state, state, close=close):
        assert isinstance(event, TextDelta)
        out.append(event.text)
    return out


async def test_a_whole_stream_is_translated_and_closed() -> None:
    closed: list[int] = []
    got = await _read(_events({"text": "a"}, {"text": "b"}, "end"), _State(), closed)
    assert got == ["a", "b"] and closed == [1]


async def test_a_stream_cut_before_its_end_event_is_interrupted() -> None:
    closed: list[int] = []
    with pytest.raises(StreamInterrupted, match="fake:m: the stream ended before the end event"):
        await _read(_events({"text": "a"}), _State(), closed)
    assert closed == [1]


async def test_twin_without_the_end_check_a_cut_stream_passes_for_whole() -> None:
    # the protection off (a state that never says unfinished): the cut answer gets through
    got = await _read(_events({"text": "a"}), _State(check_end=False), [])
    assert got == ["a"]


async def test_an_empty_stream_is_interrupted() -> None:
    with pytest.raises(StreamInterrupted, match="HTTP 200 but the stream had no events"):
        await _read(_events(), _State(check_end=False), [])


async def test_a_payload_of_the_wrong_shape_is_a_parse_error_and_the_answer_closed() -> None:
    closed: list[int] = []
    with pytest.raises(ResponseParseError, match="unexpected response shape"):
        await _read(_events({"txt": "a"}, "end"), _State(), closed)
    assert closed == [1]


async def test_a_transport_failure_mid_stream_is_stream_interrupted() -> None:
    import httpx2

    closed: list[int] = []
    broken = _events({"text": "a"}, fail=httpx2.RemoteProtocolError("peer closed"))
    with pytest.raises(StreamInterrupted, match="broke off"):
        await _read(broken, _State(), closed)
    assert closed == [1]


def test_no_provider_module_keeps_a_reading_loop_of_its_own() -> None:
    # the "nothing came" check lives in the shared loop only: a provider that reads its
    # stream by hand again would need its own copy of it
    owners = {
        path.name
        for path in MODELS.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "the stream had no events" in node.value
    }
    assert owners == {"_provider.py"}
