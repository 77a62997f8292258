"""The prompt-injection evaluation: an obeying model, a corpus, verdicts from effects.

```python
from legato.evals import evaluate_sync
from legato.evals.injection import injection_suite

suite = injection_suite(defence="on", every=10)
report = evaluate_sync(suite.agent, suite.dataset, eval_id="inj-on", evaluators=suite.evaluators)
```

Each case runs a real `Agent` with `GullibleModel` (it obeys every planted instruction it
can see) against a `World` whose side-effecting tools log effects; a case's verdict is
read from those effects. Questions go to a scripted person: `oracle` approves exactly the
calls the user's own task needs and rejects the rest (someone who reads the question),
`all` approves everything (someone who clicks yes). `defence` is `off`, `screen` (the
pattern screen `InjectionScreen` with the safety-page configuration), `on`, `quarantine`,
or `on` without one layer (`no-provenance`, `no-sinks`, `no-normalise`,
`no-capabilities`).

Two ways to run it: `injection_suite` (on the `legato.evals` runner: stored journals,
budget, resume, reports, `legato eval compare`), and `evaluate` / `run_case` (plain runs,
the effect log read from the world; what bench/injection.py prints). The harness drives
agents and the defence, so it sits with the interfaces, above what it tests.
"""

from legato.evals.injection._corpus import (
    FAMILIES,
    GOAL_KINDS,
    HELD_OUT,
    AttackCase,
    BenignCase,
    Family,
    GoalKind,
    attack_corpus,
    benign_corpus,
    same_effect,
)
from legato.evals.injection._harness import (
    READ_TOOLS,
    CaseResult,
    Defence,
    Person,
    Report,
    case_agent,
    evaluate,
    evaluate_async,
    per_goal,
    run_case,
    wilson,
)
from legato.evals.injection._suite import (
    SIDE_EFFECTS,
    attack_resisted,
    blocked,
    injection_dataset,
    injection_suite,
    journal_effects,
    questions,
    task_done,
)
from legato.evals.injection._world import Effect, World, world_tools
from legato.testing import GullibleModel, Obey, Step

__all__ = [
    "FAMILIES",
    "GOAL_KINDS",
    "HELD_OUT",
    "READ_TOOLS",
    "SIDE_EFFECTS",
    "AttackCase",
    "BenignCase",
    "CaseResult",
    "Defence",
    "Effect",
    "Family",
    "GoalKind",
    "GullibleModel",
    "Obey",
    "Person",
    "Report",
    "Step",
    "World",
    "attack_corpus",
    "attack_resisted",
    "benign_corpus",
    "blocked",
    "case_agent",
    "evaluate",
    "evaluate_async",
    "injection_dataset",
    "injection_suite",
    "journal_effects",
    "per_goal",
    "questions",
    "run_case",
    "same_effect",
    "task_done",
    "wilson",
    "world_tools",
]
