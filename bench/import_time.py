"""Cold `import legato` time: median and spread over fresh interpreter processes.

Run: `python bench/import_time.py [runs]`. Prints figures; asserts nothing.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

SNIPPET = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def measure(module: str, runs: int) -> list[float]:
    times: list[float] = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", SNIPPET.format(module=module)],
            check=True,
            capture_output=True,
            text=True,
        )
        times.append(float(out.stdout.strip()) * 1000)
    return times


def heaviest_imports(limit: int = 8) -> list[tuple[int, str]]:
    """Top-level modules by cumulative import time, from `python -X importtime`."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import legato"],
        check=True,
        capture_output=True,
        text=True,
    )
    rows: list[tuple[int, str]] = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = line.removeprefix("import time:").split("|")
        if not name.startswith("  "):  # nested imports are indented further
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:limit]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    measure("legato", 3)  # warm the file cache
    legato = measure("legato", runs)
    pydantic = measure("pydantic", runs)
    print(f"python {sys.version.split()[0]}, {runs} runs each")
    for name, times in (("legato", legato), ("pydantic (dependency)", pydantic)):
        q = statistics.quantiles(times, n=10)
        print(
            f"  import {name:<22} median {statistics.median(times):6.1f} ms   p10 {q[0]:6.1f}   p90 {q[-1]:6.1f}"
        )
    print("  heaviest top-level imports (cumulative µs, one run):")
    for micros, name in heaviest_imports():
        print(f"    {micros:>8}  {name}")


if __name__ == "__main__":
    main()
