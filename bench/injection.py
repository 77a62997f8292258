"""The injection defence: admission latency and the evaluation's figures.

1. Admission: `InjectionDefence.before_tool_admission` for a side-effecting call with
   10 kB of sink arguments (a recipient and a 10 kB command), after 1 MB of untrusted
   tool results entered the run, vs the same call with no defence. Target: p95 <= 2 ms.
   Also the one-off cost of indexing the 1 MB when it arrives.
2. The evaluation (legato.evals.injection): attack success per family (held-out
   families apart) and benign success, defence off / pattern screen / on / quarantine /
   each layer off, with a person who reads questions (`oracle`) and one who approves
   everything (`all`).

Run: python bench/injection.py [--skip-eval]
"""

from __future__ import annotations

import asyncio
import random
import statistics
import string
import sys
import time

from legato.evals.injection import attack_corpus, benign_corpus, evaluate_async
from legato.events import ToolCallFinished
from legato.injection import InjectionDefence
from legato.messages import ToolCallPart, ToolResultPart
from legato.security import HookContext, ToolAdmission
from legato.tools import Tool


def _shell(command: str, to: str) -> str:
    return "ok"


def _words(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10)))
        if rng.random() < 0.01:
            word = f"{word}@{word}.test"
        elif rng.random() < 0.01:
            word = f"https://{word}.test/{word}"
        out.append(word)
        total += len(word) + 1
    return " ".join(out)


async def admission() -> None:
    rng = random.Random(7)
    tool = Tool.from_function(
        _shell,
        name="run",
        side_effects="irreversible",
        sinks={"command": "command", "to": "recipient"},
    )
    guard = InjectionDefence()
    ctx = HookContext(run_id="bench")
    chunks = [_words(rng, 50_000) for _ in range(20)]  # 20 results of 50 kB = 1 MB
    start = time.perf_counter()
    for i, text in enumerate(chunks):
        call = ToolCallPart(id=f"c{i}", name="read_page")
        result = ToolResultPart.text_result(call_id=call.id, name=call.name, text=text)
        guard.on_event(ToolCallFinished(step=1, call=call, result=result), ctx)
    indexed = time.perf_counter() - start
    command = _words(rng, 10_000)
    arguments = {"command": command, "to": "someone@nowhere.test"}
    call = ToolCallPart.from_arguments(id="x", name="run", arguments=arguments)
    admission = ToolAdmission(
        call=call, side_effects="irreversible", arguments=call.arguments, tool=tool
    )
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(300):
        t0, c0 = time.perf_counter(), time.thread_time()
        await guard.before_tool_admission(admission, ctx)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)
    print(
        f"indexing 1 MB of untrusted results on arrival: {indexed * 1e3:.0f} ms (once, 20 results)"
    )
    for label, times in (("wall clock", wall), ("CPU time of this thread", cpu)):
        times.sort()
        p50 = statistics.median(times) * 1e3
        p95 = times[int(len(times) * 0.95)] * 1e3
        print(
            f"admission, 10 kB of sink arguments vs 1 MB untrusted ({label}): "
            f"p50 {p50:.3f} ms, p95 {p95:.3f} ms"
        )
    print("admission with no defence: no hook runs (0 ms added)")


async def evaluation() -> None:
    attacks, benign = attack_corpus(), benign_corpus()
    configs = [
        ("off", "oracle"),
        ("screen", "oracle"),
        ("on", "oracle"),
        ("on", "all"),
        ("quarantine", "all"),
        ("no-provenance", "all"),
        ("no-sinks", "all"),
        ("no-normalise", "all"),
        ("no-capabilities", "all"),
    ]
    for defence, person in configs:
        start = time.perf_counter()
        report = await evaluate_async(attacks, benign, defence=defence, person=person)  # type: ignore[arg-type]
        print(report.table())
        print(f"  ({len(attacks) + len(benign)} runs in {time.perf_counter() - start:.1f} s)")


def main() -> None:
    print(f"python {sys.version.split()[0]}")
    asyncio.run(admission())
    if "--skip-eval" not in sys.argv:
        asyncio.run(evaluation())


if __name__ == "__main__":
    main()
