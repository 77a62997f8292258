"""Draw the peers comparison from its results JSON: `python bench/peers/plot.py [results.json]
[name]`.

Writes docs/peers-per-run.png, docs/peers-cold-memory.png and docs/peers-load.png (`name`
replaces `peers` in the file names: a later run's plots beside an earlier one's). matplotlib
lives in the bench's own venv (requirements/plot.txt), not in legato's dependencies: run from an
interpreter without it, this script builds that venv and runs itself there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs"
MODES = [
    ("sync", "sync"),
    ("async", "async"),
    ("stream_sync", "streamed, sync"),
    ("stream_async", "streamed, async"),
]
LEGATO = "#1f77b4"
OTHER = "#b0b0b0"
BASE = "#ff7f0e"
BOUND = "#ffbb78"


def _colour(name: str) -> str:
    if name.startswith("legato"):
        return LEGATO if name == "legato" else "#8fbce6"
    if name == "sdk_send":  # the bound: the SDK's send path alone
        return BOUND
    return BASE if name in ("raw", "floor") else OTHER


def _reexec_in_venv() -> None:
    sys.path.insert(0, str(HERE))
    import venvs

    env = venvs.ensure("plot")
    if env.python is None:
        raise SystemExit(f"cannot build the plot venv: {env.reason}")
    os.execv(env.python, [env.python, __file__, *sys.argv[1:]])


def main() -> None:
    """Read the JSON, write the PNGs."""
    try:
        import matplotlib
    except ImportError:
        _reexec_in_venv()
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    path = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results.json"
    name = sys.argv[2] if len(sys.argv) > 2 else "peers"
    data: dict[str, Any] = json.loads(path.read_text())
    summary: dict[str, Any] = data["summary"]
    labels = {k: v["label"] for k, v in data["frameworks"].items()}
    names = [n for n in labels if n in summary]
    stamp = f"{data['date']}, {data['machine']['cores']} cores, Python {data['machine']['python']}"

    fig, axes = plt.subplots(1, 4, figsize=(16, 4.8), sharey=True)
    for ax, (mode, title) in zip(axes, MODES, strict=True):
        rows = [i for i, n in enumerate(names) if summary[n].get(f"{mode}_ms")]
        values = [summary[names[i]][f"{mode}_ms"] for i in rows]
        ax.barh(rows, values, color=[_colour(names[i]) for i in rows])
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel("ms per run (median, log scale)")
        ax.xaxis.set_minor_formatter(NullFormatter())
        for y, v in zip(rows, values, strict=True):
            ax.text(v, y, f" {v:.2f}", va="center", fontsize=8)
    axes[0].set_yticks(range(len(names)), [labels[n] for n in names])
    axes[0].invert_yaxis()  # shared: once for all four
    fig.suptitle(f"One agent run (2 model calls, 1 tool call) against a local mock — {stamp}")
    fig.tight_layout()
    fig.savefig(DOCS / f"{name}-per-run.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    parts = [("import_ms", "import"), ("construct_ms", "construct"), ("first_run_ms", "first run")]
    left = [0.0] * len(names)
    for (key, title), colour in zip(parts, ["#4c72b0", "#dd8452", "#55a868"], strict=True):
        vals = [summary[n].get(key) or 0.0 for n in names]
        axes[0].barh([labels[n] for n in names], vals, left=left, color=colour, label=title)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    axes[0].set_title("cold start, fresh process (ms)")
    axes[0].legend(loc="lower right")
    axes[0].invert_yaxis()
    rss = [summary[n].get("rss_mb") or 0.0 for n in names]
    axes[1].barh([labels[n] for n in names], rss, color=[_colour(n) for n in names])
    axes[1].set_title("RSS after one run (MB)")
    axes[1].invert_yaxis()
    idle = [summary[n].get("idle_agent_kib") or 0.0 for n in names]
    held = [summary[n].get("held_session_kib") or 0.0 for n in names]
    y = list(range(len(names)))
    axes[2].barh([i - 0.2 for i in y], idle, height=0.4, label="per idle agent", color="#4c72b0")
    axes[2].barh([i + 0.2 for i in y], held, height=0.4, label="per held session", color="#dd8452")
    axes[2].set_yticks(y, [labels[n] for n in names])
    axes[2].set_title("KiB per object, 1,000 held (tracemalloc)")
    axes[2].legend(loc="lower right")
    axes[2].invert_yaxis()
    fig.suptitle(f"Start-up and memory — {stamp}")
    fig.tight_layout()
    fig.savefig(DOCS / f"{name}-cold-memory.png", dpi=110)
    plt.close(fig)

    loads = sorted(int(k[4:]) for n in names for k in summary[n] if k.startswith("load"))
    loads = sorted(set(loads))
    fig, axes = plt.subplots(1, 2, figsize=(15, 5), sharey=True)
    have = [n for n in names if any(summary[n].get(f"load{k}") for k in loads)]
    width = 0.8 / max(1, len(loads))
    shades = ["#4c72b0", "#dd8452", "#55a868"]
    for ax, key, title in (
        (axes[0], "runs_per_s", "throughput (runs/s, log scale)"),
        (axes[1], "p99_ms", "p99 latency under that load (ms, log scale)"),
    ):
        for j, n_runs in enumerate(loads):
            ys = [i + (j - (len(loads) - 1) / 2) * width for i in range(len(have))]
            vals = [(summary[n].get(f"load{n_runs}") or {}).get(key) or 0.0 for n in have]
            ax.barh(ys, vals, height=width, color=shades[j % 3], label=f"{n_runs:,} concurrent")
            for y, v in zip(ys, vals, strict=True):
                if v:
                    ax.text(v, y, f" {v:,.0f}", va="center", fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title)
        ax.legend(loc="lower right" if key == "runs_per_s" else "upper right")
    axes[0].set_yticks(range(len(have)), [labels[n] for n in have])
    axes[0].invert_yaxis()
    fig.suptitle(f"Concurrent runs in one process (log scales) — {stamp}")
    fig.tight_layout()
    fig.savefig(DOCS / f"{name}-load.png", dpi=110)
    plt.close(fig)
    for kind in ("per-run", "cold-memory", "load"):
        print(DOCS / f"{name}-{kind}.png")


if __name__ == "__main__":
    main()
