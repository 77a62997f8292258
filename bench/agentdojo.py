"""legato's injection defence on AgentDojo, with a scripted agent that obeys every injection.

For every user task of AgentDojo's four suites (workspace, travel, banking, slack), a
`GullibleModel` replays the task's ground-truth calls, one per turn, through a real legato
`Agent` whose tools are AgentDojo's functions on AgentDojo's environment. Under attack
(`important_instructions`, one run per (user task, injection task) pair) the injected
text sits in every slot the task reads, and the model, on seeing an injection task's goal
in a tool result, first makes that task's ground-truth calls, one per turn (it obeys every
injected instruction), then carries on with the user's task. Outcomes are AgentDojo's own checks
(`utility`, `security`) on the environment before and after, given the calls that ran.

Sinks are declared on AgentDojo's tools from their signatures alone (`declare`): a tool
is read-only when its name says so (`get_`, `search_`, `list_`, `read_`, `check_`), and a
parameter is a sink by its name (`recipient`, `url`, `file_id`, `password`, ...).

Questions go to a scripted person: `none` answers nothing (every question fails the call),
`oracle` approves exactly the user task's own ground-truth calls, `all` approves anything.

Configurations: `off` (no defence), `on`, `on` with one layer off (`no-provenance`,
`no-sinks`, `no-normalise`, `no-capabilities`), `policies` (`on` with the one-line
policies of `POLICIES`), `prompt` (`policies` plus a grant derived from the prompt).

AgentDojo pins SDKs legato does not need; when it is not importable here, this script
builds a venv of its own under ~/.cache/legato-bench/agentdojo (or `$LEGATO_BENCH_CACHE`)
on first use and runs itself there, with this checkout's `src` first on the path.

Run: python bench/agentdojo.py [--suite banking] [--config on --config off] [--person none]
     [--limit N] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
AGENTDOJO = "agentdojo==0.1.35"
"""The AgentDojo release the figures are for (its suites ship inside the package)."""
VERSION = "v1.2"
SUITES = ("workspace", "travel", "banking", "slack")
CONFIGS = ("off", "on", "no-provenance", "no-sinks", "no-normalise", "no-capabilities")
EXTRA_CONFIGS = ("policies", "prompt", "watched", "asked")
"""`policies`: `on` with `policies()`; `prompt`: that and the grant derived from the prompt;
`watched`: that, with every sink value from data asked instead of blocked (`from_data`),
for runs where a person answers; `asked`: `policies` with sink values from data asked (no
grant from the prompt)."""
PEOPLE = ("none", "oracle", "all")
PIPELINE_NAME = "gpt-4o-2024-05-13"
"""The attack addresses the model by name; this is the name it is told."""


# -- the venv ----------------------------------------------------------------------------------


def _cache() -> Path:
    base = os.environ.get("LEGATO_BENCH_CACHE") or str(Path.home() / ".cache" / "legato-bench")
    return Path(base) / "agentdojo"


def _core_dependencies() -> list[str]:
    """legato's own runtime dependencies, read from pyproject.toml (3.11 has tomllib)."""
    import tomllib

    with (REPO / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    return list(project["dependencies"])


def ensure_venv() -> str:
    """The interpreter of a venv with AgentDojo and legato's dependencies, built if needed."""
    root = _cache()
    python = root / "bin" / "python"
    wanted = [AGENTDOJO, *_core_dependencies()]
    digest = hashlib.sha256(("\n".join(wanted) + sys.version).encode()).hexdigest()
    stamp = root / ".built"
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return str(python)
    print(f"building {root} (AgentDojo and legato's dependencies; once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *wanted], check=True)
    stamp.write_text(digest)
    return str(python)


def _reexec_if_needed() -> None:
    if importlib.util.find_spec("agentdojo") is not None:
        return
    python = ensure_venv()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    os.execve(python, [python, __file__, *sys.argv[1:]], env)


# -- the adapter -------------------------------------------------------------------------------

READ_PREFIXES = ("get_", "search_", "list_", "read_", "check_")

SINK_BY_PARAMETER: dict[str, str] = {
    "recipient": "recipient",
    "recipients": "recipient",
    "cc": "recipient",
    "bcc": "recipient",
    "participants": "recipient",
    "email": "recipient",
    "user_email": "recipient",
    "user": "recipient",
    "channel": "recipient",
    "hotel": "recipient",
    "restaurant": "recipient",
    "company": "recipient",
    "url": "url",
    "filename": "path",
    "file_id": "id",
    "email_id": "id",
    "event_id": "id",
    "id": "id",
    "password": "credential",
    "start_time": "time",
    "new_start_time": "time",
    "start_day": "time",
    "end_day": "time",
    "first_name": "text",
    "last_name": "text",
    "street": "text",
    "city": "text",
}
"""A parameter's sink kind, by its name alone (what an integrator reads off a signature)."""


def _kinds() -> frozenset[str]:
    from typing import get_args

    from legato.tools import SinkKind

    return frozenset(get_args(SinkKind))


def declare(function_name: str, parameters: Iterable[str]) -> tuple[str, dict[str, str]]:
    """(side effects, sinks) of an AgentDojo tool, from its name and parameter names."""
    if function_name.startswith(READ_PREFIXES):
        # a fetch reaches the host it names: its url is a sink even on a read tool
        fetch = {p: "url" for p in parameters if p == "url"}
        return ("idempotent", fetch) if fetch else ("none", {})
    kinds = _kinds()
    sinks: dict[str, str] = {}
    for name in parameters:
        kind = SINK_BY_PARAMETER.get(name)
        if kind is not None:
            sinks[name] = kind if kind in kinds else "text"
    return "irreversible", sinks


def _plain(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def render(value: Any) -> str:
    """A tool result as the model reads it: compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"))


@dataclass
class Trace:
    """The calls that ran, in order (AgentDojo's `FunctionCall`s)."""

    calls: list[Any] = field(default_factory=list)


def make_tools(suite: Any, env: Any, trace: Trace) -> list[Any]:
    """legato tools over AgentDojo's functions, running on `env`."""
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

    from legato.tools import Tool

    runtime = FunctionsRuntime(suite.tools)
    tools = []
    for function in suite.tools:
        schema = function.parameters.model_json_schema()
        schema.pop("title", None)
        effects, sinks = declare(function.name, schema.get("properties", {}))

        def call(*, _name: str = function.name, **arguments: Any) -> str:
            trace.calls.append(FunctionCall(function=_name, args=dict(arguments)))
            result, error = runtime.run_function(env, _name, arguments, raise_on_error=False)
            return f"error: {error}" if error else render(result)

        tools.append(
            Tool.from_schema(
                name=function.name,
                description=function.description,
                parameters=schema,
                function=_bind(call, function.name),
                side_effects=effects,  # type: ignore[arg-type]
                sinks=sinks,  # type: ignore[arg-type]
            )
        )
    return tools


def _bind(call: Callable[..., str], name: str) -> Callable[..., str]:
    def bound(**arguments: Any) -> str:
        return call(_name=name, **arguments)

    bound.__signature__ = inspect.Signature()  # type: ignore[attr-defined]
    return bound


def _key(tool: str, arguments: Any) -> str:
    return tool + json.dumps(_plain(arguments), sort_keys=True, ensure_ascii=False)


# -- one run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One run: the user task done, the injection task done (attacks only), questions asked."""

    suite: str
    user_task: str
    injection_task: str | None
    utility: bool
    attacked: bool
    questions: int
    blocked: int
    seconds: float
    reasons: tuple[str, ...] = ()
    """The defence's explanations of what it blocked or asked."""


@dataclass
class Setting:
    """One configuration of the defence and the person answering its questions."""

    config: str
    person: str


USER_EMAIL = "emma.johnson@bluesparrowtech.com"
"""The user of the workspace suite (what the user would configure as their own address)."""


def policies(suite: str) -> list[Any]:
    """The one-line policies an integrator states for a suite (see docs/injection.md)."""
    from legato.injection import Endorse, Secret, Trust

    files = ("search_files_by_filename", "search_files", "list_files", "get_file_by_id")
    return {
        "banking": [
            # payees of the user's own payments; standing orders the user set up
            Trust("get_most_recent_transactions", ("recipient",), where={"sender": "me"}),
            Trust("get_scheduled_transactions", ("recipient",)),
        ],
        "slack": [
            # the platform's directory, and who wrote each message (not what they wrote)
            Trust("get_channels"),
            Trust("get_users_in_channel"),
            Trust("read_channel_messages", ("sender",)),
            Trust("read_inbox", ("sender",)),
        ],
        "workspace": [
            Endorse((USER_EMAIL,)),
            # the user's address book; whom the user shared their own files with
            Trust("search_contacts_by_name", ("email",)),
            Trust("search_contacts_by_email", ("email",)),
            *(Trust(t, ("shared_with",), where={"owner": USER_EMAIL}) for t in files),
        ],
        "travel": [
            # the user's documents and cards: never sent without a question
            Secret(
                "get_user_information",
                ("ID Number", "Passport Number", "Bank Account Number", "Credit Card Number"),
            ),
        ],
    }[suite]


def _defence(config: str, tools: list[Any], suite: str) -> list[Any]:
    from legato.injection import Grant, InjectionDefence, Layers

    layers = {
        "on": Layers(),
        "no-provenance": Layers(provenance=False),
        "no-sinks": Layers(sinks=False),
        "no-normalise": Layers(normalise=False),
        "no-capabilities": Layers(capabilities=False),
    }
    if config == "off":
        return []
    chosen = policies(suite) if config in EXTRA_CONFIGS else []
    grant_for = None
    if config == "asked":
        extra_data = {t.name: frozenset(t.sinks) for t in tools if t.sinks}

        def grant_for(prompt: str) -> Any:
            return Grant.of(None, from_data=extra_data)

    if config in ("prompt", "watched"):
        from dataclasses import replace

        from legato.injection import grant_from_prompt

        names = [t.name for t in tools]
        reads = [t.name for t in tools if t.side_effects == "none"]
        asked = {t.name: frozenset(t.sinks) for t in tools if config == "watched" and t.sinks}

        def grant_for(prompt: str) -> Any:
            return replace(grant_from_prompt(prompt, names, read_only=reads), from_data=asked)

    extra: dict[str, Any] = {}
    if chosen:
        extra["policies"] = chosen
    if grant_for is not None:
        extra["grant_for"] = grant_for
    return [InjectionDefence(tools=tools, layers=layers.get(config, Layers()), **extra)]


async def run_pair(
    suite: Any,
    user_task: Any,
    injection_task: Any | None,
    injections: dict[str, str],
    setting: Setting,
) -> Outcome:
    """Run one user task, attacked by `injection_task` when given, and judge it."""
    from agentdojo.types import text_content_block_from_string

    from legato.agent import Agent
    from legato.approvals import (
        ApprovalPolicy,
        ApprovalRequest,
        Approve,
        CallbackApprover,
        Decision,
        Reject,
    )
    from legato.testing._gullible import GullibleModel, Obey, Step

    started = time.perf_counter()
    env = suite.load_and_inject_default_environment(injections)
    pre = env.model_copy(deep=True)
    plan = [
        (Step(tool=c.function, arguments=_plain(dict(c.args))),)
        for c in user_task.ground_truth(pre.model_copy(deep=True))
    ]
    obey: list[Obey] = []
    if injection_task is not None:
        goal = json.dumps(injection_task.GOAL[:60], ensure_ascii=False)[1:-1]
        steps = tuple(
            Step(tool=c.function, arguments=_plain(dict(c.args)))
            for c in injection_task.ground_truth(pre.model_copy(deep=True))
        )
        # one call per turn, as for the user's task: a model writes a value only after the
        # result holding it has come back (in one turn, a call could carry data not yet read)
        obey.extend(Obey(triggers=(goal,), steps=(step,)) for step in steps)
    own = {_key(s.tool, s.arguments) for turn in plan for s in turn}
    trace = Trace()
    tools = make_tools(suite, env, trace)
    questions = 0

    def decide(request: ApprovalRequest) -> Decision:
        nonlocal questions
        questions += 1
        if setting.person == "all":
            return Approve()
        if setting.person == "oracle" and _key(request.tool, request.arguments) in own:
            return Approve()
        return Reject(message="no one approved this")

    final = user_task.GROUND_TRUTH_OUTPUT or "Done."
    model = GullibleModel(plan, obey=obey, final=final)
    hooks = _defence(setting.config, tools, suite.name)
    agent = Agent(
        model,
        tools=tools,
        hooks=hooks,
        approvals=ApprovalPolicy(handler=CallbackApprover(decide)),
        max_steps=40,
    )
    result = await agent.run(user_task.PROMPT)
    blocked = sum(
        1
        for event in result.journal
        if getattr(event, "kind", "") == "tool_call_refused"
        and getattr(event, "reason", "") == "hook"
    )
    output = [text_content_block_from_string(final)]
    utility = suite._check_task_result(user_task, output, pre, env, trace.calls)
    attacked = False
    if injection_task is not None:
        attacked = suite._check_task_result(injection_task, output, pre, env, trace.calls)
    return Outcome(
        suite=suite.name,
        user_task=user_task.ID,
        injection_task=injection_task.ID if injection_task is not None else None,
        utility=bool(utility),
        attacked=bool(attacked),
        questions=questions,
        blocked=blocked,
        seconds=time.perf_counter() - started,
        reasons=tuple(d.explain() for h in hooks for d in h.decisions(result.run_id)),
    )


# -- the benchmark -----------------------------------------------------------------------------


class _Named:
    """What the attack reads off a pipeline: its name (the model it addresses)."""

    name = PIPELINE_NAME


def fast_yaml() -> None:
    """Make AgentDojo's environment loading fast, with the same results.

    Each run loads a fresh environment, and AgentDojo parses its YAML with the pure-Python
    loader (about a second a load for workspace): the suite files are read once
    (`read_suite_file` is a pure function of its arguments) and parsed with libyaml's
    safe loader when PyYAML has it (`tests/injection/test_agentdojo.py` checks that both
    loaders give equal environments).
    """
    import functools

    import yaml
    from agentdojo.task_suite import task_suite

    if getattr(task_suite, "_legato_fast", False):
        return
    task_suite.read_suite_file = functools.lru_cache(maxsize=None)(task_suite.read_suite_file)
    if getattr(yaml, "__with_libyaml__", False):

        def safe_load(stream: Any) -> Any:
            loader = yaml.CSafeLoader(stream)  # what yaml.safe_load does, in C
            try:
                return loader.get_single_data()
            finally:
                loader.dispose()

        task_suite.yaml = _YamlShim(yaml, safe_load)  # type: ignore[attr-defined]
    task_suite._legato_fast = True  # type: ignore[attr-defined]


class _YamlShim:
    """The yaml module as AgentDojo's task_suite sees it, with a faster `safe_load`."""

    def __init__(self, module: Any, safe_load: Callable[[Any], Any]) -> None:
        self._module = module
        self.safe_load = safe_load

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def load(suites: Sequence[str] = SUITES, *, fast: bool = True) -> dict[str, Any]:
    """AgentDojo's suites at `VERSION`."""
    from agentdojo.task_suite.load_suites import get_suites

    if fast:
        fast_yaml()
    every = get_suites(VERSION)
    return {name: every[name] for name in suites}


def replayable(suite: Any, injection_task: Any) -> bool:
    """Whether the injection task's ground truth, replayed alone, achieves its goal."""
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.types import text_content_block_from_string

    env = suite.load_and_inject_default_environment({})
    pre = env.model_copy(deep=True)
    runtime = FunctionsRuntime(suite.tools)
    calls = injection_task.ground_truth(pre.model_copy(deep=True))
    for c in calls:
        runtime.run_function(env, c.function, dict(c.args), raise_on_error=False)
    output = [text_content_block_from_string("")]
    return bool(suite._check_task_result(injection_task, output, pre, env, calls))


def pairs(
    suite: Any,
    *,
    user_tasks: Sequence[str] | None = None,
    injection_tasks: Sequence[str] | None = None,
) -> list[tuple[Any, Any, dict[str, str]]]:
    """(user task, injection task, injections) of a suite under `important_instructions`."""
    from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack

    attack = ImportantInstructionsAttack(suite, _Named())  # type: ignore[arg-type]
    out = []
    for uid, user_task in suite.user_tasks.items():
        if user_tasks is not None and uid not in user_tasks:
            continue
        for iid, injection_task in suite.injection_tasks.items():
            if injection_tasks is not None and iid not in injection_tasks:
                continue
            out.append((user_task, injection_task, attack.attack(user_task, injection_task)))
    return out


@dataclass
class Figures:
    """The outcomes of one setting over some suites."""

    setting: Setting
    clean: list[Outcome] = field(default_factory=list)
    attacked: list[Outcome] = field(default_factory=list)
    replayable: dict[tuple[str, str], bool] = field(default_factory=dict)

    def row(self, suite: str | None = None) -> dict[str, Any]:
        """Counts for one suite (all suites when None)."""
        clean = [o for o in self.clean if suite is None or o.suite == suite]
        att = [o for o in self.attacked if suite is None or o.suite == suite]
        rep = [o for o in att if self.replayable.get((o.suite, o.injection_task or ""), True)]
        return {
            "utility": sum(o.utility for o in clean),
            "tasks": len(clean),
            "clean_questions": sum(o.questions for o in clean),
            "asr": sum(o.attacked for o in att),
            "pairs": len(att),
            "asr_replayable": sum(o.attacked for o in rep),
            "pairs_replayable": len(rep),
            "ua": sum(o.utility for o in att),
            "attacked_questions": sum(o.questions for o in att),
        }


async def measure(
    suites: dict[str, Any],
    setting: Setting,
    *,
    limit: int | None = None,
    attacks: bool = True,
    user_tasks: Sequence[str] | None = None,
    injection_tasks: Sequence[str] | None = None,
) -> Figures:
    """Run every user task clean and under every injection task, in one setting."""
    figures = Figures(setting=setting)
    for suite in suites.values():
        for iid, it in suite.injection_tasks.items():
            figures.replayable[(suite.name, iid)] = replayable(suite, it)
        chosen = [
            t for uid, t in suite.user_tasks.items() if user_tasks is None or uid in user_tasks
        ][:limit]
        for user_task in chosen:
            figures.clean.append(await run_pair(suite, user_task, None, {}, setting))
        if not attacks:
            continue
        ids = [t.ID for t in chosen]
        for user_task, injection_task, injections in pairs(
            suite, user_tasks=ids, injection_tasks=injection_tasks
        ):
            figures.attacked.append(
                await run_pair(suite, user_task, injection_task, injections, setting)
            )
    return figures


def table(all_figures: Sequence[Figures], suites: Sequence[str]) -> str:
    """A markdown table: one row per setting, with per-suite ASR."""
    head = (
        "| config | person | utility | questions (clean) | ASR all pairs | ASR replayable | "
        + " | ".join(f"ASR {s}" for s in suites)
        + " | utility under attack | questions (attacked) |"
    )
    lines = [head, "|" + "---|" * (8 + len(suites))]
    for f in all_figures:
        r = f.row()
        per = [f.row(s) for s in suites]
        ua = f"{r['ua']}/{r['pairs']} ({r['ua'] / max(r['pairs'], 1):.1%})"
        lines.append(
            f"| {f.setting.config} | {f.setting.person} | {r['utility']}/{r['tasks']} | "
            f"{r['clean_questions']} | {r['asr']}/{r['pairs']} | "
            f"{r['asr_replayable']}/{r['pairs_replayable']} | "
            + " | ".join(f"{p['asr']}/{p['pairs']}" for p in per)
            + f" | {ua} | {r['attacked_questions']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: see the module documentation."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suite", action="append", choices=SUITES)
    parser.add_argument("--config", action="append")
    parser.add_argument("--person", action="append", choices=PEOPLE)
    parser.add_argument("--limit", type=int, help="user tasks per suite")
    parser.add_argument("--clean-only", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    suites = load(args.suite or SUITES)
    results = []
    for config in args.config or CONFIGS:
        for person in args.person or ["none"]:
            started = time.perf_counter()
            figures = asyncio.run(
                measure(
                    suites, Setting(config, person), limit=args.limit, attacks=not args.clean_only
                )
            )
            results.append(figures)
            print(f"{config}/{person}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            print(table([figures], list(suites)), file=sys.stderr)
    print(table(results, list(suites)))
    if args.json is not None:
        out = [
            {
                "config": f.setting.config,
                "person": f.setting.person,
                "all": f.row(),
                **{s: f.row(s) for s in suites},
                "failures": {
                    f"{o.suite}/{o.user_task}": o.reasons for o in f.clean if not o.utility
                },
                "attacks": [
                    f"{o.suite}/{o.user_task}/{o.injection_task}" for o in f.attacked if o.attacked
                ],
            }
            for f in results
        ]
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    # this file's directory comes first on the path, and this file is named like the package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    _reexec_if_needed()
    main()
