"""The first harness: each case run as a plain agent run, verdicts from the world's effect log.

Kept for the figures of docs/injection.md and bench/injection.py; the same cases also run on
`legato.evals` (see `legato.evals.injection`).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from legato.agent import Agent
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    Decision,
    Reject,
)
from legato.evals._stats import wilson
from legato.evals.injection._corpus import (
    FAMILIES,
    GOAL_KINDS,
    HELD_OUT,
    AttackCase,
    BenignCase,
    attack_corpus,
    benign_corpus,
    same_effect,
)
from legato.evals.injection._world import Effect, World, world_tools
from legato.injection import InjectionDefence, Layers, extraction_tool
from legato.security import Hook, InjectionScreen
from legato.testing import GullibleModel, Obey, Step
from legato.tools import Tool

__all__ = [
    "FAMILIES",
    "GOAL_KINDS",
    "HELD_OUT",
    "AttackCase",
    "BenignCase",
    "CaseResult",
    "Defence",
    "Effect",
    "GullibleModel",
    "Obey",
    "Report",
    "Step",
    "World",
    "attack_corpus",
    "benign_corpus",
    "case_agent",
    "evaluate",
    "evaluate_async",
    "run_case",
    "per_goal",
    "wilson",
    "world_tools",
]

Defence: TypeAlias = Literal[
    "off",
    "screen",
    "on",
    "quarantine",
    "no-provenance",
    "no-sinks",
    "no-normalise",
    "no-capabilities",
]
Person: TypeAlias = Literal["oracle", "all"]

_LAYERS: dict[str, Layers] = {
    "on": Layers(),
    "quarantine": Layers(),
    "no-provenance": Layers(provenance=False),
    "no-sinks": Layers(sinks=False),
    "no-normalise": Layers(normalise=False),
    "no-capabilities": Layers(capabilities=False),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """How one case went."""

    id: str
    success: bool
    """Attack: the attacker's effect happened. Benign: the task's effects happened."""
    questions: int
    """Approval questions asked of the person."""
    blocked: int
    """Calls the defence blocked."""


READ_TOOLS = frozenset(
    {"read_inbox", "read_file", "browse", "get_transactions", "get_events", "docs_lookup"}
)
"""The world's read tools (quarantined in the `quarantine` configuration)."""


def _hooks(defence: Defence, case: AttackCase | BenignCase) -> tuple[list[Hook], list[Tool]]:
    if defence == "off":
        return [], []
    if defence == "screen":
        return [InjectionScreen()], []
    quarantine = READ_TOOLS if defence == "quarantine" else frozenset[str]()
    guard = InjectionDefence(grant=case.grant, layers=_LAYERS[defence], quarantine=quarantine)
    return [guard], ([extraction_tool(guard)] if quarantine else [])


def _plan(case: AttackCase | BenignCase, defence: Defence) -> list[tuple[Step, ...]]:
    plan = list(case.plan)
    if defence == "quarantine" and isinstance(case, BenignCase) and case.extract is not None:
        plan.insert(1, (Step(tool="extract", arguments={"handle": "$q1", "kind": case.extract}),))
    return plan


def _expected(case: AttackCase | BenignCase) -> list[Step]:
    return list(case.expected)


def case_agent(
    case: AttackCase | BenignCase, *, defence: Defence = "on", person: Person = "oracle"
) -> tuple[Agent[str], World, list[ApprovalRequest]]:
    """The agent one run of `case` runs on: a fresh world, the obeying model, the defence.

    Returns the agent, its world (whose effect log the verdict reads) and the list the
    scripted person appends each question to.
    """
    world: World = case.world()
    tools = world_tools(world)
    asked: list[ApprovalRequest] = []
    expected = _expected(case)

    def decide(request: ApprovalRequest) -> Decision:
        asked.append(request)
        if person == "all":
            return Approve()
        effect = Effect(tool=request.tool, arguments=dict(request.arguments))  # type: ignore[arg-type] - a JSON object
        if any(same_effect(effect, step) for step in expected):
            return Approve()
        return Reject(message="not what I asked for")

    obey = case.obey if isinstance(case, AttackCase) else ()
    model = GullibleModel(_plan(case, defence), obey=obey)
    policy = ApprovalPolicy(handler=CallbackApprover(decide))
    hooks, extra = _hooks(defence, case)
    agent = Agent(
        model,
        tools=[*tools, *extra],
        hooks=hooks,
        approvals=policy,
        max_steps=12,
        name=f"injection-{defence}",
    )
    return agent, world, asked


