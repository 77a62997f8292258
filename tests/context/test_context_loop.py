"""Compaction inside the agent loop: triggers, journal events, overflow retry, summaries."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from legato import Agent, tool
from legato.context import (
    RULES,
    CharCounter,
    ContextPolicy,
    ElideToolResults,
    KeepRecent,
    Summarize,
    count_request,
    validate,
)
from legato.events import Compacted, Journal, ModelRequested, ModelResponded, RunStarted, UserPrompt
from legato.exceptions import (
    CompactionFailed,
    ConfigurationError,
    ContextLengthExceeded,
    ModelTimeout,
)
from legato.messages import Message
from legato.models import ModelProfile, ModelRequest
from legato.run._context import ContextStep, context_view
from legato.store import SQLiteStore
from legato.testing import FunctionModel, ScriptedModel, call, reply


@tool
def fetch(page: int) -> str:
    """Fetch a large page.

    Args:
        page: Page number.
    """
    return f"page {page}: " + "lorem ipsum " * 800


def request_tokens(request: ModelRequest) -> int:
    return count_request(
        request.messages, CharCounter(), instructions=request.instructions, tools=request.tools
    )


def paging_model(pages: int, *, window: int = 6000) -> ScriptedModel:
    turns = [reply(f"Reading page {i}.", call("fetch", {"page": i})) for i in range(pages)]
    return ScriptedModel([*turns, "All pages read."], profile=ModelProfile(context_window=window))


def test_without_a_policy_the_request_grows_past_the_window() -> None:
    model = paging_model(8, window=12_000)
    Agent(model, tools=[fetch]).run_sync("Read every page.")
    assert max(request_tokens(r) for r in model.requests) > 12_000


def test_threshold_compaction_keeps_every_request_inside_the_window() -> None:
    model = paging_model(8, window=12_000)
    policy = ContextPolicy(trigger=0.8, target=0.5, counter=CharCounter())
    result = Agent(model, tools=[fetch], context=policy).run_sync("Read every page.")
    assert result.output == "All pages read."
    assert all(request_tokens(r) <= 0.8 * 12_000 for r in model.requests)
    for r in model.requests:
        for rules in RULES:
            assert validate(r.messages, rules) == []
    compactions = [e for e in result.journal if isinstance(e, Compacted)]
    assert compactions
    assert all(c.reason == "threshold" for c in compactions)
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    # the full history is intact: the result and the journal still hold every page
    assert sum(len(m.tool_results) for m in result.messages) == 8
    elided = {call_id for c in compactions for call_id in c.elided}
    assert elided
    # unchanged messages are stored by reference only, so the events stay small
    pairs = [(m, s) for c in compactions for m, s in zip(c.messages, c.sources, strict=True)]
    assert any(m is None for m, _ in pairs)
    assert all(s >= 0 for m, s in pairs if m is None)
    # the first user message was never dropped (it is the latest user message)
    assert all(r.messages[0].text.endswith("Read every page.") for r in model.requests)


def test_compacted_event_records_what_was_removed() -> None:
    model = paging_model(10, window=4000)
    policy = ContextPolicy(strategy=KeepRecent(), counter=CharCounter())
    result = Agent(model, tools=[fetch], context=policy).run_sync("Read.")
    compactions = [e for e in result.journal if isinstance(e, Compacted)]
    assert compactions
    first = compactions[0]
    assert first.removed
    for index in first.removed:
        assert 0 <= index < first.upto
        assert result.messages[index] is not None  # the removed messages stay in the history
    kept = [s for s in first.sources if s >= 0]
    assert not set(kept) & set(first.removed)
    assert all(m is not None for m, s in zip(first.messages, first.sources, strict=True) if s < 0)
    loaded = Journal.from_jsonl(result.journal.to_jsonl())
    assert loaded == result.journal  # Compacted round-trips through JSON


def test_recall_result_brings_an_elided_result_back() -> None:
    seen: list[str] = []

    def model_fn(request: ModelRequest) -> str | object:
        step = sum(1 for m in request.messages if m.role == "assistant")
        last = request.messages[-1]
        if last.role == "tool" and last.tool_results[0].name == "recall_result":
            seen.append(last.tool_results[0].text)
            return "Recalled."
        if step < 4:
            return reply(call("fetch", {"page": step}))
        stub = next(
            r
            for m in request.messages
            for r in m.tool_results
            if r.text.startswith("[legato: result elided")
        )
        return reply(call("recall_result", {"handle": stub.call_id}))

    model = FunctionModel(model_fn, profile=ModelProfile(context_window=5000))  # pyright: ignore[reportArgumentType]
    policy = ContextPolicy(
        strategy=ElideToolResults(keep_last_rounds=1, min_chars=1000), counter=CharCounter()
    )
    result = Agent(model, tools=[fetch], context=policy).run_sync("Read.")
    assert result.output == "Recalled."
    assert seen
    assert seen[0].startswith("page ")
    assert "lorem ipsum" in seen[0]


def test_context_length_error_compacts_and_retries_once() -> None:
    limit = 5000

    def strict(request: ModelRequest) -> object:
        if request_tokens(request) > limit:
            msg = "maximum context length exceeded"
            raise ContextLengthExceeded(msg, status_code=400)
        if len([m for m in request.messages if m.role == "tool"]) < 6 and not any(
            "removed" in m.text for m in request.messages
        ):
            return reply(call("fetch", {"page": len(request.messages)}))
        return "done"

    # no window in the profile: only the provider's error tells us
    model = FunctionModel(strict)  # pyright: ignore[reportArgumentType]
    policy = ContextPolicy(strategy=KeepRecent(), counter=CharCounter())
    result = Agent(model, tools=[fetch], context=policy).run_sync("Go.")
    assert result.output == "done"
    compactions = [e for e in result.journal if isinstance(e, Compacted)]
    assert compactions
    assert compactions[0].reason == "context_length_exceeded"
    steps = [e.step for e in result.journal if isinstance(e, ModelRequested)]
    assert steps == sorted(steps)
    assert len(steps) > len(set(steps))  # the retried call kept its step number

    # the protection off: the same run fails with the provider's error
    with pytest.raises(ContextLengthExceeded):
        Agent(FunctionModel(strict), tools=[fetch]).run_sync("Go.")  # pyright: ignore[reportArgumentType]


def test_a_failing_summary_call_is_a_typed_error_and_the_session_is_untouched(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "legato.db")
    Agent(ScriptedModel(["hi"]), store=store).run_sync("hello", session="s")

    async def broken(request: ModelRequest) -> str:
        raise ModelTimeout("summary model timed out")

    policy = ContextPolicy(strategy=Summarize(model=FunctionModel(broken)), counter=CharCounter())
    agent = Agent(paging_model(6, window=4000), tools=[fetch], context=policy, store=store)
    with pytest.raises(CompactionFailed, match="timed out"):
        agent.run_sync("Read.", session="s")
    assert [m.text for m in store.load_session("s")] == ["hello", "hi"]


def test_summary_is_cached_in_the_journal_and_never_recomputed() -> None:
    calls: list[ModelRequest] = []

    def summarizer(request: ModelRequest) -> str:
        calls.append(request)
        return "The user asked for pages; pages 0-3 were lorem ipsum."

    model = paging_model(0, window=3000)
    policy = ContextPolicy(
        strategy=Summarize(model=FunctionModel(summarizer)),
        counter=CharCounter(),
        pinned_state={"order_id": 42},
    )
    history = [Message.user("Read the pages.")]
    for i in range(4):
        history += [
            reply(call("fetch", {"page": i}, id=f"c{i}")).message,
            Message(
                role="tool",
                parts=(fetch_result(f"c{i}", i),),
            ),
        ]
    events = [RunStarted(run_id="r", agent="a", model="m", history=tuple(history))]
    step = ContextStep(policy, model)
    view, event = asyncio.run(step.prepare(events, history, instructions=None, tools=()))
    assert event is not None
    assert event.summary == "The user asked for pages; pages 0-3 were lorem ipsum."
    assert any("order_id: 42" in m.text for m in view)
    assert len(calls) == 1
    # resume: the journal with the event gives the same view without calling the model
    again, second = asyncio.run(
        step.prepare([*events, event], history, instructions=None, tools=())
    )
    assert second is None
    assert again == view
    assert len(calls) == 1
    # and the journal round-trip keeps the summary
    restored = Journal.from_jsonl(Journal([*events, event]).to_jsonl())
    assert context_view(restored.events, history)[0] == view


def fetch_result(call_id: str, page: int):
    from legato.messages import ToolResultPart

    return ToolResultPart.text_result(
        call_id=call_id, name="fetch", text=f"page {page}: " + "lorem ipsum " * 800
    )


def test_provider_usage_is_the_truth_for_the_next_estimate() -> None:
    from legato.messages import Usage

    # the provider counts twice what chars/4 says: the estimate follows the provider
    model = ScriptedModel(
        [reply(call("fetch", {"page": 1}), usage=Usage(input_tokens=208, output_tokens=10))],
        profile=ModelProfile(context_window=100_000),
    )
    history = [Message.user("x" * 400)]  # 4 + 100 counted tokens
    response = model_response(model, history)
    messages = [*history, response.response.message, Message.user("more")]
    events = [
        RunStarted(run_id="r", agent="a", model="m"),
        UserPrompt(message=history[0]),
        response,
    ]
    counter = CharCounter()
    step = ContextStep(ContextPolicy(counter=counter), model)
    estimate = step.estimate(counter, events, messages, messages, overhead=0)
    assert step.ratio == 2.0
    assert estimate == 208 + 10 + 2 * (4 + counter.count("more"))


def test_compaction_budgets_in_the_providers_tokens_when_the_counter_is_off() -> None:
    from legato.messages import Usage

    window = 12_000
    pages = iter(range(10))

    def provider(request: ModelRequest) -> object:
        # this provider's tokenizer yields 1.6x what chars/4 counts
        reported = int(request_tokens(request) * 1.6)
        if reported > window:
            msg = f"{reported} tokens is more than {window}"
            raise ContextLengthExceeded(msg)
        page = next(pages, None)
        answer = reply(call("fetch", {"page": page})) if page is not None else reply("done")
        return replace(answer, usage=Usage(input_tokens=reported, output_tokens=5))

    model = FunctionModel(provider, profile=ModelProfile(context_window=window))  # pyright: ignore[reportArgumentType]

    def after_compactions(policy: ContextPolicy) -> list[int]:
        """What the provider counted for each request sent right after a compaction."""
        result = Agent(model, tools=[fetch], context=policy).run_sync("Read ten pages.")
        assert result.output == "done"
        sizes: list[int] = []
        compacted = False
        for event in result.journal:
            if isinstance(event, Compacted):
                compacted = True
            elif isinstance(event, ModelResponded) and compacted:
                sizes.append(event.response.usage.input_tokens)
                compacted = False
        return sizes

    target = 0.5 * window
    calibrated = after_compactions(ContextPolicy(counter=CharCounter()))
    assert calibrated
    assert all(size <= target * 1.1 for size in calibrated)  # aimed at the provider's count
    # the protection off: compacting by the counter's own numbers misses the target
    pages = iter(range(10))
    uncalibrated = after_compactions(ContextPolicy(counter=CharCounter(), calibrate=False))
    assert uncalibrated
    assert all(size > target * 1.3 for size in uncalibrated)


def model_response(model: ScriptedModel, history: list[Message]) -> ModelResponded:
    from legato.models import complete

    response = asyncio.run(complete(model, ModelRequest(messages=tuple(history))))
    return ModelResponded(step=1, response=response)


def test_policy_validation() -> None:
    with pytest.raises(ConfigurationError):
        ContextPolicy(trigger=0.5, target=0.6)
    with pytest.raises(ConfigurationError):
        ContextPolicy(window=0)


def test_a_session_continues_from_its_compacted_view_without_summarizing_again(
    tmp_path: Path,
) -> None:
    calls: list[ModelRequest] = []

    def summarizer(request: ModelRequest) -> str:
        calls.append(request)
        return "Pages 0-5 were read; all lorem ipsum."

    store = SQLiteStore(tmp_path / "legato.db")
    policy = ContextPolicy(
        strategy=Summarize(model=FunctionModel(summarizer)), counter=CharCounter()
    )
    first = paging_model(6, window=12_000)
    Agent(first, tools=[fetch], context=policy, store=store).run_sync("Read.", session="s")
    assert len(calls) == 1
    carried = store.session_context("s")
    assert carried is not None
    assert carried.summary == "Pages 0-5 were read; all lorem ipsum."

    second = ScriptedModel(["Yes, all read."], profile=ModelProfile(context_window=12_000))
    result = Agent(second, tools=[fetch], context=policy, store=store).run_sync(
        "Did you read them?", session="s"
    )
    assert len(calls) == 1  # the summary was not computed again
    sent = second.requests[0].messages
    assert "[legato: summary of 6 earlier messages]" in sent[0].text
    assert sent[-1].text == "Did you read them?"
    assert sum(len(m.tool_results) for m in result.messages) == 6  # history whole
    [event] = [e for e in result.journal if isinstance(e, Compacted)]
    assert event.reason == "carried_over"

    # undoing turns until the view covers missing messages drops the carried view
    store.undo_turn("s")
    assert store.session_context("s") is not None
    store.undo_turn("s")
    assert store.session_context("s") is None


def test_repeated_summaries_fold_into_one_instead_of_piling_up() -> None:
    from legato.context import CompactionRequest, count_message, is_summary

    counter = CharCounter()
    summaries = iter(["first summary", "second summary"])
    strategy = Summarize(model=FunctionModel(lambda request: next(summaries)))
    request = CompactionRequest(
        budget=400,
        count=lambda m: count_message(m, counter),
        pinned=lambda i, m: is_summary(m),
    )
    messages = [
        m
        for i in range(20)
        for m in (Message.user(f"q{i} " * 40), Message.assistant(f"a{i} " * 40))
    ]
    once = asyncio.run(strategy.compact(messages, request))
    grown = [
        *once.messages,
        *[
            m
            for i in range(20, 30)
            for m in (Message.user(f"q{i} " * 40), Message.assistant(f"a{i} " * 40))
        ],
    ]
    twice = asyncio.run(strategy.compact(grown, request))
    notes = [m for m in twice.messages if is_summary(m)]
    assert len(notes) == 1
    assert "second summary" in notes[0].text
    assert "first summary" not in "".join(m.text for m in twice.messages)


def test_between_compactions_each_request_extends_the_previous_one_byte_for_byte() -> None:
    from legato.messages import messages_to_json

    model = paging_model(12, window=12_000)
    policy = ContextPolicy(counter=CharCounter())
    result = Agent(model, tools=[fetch], context=policy).run_sync("Read every page.")
    # which requests came right after a compaction
    after_compaction: list[bool] = []
    pending = False
    for event in result.journal:
        if isinstance(event, Compacted):
            pending = True
        elif isinstance(event, ModelRequested):
            after_compaction.append(pending)
            pending = False
    assert any(after_compaction)
    rewrites = 0
    for k in range(1, len(model.requests)):
        before = messages_to_json(model.requests[k - 1].messages)[:-1]
        now = messages_to_json(model.requests[k].messages)
        if not now.startswith(before):
            rewrites += 1
            assert after_compaction[k], f"request {k} rewrote its prefix without a compaction"
    assert rewrites == sum(after_compaction)


def test_pinned_state_keys_are_copied_from_the_runs_state_into_the_summary() -> None:
    policy = ContextPolicy(
        strategy=Summarize(model=FunctionModel(lambda request: "Older turns, summarized.")),
        counter=CharCounter(),
        pinned_state_keys=("order_id", "missing_key"),
        window=400,
    )
    history = [
        m
        for i in range(12)
        for m in (Message.user(f"question {i} " * 20), Message.assistant(f"answer {i} " * 20))
    ]
    step = ContextStep(policy, ScriptedModel([]))
    view, event = asyncio.run(
        step.prepare(
            [RunStarted(run_id="r", agent="a", model="m", history=tuple(history))],
            history,
            instructions=None,
            tools=(),
            state_values={"order_id": 4711, "status": "open"},
        )
    )
    assert event is not None
    text = "\n".join(m.text for m in view)
    assert "order_id: 4711" in text
    assert "status" not in text  # only the pinned keys
