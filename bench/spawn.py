"""Sub-agents: context transferred with selective slicing vs a full copy, and concurrency.

Run: `python bench/spawn.py`. Prints figures; asserts nothing.

1. A scripted long-horizon task: a parent agent has read 36 files and taken notes over a
   multi-part job (four subtasks). Each subtask needs planted facts scattered through the
   parent's history. The parent spawns one child per subtask; each child's first request is
   checked for every fact it needs. The same run is made with `slice="selective"` (the
   default) and `slice="full"`; the tokens handed to children are compared.
2. N children, each calling a slow tool (0.2 s), spawned in one response (concurrently)
   or one per response (sequentially).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from typing import Any

from legato import Agent, tool
from legato.events import ContextSliced, SpawnFinished
from legato.messages import Message
from legato.models import ModelRequest
from legato.spawn import SpawnLimits, spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply

WORDS = (
    "module function value returns handler config option request response client server "
    "cache layer index queue worker retry timeout payload schema field record buffer stream "
    "parser token render template helper utility adapter service registry context batch"
).split()

# subtask -> (the task the parent gives, the planted facts the child needs, where they live)
SUBTASKS: dict[str, tuple[str, dict[str, str]]] = {
    "session": (
        "Change SESSION_TTL in auth/session.py so sessions expire as docs/security-policy.md "
        "requires, and mention ticket SEC-118 in the commit message.",
        {
            "auth/session.py": "SESSION_TTL = 86400  # one day, set in 2019",
            "docs/security-policy.md": "Idle sessions must expire after 30 minutes (SEC-118).",
        },
    ),
    "rounding": (
        "Make invoice totals use the rounding that finance asked for; the rounding code is in "
        "billing/totals.py.",
        {
            "billing/totals.py": "def invoice_total(lines): return round(sum(lines), 2)  # half-up",
            "note:finance": "Finance: invoices must use banker's rounding (round half to even).",
        },
    ),
    "email": (
        "Fix the password-reset email in templates/reset_email.html: the link must use the "
        "RESET_URL_BASE from settings/urls.py.",
        {
            "templates/reset_email.html": "<a href='http://localhost/reset/{{token}}'>Reset</a>",
            "settings/urls.py": "RESET_URL_BASE = 'https://accounts.example.org/reset'",
        },
    ),
    "search": (
        "Rebuild the search index mapping in search/mapping.json so the field product_code "
        "is a keyword, as INC-2041 describes.",
        {
            "search/mapping.json": '{"product_code": {"type": "text"}, "title": {"type": "text"}}',
            "note:incident": "INC-2041: searches for product_code ABC-12 miss because it is tokenized.",
        },
    ),
}


VAGUE: dict[str, str] = {
    "session": "Make idle sessions expire as the security policy requires.",
    "rounding": "Make invoice totals use the rounding that finance asked for.",
    "email": "Fix the link in the password reset email.",
    "search": "Make searches for product codes find their products.",
}
"""The same subtasks described without naming a file or an id (term overlap only)."""


def filler(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def parent_history(seed: int) -> tuple[list[Any], dict[str, str]]:
    """The parent's tool calls so far: planted files among noise files, plus user notes."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    notes: list[str] = []
    for _, facts in SUBTASKS.values():
        for where, fact in facts.items():
            if where.startswith("note:"):
                notes.append(fact)
            else:
                files[where] = f"{filler(rng, 40)}\n{fact}\n{filler(rng, 60)}"
    noise = [
        "core/app.py",
        "core/routes.py",
        "core/models.py",
        "core/db.py",
        "workers/queue.py",
        "workers/retry.py",
        "api/v1/users.py",
        "api/v1/orders.py",
        "api/v2/orders.py",
        "frontend/build.js",
        "frontend/theme.css",
        "docs/changelog.md",
        "docs/deploy.md",
        "scripts/migrate.py",
        "scripts/backup.sh",
        "tests/test_orders.py",
        "tests/test_users.py",
        "infra/terraform.tf",
        "infra/k8s.yaml",
        "logs/app-2026-11-29.log",
        "README.md",
        "pyproject.toml",
        "Makefile",
        "core/cache.py",
        "api/v1/health.py",
        "core/events.py",
        "workers/cron.py",
        "core/settings_base.py",
    ]
    for name in noise:
        files[name] = filler(rng, rng.randint(80, 160))
    order = list(files)
    rng.shuffle(order)
    turns: list[Any] = []
    for i, name in enumerate(order):
        turns.append(reply(call("read_file", {"path": name})))
        if i % 9 == 4 and notes:
            turns.append(reply(call("note", {"text": notes.pop()})))
    while notes:
        turns.append(reply(call("note", {"text": notes.pop()})))
    return turns, files


