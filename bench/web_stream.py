"""What the web UI adds to a run: AG-UI mapping, the hub's frame log and SSE framing.

Run: `python bench/web_stream.py`. A scripted model streams a long answer in small chunks
(instantly), once through `agent.stream` alone and once through the web layer (the hub,
the AG-UI mapper, SSE text, read back over HTTP on an in-process ASGI transport). Prints
figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

from legato import Agent
from legato.store import SQLiteStore
from legato.testing import ScriptedModel
from legato.web import create_app

CHUNKS = 2000
ANSWER = "word " * CHUNKS  # 5-character chunks: 2,000 text deltas
REPEATS = 7


def _agent() -> Agent[str]:
    return Agent(ScriptedModel([ANSWER], chunk_size=5))


async def plain() -> tuple[float, int]:
    start = time.perf_counter()
    events = 0
    async for _ in _agent().stream("go"):
        events += 1
    return time.perf_counter() - start, events


async def through_the_web() -> tuple[float, int]:
    app = create_app(_agent(), store=SQLiteStore(":memory:"), token="t", port=8000)
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": "Bearer t"}
    body = {
        "threadId": "bench",
        "runId": "r",
        "messages": [{"id": "m", "role": "user", "content": "go"}],
    }
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1:8000", headers=headers
    ) as http:
        start = time.perf_counter()
        response = await http.post("/api/agui", json=body)
        elapsed = time.perf_counter() - start
    frames = response.text.count("\ndata: ")
    return elapsed, frames


async def main() -> None:
    await plain()  # warm up imports and caches
    await through_the_web()
    plain_times, web_times = [], []
    events = frames = 0
    for _ in range(REPEATS):
        seconds, events = await plain()
        plain_times.append(seconds)
        seconds, frames = await through_the_web()
        web_times.append(seconds)
    p, w = statistics.median(plain_times), statistics.median(web_times)
    print(f"answer of {CHUNKS} text deltas, median of {REPEATS} runs")
    print(f"  agent.stream alone        {p * 1000:8.1f} ms  ({events} events)")
    print(f"  through legato.web (SSE)  {w * 1000:8.1f} ms  ({frames} AG-UI frames)")
    print(f"  added per delta           {(w - p) / CHUNKS * 1e6:8.1f} us")


if __name__ == "__main__":
    asyncio.run(main())
