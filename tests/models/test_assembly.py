"""The tool-call delta assembler against the stream shapes real servers produce."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from legato.messages import StopReason, TextPart, ToolCallPart
from legato.models import TextDelta, ToolCallDelta
from legato.models.assembly import ResponseAssembler


def _calls(assembler: ResponseAssembler) -> list[ToolCallPart]:
    return assembler.build().message.tool_calls


def test_llamacpp_repeats_the_name_in_every_chunk() -> None:
    a = ResponseAssembler()
    for fragment in ["{", ' "', "city", '": "', "Paris", '"}', ""]:
        a.add_tool_call(index=0, id="call_1", name="get_weather", arguments=fragment)
    (call,) = _calls(a)
    assert call.name == "get_weather"
    assert call.arguments == {"city": "Paris"}


def test_id_arriving_late_is_attached() -> None:
    a = ResponseAssembler()
    a.add_tool_call(index=0, name="f", arguments='{"x"')
    a.add_tool_call(index=0, id="late", arguments=": 1}")
    (call,) = _calls(a)
    assert call.id == "late" and call.arguments == {"x": 1}


def test_interleaved_parallel_calls_by_index() -> None:
    a = ResponseAssembler()
    a.add_tool_call(index=0, id="a", name="f", arguments="")
    a.add_tool_call(index=1, id="b", name="g", arguments="")
    a.add_tool_call(index=1, arguments='{"y": ')
    a.add_tool_call(index=0, arguments='{"x": ')
    a.add_tool_call(index=0, arguments="1}")
    a.add_tool_call(index=1, arguments="2}")
    calls = _calls(a)
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {"y": 2}),
    ]


def test_index_collision_with_new_id_starts_a_new_call() -> None:
    a = ResponseAssembler()
    a.add_tool_call(index=0, id="a", name="f", arguments="{}")
    a.add_tool_call(index=0, id="b", name="g", arguments="{}")
    assert [c.id for c in _calls(a)] == ["a", "b"]


def test_calls_keyed_by_id_only() -> None:
    a = ResponseAssembler()
    a.add_tool_call(id="a", name="f", arguments='{"k":')
    a.add_tool_call(id="b", name="g", arguments="{}")
    a.add_tool_call(id="a", arguments=' "v"}')
    assert [c.arguments for c in _calls(a)] == [{"k": "v"}, {}]


def test_text_before_between_and_after_calls_keeps_order() -> None:
    a = ResponseAssembler()
    a.add_text("Let me check. ")
    a.add_tool_call(index=0, id="1", name="f", arguments="{}")
    a.add_text("And also ")
    a.add_tool_call(index=1, id="2", name="g", arguments="{}")
    a.add_text("done.")
    response = a.build()
    kinds = [p.kind for p in response.message.parts]
    assert kinds == ["text", "tool_call", "text", "tool_call", "text"]
    assert response.stop_reason is StopReason.TOOL_CALLS


def test_empty_deltas_emit_nothing() -> None:
    a = ResponseAssembler()
    assert a.add_text("") is None
    assert a.add_text(None) is None
    first = a.add_tool_call(index=0, id="1", name="f")
    assert isinstance(first, ToolCallDelta) and first.name == "f"
    assert a.add_tool_call(index=0, arguments="") is None
    assert a.add_tool_call(index=0, name="f") is None
    assert isinstance(a.add_text("x"), TextDelta)


def test_missing_id_gets_a_stable_one_and_bad_json_is_kept_raw() -> None:
    a = ResponseAssembler()
    a.add_tool_call(index=0, name="f", arguments='{"a": ')
    (call,) = _calls(a)
    assert call.id == "call_0"
    assert call.arguments is None and call.raw_arguments == '{"a": '


def test_thinking_with_signature() -> None:
    a = ResponseAssembler(provider="anthropic")
    a.add_thinking("hmm ")
    a.add_thinking("ok")
    a.add_thinking(signature="sig")
    a.add_text("answer")
    parts = a.build().message.parts
    assert parts[0].kind == "thinking"
    assert parts[0] == parts[0].__class__(text="hmm ok", signature="sig", provider="anthropic")
    assert parts[1] == TextPart(text="answer")


calls_strategy = st.lists(
    st.tuples(
        st.sampled_from(["f", "g", "lookup_user"]),
        st.dictionaries(
            st.sampled_from(["a", "b", "city"]), st.integers() | st.text(max_size=6), max_size=3
        ),
    ),
    min_size=1,
    max_size=4,
)


@given(calls_strategy, st.data())
def test_any_fragmentation_and_interleaving_gives_the_reference_calls(
    calls: list[tuple[str, dict[str, object]]], data: st.DataObject
) -> None:
    reference = [(f"id{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]
    # Cut each call's argument text at random points, then interleave the chunk queues.
    queues: list[list[tuple[int, str | None, str | None, str]]] = []
    for i, (call_id, name, raw) in enumerate(reference):
        cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=5)))
        pieces = [raw[s:e] for s, e in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        repeat_name = data.draw(st.booleans())
        chunks: list[tuple[int, str | None, str | None, str]] = [(i, call_id, name, pieces[0])]
        chunks += [(i, None, name if repeat_name else None, p) for p in pieces[1:]]
        queues.append(chunks)
    a = ResponseAssembler()
    # Each call must have started before the next one starts (index order), as servers do.
    for q in queues:
        a.add_tool_call(index=q[0][0], id=q[0][1], name=q[0][2], arguments=q[0][3])
    rest = [c for q in queues for c in q[1:]]
    order = data.draw(st.permutations(rest))
    # Keep each call's own fragments in order while interleaving calls.
    positions = {i: [c for c in rest if c[0] == i] for i in range(len(queues))}
    for chunk in order:
        own = positions[chunk[0]].pop(0)
        a.add_tool_call(index=own[0], id=own[1], name=own[2], arguments=own[3])
    built = [(c.id, c.name, c.raw_arguments) for c in _calls(a)]
    assert built == reference


def test_part_count_is_the_index_of_the_next_part() -> None:
    a = ResponseAssembler()
    assert a.part_count() == 0
    a.add_thinking("hmm", signature="sig")
    a.close_part()
    a.close_part()  # an empty text part between blocks is no part
    assert a.part_count() == 1
    a.add_text("answer")
    assert a.part_count() == 2  # the open text part counts once it has text
    a.add_tool_call(index=0, id="c1", name="f", arguments="{}")
    built = a.build().message.parts
    assert a.part_count() == len(built) == 3
    assert built[1] == TextPart(text="answer")
