"""Agents in files: a strict, versioned YAML schema loaded into an `Agent`.

```yaml
# yaml-language-server: $schema=agent.schema.json
version: 1
name: mailer
model: anthropic:claude-sonnet-4-5
instructions: Be brief.
tools:
  - import: mytools:send_email          # a tool, function, toolset or list, by import path
  - mcp: {command: mcp-server-time}     # an MCP server's tools (stdio or url:)
approvals:
  rules:
    - {tool: send_email, action: ask}
budget: {model_calls: 20, tool_calls: 40}
```

The rules, each tested:

- Parsed with `yaml.safe_load` only: a `!!python/...` tag is an error, never executed.
- `version: 1` is required; an unknown key is an error naming the file, the line and the
  dotted path (`tools[1].nmae`).
- Secrets (`api_key`, an MCP server's `env` and `headers` values) are only written as a whole
  `${VARIABLE}` and read from the environment after parsing; a literal secret or a missing
  variable is an error. Nothing else is interpolated.
- A file never loosens what the program sets in code: with `Agent.from_file(path,
  approvals=..., budget=..., max_steps=...)` each call gets the stricter action of the two
  policies (`auto` < `ask` < `deny`), each budget limit the smaller value. What the file
  tried to loosen is reported in `LoadedAgent.notes`.

`agent_schema()` is the JSON Schema editors use (published as `docs/agent.schema.json`).
An `mcp:` entry needs `legato.mcp` imported (it registers the client agent files use; the
`legato` command imports it): the runtime layer knows no MCP transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from legato._agent_spec import (
    AgentFileSpec,
    AgentRecipe,
    McpClientFactory,
    McpHttp,
    McpStdio,
    agent_schema,
    load_object,
    load_tools,
    parse_agent_file,
    read_agent_file,
    register_mcp_factory,
)
from legato.agent import Agent

if TYPE_CHECKING:
    from legato.approvals import ApprovalPolicy
    from legato.budgets import BudgetLimits

__all__ = [
    "AgentFileSpec",
    "AgentRecipe",
    "LoadedAgent",
    "McpClientFactory",
    "McpHttp",
    "McpStdio",
    "agent_schema",
    "load_agent_file",
    "load_object",
    "load_tools",
    "parse_agent_file",
    "read_agent_file",
    "register_mcp_factory",
]


@dataclass(kw_only=True)
class LoadedAgent:
    """An agent built from a file, and what the file was not allowed to loosen."""

    agent: Agent[str]
    spec: AgentFileSpec
    notes: list[str] = field(default_factory=lambda: [])
    """One line per setting of the file that code kept stricter."""


def load_agent_file(
    path: str | Path,
    *,
    approvals: ApprovalPolicy | None = None,
    budget: BudgetLimits | None = None,
    max_steps: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadedAgent:
    """Build the agent a file describes; code's `approvals`, `budget`, `max_steps` are floors."""
    recipe = read_agent_file(
        path, approvals=approvals, budget=budget, max_steps=max_steps, environ=environ
    )
    agent: Agent[str] = recipe.build(Agent)
    return LoadedAgent(agent=agent, spec=recipe.spec, notes=recipe.notes)
