"""Chat Completions' `url_citation` annotations, through the official SDK against the simulator.

OpenAI's search models annotate the answer with the sources it cites: on the whole message
(`message.annotations`) or in a streamed delta after the text (a field the SDK's delta type
does not declare). legato keeps them in `provider_details["citations"]`, flattened as the
Responses API gives them, each with the index of the text part it supports.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from conformance_cases import CASES
from scenarios import call, close, make, request_for

from legato.messages import Message, TextPart, messages_from_json, messages_to_json
from legato.simulator import SimCitation, SimTurn, WireSimulator

CHAT = next(c for c in CASES if c.id == "openai-chat")
ANSWER = "Legato is a Python framework for agents."
SOURCE = SimCitation(
    url="https://example.org/legato", title="Legato", cited_text="a Python framework"
)


def citations(message: Message) -> list[dict[str, Any]]:
    found = (message.provider_details or {}).get("citations")
    assert isinstance(found, list), "the citations were dropped"
    return [cast(dict[str, Any], c) for c in found]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_url_citations_are_kept_with_their_text_part(
    sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(SimTurn(text=ANSWER, thinking="Check the docs.", citations=(SOURCE,)))
    model = make(CHAT, sim, stream=stream)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    message = out.response.message
    assert message.text == ANSWER
    (citation,) = citations(message)
    start = ANSWER.index("a Python framework")
    assert citation == {
        "part": citation["part"],
        "type": "url_citation",
        "url": SOURCE.url,
        "title": "Legato",
        "start_index": start,
        "end_index": start + len("a Python framework"),
    }
    assert message.parts[citation["part"]] == TextPart(text=ANSWER)
    # kept through the journal's JSON form, as a resumed run reads it
    (back,) = messages_from_json(messages_to_json([message]))
    assert citations(back) == [citation]


async def test_an_answer_without_sources_has_no_citations(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text=ANSWER))
    model = make(CHAT, sim, stream=True)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert "citations" not in (out.response.message.provider_details or {})
