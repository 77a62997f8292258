"""Context, memory and store figures: compaction time, tokens saved, recall@5, journal I/O,
and what `forget` costs on a store full of journals.

Run: `.venv/bin/python bench/context.py`. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import asyncio
import platform
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from legato import Agent
from legato.context import (
    Chain,
    CharCounter,
    CompactionRequest,
    Compactor,
    ElideToolResults,
    KeepRecent,
    Summarize,
    count_message,
    elide_tool_results,
    is_summary,
    keep_recent,
)
from legato.events import ModelRequested, RunStarted, UserPrompt
from legato.memory import Memory, SQLiteMemory
from legato.messages import Message, ToolCallPart, ToolResultPart
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, ScriptedModel, call, reply

COUNTER = CharCounter()


def count(message: Message) -> int:
    return count_message(message, COUNTER)


def conversation(turns: int, *, result_chars: int = 4000) -> list[Message]:
    """A session of `turns` turns: question, tool call, large result, answer."""
    out: list[Message] = []
    for t in range(turns):
        out.append(Message.user(f"Check the log of day {t}"))
        call = ToolCallPart.from_arguments(id=f"c{t}", name="read_log", arguments={"day": t})
        out.append(Message(role="assistant", parts=(call,)))
        text = (f"day {t} line: request served in {t % 97} ms\n" * 200)[:result_chars]
        out.append(
            Message(
                role="tool",
                parts=(ToolResultPart.text_result(call_id=call.id, name="read_log", text=text),),
            )
        )
        out.append(Message.assistant(f"Day {t} looks normal."))
    return out


def timed(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_compaction_time() -> None:
    print("## Compaction time (best of 3)")
    for n in (1_000, 10_000):
        messages = conversation(n // 4, result_chars=800)

        def keep(messages: list[Message] = messages) -> object:
            return keep_recent(
                messages, budget=8_000, count=count, pinned=lambda i, m: is_summary(m)
            )

        def elide(messages: list[Message] = messages) -> object:
            return elide_tool_results(messages, min_chars=500)

        t_keep = timed(keep)
        t_elide = timed(elide)
        print(
            f"- {n:>6} messages: keep_recent {t_keep * 1000:8.1f} ms, elide_tool_results {t_elide * 1000:8.1f} ms"
        )


def summarizer(request: ModelRequest) -> str:
    return "Days 0 to N were normal; every request was served under 100 ms."


def bench_tokens_saved() -> None:
    print("\n## Tokens saved per strategy on the 500-turn session (budget 8,000 tokens)")
    messages = conversation(500)
    before = sum(count(m) for m in messages)
    strategies: list[Compactor] = [
        ElideToolResults(min_chars=1000),
        KeepRecent(),
        Chain(steps=(ElideToolResults(min_chars=1000), KeepRecent())),
        Summarize(model=FunctionModel(summarizer)),
    ]
    request = CompactionRequest(budget=8_000, count=count, pinned=lambda i, m: is_summary(m))
    for strategy in strategies:
        start = time.perf_counter()
        result = asyncio.run(strategy.compact(messages, request))
        took = time.perf_counter() - start
        after = sum(count(m) for m in result.messages)
        name = strategy.name if not isinstance(strategy, Chain) else "elide+keep_recent"
        print(
            f"- {name:<22} {before:>9,} -> {after:>7,} tokens ({1 - after / before:6.1%} saved), "
            f"{len(result.messages):>5} messages kept, {took * 1000:6.1f} ms"
        )


WORDS = [
    "amber",
    "birch",
    "cobalt",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kelp",
    "lumen",
    "maple",
    "nickel",
    "onyx",
    "pepper",
    "quartz",
    "raven",
    "sable",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "basalt",
    "cedar",
    "dune",
    "flint",
]
ATTRIBUTES = ["owner", "region", "port", "budget", "deadline", "language", "database", "version"]
PARAPHRASES = {
    "owner": "who is responsible for",
    "region": "where is it hosted,",
    "port": "which network port does",
    "budget": "how much money has",
    "deadline": "when is the due date of",
    "language": "which programming language is used in",
    "database": "where is the data stored for",
    "version": "which release is",
}


def bench_recall() -> None:
    print("\n## recall@5 on a generated corpus of 10,000 items")
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        memory = SQLiteMemory(Path(tmp) / "m.db")
        targets: list[tuple[str, str, str]] = []
        start = time.perf_counter()
        # 1,250 projects x 8 attributes: every query's project has 7 distractor items
        for i in range(1_250):
            name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randint(1, 20)}"
            for attribute in ATTRIBUTES:
                value = f"{rng.choice(WORDS)}{rng.randint(1, 999)}"
                item = memory.remember(f"Project {name} has {attribute} {value}.")
                if i % 6 == 0 and rng.random() < 0.2:
                    targets.append((item.id, name, attribute))
        insert = time.perf_counter() - start
        hits = {"same words": 0, "paraphrased": 0}
        start = time.perf_counter()
        for item_id, name, attribute in targets:
            for style, query in (
                ("same words", f"what is the {attribute} of project {name}?"),
                ("paraphrased", f"{PARAPHRASES[attribute]} project {name}?"),
            ):
                found = memory.recall(query, limit=5)
                hits[style] += any(r.item.id == item_id for r in found)
        search = (time.perf_counter() - start) / (2 * len(targets))
    for style, count_ in hits.items():
        print(
            f"- recall@5 ({style} queries) = {count_ / len(targets):.3f} over {len(targets)} queries"
        )
    print(f"- insert {insert:.1f} s for 10,000 items; {search * 1000:.2f} ms per query (BM25 only)")


def bench_journal() -> None:
    print("\n## SQLite journal: 10,000 events")
    events = [RunStarted(run_id="bench", agent="a", model="m")]
    for i in range(9_999):
        events.append(
            UserPrompt(message=Message.user(f"event {i}"))
            if i % 2
            else ModelRequested(step=i, model="m")
        )
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "one.db")
        start = time.perf_counter()
        for i, event in enumerate(events):  # one transaction per event, as a live run does
            store.append_events("bench", [event], start=i)
        one_by_one = time.perf_counter() - start
        store2 = SQLiteStore(Path(tmp) / "batch.db")
        start = time.perf_counter()
        store2.append_events("bench", events, start=0)
        batched = time.perf_counter() - start
        load = timed(lambda: store.load_run("bench"))
    print(
        f"- append one event per transaction: {one_by_one:.2f} s ({one_by_one / len(events) * 1e6:.0f} µs/event)\n"
        f"- append in one transaction: {batched * 1000:.0f} ms\n"
        f"- load the run: {load * 1000:.0f} ms"
    )


def bench_forget(padding_runs: int = 200, events_per_run: int = 100) -> None:
    """`forget` on a store whose journals and sessions quote memory, padded with other runs."""
    print(
        f"\n## forget: 1,000 items, 50 sessions that recalled them, "
        f"{padding_runs * events_per_run:,} other journal events"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "legato.db")
        memory = SQLiteMemory(db=store.db)
        items = [memory.remember(f"Customer {i} prefers plan {i % 7}.") for i in range(1_000)]
        for i in range(50):  # real runs: automatic recall plus a recall tool call
            model = ScriptedModel([reply(call("recall", {"query": f"customer {i} plan"})), "ok"])
            agent = Agent(model, memory=Memory(store=memory), store=store)
            agent.run_sync(f"What plan does customer {i} prefer?", session=f"s{i}")
        filler = [UserPrompt(message=Message.user("x" * 900)) for _ in range(events_per_run - 1)]
        start = time.perf_counter()
        for r in range(padding_runs):
            head = RunStarted(run_id=f"pad-{r}", agent="a", model="m")
            store.append_events(f"pad-{r}", [head, *filler], start=0)
        pad = time.perf_counter() - start
        start = time.perf_counter()
        report = memory.forget(items[3].id)
        one = time.perf_counter() - start
        start = time.perf_counter()
        report_run = memory.forget(run_id="no-such-run")
        nothing = time.perf_counter() - start
        event = UserPrompt(message=Message.user("after"))
        store.append_events("after", [RunStarted(run_id="after", agent="a", model="m")], start=0)
        start = time.perf_counter()
        for k in range(1, 1_001):  # a live run's writes, now that a forgotten id is on record
            store.append_events("after", [event], start=k)
        after = (time.perf_counter() - start) / 1_000
    print(
        f"- padding written in {pad:.1f} s\n"
        f"- forget one item: {one * 1000:.0f} ms (recalled in {len(report.sessions)} sessions: "
        f"{report.messages} messages and {report.events} journal events redacted)\n"
        f"- forget that matches nothing: {nothing * 1000:.0f} ms ({len(report_run.items)} items)\n"
        f"- a journal write afterwards: {after * 1e6:.0f} µs per event"
    )


def main() -> None:
    print(
        f"# bench/context.py — {platform.python_implementation()} {platform.python_version()}, {platform.machine()}\n"
    )
    bench_compaction_time()
    bench_tokens_saved()
    bench_recall()
    bench_journal()
    bench_forget()


if __name__ == "__main__":
    main()