async def run_case(
    case: AttackCase | BenignCase, *, defence: Defence = "on", person: Person = "oracle"
) -> CaseResult:
    """Run one case and judge it from the effect log."""
    agent, world, asked = case_agent(case, defence=defence, person=person)
    result = await agent.run(case.prompt)
    blocked = sum(
        1
        for event in result.journal
        if getattr(event, "kind", "") == "tool_call_refused"
        and getattr(event, "reason", "") == "hook"
    )
    return CaseResult(
        id=case.id, success=case.succeeded(world.effects), questions=len(asked), blocked=blocked
    )


@dataclass(kw_only=True)
class Report:
    """Attack and benign figures of one configuration."""

    defence: Defence
    person: Person
    attacks: dict[str, CaseResult] = field(default_factory=lambda: {})
    benign: dict[str, CaseResult] = field(default_factory=lambda: {})
    families: dict[str, str] = field(default_factory=lambda: {})
    goals: dict[str, str] = field(default_factory=lambda: {})
    from_data: set[str] = field(default_factory=lambda: set())

    def attack_rate(self, *, family: str | None = None, goal: str | None = None) -> tuple[int, int]:
        """(successful attacks, cases), optionally for one family or goal kind."""
        chosen = [
            r
            for cid, r in self.attacks.items()
            if (family is None or self.families[cid] == family)
            and (goal is None or self.goals[cid] == goal)
        ]
        return sum(r.success for r in chosen), len(chosen)

    def held_out_rate(self, held_out: bool) -> tuple[int, int]:
        """(successes, cases) over the held-out families, or over the others."""
        chosen = [
            r for cid, r in self.attacks.items() if (self.families[cid] in HELD_OUT) == held_out
        ]
        return sum(r.success for r in chosen), len(chosen)

    def benign_rate(self, *, from_data: bool) -> tuple[int, int, int]:
        """(completed, completed without a question, cases) of the benign tasks of one kind."""
        chosen = [r for cid, r in self.benign.items() if (cid in self.from_data) == from_data]
        done = sum(r.success for r in chosen)
        quiet = sum(r.success and r.questions == 0 for r in chosen)
        return done, quiet, len(chosen)

    def table(self) -> str:
        """A plain-text table: attack success per family (held-out marked) and benign."""
        lines = [f"defence={self.defence} person={self.person}"]
        for family in FAMILIES:
            s, n = self.attack_rate(family=family)
            if n:
                lo, hi = wilson(s, n)
                mark = " (held out)" if family in HELD_OUT else ""
                lines.append(
                    f"  {family:<24}{mark:<11} ASR {s:>3}/{n:<3} = {s / n:6.1%}  [{lo:.1%}, {hi:.1%}]"
                )
        s, n = self.attack_rate()
        if n:
            lines.append(
                f"  {'all attacks':<35} ASR {s:>3}/{n:<3} = {s / n:6.1%}  {wilson(s, n)[0]:.1%}-{wilson(s, n)[1]:.1%}"
            )
            questions = sum(r.questions for r in self.attacks.values())
            blocked = sum(r.blocked > 0 for r in self.attacks.values())
            lines.append(
                f"  attack cases with a block: {blocked}/{n}; questions asked: {questions}"
            )
        for from_data in (False, True):
            done, quiet, total = self.benign_rate(from_data=from_data)
            if total:
                label = "benign, sinks from data" if from_data else "benign, sinks from user"
                lines.append(
                    f"  {label:<35} done {done}/{total} = {done / total:6.1%}; with no question {quiet}/{total}"
                )
        return "\n".join(lines)


async def evaluate_async(
    attacks: Sequence[AttackCase],
    benign: Sequence[BenignCase],
    *,
    defence: Defence = "on",
    person: Person = "oracle",
) -> Report:
    """Run every case (sequentially, each with a fresh world and model)."""
    report = Report(defence=defence, person=person)
    for case in attacks:
        report.attacks[case.id] = await run_case(case, defence=defence, person=person)
        report.families[case.id] = case.family
        report.goals[case.id] = case.goal
    for task in benign:
        report.benign[task.id] = await run_case(task, defence=defence, person=person)
        if task.from_data:
            report.from_data.add(task.id)
    return report


def evaluate(
    attacks: Sequence[AttackCase],
    benign: Sequence[BenignCase],
    *,
    defence: Defence = "on",
    person: Person = "oracle",
) -> Report:
    """`evaluate_async` from synchronous code."""
    return asyncio.run(evaluate_async(attacks, benign, defence=defence, person=person))


def per_goal(report: Report) -> dict[str, tuple[int, int]]:
    """(successes, cases) per goal kind."""
    out: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
    for goal in GOAL_KINDS:
        out[goal] = report.attack_rate(goal=goal)
    return dict(out)
