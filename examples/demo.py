"""`make demo`: what legato does, in one minute, offline, with no key.

Each section is a small module next to this file, runnable alone:

1. `same_agent_every_provider.py`: one agent on six providers' wire APIs (a local simulator)
2. `demo_tools.py`: a tool call, streamed
3. `demo_approval.py`: an approval that holds a side-effecting sibling
4. `demo_contract.py`: a contract that rejects a bad result
5. `demo_subagent.py`: a sub-agent with its slice of the context, and the tree's cost
6. `demo_durable.py`: a run killed by SIGKILL and resumed by id from its SQLite journal
7. `demo_replay.py`: that journal replayed
8. `demo_local.py`: a real model in-process (SmolLM2-135M via llama.cpp) making a tool call

Sections 1-7 use scripted models, so their output is exact (a test checks it). Section 8
is optional: when the local model is missing or fails, the demo says so and ends well.
`python examples/demo.py --scripted` stops after section 7.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sections, run as a script or not

import demo_approval
import demo_contract
import demo_durable
import demo_local
import demo_replay
import demo_subagent
import demo_tools
import same_agent_every_provider

from legato.exceptions import MissingDependency

SWITCH = """\
Next:
  a real model:  pip install -e '.[cli,anthropic]'; export ANTHROPIC_API_KEY=...
                 legato chat --model anthropic:claude-sonnet-4-5 --tools module:obj
  a web UI:      legato serve --demo          (extras cli,web)
  each section:  python examples/demo_approval.py (and the others listed above)"""


def section(number: int, title: str, run: Callable[[], object]) -> None:
    """Print a section's title, then run it (said and skipped when an extra is missing)."""
    print(f"\n== {number}. {title}")
    try:
        run()
    except MissingDependency as missing:
        print(f"  skipped: {missing} (or: pip install -e '.[demo]')")


def main(argv: list[str] | None = None) -> None:
    """Run every section in order (`--scripted`: all but the real model)."""
    args = sys.argv[1:] if argv is None else argv
    started = time.perf_counter()
    state: dict[str, object] = {}
    section(
        1,
        "The same agent on six providers (their SDKs, a local wire simulator): same answer, priced",
        same_agent_every_provider.main,
    )
    section(2, "A tool call, streamed", demo_tools.main)
    section(
        3, "An approval holds the side-effecting sibling; read-only goes on", demo_approval.main
    )
    section(4, "A contract rejects a bad result; the state stays verified", demo_contract.main)
    section(
        5, "A sub-agent gets its slice and only the tools granted; the cost", demo_subagent.main
    )
    section(
        6,
        "A durable run: killed mid-run, resumed by id from SQLite, effects once",
        lambda: state.update(demo_durable.main()),
    )
    section(
        7,
        "The journal, read back and replayed",
        lambda: demo_replay.replay_run(Path(str(state["db"])), str(state["run_id"])),
    )
    if "--scripted" not in args:
        section(8, "A real model, in-process: one real tool call", demo_local.main)
    print(f"\n[demo finished in {time.perf_counter() - started:.1f} s]\n{SWITCH}")


if __name__ == "__main__":
    main()
