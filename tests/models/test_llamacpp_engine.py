"""The llama.cpp provider's generation logic, on a scripted stand-in for `llama_cpp.Llama`.

The stand-in tokenizes one character per token and answers each generation phase from a
script, so the switch from free text to a grammar-constrained tool call, stop sequences,
token limits and cancellation are tested exactly, without a model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legato.exceptions import ModelError
from legato.messages import Message, StopReason, ToolDefinition
from legato.models import LOCAL_MODEL, ModelSettings, default_model
from legato.models._llamacpp_prompt import (
    CALL_MARKER,
    TextWatcher,
    chat_turns,
    name_grammar,
    output_or_call_grammar,
)
from legato.models.llamacpp import (
    _Args,
    _CallStart,
    _Done,
    _Failed,
    _Generator,
    _Item,
    _Loaded,
    _Plan,
    _sampling,
)

EOS = -1
WEATHER = ToolDefinition(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SEARCH = ToolDefinition(name="search")


class ScriptedLlama:
    """One character per token; each `generate` call plays the next scripted phase."""

    def __init__(self, phases: Sequence[str], *, end_with_eos: bool = True) -> None:
        self.phases = list(phases)
        self.end_with_eos = end_with_eos
        self.contexts: list[str] = []
        self.grammars: list[object] = []
        self.metadata: dict[str, str] = {}

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [ord(c) for c in text.decode()]

    def detokenize(self, tokens: list[int]) -> bytes:
        return "".join(chr(t) for t in tokens).encode()

    def generate(self, tokens: Sequence[int], **kwargs: Any) -> Iterator[int]:
        self.contexts.append("".join(chr(t) for t in tokens))
        self.grammars.append(kwargs.get("grammar"))
        phase = self.phases.pop(0)
        yield from (ord(c) for c in phase)
        if self.end_with_eos:
            yield EOS
        else:
            while True:
                yield ord(".")

    def n_ctx(self) -> int:
        return 10_000

    def set_seed(self, seed: int) -> None:
        pass

    def close(self) -> None:
        pass


def loaded(llama: ScriptedLlama, *, cached: int = 0) -> _Loaded:
    return _Loaded(
        llama=llama,
        lock=threading.Lock(),
        render=lambda turns: "".join(f"[{t['role']}] {t['content']}\n" for t in turns) + "> ",
        bos_text="",
        is_eog=lambda token: token == EOS,
        grammar=lambda gbnf: f"grammar:{gbnf}",
        schema_grammar=lambda schema: f"schema:{json.dumps(schema)}",
        cached_prefix=lambda tokens: min(cached, len(tokens)),
        load_seconds=0.0,
        n_ctx=10_000,
    )


def run(
    llama: ScriptedLlama,
    *,
    tools: tuple[ToolDefinition, ...] = (),
    forced: bool = False,
    settings: ModelSettings | None = None,
    cancel: threading.Event | None = None,
) -> list[_Item]:
    items: list[_Item] = []
    settings = settings or ModelSettings()
    plan = _Plan(
        prompt="PROMPT ",
        tools=tools,
        forced=forced,
        output_schema=None,
        settings=settings,
        sampling=_sampling(settings),
    )
    _Generator(loaded(llama), plan, emit=items.append, cancel=cancel or threading.Event()).run()
    return items


def text_of(items: list[_Item]) -> str:
    return "".join(getattr(i, "text", "") for i in items if type(i).__name__ == "_Text")


def test_text_streams_one_piece_per_token() -> None:
    items = run(ScriptedLlama(["Hi there"]))
    assert text_of(items) == "Hi there"
    done = items[-1]
    assert isinstance(done, _Done)
    assert done.stop_reason is StopReason.END_TURN
    assert done.usage.output_tokens == len("Hi there")
    assert done.usage.input_tokens == len("PROMPT ")


def test_auto_mode_switches_to_a_constrained_call_when_the_model_starts_one() -> None:
    # The marker arrives split over tokens and is followed by junk the model wrote itself.
    llama = ScriptedLlama(["Let me check. <tool_call> {garbage", "get_weather", '{"city": "Oslo"}'])
    items = run(llama, tools=(WEATHER, SEARCH))
    assert text_of(items) == "Let me check. "
    starts = [i for i in items if isinstance(i, _CallStart)]
    assert [s.name for s in starts] == ["get_weather"]
    assert "".join(i.text for i in items if isinstance(i, _Args)) == '{"city": "Oslo"}'
    done = items[-1]
    assert isinstance(done, _Done)
    assert done.stop_reason is StopReason.TOOL_CALLS
    # Phase 2 sees the canonical start of a call and picks only among the tool names;
    # phase 3 continues after the name under the tool's schema grammar.
    assert llama.contexts[1] == 'PROMPT Let me check.\n<tool_call>\n{"name": "'
    assert llama.grammars[1] == "grammar:" + name_grammar(["get_weather", "search"])
    assert llama.contexts[2].endswith('{"name": "get_weather", "arguments": ')
    assert llama.grammars[2] == "grammar:schema:" + json.dumps(WEATHER.parameters)
    assert llama.grammars[0] is None


def test_forced_call_with_one_tool_skips_the_name_phase() -> None:
    llama = ScriptedLlama(['{"city": "Rome"} \n'])
    items = run(llama, tools=(WEATHER,), forced=True)
    assert text_of(items) == ""
    assert [i.name for i in items if isinstance(i, _CallStart)] == ["get_weather"]
    assert llama.contexts == ['PROMPT <tool_call>\n{"name": "get_weather", "arguments": ']
    # Whitespace after the object (which the grammar allows) is not part of the arguments.
    assert "".join(i.text for i in items if isinstance(i, _Args)) == '{"city": "Rome"}'
    done = items[-1]
    assert isinstance(done, _Done)
    assert done.usage.output_tokens == len('{"city": "Rome"} \n')


def test_cache_reads_count_prompt_tokens_only() -> None:
    for forced, script in ((True, ['{"city": "Rome"}']), (False, ["hello"])):
        items: list[_Item] = []
        settings = ModelSettings()
        plan = _Plan(
            prompt="PROMPT ",
            tools=(WEATHER,),
            forced=forced,
            output_schema=None,
            settings=settings,
            sampling={},
        )
        model = loaded(ScriptedLlama(script), cached=10_000)
        _Generator(model, plan, emit=items.append, cancel=threading.Event()).run()
        done = items[-1]
        assert isinstance(done, _Done)
        assert done.usage.cache_read_tokens == len("PROMPT ") == done.usage.input_tokens


def test_text_that_only_looks_like_the_marker_is_released() -> None:
    items = run(ScriptedLlama(["a <tool_cal and <b>"]), tools=(WEATHER,))
    assert text_of(items) == "a <tool_cal and <b>"
    assert not any(isinstance(i, _CallStart) for i in items)


def test_without_tools_the_marker_is_plain_text() -> None:
    items = run(ScriptedLlama(["x <tool_call> y"]))
    assert text_of(items) == "x <tool_call> y"


def test_stop_sequence_and_max_tokens() -> None:
    items = run(
        ScriptedLlama(["one two STOP three"]), settings=ModelSettings(stop_sequences=("STOP",))
    )
    assert text_of(items) == "one two "
    done = items[-1]
    assert isinstance(done, _Done)
    assert done.stop_reason is StopReason.STOP_SEQUENCE

    items = run(ScriptedLlama(["abcdefgh"]), settings=ModelSettings(max_tokens=3))
    assert text_of(items) == "abc"
    done = items[-1]
    assert isinstance(done, _Done)
    assert done.stop_reason is StopReason.MAX_TOKENS
    assert done.usage.output_tokens == 3


def test_cancellation_stops_an_endless_generation() -> None:
    cancel = threading.Event()
    seen: list[_Item] = []
    llama = ScriptedLlama(["go"], end_with_eos=False)

    def emit(item: _Item) -> None:
        seen.append(item)
        if len(seen) == 50:
            cancel.set()

    plan = _Plan(
        prompt="P",
        tools=(),
        forced=False,
        output_schema=None,
        settings=ModelSettings(),
        sampling={},
    )
    _Generator(loaded(llama), plan, emit=emit, cancel=cancel).run()
    assert len(seen) == 50  # nothing after the cancel, and no _Done
    assert not any(isinstance(i, _Done | _Failed) for i in seen)


def test_failures_in_the_worker_are_reported() -> None:
    class Broken(ScriptedLlama):
        def generate(self, tokens: Sequence[int], **kwargs: Any) -> Iterator[int]:
            raise RuntimeError("llama_decode returned -1")

    items = run(Broken([]))
    [failed] = items
    assert isinstance(failed, _Failed)
    assert isinstance(failed.error, ModelError)
    assert "RuntimeError: llama_decode returned -1" in str(failed.error)
    assert isinstance(failed.error.__cause__, RuntimeError)


# -- pure helpers ------------------------------------------------------------------------------


def test_watcher_holds_back_possible_starts() -> None:
    watcher = TextWatcher([CALL_MARKER, "END"])
    assert watcher.feed("abc <to") == ("abc ", None)
    assert watcher.feed("ol_") == ("", None)
    assert watcher.feed("call> rest") == ("", CALL_MARKER)
    watcher = TextWatcher(["END"])
    assert watcher.feed("x E") == ("x ", None)
    assert watcher.flush() == "E"


def test_chat_turns_merge_system_text() -> None:
    turns = chat_turns(
        [Message.system("Rule 1."), Message.user("hi")],
        instructions="Be brief.",
        tools_prompt="TOOLS",
    )
    assert turns == [
        {"role": "system", "content": "Be brief.\n\nRule 1.\n\nTOOLS"},
        {"role": "user", "content": "hi"},
    ]
    assert chat_turns([Message.user("hi")], instructions=None, tools_prompt=None) == [
        {"role": "user", "content": "hi"}
    ]


def test_grammars() -> None:
    assert name_grammar(["a", 'q"x']) == 'root ::= "a\\"" | "q\\"x\\""\n'
    combined = output_or_call_grammar('root ::= object\nobject ::= "{}"\n')
    assert combined.startswith('root ::= legato-output | "<tool_call>"\n')
    assert "legato-output ::= object" in combined
    assert combined.count("root ::=") == 1


def test_sampling_options() -> None:
    assert _sampling(ModelSettings()) == {"temp": 0.8, "top_p": 0.95}
    options = _sampling(
        ModelSettings(temperature=0, top_p=0.5, extra_body={"repeat_penalty": 1.1, "top_k": 5})
    )
    assert options == {"temp": 0, "top_p": 0.5, "repeat_penalty": 1.1, "top_k": 5}


# -- the default model -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, LOCAL_MODEL),
        ({"ANTHROPIC_API_KEY": " "}, LOCAL_MODEL),
        ({"OPENAI_API_KEY": "sk-x"}, "openai:gpt-4.1-mini"),
        ({"GEMINI_API_KEY": "g", "OPENAI_API_KEY": "o"}, "openai:gpt-4.1-mini"),
        ({"GOOGLE_API_KEY": "g"}, "gemini:gemini-2.5-flash"),
        ({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, "anthropic:claude-sonnet-4-5"),
        ({"LEGATO_MODEL": "test:echo", "ANTHROPIC_API_KEY": "a"}, "test:echo"),
    ],
)
def test_default_model_prefers_a_keyed_provider(environ: dict[str, str], expected: str) -> None:
    assert default_model(environ) == expected


def test_default_model_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("LEGATO_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    assert default_model() == "llamacpp:smollm2"
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    assert default_model() == "gemini:gemini-2.5-flash"


def first_completed(text: str, watched: list[str]) -> tuple[str, str | None]:
    """Reference: the text before the first watched string to be completed, and that string."""
    for end in range(1, len(text) + 1):
        found = [(text.find(w, 0, end), w) for w in watched if text.find(w, 0, end) >= 0]
        if found:
            start, word = min(found)
            return text[:start], word
    return text, None


@given(
    text=st.lists(
        st.sampled_from(["<tool_call>", "<tool", "_call>", "END", "EN", "D x", "a", " ", "<"]),
        max_size=8,
    ).map("".join),
    cuts=st.lists(st.integers(min_value=0, max_value=90), max_size=8),
    watched=st.sampled_from(
        [[CALL_MARKER], [CALL_MARKER, "END"], ["END", "D x"], [CALL_MARKER, "ol_c"], []]
    ),
)
def test_watcher_on_any_split_matches_the_reference(
    text: str, cuts: list[int], watched: list[str]
) -> None:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in zip(points, points[1:], strict=False)]
    watcher = TextWatcher(watched)
    shown: list[str] = []
    hit: str | None = None
    for chunk in chunks:
        safe, hit = watcher.feed(chunk)
        shown.append(safe)
        if hit is not None:
            break
    if hit is None:
        shown.append(watcher.flush())
    assert ("".join(shown), hit) == first_completed(text, watched)
