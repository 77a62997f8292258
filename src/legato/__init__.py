"""legato: LLM agents that run the same on every provider, with verified state and safe effects.

```python
from legato import Agent, tool

@tool
def get_weather(city: str) -> str:
    \"\"\"Current weather for a city.\"\"\"
    return "sunny"

agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], instructions="Be brief.")
result = agent.run_sync("Weather in Paris?")
```

Importing legato has no side effects: no files, no network, no logging configuration.
"""

from typing import TYPE_CHECKING, Any

from legato._version import __version__
from legato.agent import Agent, AgentOptions, Prompt, RunOptions
from legato.contracts import State
from legato.events import Journal, RunEvent
from legato.exceptions import LegatoError, ToolError
from legato.messages import (
    DocumentPart,
    ImagePart,
    Message,
    ModelResponse,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from legato.models import Model, ModelSettings
from legato.run import RunHandle, RunResult, replay
from legato.tools import RunContext, Tool, Toolset, tool

if TYPE_CHECKING:  # loaded on first use: `import legato` stays light
    from legato.approvals import ApprovalPolicy, Rule
    from legato.budgets import Budget, BudgetLimits

__all__ = [
    "Agent",
    "AgentOptions",
    "ApprovalPolicy",
    "Budget",
    "BudgetLimits",
    "DocumentPart",
    "ImagePart",
    "Journal",
    "LegatoError",
    "Message",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "Prompt",
    "RunContext",
    "RunEvent",
    "RunHandle",
    "RunOptions",
    "RunResult",
    "Rule",
    "State",
    "StopReason",
    "TextPart",
    "ThinkingPart",
    "Tool",
    "ToolCallPart",
    "ToolError",
    "ToolResultPart",
    "Toolset",
    "Usage",
    "__version__",
    "replay",
    "tool",
]


_LAZY = {
    "ApprovalPolicy": "legato.approvals",
    "Rule": "legato.approvals",
    "Budget": "legato.budgets",
    "BudgetLimits": "legato.budgets",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'legato' has no attribute {name!r}"
        raise AttributeError(msg)
    import importlib

    return getattr(importlib.import_module(module), name)
