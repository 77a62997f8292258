"""legato runs on Temporal: one more driver of the same step function (extra `temporal`).

The workflow (`LegatoRun`) plans; activities advance the run one unit each (one model
call, one tool call keyed by its effect id, a step's close, a decision), writing to the
legato store and returning references; model calls and safe tool calls run as local
activities by default. The journal stays the truth and Temporal's history
stays small. See docs/temporal.md.

```python
async with legato_worker(client, task_queue="agents", agents={"support": agent}):
    runs = TemporalRuns(client, task_queue="agents")
    run_id = await runs.start("support", "Where is my order?")
    outcome = await runs.result(run_id)
```
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("temporalio") is None:  # pragma: no cover - the environment's
    from legato.exceptions import MissingDependency

    package = "temporalio"
    raise MissingDependency(package, "temporal")

from legato.temporal._activities import MAX_PROMPT_BYTES, LegatoActivities, journal_digest
from legato.temporal._client import (
    MAX_LOCAL_RESULT_BYTES,
    PASSED_THROUGH,
    LocalResultLimit,
    TemporalRuns,
    legato_worker,
)
from legato.temporal._types import (
    ActivitySettings,
    DecisionInput,
    LocalActivities,
    Plan,
    RunInput,
    RunOutcome,
    RunRef,
)
from legato.temporal._workflow import LegatoRun

__all__ = [
    "MAX_LOCAL_RESULT_BYTES",
    "MAX_PROMPT_BYTES",
    "PASSED_THROUGH",
    "ActivitySettings",
    "DecisionInput",
    "LegatoActivities",
    "LegatoRun",
    "LocalActivities",
    "LocalResultLimit",
    "Plan",
    "RunInput",
    "RunOutcome",
    "RunRef",
    "TemporalRuns",
    "journal_digest",
    "legato_worker",
]
