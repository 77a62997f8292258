"""What an agent file says, read and checked, and the parts of the agent it describes.

The public face is `legato.agent_file` (which builds the `Agent`); `Agent.from_file` reads
files through `read_agent_file` here, so this module never imports the agent. An agent
file's MCP servers become tool sources through the factory `legato.mcp` registers when it
is imported (`register_mcp_factory`): the runtime layer knows no MCP transport.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from legato.exceptions import AgentFileError, ConfigurationError, MissingDependency

if TYPE_CHECKING:
    from legato.approvals import Action, ApprovalPolicy
    from legato.budgets import BudgetLimits
    from legato.messages import JsonValue
    from legato.tools import Tool, ToolSource

__all__ = [
    "AgentFileSpec",
    "AgentRecipe",
    "McpClientFactory",
    "McpHttp",
    "McpStdio",
    "agent_schema",
    "load_object",
    "load_tools",
    "parse_agent_file",
    "read_agent_file",
    "register_mcp_factory",
]

T = TypeVar("T")

_SECRET = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_STRICTNESS: dict[str, int] = {"auto": 0, "ask": 1, "deny": 2}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """A model with its server and key."""

    name: str = Field(description="A 'provider:model' string.")
    base_url: str | None = Field(default=None, description="Another server for the provider.")
    api_key: str | None = Field(default=None, description="Only as '${ENVIRONMENT_VARIABLE}'.")


class ImportTool(_Strict):
    """Tools by import path: `module:object` (a tool, function, toolset or list)."""

    import_: str = Field(alias="import", description="module:object")


class McpStdio(_Strict):
    """An MCP server started as a command."""

    command: str
    args: list[str] = Field(default_factory=lambda: [])
    env: dict[str, str] = Field(
        default_factory=lambda: {}, description="Values only as '${ENVIRONMENT_VARIABLE}'."
    )
    cwd: str | None = None


class McpHttp(_Strict):
    """An MCP server reached over Streamable HTTP."""

    url: str
    headers: dict[str, str] = Field(
        default_factory=lambda: {}, description="Values only as '${ENVIRONMENT_VARIABLE}'."
    )


class McpTool(_Strict):
    """The tools of an MCP server."""

    mcp: McpStdio | McpHttp
    name: str | None = None


class RuleSpec(_Strict):
    """One approval rule: calls of `tool` (a glob) whose arguments match get `action`."""

    tool: str
    action: Literal["auto", "ask", "deny"]
    arguments: dict[str, str] = Field(default_factory=lambda: {})


class ApprovalsSpec(_Strict):
    """Which calls run freely, wait for a person, or never run."""

    default: Literal["auto", "ask", "deny"] = "auto"
    rules: list[RuleSpec] = Field(default_factory=lambda: [])


class BudgetSpec(_Strict):
    """Limits per run."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    model_calls: int | None = Field(default=None, ge=0)
    tool_calls: int | None = Field(default=None, ge=0)
    wall_time: float | None = Field(default=None, ge=0)


class SandboxSpec(_Strict):
    """The built-in workspace tools, confined to a directory."""

    workspace: str = Field(description="The directory, relative to the file.")
    kind: Literal["bwrap", "none"] = "bwrap"
    network: bool = False
    commands: bool = False
    read_only: bool = True


class AgentFileSpec(_Strict):
    """An agent file, version 1."""

    version: Literal[1]
    name: str = "agent"
    model: str | ModelSpec | None = None
    instructions: str | None = None
    tools: list[ImportTool | McpTool] = Field(default_factory=lambda: [])
    approvals: ApprovalsSpec | None = None
    budget: BudgetSpec | None = None
    max_steps: int | None = Field(default=None, ge=1)
    sandbox: SandboxSpec | None = None


def agent_schema() -> dict[str, Any]:
    """The JSON Schema of agent files (for editors)."""
    schema = AgentFileSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "legato agent file"
    return schema


