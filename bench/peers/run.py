"""legato against its peers and the floor: one command, `python bench/peers/run.py`.

Builds (or reuses) one virtualenv per framework from `bench/peers/requirements/` (see venvs.py),
starts the counting mock server (mockserver.py) on 127.0.0.1, and runs the same agent, two model calls
and one tool call, in every framework, each in its own interpreter (agents/fw_*.py), and through
the SDK's send path alone (agents/fw_sdk_send.py: the least a framework on the SDK can spend). Rounds
alternate across frameworks (A B C ... then ... C B A), every run is verified against the
server's counts, and medians are reported: ms per run (sync, async, streamed) with the ratio to
the raw SDK and to the floor, cold import / construct / first run / RSS, KiB per idle agent and
per held session (1,000 of each), and throughput with p50/p99 latency for 200 and 2,000
concurrent async runs. Writes a JSON results file and prints markdown tables and legato's
targets; `bench/peers/plot.py` draws the PNGs from the JSON.

    python bench/peers/run.py                  # everything (about half an hour on 2 cores)
    python bench/peers/run.py --quick          # floor, raw SDK and legato, tiny counts
    python bench/peers/run.py --only legato,raw --here   # this interpreter, no venvs
    python bench/peers/run.py --only legato,raw --here --load none   # no load rounds

A failed verification or a crashed script is printed as FAILED and the command exits 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import venvs
from harness import AGENTS, BenchError, Framework, run_task
from mockserver import MockServer

HERE = Path(__file__).resolve().parent
LABELS = {
    "floor": "floor (hand-written client)",
    "raw": "openai SDK (raw)",
    "sdk_send": "openai SDK, send path only (a bound)",
    "legato": "legato",
    "legato_atool": "legato, async def tool",
    "pydantic_ai": "pydantic-ai",
    "openai_agents": "OpenAI Agents SDK",
    "langgraph": "LangGraph",
    "smolagents": "smolagents",
    "strands": "Strands",
    "orchestral": "Orchestral",
}
ALL = list(LABELS)
QUICK = ["floor", "raw", "legato"]
MODES = ["sync", "async", "stream_sync", "stream_async"]
TASKS = ("cold", "warm", "memory", "load")
LOAD_FIELDS = (
    "runs_per_s",
    "p50_ms",
    "p99_ms",
    "cpu_ms_per_run",
    "gc_ms_per_run",
    "full_collections",
    "connections",
    "most_open",
)
"""What the load table reports, medians over rounds (the CPU, GC and connection figures only
when the script's driver and the mock report them)."""
VENV = {"legato_atool": "legato", "sdk_send": "legato"}
"""Variants that run in another framework's venv (`sdk_send`: the SDK as legato installs it)."""
OURS = {"legato", "legato_atool", "raw", "floor", "sdk_send"}
"""Not peers: legato, its variant, the two baselines and the SDK's send path."""


@dataclass
class Config:
    """How much to measure."""

    warm_rounds: int = 5
    runs: int = 30
    warmup: int = 10
    cold_rounds: int = 5
    memory_count: int = 1000
    load: dict[int, int] = field(default_factory=lambda: {200: 3, 2000: 2})
    """Concurrent runs -> rounds."""
    tasks: tuple[str, ...] = TASKS
    """Which tasks to run."""
    gc_threshold: tuple[int, ...] = ()
    """`gc.set_threshold` for every framework's load task (empty: CPython's default)."""


QUICK_CONFIG = Config(
    warm_rounds=2, runs=5, warmup=2, cold_rounds=1, memory_count=20, load={20: 1, 50: 1}
)


def frameworks(names: list[str], *, here: bool) -> list[Framework]:
    """The frameworks to run, each with its interpreter (built venvs, or this Python)."""
    out: list[Framework] = []
    for name in names:
        script = AGENTS / f"fw_{name}.py"
        if not script.exists():
            out.append(Framework(name, LABELS[name], None, script, "no agent script yet"))
            continue
        if name == "floor" or here:
            out.append(Framework(name, LABELS[name], sys.executable, script, isolated=False))
            continue
        env = venvs.ensure(VENV.get(name, name))
        out.append(Framework(name, LABELS[name], env.python, script, env.reason))
    return out


def _order(items: list[Framework], round_no: int) -> list[Framework]:
    return items if round_no % 2 == 0 else items[::-1]


def measure(fws: list[Framework], cfg: Config, server: MockServer) -> dict[str, Any]:
    """Every task, rounds alternating across frameworks; raw reports and failures."""
    runnable = [f for f in fws if f.python]
    raw: dict[str, dict[str, list[Any]]] = {f.name: {} for f in runnable}
    failures: list[str] = []

    def do(fw: Framework, key: str, task: dict[str, Any]) -> None:
        try:
            report = run_task(server, fw, task)
        except BenchError as exc:
            failures.append(str(exc))
            print(f"  FAILED {exc}", flush=True)
            return
        raw[fw.name].setdefault(key, []).append(report)
        print(f"  {fw.name:<14} {key:<10} ok ({report['runs']} runs verified)", flush=True)

    tasks = cfg.tasks
    for r in range(cfg.cold_rounds if "cold" in tasks else 0):
        print(f"cold, round {r + 1}/{cfg.cold_rounds}", flush=True)
        for fw in _order(runnable, r):
            do(fw, "cold", {"task": "cold"})
    for r in range(cfg.warm_rounds if "warm" in tasks else 0):
        print(f"per run, round {r + 1}/{cfg.warm_rounds}", flush=True)
        for fw in _order(runnable, r):
            do(fw, "warm", {"task": "warm", "runs": cfg.runs, "warmup": cfg.warmup})
    if "memory" in tasks:
        print(f"memory, {cfg.memory_count} idle agents and held sessions", flush=True)
        for fw in runnable:
            do(fw, "memory", {"task": "memory", "count": cfg.memory_count})
    for n, rounds in cfg.load.items() if "load" in tasks else ():
        for r in range(rounds):
            print(f"{n} concurrent runs, round {r + 1}/{rounds}", flush=True)
            for fw in _order(runnable, r):
                task: dict[str, Any] = {"task": "load", "n": n}
                if cfg.gc_threshold:
                    task["gc_threshold"] = list(cfg.gc_threshold)
                do(fw, f"load{n}", task)
    return {"reports": raw, "failures": failures}


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _one(tasks: dict[str, list[Any]], cfg: Config) -> dict[str, Any]:
    """One framework's medians over rounds."""
    s: dict[str, Any] = {}
    warm = tasks.get("warm", [])
    for mode in MODES:
        for key, field_ in ((f"{mode}_ms", "median_ms"), (f"{mode}_cpu_ms", "cpu_ms")):
            vals = [w[mode][field_] for w in warm if mode in w]
            if vals:
                s[key] = _median(vals)
    for key in ("import_ms", "construct_ms", "first_run_ms", "cold_ms", "rss_mb"):
        vals = [c[key] for c in tasks.get("cold", [])]
        if vals:
            s[key] = _median(vals)
    for m in tasks.get("memory", []):
        s["idle_agent_kib"] = m["idle_agent_kib"]
        s["held_session_kib"] = m["held_session_kib"]
    for n in cfg.load:
        got = [x for x in tasks.get(f"load{n}", []) if "runs_per_s" in x]
        if got:
            s[f"load{n}"] = {
                k: _median([x[k] for x in got]) for k in LOAD_FIELDS if all(k in x for x in got)
            }
    return s


def _ratios(s: dict[str, Any], ref: dict[str, Any], base: str, cfg: Config) -> None:
    """Add `s`'s ratios to the reference `ref` (the raw SDK or the floor), in place."""
    for mode in MODES:
        for key in (f"{mode}_ms", f"{mode}_cpu_ms"):
            mine, theirs = s.get(key), ref.get(key)
            if mine and theirs:
                s[key.replace("_ms", f"_x_{base}")] = round(mine / theirs, 3)
    for n in cfg.load:
        mine, theirs = s.get(f"load{n}"), ref.get(f"load{n}")
        if mine and theirs:
            mine[f"throughput_x_{base}"] = round(mine["runs_per_s"] / theirs["runs_per_s"], 3)


def summarize(reports: dict[str, dict[str, list[Any]]], cfg: Config) -> dict[str, Any]:
    """Medians over rounds, and the ratios to the raw SDK and to the floor."""
    out = {name: _one(tasks, cfg) for name, tasks in reports.items()}
    for base in ("raw", "floor", "sdk_send"):
        for s in out.values():
            _ratios(s, out.get(base, {}), base, cfg)
    return out


def _f(v: Any, unit: str = "", nd: int = 2) -> str:
    if v is None:
        return "–"
    return f"{v:,.{nd}f}{unit}"


def tables(summary: dict[str, Any], cfg: Config, skipped: dict[str, str]) -> str:
    """The markdown tables printed and pasted into docs/benchmarks.md."""
    names = [n for n in ALL if n in summary]
    lines = [
        "| framework | sync ms | ×raw | async ms | ×raw | stream sync ms | ×raw | stream async ms | ×raw | async ×floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        s = summary[n]
        row = [LABELS[n]]
        for mode in MODES:
            row += [_f(s.get(f"{mode}_ms")), _f(s.get(f"{mode}_x_raw"), "×")]
        row.append(_f(s.get("async_x_floor"), "×", 1))
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "| framework (CPU of the client process) | sync CPU ms | ×raw | async CPU ms | ×raw | stream sync CPU ms | ×raw | stream async CPU ms | ×raw |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        s = summary[n]
        row = [LABELS[n]]
        for mode in MODES:
            row += [_f(s.get(f"{mode}_cpu_ms")), _f(s.get(f"{mode}_cpu_x_raw"), "×")]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "| framework | import ms | construct ms | first run ms | cold total ms | RSS after one run MB | KiB per idle agent | KiB per held session |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        s = summary[n]
        keys = ("import_ms", "construct_ms", "first_run_ms", "cold_ms", "rss_mb")
        row = [LABELS[n]] + [_f(s.get(k), nd=1) for k in keys]
        row += [_f(s.get("idle_agent_kib")), _f(s.get("held_session_kib"))]
        lines.append("| " + " | ".join(row) + " |")
    head = "| framework |"
    rule = "|---|"
    for n in cfg.load:
        head += f" {n:,} runs/s | ×raw | ×floor | p50 ms | p99 ms |"
        rule += "---|---|---|---|---|"
    lines += ["", head, rule]
    for n in names:
        row = [LABELS[n]]
        for k in cfg.load:
            x = summary[n].get(f"load{k}")
            if x is None:
                row += ["n/a (sync only)" if n in ("smolagents", "orchestral") else "–"] + ["–"] * 4
                continue
            row += [
                _f(x["runs_per_s"], nd=0),
                _f(x.get("throughput_x_raw"), "×"),
                _f(x.get("throughput_x_floor"), "×"),
                _f(x["p50_ms"], nd=0),
                _f(x["p99_ms"], nd=0),
            ]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "| framework | concurrent runs | CPU ms per run | of it GC ms | full collections | connections opened | most open at once |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in names:
        for k in cfg.load:
            x = summary[n].get(f"load{k}")
            if x is None or "cpu_ms_per_run" not in x:
                continue
            row = [LABELS[n], f"{k:,}", _f(x["cpu_ms_per_run"]), _f(x.get("gc_ms_per_run"))]
            row += [_f(x.get(c), nd=0) for c in ("full_collections", "connections", "most_open")]
            lines.append("| " + " | ".join(row) + " |")
    for name, why in skipped.items():
        lines.append(f"\n{LABELS[name]}: not run: {why}")
    return "\n".join(lines)


def targets(summary: dict[str, Any], cfg: Config) -> list[dict[str, Any]]:
    """legato's targets from issue 28, each with the measured value and whether it is met."""
    lg, raw, floor = summary.get("legato", {}), summary.get("raw", {}), summary.get("floor", {})
    peers = [s for n, s in summary.items() if n not in OURS]
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, limit: float | None, ok: bool | None) -> None:
        out.append({"target": what, "value": value, "limit": limit, "met": ok})

    for mode in MODES:
        for kind in ("", "_cpu"):
            v = lg.get(f"{mode}{kind}_x_raw")
            if v is not None:
                what = f"{mode}{' CPU' if kind else ''} ≤ 0.50× raw SDK"
                add(what, v, 0.5, v <= 0.5)
    send = summary.get("sdk_send", {})
    for mode in MODES:  # the bound: no framework sending through the SDK spends less
        v, mine = send.get(f"{mode}_cpu_x_raw"), lg.get(f"{mode}_cpu_x_sdk_send")
        if v is not None:
            add(f"{mode} CPU: the SDK's send path alone, ×raw (a bound)", v, 0.5, None)
        if mine is not None:
            add(f"{mode} CPU: legato ×the SDK's send path (legato's own share)", mine, None, None)
    for mode in MODES:
        mine = lg.get(f"{mode}_ms")
        others = [p[f"{mode}_ms"] for p in peers if p.get(f"{mode}_ms")]
        if mine and others:
            add(f"{mode}: below every peer", mine, min(others), mine < min(others))
    if lg.get("cold_ms") and raw.get("cold_ms"):
        limit = 0.9 * raw["cold_ms"]
        add(
            "cold import + construct + first run ≤ 0.9× raw",
            lg["cold_ms"],
            limit,
            lg["cold_ms"] <= limit,
        )
    if lg.get("rss_mb") and raw.get("rss_mb"):
        limit = raw["rss_mb"] + 3
        add("RSS after one run ≤ raw + 3 MB", lg["rss_mb"], limit, lg["rss_mb"] <= limit)
    if not cfg.load:  # `--load none`
        return out
    big = max(cfg.load)
    mine, theirs, fl = lg.get(f"load{big}"), raw.get(f"load{big}"), floor.get(f"load{big}")
    if mine and theirs:
        v = mine["runs_per_s"] / theirs["runs_per_s"]
        add(f"{big} concurrent: throughput ≥ 3× raw", round(v, 3), 3.0, v >= 3.0)
    if mine and fl:
        v = fl["runs_per_s"] / mine["runs_per_s"]
        add(f"{big} concurrent: within 5× of the floor", round(v, 3), 5.0, v <= 5.0)
    return out


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "system": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _config(args: argparse.Namespace, p: argparse.ArgumentParser) -> Config:
    """The configuration the options ask for."""
    cfg = QUICK_CONFIG if args.quick else Config()
    if args.memory:
        cfg.memory_count = args.memory
    if args.rounds:
        cfg.warm_rounds = cfg.cold_rounds = args.rounds
    if args.tasks:
        cfg.tasks = tuple(args.tasks.split(","))
        if bad := [t for t in cfg.tasks if t not in TASKS]:
            p.error(f"unknown task(s): {', '.join(bad)}")
    if args.load:
        try:
            # `none`: no load rounds
            pairs = [] if args.load == "none" else [x.split(":") for x in args.load.split(",")]
            cfg.load = {int(n): int(rounds) for n, rounds in pairs}
        except ValueError:
            p.error(f"--load takes N:ROUNDS[,N:ROUNDS...], not {args.load!r}")
    if args.gc_threshold:
        try:
            cfg.gc_threshold = tuple(int(x) for x in args.gc_threshold.split(","))
        except ValueError:
            p.error(f"--gc-threshold takes integers, not {args.gc_threshold!r}")
    return cfg


def main(argv: list[str] | None = None) -> int:
    """Parse the options, measure, print, write the JSON; 1 when anything failed."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="floor, raw SDK and legato, tiny counts")
    p.add_argument("--only", help="comma-separated frameworks: " + ",".join(ALL))
    p.add_argument("--here", action="store_true", help="run every script in this interpreter")
    p.add_argument("--setup", action="store_true", help="only build the venvs")
    p.add_argument("--out", type=Path, help="results JSON (default bench/peers/results.json)")
    p.add_argument("--memory", type=int, help="idle agents and held sessions (default 1,000)")
    p.add_argument("--rounds", type=int, help="per-run rounds (default 5)")
    p.add_argument(
        "--gc-threshold",
        help="gc.set_threshold for every framework's load task, e.g. 50000,20,100",
    )
    p.add_argument("--tasks", help="comma-separated tasks (default all): " + ",".join(TASKS))
    p.add_argument(
        "--load",
        help="concurrent runs and rounds, e.g. 2000:2 or 200:3,2000:2 (the default); none: skip",
    )
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else (QUICK if args.quick else ALL)
    unknown = [n for n in names if n not in LABELS]
    if unknown:
        p.error(f"unknown framework(s): {', '.join(unknown)}")
    if "floor" not in names:
        names = ["floor", *names]
    names = [n for n in ALL if n in names]
    cfg = _config(args, p)
    if args.setup:
        for name in names:
            if name != "floor":
                env = venvs.ensure(name)
                print(f"{name}: {env.python or env.reason}")
        return 0
    fws = frameworks(names, here=args.here)
    skipped = {f.name: f.reason for f in fws if not f.python}
    started = datetime.datetime.now(datetime.UTC)
    info = machine()
    print(
        f"{started:%Y-%m-%d %H:%M} UTC, {info['cores']} cores, {info['cpu']}, "
        f"python {info['python']}, load {info['load_average']}",
        flush=True,
    )
    for name, why in skipped.items():
        print(f"{name}: not run: {why}", flush=True)
    with MockServer() as server:
        got = measure(fws, cfg, server)
    summary = summarize(got["reports"], cfg)
    goals = targets(summary, cfg)
    versions = {}
    for f in fws:
        if f.python and f.name not in ("floor",):
            try:
                versions[f.name] = venvs.freeze(f.python)
            except Exception as exc:
                versions[f.name] = {"error": str(exc)}
    result = {
        "date": f"{started:%Y-%m-%d %H:%M} UTC",
        "machine": info | {"load_average_end": [round(x, 2) for x in os.getloadavg()]},
        "config": asdict(cfg),
        "frameworks": {f.name: {"label": f.label, "skipped": f.reason} for f in fws},
        "summary": summary,
        "targets": goals,
        "failures": got["failures"],
        "reports": got["reports"],
        "versions": versions,
    }
    out = args.out or HERE / ("results-quick.json" if args.quick else "results.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print(tables(summary, cfg, skipped))
    print()
    for g in goals:
        mark = "for reference" if g["met"] is None else "met" if g["met"] else "NOT met"
        print(f"target: {g['target']}: {g['value']} (limit {g['limit']}) -> {mark}")
    print(f"\nresults: {out}")
    if got["failures"]:
        print(f"\nFAILED: {len(got['failures'])} task(s):", file=sys.stderr)
        for f in got["failures"]:
            print(f"  {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
