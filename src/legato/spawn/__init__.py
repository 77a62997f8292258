"""Sub-agents: spawning at run time, memory slicing, skills, spawn policies, resumption.

```python
from legato import Agent
from legato.spawn import spawn_tools

agent = Agent(model, tools=[spawn_tools([read_file, grep], model=model)])
```

The model gets `spawn` (start a child with a task, granted tools and skills, a budget
share; wait or run it in the background), `wait_children` (all / first / any) and `todo`.
Children are full runs with their own journals; their events stream through the parent
tagged with their lineage. See docs/subagents.md.
"""

from legato.spawn._as_tool import agent_tool, resume, resume_stream
from legato.spawn._child import (
    ChildOutcome,
    child_budget,
    current_lineage,
    outcome_from_journal,
    tree_steps,
    tree_usage,
)
from legato.spawn._limits import (
    BudgetShare,
    ChildLimits,
    SpawnLimits,
    narrow_limits,
    narrow_settings,
)
from legato.spawn._policy import (
    NeverSpawn,
    SpawnDecision,
    SpawnPolicy,
    ThresholdPolicy,
    TodoList,
    measure,
)
from legato.spawn._settings import Inheritance
from legato.spawn._skills import Skill, SkillSet, load_skill, load_skills, parse_front_matter
from legato.spawn._slice import (
    ContextSource,
    MemorySource,
    SliceItem,
    SliceMode,
    SliceResult,
    StateSource,
    estimate_tokens,
    items_from_messages,
    select_slice,
)
from legato.spawn._store import ChildRecord, JournalStore, MemoryJournalStore
from legato.spawn._toolset import SpawnToolset, spawn_tools

__all__ = [
    "BudgetShare",
    "ChildLimits",
    "ChildOutcome",
    "ChildRecord",
    "ContextSource",
    "Inheritance",
    "JournalStore",
    "MemoryJournalStore",
    "MemorySource",
    "NeverSpawn",
    "Skill",
    "SkillSet",
    "SliceItem",
    "SliceMode",
    "SliceResult",
    "SpawnDecision",
    "SpawnLimits",
    "SpawnPolicy",
    "SpawnToolset",
    "StateSource",
    "ThresholdPolicy",
    "TodoList",
    "agent_tool",
    "child_budget",
    "current_lineage",
    "estimate_tokens",
    "items_from_messages",
    "load_skill",
    "load_skills",
    "measure",
    "narrow_limits",
    "narrow_settings",
    "outcome_from_journal",
    "parse_front_matter",
    "resume",
    "resume_stream",
    "select_slice",
    "spawn_tools",
    "tree_steps",
    "tree_usage",
]