async def slicing_run(mode: str, seed: int, *, vague: bool = False) -> dict[str, Any]:
    turns, files = parent_history(seed)

    @tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: The file's path.
        """
        return files[path]

    @tool
    def note(text: str) -> str:
        """Record a note from the user.

        Args:
            text: The note.
        """
        return f"noted: {text}"

    recall: dict[str, tuple[int, int]] = {}

    tasks = {k: VAGUE[k] if vague else t for k, (t, _) in SUBTASKS.items()}

    def child_turn(request: ModelRequest) -> str:
        task = request.messages[-1].text
        name = next(k for k, t in tasks.items() if t == task)
        seen = " ".join(getattr(p, "text", "") for m in request.messages for p in m.parts)
        facts = SUBTASKS[name][1].values()
        recall[name] = (sum(f in seen for f in facts), len(facts))
        return f"{name} done"

    spawns = reply(*(call("spawn", {"task": t, "tools": ["read_file"]}) for t in tasks.values()))
    parent = ScriptedModel([*turns, spawns, "all four parts done"])
    spawner = spawn_tools(
        [read_file, note],
        model=FunctionModel(child_turn),
        slice=mode,  # type: ignore[arg-type] # "selective" or "full"
        limits=SpawnLimits(slice_tokens=1500, max_children=8),
    )
    prompt = Message.user(
        "Four fixes for this release: session expiry, invoice rounding, the reset email link "
        "and the search mapping. Read around first, then hand each part to a sub-agent."
    )
    result = await Agent(parent, tools=[spawner], max_steps=200).run(prompt)
    sliced = [e for e in result.journal if isinstance(e, ContextSliced)]
    if "--explain" in sys.argv and mode == "selective" and seed == 0 and vague:
        for e in sliced:
            print(
                f"    slice for {e.child_run_id[-6:]}: "
                + "; ".join(f"{x.id} {x.score} {x.reasons}" for x in e.entries)
            )
    prompts = sum(e.usage.input_tokens for e in result.journal if isinstance(e, SpawnFinished))
    return {
        "prompt": prompts,
        "passed": sum(e.tokens_passed for e in sliced),
        "available": sum(e.tokens_available for e in sliced),
        "per_child": [e.tokens_passed for e in sliced],
        "recall": recall,
    }


async def concurrency_run(n: int, concurrent: bool, delay: float) -> float:
    @tool
    async def slow_lookup(key: str) -> str:
        """A slow lookup.

        Args:
            key: What to look up.
        """
        await asyncio.sleep(delay)
        return f"{key}: found"

    def child_turn(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return last.tool_results[0].text
        return reply(call("slow_lookup", {"key": last.text}))

    calls = [call("spawn", {"task": f"part {i}", "tools": ["slow_lookup"]}) for i in range(n)]
    turns = [reply(*calls)] if concurrent else [reply(c) for c in calls]
    parent = ScriptedModel([*turns, "done"])
    spawner = spawn_tools(
        [slow_lookup], model=FunctionModel(child_turn), limits=SpawnLimits(max_children=n)
    )
    started = time.perf_counter()
    await Agent(parent, tools=[spawner], max_steps=n + 2).run("go")
    return time.perf_counter() - started


async def main() -> None:
    print(f"python {sys.version.split()[0]}")
    print("\n1. Context handed to 4 children (one per subtask), 5 seeds")
    savings: list[float] = []
    for seed in range(5):
        selective = await slicing_run("selective", seed)
        full = await slicing_run("full", seed)
        saved = 1 - selective["passed"] / full["passed"]
        savings.append(saved)
        found = sum(f for f, _ in selective["recall"].values())
        needed = sum(n for _, n in selective["recall"].values())
        full_found = sum(f for f, _ in full["recall"].values())
        print(
            f"  seed {seed}: selective {selective['passed']:>5} tokens "
            f"(per child {selective['per_child']}), full {full['passed']:>5} tokens, "
            f"{saved:.1%} fewer; planted facts in slices {found}/{needed} "
            f"(full copy {full_full(full_found, needed)}); children's whole prompts "
            f"{selective['prompt']} vs {full['prompt']} tokens"
        )
    print(
        f"  tokens saved by selective slicing: median {statistics.median(savings):.1%}, min {min(savings):.1%}"
    )
    print("  the same subtasks described vaguely (no file names or ids in the task):")
    for seed in range(5):
        vague = await slicing_run("selective", seed, vague=True)
        full = await slicing_run("full", seed, vague=True)
        found = sum(f for f, _ in vague["recall"].values())
        needed = sum(n for _, n in vague["recall"].values())
        missed = [k for k, (f, n) in vague["recall"].items() if f < n]
        print(
            f"  seed {seed}: selective {vague['passed']:>5} tokens, full {full['passed']:>5}, "
            f"{1 - vague['passed'] / full['passed']:.1%} fewer; facts {found}/{needed}"
            + (f" (incomplete: {', '.join(missed)})" if missed else "")
        )

    print("\n2. Wall time of N children, each calling a 0.2 s tool")
    for n in (2, 4, 8):
        seq = await concurrency_run(n, concurrent=False, delay=0.2)
        con = await concurrency_run(n, concurrent=True, delay=0.2)
        print(f"  N={n}: sequential {seq:.3f} s, concurrent {con:.3f} s, speed-up {seq / con:.1f}x")


def full_full(found: int, needed: int) -> str:
    return f"{found}/{needed}"


if __name__ == "__main__":
    asyncio.run(main())
