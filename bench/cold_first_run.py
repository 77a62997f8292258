"""Cold first run: import + construct + one run in a fresh interpreter, two source trees paired.

Run: `python bench/cold_first_run.py BEFORE_SRC AFTER_SRC [--rounds N]` (one tree: give it
twice). The parent serves the wire simulator on 127.0.0.1 over plain http; each round starts
one fresh interpreter per tree (which goes first alternates) that times, in wall and CPU
time, `import legato`, building `Agent(OpenAIChatModel(..., base_url=...))`, and its first
`run_sync`, and reports whether the run loaded the price table (`genai_prices`) or built a
real SSL context. Prints medians per tree and the median of the per-round ratios. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
url = sys.argv[1]
wall, cpu = time.perf_counter(), time.process_time()
import legato
from legato import Agent
from legato.models.openai_chat import OpenAIChatModel
imported = time.perf_counter() - wall
agent = Agent(OpenAIChatModel("gpt-4o", base_url=url + "/v1", api_key="k"))
built = time.perf_counter() - wall
import httpx2
ssl_built = []
create = httpx2.create_ssl_context
def counted(verify=True, *args, **kwargs):
    import ssl
    if not isinstance(verify, ssl.SSLContext):  # one handed in is returned, not built
        ssl_built.append(1)
    return create(verify, *args, **kwargs)
httpx2.create_ssl_context = counted
started = time.perf_counter()
assert agent.run_sync("hi").output
first_run = time.perf_counter() - started
print(json.dumps({
    "import": imported, "construct": built - imported, "first_run": first_run,
    "total": built + first_run, "cpu": time.process_time() - cpu,
    "prices": "genai_prices" in sys.modules,
    "ssl_built": len(ssl_built),
}))
"""

FIGURES = ("import", "construct", "first_run", "total", "cpu")


def _child(src: str, url: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description="paired cold first run of two source trees")
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    from legato.simulator import SimTurn, WireSimulator

    rows: dict[str, list[dict[str, float]]] = {args.before: [], args.after: []}
    with WireSimulator() as sim:
        sim.enqueue(SimTurn(text="warm"))
        _child(args.after, sim.url)  # warms the file cache
        for i in range(args.rounds):
            order = (args.before, args.after) if i % 2 == 0 else (args.after, args.before)
            for src in order:
                sim.enqueue(SimTurn(text="hello"))
                rows[src].append(_child(src, sim.url))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"A = {args.before}, B = {args.after}; {args.rounds} rounds; load average {load}")
    a, b = rows[args.before], rows[args.after]
    for key in FIGURES:
        ratios = [y[key] / x[key] for x, y in zip(a, b, strict=True)]
        print(
            f"  {key:<10} A {statistics.median(r[key] for r in a) * 1e3:7.1f} ms  "
            f"B {statistics.median(r[key] for r in b) * 1e3:7.1f} ms  "
            f"B/A median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})"
        )
    for name, group in (("A", a), ("B", b)):
        print(
            f"  {name}: price table loaded {sum(bool(r['prices']) for r in group)}/{len(group)}, "
            f"real SSL context built {sum(bool(r['ssl_built']) for r in group)}/{len(group)}"
        )


if __name__ == "__main__":
    main()
