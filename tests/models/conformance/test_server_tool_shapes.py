"""Citations and the tools a provider runs itself, through the official SDKs against the simulator.

Anthropic: `citations` on text blocks (whole, and as `citations_delta` when streamed) and the
server-tool blocks (`server_tool_use` with its input streamed as `input_json_delta`, and the
`*_tool_result` blocks, their error forms included). OpenAI Responses: `annotations` on output
text (whole, and as `response.output_text.annotation.added`) and the built-in tool items
(`web_search_call`, `file_search_call`, `code_interpreter_call`, `image_generation_call`,
`mcp_call`) with their progress events.
The answer text and the real tool calls come through intact; citations are kept as metadata;
server-tool blocks never turn into tool calls, and a multi-turn conversation goes on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pytest
from conformance_cases import CASES, Case
from scenarios import WEATHER, call, close, make, request_for

from legato.exceptions import ContentFiltered, ResponseParseError
from legato.messages import (
    Message,
    StopReason,
    TextPart,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
)
from legato.simulator import (
    Fault,
    ServerToolKind,
    SimCall,
    SimCitation,
    SimServerTool,
    SimTurn,
    WireSimulator,
)

KINDS: dict[str, tuple[ServerToolKind, ...]] = {
    "anthropic": ("web_search", "web_fetch", "code_execution"),
    "openai_responses": ("web_search", "file_search", "code_execution", "image_generation", "mcp"),
}
SHAPE_CASES = [c for c in CASES if c.api in KINDS]
ANSWER = "Legato is a Python framework for agents."
SOURCE = SimCitation(
    url="https://example.org/legato", title="Legato", cited_text="a Python framework"
)
STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])


def _turn(case: Case, *, failed: bool = False, calls: bool = True) -> SimTurn:
    tools = tuple(SimServerTool(kind=k, failed=failed) for k in KINDS[case.api])
    return SimTurn(
        server_tools=tools,
        text=ANSWER,
        citations=(SOURCE,),
        calls=(SimCall(name="get_weather", arguments={"city": "Bern"}),) if calls else (),
    )


@pytest.mark.parametrize("case", SHAPE_CASES, ids=str)
@pytest.mark.parametrize("failed", [False, True], ids=["result", "error-result"])
@STREAM
async def test_server_tools_and_citations_keep_the_answer_and_the_calls(
    case: Case, sim: WireSimulator, stream: bool, failed: bool
) -> None:
    sim.enqueue(_turn(case, failed=failed))
    model = make(case, sim, stream=stream)
    try:
        out = await call(model, request_for(tools=[WEATHER]))
    finally:
        await close(model)
    message = out.response.message
    assert message.text == ANSWER
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        ("get_weather", {"city": "Bern"})
    ]
    assert out.response.stop_reason is StopReason.TOOL_CALLS
    if stream:
        assert out.text_deltas == ANSWER
        assert set(out.streamed_arguments()) == {0}  # no call made of a server tool's input
    (citation,) = _citations(message)
    assert citation["url"] == SOURCE.url
    part = citation["part"]
    assert isinstance(part, int)
    assert message.parts[part] == TextPart(text=ANSWER)


def _citations(message: Message) -> list[dict[str, Any]]:
    found = (message.provider_details or {}).get("citations")
    assert isinstance(found, list)
    return [cast(dict[str, Any], c) for c in found if isinstance(c, dict)]


async def _both(case: Case) -> tuple[Message, Message]:
    messages: list[Message] = []
    for stream in (True, False):
        with WireSimulator() as fresh:  # a fresh one each, so the made-up ids match
            fresh.enqueue(_turn(case))
            model = make(case, fresh, stream=stream)
            try:
                outcome = await call(model, request_for(tools=[WEATHER]))
            finally:
                await close(model)
            messages.append(outcome.response.message)
    return messages[0], messages[1]


@pytest.mark.parametrize("case", SHAPE_CASES, ids=str)
async def test_streamed_and_whole_keep_the_same_metadata(case: Case) -> None:
    streamed, whole = await _both(case)
    assert streamed.parts == whole.parts
    assert streamed.provider_details == whole.provider_details


def _anthropic_case() -> Case:
    return next(c for c in SHAPE_CASES if c.api == "anthropic")


@STREAM
async def test_anthropic_server_blocks_go_back_in_place_on_the_next_turn(
    sim: WireSimulator, stream: bool
) -> None:
    case = _anthropic_case()
    sim.enqueue(_turn(case), SimTurn(text="Done."))
    model = make(case, sim, stream=stream)
    try:
        first = await call(model, request_for(tools=[WEATHER]))
        # through the journal's JSON form and back, as a resumed run would read it
        (reply,) = messages_from_json(messages_to_json([first.response.message]))
        (tool_call,) = reply.tool_calls
        result = ToolResultPart.text_result(call_id=tool_call.id, name="get_weather", text="sun")
        history = (
            Message.user("What is legato?"),
            reply,
            Message(role="tool", parts=(result,)),
        )
        second = await call(model, request_for(*history, tools=[WEATHER]))
    finally:
        await close(model)
    assert second.response.message.text == "Done."
    sent: list[dict[str, Any]] = sim.requests[1].body["messages"][1]["content"]
    types = [b["type"] for b in sent]
    assert types == [
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_fetch_tool_result",
        "server_tool_use",
        "code_execution_tool_result",
        "text",
        "tool_use",
    ]
    assert sent[0]["input"] == {"query": "legato framework"}  # streamed input reassembled
    assert sent[0]["id"] == sent[1]["tool_use_id"]
    assert sent[1]["content"][0]["url"] == "https://example.org/source"


async def test_anthropic_server_blocks_are_not_sent_to_another_provider(
    sim: WireSimulator,
) -> None:
    case = _anthropic_case()
    other = next(c for c in SHAPE_CASES if c.api == "openai_responses")
    sim.enqueue(_turn(case, calls=False), SimTurn(text="Fine."))
    claude = make(case, sim, stream=True)
    gpt = make(other, sim, stream=True)
    try:
        first = await call(claude, request_for())
        history = (Message.user("What is legato?"), first.response.message, Message.user("Ok?"))
        second = await call(gpt, request_for(*history))
    finally:
        await close(claude)
        await close(gpt)
    assert second.response.message.text == "Fine."
    body = str(sim.requests[1].body)
    assert "server_tool_use" not in body
    assert "srvtoolu" not in body
    assert ANSWER in body


@STREAM
async def test_responses_builtin_items_are_kept_and_not_sent_back(
    sim: WireSimulator, stream: bool
) -> None:
    case = next(c for c in SHAPE_CASES if c.api == "openai_responses")
    turn = _turn(case, calls=False)
    sim.enqueue(
        replace(turn, thinking="Look it up.", thinking_signature="enc"), SimTurn(text="Ok.")
    )
    model = make(case, sim, stream=stream)
    try:
        first = await call(model, request_for())
        reply = first.response.message
        history = (Message.user("What is legato?"), reply, Message.user("Thanks."))
        second = await call(model, request_for(*history))
    finally:
        await close(model)
    assert second.response.message.text == "Ok."
    kept = (reply.provider_details or {}).get("openai_builtin_items")
    assert isinstance(kept, list)
    types = [item["type"] for item in kept if isinstance(item, dict)]
    assert types == [
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
    ]
    sent: list[dict[str, Any]] = sim.requests[1].body["input"]
    kinds = [item.get("type", item.get("role")) for item in sent]
    assert kinds == ["user", "reasoning", "assistant", "user"]


async def test_a_server_tool_input_that_is_not_json_is_a_typed_error(sim: WireSimulator) -> None:
    # The documented input of a server tool is a JSON object; broken text cannot be kept.
    broken = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"input_json_delta","partial_json":"}{"}}\n\n'
    )
    turn = SimTurn(server_tools=(SimServerTool(),), text=ANSWER)
    sim.enqueue(replace(turn, fault=Fault(raw_event=broken, raw_after=3)))
    model = make(_anthropic_case(), sim, stream=True)
    try:
        with pytest.raises(ResponseParseError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert info.value.body is not None


async def test_an_older_or_newer_item_shape_is_kept_without_a_warning(sim: WireSimulator) -> None:
    # An `mcp_call` whose `error` is a bare string (this SDK declares an object): the item is
    # kept as sent; the test suite turns warnings into errors, so a warning would fail here.
    item = (
        '{"type":"mcp_call","id":"mcp_x","server_label":"docs","name":"search_docs",'
        '"arguments":"{}","output":null,"error":"the MCP server did not answer","status":"failed"}'
    )
    done = (
        'event: response.output_item.done\ndata: {"type":"response.output_item.done",'
        f'"sequence_number":3,"output_index":0,"item":{item}}}\n\n'
    ).encode()
    case = next(c for c in SHAPE_CASES if c.api == "openai_responses")
    sim.enqueue(SimTurn(text=ANSWER, fault=Fault(raw_event=done, raw_after=2)))
    model = make(case, sim, stream=True)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert out.response.message.text == ANSWER
    (kept,) = cast(list[Any], (out.response.message.provider_details or {})["openai_builtin_items"])
    assert kept["error"] == "the MCP server did not answer"


@pytest.mark.parametrize("case", SHAPE_CASES, ids=str)
@STREAM
async def test_a_citation_of_a_document_is_kept_with_its_text_part(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    cite = SimCitation(title="notes.txt", cited_text="Python framework", document=0)
    sim.enqueue(SimTurn(thinking="Read the notes.", text=ANSWER, citations=(cite, SOURCE)))
    model = make(case, sim, stream=stream)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    message = out.response.message
    assert message.text == ANSWER
    first, second = _citations(message)
    expected = {"anthropic": "char_location", "openai_responses": "file_citation"}[case.api]
    assert (first["type"], second["url"]) == (expected, SOURCE.url)
    assert first["part"] == second["part"] == 1  # after the thinking part
    assert message.parts[1] == TextPart(text=ANSWER)


@STREAM
async def test_a_responses_refusal_is_content_filtered_with_its_words(
    sim: WireSimulator, stream: bool
) -> None:
    case = next(c for c in SHAPE_CASES if c.api == "openai_responses")
    sim.enqueue(SimTurn(refusal="I can't help with that."))
    model = make(case, sim, stream=stream)
    try:
        with pytest.raises(ContentFiltered) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert "I can't help with that." in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_chat_completions_refusal_is_content_filtered_with_its_words(
    sim: WireSimulator, stream: bool
) -> None:
    """`message.refusal` (whole) and `delta.refusal` (streamed) are the model declining:
    a typed error with its words, never an empty answer."""
    case = next(c for c in CASES if c.api == "openai_chat")
    sim.enqueue(SimTurn(refusal="I can't help with that."))
    model = make(case, sim, stream=stream)
    try:
        with pytest.raises(ContentFiltered) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert "I can't help with that." in str(info.value)