def load_object(spec: str) -> Any:
    """Import `module:attribute` (the current directory is importable)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        msg = f"expected 'module:attribute', got {spec!r}"
        raise ConfigurationError(msg)
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        msg = f"cannot import {module_name!r}: {exc}"
        raise ConfigurationError(msg) from exc
    except Exception as exc:  # the module's own code failed: one line, at its own frame
        where = _where(exc, module_name)
        msg = f"cannot import {module_name!r}: {where}{type(exc).__name__}: {exc}"
        raise ConfigurationError(msg) from exc
    try:
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError as exc:
        msg = f"{module_name!r} has no attribute {attr!r}"
        raise ConfigurationError(msg) from exc
    return obj


def _where(exc: Exception, module_name: str) -> str:
    """`file:line: ` where the user's module failed.

    Its own innermost frame if it has one, else the innermost frame outside Python's import
    machinery and legato.
    """
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: "
    import importlib.util
    import traceback

    legato_dir = str(Path(__file__).resolve().parent)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(("<frozen", legato_dir))
    ]
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    own = [f for f in frames if spec is not None and f.filename == spec.origin]
    chosen = own or frames
    return f"{chosen[-1].filename}:{chosen[-1].lineno}: " if chosen else ""


def load_tools(specs: list[str]) -> list[Tool | ToolSource]:
    """Tools from `module:object` specs: a tool, a function, a toolset, or a list of them."""
    from legato.tools import Tool, ToolSource

    tools: list[Tool | ToolSource] = []
    for spec in specs:
        obj = load_object(spec)
        items: list[Any] = list(obj) if isinstance(obj, list | tuple) else [obj]  # pyright: ignore[reportUnknownArgumentType]
        for item in items:
            tools.append(item if isinstance(item, Tool | ToolSource) else Tool.from_function(item))
    return tools


# -- parsing -------------------------------------------------------------------------------------


def _lines(node: Any, path: str, out: dict[str, int]) -> None:
    """Record the line of every dotted path in a composed YAML node tree."""
    import yaml

    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = str(key.value)
            child = f"{path}.{name}" if path else name
            out[child] = key.start_mark.line + 1
            _lines(value, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _lines(item, f"{path}[{index}]", out)


def _dotted(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in ("ImportTool", "McpTool", "McpStdio", "McpHttp", "ModelSpec", "str"):
            continue  # the union member pydantic tried; not part of the file's path
        else:
            text += f".{part}" if text else str(part)
    return text


def _best_error(exc: ValidationError) -> tuple[str, str]:
    """The most useful (path, message) of a validation error."""
    errors = exc.errors()
    extra = [e for e in errors if e["type"] == "extra_forbidden"]
    chosen = extra[0] if extra else errors[0]
    path = _dotted(tuple(chosen["loc"]))
    if chosen["type"] == "extra_forbidden":
        return path, f"unknown key {path!r}"
    return path, f"{path or 'the file'}: {chosen['msg']}"


def parse_agent_file(text: str, *, path: str = "<agent file>") -> AgentFileSpec:
    """Parse and validate an agent file's text (no environment read, nothing imported)."""
    try:
        import yaml
    except ModuleNotFoundError:
        package = "pyyaml"
        raise MissingDependency(package, "agents") from None
    try:
        node: Any = yaml.compose(text, Loader=yaml.SafeLoader)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType] - the stub leaves compose untyped
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        msg = f"not valid YAML for an agent file: {problem}"
        raise AgentFileError(msg, path=path, line=line) from None
    if not isinstance(data, dict) or node is None:
        msg = "an agent file is a mapping (version: 1, model: ...)"
        raise AgentFileError(msg, path=path, line=1)
    lines: dict[str, int] = {}
    _lines(node, "", lines)
    if "version" not in data:
        msg = "'version: 1' is required"
        raise AgentFileError(msg, path=path, line=1)
    try:
        return AgentFileSpec.model_validate(data)
    except ValidationError as exc:
        dotted, message = _best_error(exc)
        line = lines.get(dotted)
        while line is None and dotted:
            dotted = dotted.rpartition(".")[0] if "." in dotted else dotted.rpartition("[")[0]
            line = lines.get(dotted)
        raise AgentFileError(message, path=path, line=line) from None


def _secret(value: str | None, where: str, environ: Mapping[str, str], path: str) -> str | None:
    """A secret field's value: only a whole `${VARIABLE}`, read from the environment."""
    if value is None:
        return None
    match = _SECRET.match(value)
    if match is None:
        msg = f"{where}: secrets are written as '${{ENVIRONMENT_VARIABLE}}', never in the file"
        raise AgentFileError(msg, path=path)
    variable = match.group(1)
    if variable not in environ:
        msg = f"{where}: the environment variable {variable} is not set"
        raise AgentFileError(msg, path=path)
    return environ[variable]


