"""A 500-turn scripted session with large tool outputs under a small context budget."""

from __future__ import annotations

import re
from pathlib import Path

from legato import Agent, tool
from legato.context import RULES, CharCounter, ContextPolicy, count_request, validate
from legato.events import Compacted, ModelResponded
from legato.messages import Message
from legato.models import ModelProfile, ModelRequest
from legato.testing import FunctionModel, call, reply

TURNS = 500
WINDOW = 8000
FACT = re.compile(r"FACT: vault (\d+) opens with code (\w+)")


@tool
def read_log(day: int) -> str:
    """Read one day's server log (large).

    Args:
        day: Day number.
    """
    return "\n".join(f"day {day} line {i}: request served in {i % 97} ms" for i in range(120))


def script(request: ModelRequest) -> object:
    last = request.messages[-1]
    if last.role == "user":
        text = last.text
        facts = FACT.findall(text)
        if facts:
            vault, code = facts[-1]
            return reply(
                call("remember", {"text": f"Vault {vault} opens with code {code}.", "kind": "fact"})
            )
        day = int(text.rsplit(" ", 1)[-1])
        return reply(f"Reading day {day}.", call("read_log", {"day": day}))
    return f"Done with turn {sum(1 for m in request.messages if m.role == 'user')}."


async def test_500_turns_stay_in_budget_with_valid_pairs_and_every_pinned_fact(
    tmp_path: Path,
) -> None:
    from legato.memory import Memory, SQLiteMemory

    memory = SQLiteMemory(tmp_path / "legato.db")
    model = FunctionModel(script, profile=ModelProfile(context_window=WINDOW))  # pyright: ignore[reportArgumentType]
    policy = ContextPolicy(
        trigger=0.8,
        target=0.5,
        counter=CharCounter(),
        pin=lambda m: m.role == "user" and "FACT:" in m.text,
    )
    agent = Agent(
        model,
        tools=[read_log],
        context=policy,
        memory=Memory(store=memory, recall_tokens=0),
        instructions="You are an on-call assistant.",
    )
    history: list[Message] = []
    facts: dict[str, str] = {}
    reported: list[int] = []
    compactions = 0
    raw_tokens = 0
    for turn in range(TURNS):
        if turn % 50 == 7:
            vault, code = str(turn), f"K{turn * 7919 % 100000:05d}"
            facts[vault] = code
            prompt = f"FACT: vault {vault} opens with code {code}"
        else:
            prompt = f"Check the log of day {turn}"
        result = await agent.run(prompt, message_history=history)
        history = result.messages
        compactions += sum(1 for e in result.journal if isinstance(e, Compacted))
        reported += [
            e.response.usage.input_tokens for e in result.journal if isinstance(e, ModelResponded)
        ]
        raw_tokens = count_request(history, CharCounter())

    assert len(history) >= TURNS * 4
    assert compactions > 0
    assert raw_tokens > 20 * WINDOW  # the uncompacted history is far beyond the window
    for request in model.requests:
        estimate = count_request(
            request.messages, CharCounter(), instructions=request.instructions, tools=request.tools
        )
        # compaction aims at 80% of the window by the usage-informed estimate; a fresh
        # count of the same request may differ by a little
        assert estimate <= 0.85 * WINDOW
        for rules in RULES:
            problems = validate(request.messages, rules)
            assert problems == [], f"{rules.name}: {problems[:3]}"
    assert len(reported) == len(model.requests)
    assert max(reported) <= WINDOW  # what the provider counted never overflowed
    final = "\n".join(m.text for m in model.requests[-1].messages)
    for vault, code in facts.items():
        in_context = f"vault {vault} opens with code {code}" in final
        recalled = any(code in r.item.text for r in memory.recall(f"vault {vault} code", limit=5))
        assert in_context or recalled, f"fact about vault {vault} is lost"
        assert in_context  # pinned messages are never compacted away
        assert recalled  # and memory has it too


async def test_a_long_stored_session_summarizes_rarely_and_stays_valid(tmp_path: Path) -> None:
    from legato.context import Summarize
    from legato.store import SQLiteStore

    summaries: list[ModelRequest] = []

    def summarizer(request: ModelRequest) -> str:
        summaries.append(request)
        return f"Summary {len(summaries)}: days were read; all requests were served."

    policy = ContextPolicy(
        strategy=Summarize(model=FunctionModel(summarizer)),
        counter=CharCounter(),
        pinned_state={"vault 7": "K55433"},
    )
    turns = 60

    def agent() -> tuple[Agent[str], FunctionModel]:
        model = FunctionModel(script, profile=ModelProfile(context_window=WINDOW))  # pyright: ignore[reportArgumentType]
        return Agent(model, tools=[read_log], context=policy, store=store), model

    store = SQLiteStore(tmp_path / "legato.db")
    stored, model = agent()
    for turn in range(turns):
        await stored.run(f"Check the log of day {turn}", session="ops")
    with_session = len(summaries)
    for request in model.requests:
        for rules in RULES:
            assert validate(request.messages, rules) == []
        estimate = count_request(
            request.messages, CharCounter(), instructions=request.instructions, tools=request.tools
        )
        assert estimate <= 0.85 * WINDOW
    final = "\n".join(m.text for m in model.requests[-1].messages)
    assert "vault 7: 'K55433'" in final  # pinned state survives every summary
    assert len(store.load_session("ops")) == turns * 4  # the stored history is whole

    # without carrying the view over, every run starts from the whole history and
    # summarizes again on its first call
    summaries.clear()
    plain, _ = agent()
    history: list[Message] = []
    for turn in range(turns):
        history = (
            await plain.run(f"Check the log of day {turn}", message_history=history)
        ).messages
    without = len(summaries)
    print(f"summaries over {turns} turns: {with_session} carried over, {without} without")
    assert with_session > 0
    assert with_session * 3 < without
