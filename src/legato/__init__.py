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

if TYPE_CHECKING:  # every public name loads on first use: `import legato` stays light
    from legato.agent import Agent, AgentOptions, Prompt, RunOptions
    from legato.approvals import ApprovalPolicy, Rule
    from legato.budgets import Budget, BudgetLimits
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
    from legato.run import (
        RunHandle,
        RunResult,
        cancel_all_runs,
        install_sigint_handler,
        replay,
    )
    from legato.tools import RunContext, Tool, Toolset, tool

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
    "cancel_all_runs",
    "install_sigint_handler",
    "replay",
    "tool",
]

_LAZY = {
    **dict.fromkeys(("Agent", "AgentOptions", "Prompt", "RunOptions"), "legato.agent"),
    **dict.fromkeys(("ApprovalPolicy", "Rule"), "legato.approvals"),
    **dict.fromkeys(("Budget", "BudgetLimits"), "legato.budgets"),
    "State": "legato.contracts",
    **dict.fromkeys(("Journal", "RunEvent"), "legato.events"),
    **dict.fromkeys(("LegatoError", "ToolError"), "legato.exceptions"),
    **dict.fromkeys(
        (
            "DocumentPart",
            "ImagePart",
            "Message",
            "ModelResponse",
            "StopReason",
            "TextPart",
            "ThinkingPart",
            "ToolCallPart",
            "ToolResultPart",
            "Usage",
        ),
        "legato.messages",
    ),
    **dict.fromkeys(("Model", "ModelSettings"), "legato.models"),
    **dict.fromkeys(
        ("RunHandle", "RunResult", "cancel_all_runs", "install_sigint_handler", "replay"),
        "legato.run",
    ),
    **dict.fromkeys(("RunContext", "Tool", "Toolset", "tool"), "legato.tools"),
}
"""Where each public name lives; loaded (and kept in the module) on first access."""


def __getattr__(name: str) -> Any:
    import importlib

    module = _LAZY.get(name)
    if module is None:
        try:  # a submodule not imported yet (`import legato` then `legato.events`)
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