# -- building the agent --------------------------------------------------------------------------


@dataclass(kw_only=True)
class AgentRecipe:
    """The agent a file describes, in parts: what `Agent(...)` is called with.

    `notes` has one line per setting of the file that code kept stricter.
    """

    spec: AgentFileSpec
    model: Any
    tools: list[Any]
    approvals: ApprovalPolicy | None
    budget: BudgetLimits | None
    max_steps: int
    notes: list[str] = field(default_factory=lambda: [])

    def build(self, make: Callable[..., T]) -> T:
        """Call `make` (the `Agent` class) with the parts: the model, then the options."""
        return make(
            self.model,
            name=self.spec.name,
            instructions=self.spec.instructions,
            tools=self.tools,
            approvals=self.approvals,
            budget=self.budget,
            max_steps=self.max_steps,
        )


McpClientFactory: TypeAlias = "Callable[[McpStdio | McpHttp, str], ToolSource]"
"""Makes the tool source of an agent file's MCP server: its entry, with the secrets of
`env` / `headers` read from the environment already, and the source's name."""

_MCP_FACTORY: list[McpClientFactory] = []


MCP_ENTRY_POINTS = "legato.agent_file_mcp"
"""The entry-point group through which an installed package offers agent files an MCP
client; legato's own `legato.mcp` is declared there in legato's package metadata."""


def register_mcp_factory(factory: McpClientFactory) -> None:
    """Set how agent files' MCP servers become tool sources (`legato.mcp` does, on import)."""
    _MCP_FACTORY[:] = [factory]


def _mcp_factory() -> McpClientFactory | None:
    """The registered MCP client factory, else the first one the installed packages offer.

    The runtime names no MCP package: the interface registers its client when imported, and
    an agent file read before that finds it through the package metadata's entry point
    (loading it imports the interface, which registers itself).
    """
    if not _MCP_FACTORY:
        from importlib.metadata import entry_points

        for entry in entry_points(group=MCP_ENTRY_POINTS):
            factory = cast("McpClientFactory", entry.load())
            if not _MCP_FACTORY:
                register_mcp_factory(factory)
            break
    return _MCP_FACTORY[0] if _MCP_FACTORY else None


def _stricter(
    code: ApprovalPolicy | None, file: ApprovalPolicy | None, notes: list[str]
) -> ApprovalPolicy | None:
    """A policy giving each call the stricter action of `code` and `file`."""
    if code is None:
        return file
    if file is None:
        return code
    from legato.approvals import ApprovalPolicy

    class StricterPolicy(ApprovalPolicy):
        """The stricter of two policies, call by call."""

        def action(self, tool: Tool, arguments: JsonValue) -> tuple[Action, str]:
            mine = code.action(tool, arguments)
            theirs = file.action(tool, arguments)
            if _STRICTNESS[theirs[0]] > _STRICTNESS[mine[0]]:
                return theirs
            return mine

    for rule in file.rules:
        looser = [
            r
            for r in code.rules
            if r.tool == rule.tool and _STRICTNESS[r.action] > _STRICTNESS[rule.action]
        ]
        if looser:
            notes.append(
                f"the file's approval rule {rule.describe()!r} is looser than the code's "
                f"{looser[0].describe()!r}: kept {looser[0].action}"
            )
    if _STRICTNESS[file.default] < _STRICTNESS[code.default]:
        notes.append(
            f"the file's default {file.default!r} is looser than the code's: kept {code.default}"
        )
    return StricterPolicy(
        rules=[*code.rules, *file.rules],  # shown and checked; `action` decides
        default=code.default,
        handler=code.handler,
        store=code.store,
        wait=code.wait,
        ttl=code.ttl,
        reject_holds_siblings=code.reject_holds_siblings,
    )


def _smaller_budget(
    code: BudgetLimits | None, file: BudgetSpec | None, notes: list[str]
) -> BudgetLimits | None:
    from legato.budgets import BudgetLimits

    if file is None:
        return code
    values: dict[str, Any] = file.model_dump(exclude_none=True)
    if code is None:
        return BudgetLimits(**values)
    merged: dict[str, Any] = {}
    for f in fields(code):
        mine = getattr(code, f.name)
        theirs = values.get(f.name)
        if theirs is None:
            continue
        if mine is not None and theirs > mine:
            notes.append(
                f"the file's budget {f.name}={theirs} is above the code's {mine}: kept {mine}"
            )
            continue
        merged[f.name] = theirs
    from dataclasses import replace

    return replace(code, **merged)


