"""Evaluations built on the journal: datasets, evaluators, resumable runs, reports.

```python
from legato.evals import Dataset, evaluate_sync, tool_called

dataset = Dataset.from_file("cases.yaml")
report = evaluate_sync(agent, dataset, eval_id="nightly", evaluators=[tool_called("search")])
report.save("nightly.json")
```

Every (case, repeat) is an ordinary legato run whose journal is kept in a store (SQLite
by default): evaluators read the output and the journal (tool calls, approvals, contract
rejections, tokens, cost, durations); an interrupted evaluation started again with the
same `eval_id` takes finished runs from the store instead of paying for them again;
`replay` scores stored runs with new evaluators without calling the agent's model.
A case the schema refuses, an evaluator that raises, a judge answer that does not parse
or a budget that runs out marks that case with the reason; the rest goes on.
"""

from legato.evals._dataset import Case, Checks, Dataset, InvalidCase, dataset_schema
from legato.evals._evaluators import (
    EvalContext,
    Evaluator,
    FunctionEvaluator,
    Judge,
    Score,
    Verdict,
    approvals_asked,
    case_evaluators,
    contains,
    equals,
    evaluator,
    evaluator_version,
    json_schema,
    judge,
    matches,
    max_cost,
    max_latency,
    max_tokens,
    max_tool_calls,
    no_contract_rejections,
    tool_called,
    tool_calls_in_order,
    tool_not_called,
)
from legato.evals._html import report_html
from legato.evals._judge_cache import JudgeCache
from legato.evals._report import CaseChange, Comparison, compare, rate_text, report_table
from legato.evals._results import CaseResult, CaseStats, EvalReport, Status
from legato.evals._runner import AgentFactory, Suite, evaluate, evaluate_sync, replay, run_id_of
from legato.evals._stats import clustered_interval, wilson

__all__ = [
    "AgentFactory",
    "Case",
    "CaseChange",
    "CaseResult",
    "CaseStats",
    "Checks",
    "Comparison",
    "Dataset",
    "EvalContext",
    "EvalReport",
    "Evaluator",
    "FunctionEvaluator",
    "InvalidCase",
    "Judge",
    "JudgeCache",
    "Score",
    "Status",
    "Suite",
    "Verdict",
    "approvals_asked",
    "case_evaluators",
    "clustered_interval",
    "compare",
    "contains",
    "dataset_schema",
    "equals",
    "evaluate",
    "evaluate_sync",
    "evaluator",
    "evaluator_version",
    "json_schema",
    "judge",
    "matches",
    "rate_text",
    "max_cost",
    "max_latency",
    "max_tokens",
    "max_tool_calls",
    "no_contract_rejections",
    "replay",
    "report_html",
    "report_table",
    "run_id_of",
    "tool_called",
    "tool_calls_in_order",
    "tool_not_called",
    "wilson",
]
