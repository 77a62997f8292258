"""Memory after one run: legato against the raw OpenAI SDK, and what a held result holds.

Run: `python bench/memory_after_run.py [--rounds N]`. The parent serves the wire simulator
(127.0.0.1); each round starts two fresh interpreters in turn (which goes first
alternates): one makes a chat completion with the raw `openai` SDK, the other runs
`Agent(OpenAIChatModel(...)).run_sync(...)` against the same server, and each reports its
RSS after the run (the result still held), the peak RSS, the modules loaded and the time
from its first line to the run's end (import + construct + one run). The raw SDK runs
twice: as installed here (with `openai[aiohttp]`, whose `import openai` imports aiohttp),
and with aiohttp hidden, as the SDK installed without the extra. Prints medians, the
differences, and how much of legato's process is the price table
(`genai_prices`, loaded when a response is priced). Then, in this process, the size of
a held `RunResult` (tracemalloc, 200 results held) next to its messages alone. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tracemalloc

CHILD = r"""
import time
wall, cpu = time.perf_counter(), time.process_time()
import json, sys
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
url, mode = sys.argv[1], sys.argv[2]
if mode == "raw-no-aiohttp":
    sys.modules["aiohttp"] = None  # as if the SDK were installed without its aiohttp extra
if mode.startswith("raw"):
    import openai
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    held = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    assert held.choices[0].message.content
else:
    from legato import Agent
    from legato.models.openai_chat import OpenAIChatModel
    agent = Agent(OpenAIChatModel("gpt-4o", base_url=url + "/v1", api_key="k"))
    held = agent.run_sync("hi")
    assert held.output
print(json.dumps({
    "rss": status("VmRSS"),
    "peak": status("VmHWM"),
    "modules": len(sys.modules),
    "prices": "genai_prices" in sys.modules,
    "aiohttp": sys.modules.get("aiohttp") is not None,
    "cold_ms": (time.perf_counter() - wall) * 1e3,
    "cold_cpu_ms": (time.process_time() - cpu) * 1e3,
}))
"""


def _child(url: str, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _prices_rss() -> float:
    """RSS (MB) that loading the price table and pricing one call adds, in a fresh process."""
    code = (
        "import legato.models.openai_chat as m, openai\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS'): return int(line.split()[1]) / 1024\n"
        "before = rss()\n"
        "from legato.messages import Usage\n"
        "from legato.models._provider import cost_in_dollars\n"
        "assert cost_in_dollars(Usage(input_tokens=10, output_tokens=5), model='gpt-4o',"
        " provider_id='openai')\n"
        "print(rss() - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def held_result_sizes(count: int = 200) -> tuple[float, float]:
    """Bytes per held `RunResult` and per list of its messages alone (tool call + answer)."""
    from legato import Agent, RunResult, tool
    from legato.testing import ScriptedModel, call, reply

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: What to look up.
        """
        return "value " * 20

    def one() -> RunResult[str]:
        model = ScriptedModel([reply(call("lookup", {"key": "k"})), "the answer is " * 10])
        return Agent(model, tools=[lookup]).run_sync("question " * 5)

    one()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    held = [one() for _ in range(count)]
    gc.collect()
    whole = (tracemalloc.get_traced_memory()[0] - base) / count
    messages = [list(r.messages) for r in held]
    del held
    gc.collect()
    alone = (tracemalloc.get_traced_memory()[0] - base) / count
    tracemalloc.stop()
    assert len(messages) == count
    return whole, alone


def main() -> None:
    parser = argparse.ArgumentParser(description="RSS after one run, legato vs the raw SDK")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from legato.simulator import SimTurn, WireSimulator

    modes = ("raw", "raw-no-aiohttp", "legato")
    figures: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    with WireSimulator() as sim:
        for i in range(args.rounds):
            order = modes if i % 2 == 0 else modes[::-1]
            for mode in order:
                sim.enqueue(SimTurn(text="hello there " * 20))
                figures[mode].append(_child(sim.url, mode))
    print(f"python {sys.version.split()[0]}, {args.rounds} rounds, one fresh process per run")
    for mode, rows in figures.items():
        print(
            f"  {mode:<14} RSS after one run {statistics.median(r['rss'] for r in rows):6.1f} MB"
            f"  peak {statistics.median(r['peak'] for r in rows):6.1f} MB"
            f"  modules {statistics.median(r['modules'] for r in rows):5.0f}"
            f"  price table loaded: {all(r['prices'] for r in rows)}"
            f"  aiohttp loaded: {all(r['aiohttp'] for r in rows)}"
            f"  cold (import + construct + one run) {statistics.median(r['cold_ms'] for r in rows):6.0f} ms"
            f", CPU {statistics.median(r['cold_cpu_ms'] for r in rows):6.0f} ms"
        )
    for raw in ("raw", "raw-no-aiohttp"):
        pairs = list(zip(figures[raw], figures["legato"], strict=True))
        gap = statistics.median(b["rss"] - a["rss"] for a, b in pairs)
        cold = statistics.median(b["cold_cpu_ms"] / a["cold_cpu_ms"] for a, b in pairs)
        print(
            f"  legato - {raw}: {gap:+.1f} MB (target: +3 MB at most); "
            f"cold CPU legato / {raw}: {cold:.2f}x (target: 0.9x at most)"
        )
    print(f"  of which loading the price table and pricing one call: {_prices_rss():+.1f} MB")
    whole, alone = held_result_sizes()
    print(
        f"  a held RunResult (tool call + answer): {whole / 1024:.2f} KiB; its messages alone "
        f"{alone / 1024:.2f} KiB ({whole / alone:.1f}x; the rest is the journal's events)"
    )


if __name__ == "__main__":
    main()