def _model(spec: AgentFileSpec, environ: Mapping[str, str], path: str) -> Any:
    from legato.models import default_model, infer_model

    model = spec.model
    if model is None:
        return default_model(environ)
    if isinstance(model, str):
        return infer_model(model)
    key = _secret(model.api_key, "model.api_key", environ, path)
    if model.base_url is None and key is None:
        return infer_model(model.name)
    provider, _, name = model.name.partition(":")
    from legato.models import openai_compatible

    factories: dict[str, str] = {
        "openai": "legato.models.openai_responses:OpenAIResponsesModel",
        "openai-chat": "legato.models.openai_chat:OpenAIChatModel",
        "anthropic": "legato.models.anthropic:AnthropicModel",
        "gemini": "legato.models.gemini:GeminiModel",
    }
    target = factories.get(provider)
    if target is None:
        if provider in openai_compatible.PROFILES:
            return openai_compatible.compatible_model(
                provider, name, api_key=key, base_url=model.base_url
            )
        msg = f"model.base_url / model.api_key do not apply to {provider}: models"
        raise AgentFileError(msg, path=path)
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    return cls(name, api_key=key, base_url=model.base_url)


def _tools(spec: AgentFileSpec, environ: Mapping[str, str], path: str, base: Path) -> list[Any]:
    tools: list[Any] = []
    for index, item in enumerate(spec.tools):
        if isinstance(item, ImportTool):
            try:
                tools += load_tools([item.import_])
            except ConfigurationError as exc:
                msg = f"tools[{index}].import: {exc}"
                raise AgentFileError(msg, path=path) from None
            continue
        factory = _mcp_factory()
        if factory is None:
            msg = (
                f"tools[{index}].mcp: no MCP client is installed (nothing registered, and no "
                f"{MCP_ENTRY_POINTS!r} entry point); install legato with its mcp extra"
            )
            raise AgentFileError(msg, path=path)
        server = item.mcp
        if isinstance(server, McpStdio):
            env = {
                k: _secret(v, f"tools[{index}].mcp.env.{k}", environ, path) or ""
                for k, v in server.env.items()
            }
            server = server.model_copy(update={"env": env})
        else:
            headers = {
                k: _secret(v, f"tools[{index}].mcp.headers.{k}", environ, path) or ""
                for k, v in server.headers.items()
            }
            server = server.model_copy(update={"headers": headers})
        tools.append(factory(server, item.name or f"mcp{index}"))
    if spec.sandbox is not None:
        from legato.sandbox import Workspace
        from legato.tools.builtin import workspace_tools

        box = spec.sandbox
        root = (base / box.workspace).resolve()
        tools.append(
            workspace_tools(
                Workspace(root),
                sandbox=box.kind,
                network=box.network,
                commands=box.commands,
                read_only=box.read_only,
            )
        )
    return tools


def read_agent_file(
    path: str | Path,
    *,
    approvals: ApprovalPolicy | None = None,
    budget: BudgetLimits | None = None,
    max_steps: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> AgentRecipe:
    """Read the agent a file describes; code's `approvals`, `budget`, `max_steps` are floors."""
    from legato.approvals import ApprovalPolicy, Rule

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"cannot read it: {exc.strerror}"
        raise AgentFileError(msg, path=str(file)) from None
    spec = parse_agent_file(text, path=str(file))
    env = os.environ if environ is None else environ
    notes: list[str] = []
    file_policy = None
    if spec.approvals is not None:
        file_policy = ApprovalPolicy(
            rules=[Rule(r.tool, r.action, arguments=r.arguments) for r in spec.approvals.rules],
            default=spec.approvals.default,
        )
    steps = spec.max_steps
    if max_steps is not None and (steps is None or steps > max_steps):
        if steps is not None:
            notes.append(
                f"the file's max_steps={steps} is above the code's {max_steps}: kept {max_steps}"
            )
        steps = max_steps
    return AgentRecipe(
        spec=spec,
        model=_model(spec, env, str(file)),
        tools=_tools(spec, env, str(file), file.parent),
        approvals=_stricter(approvals, file_policy, notes),
        budget=_smaller_budget(budget, spec.budget, notes),
        max_steps=steps or 50,
        notes=notes,
    )
