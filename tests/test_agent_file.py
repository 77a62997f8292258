"""Agent files: strict schema, safe YAML, secrets from the environment, code policy as a floor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from legato import Agent
from legato.agent_file import agent_schema, load_agent_file, parse_agent_file
from legato.approvals import ApprovalPolicy, Rule
from legato.budgets import BudgetLimits
from legato.cli._app import app
from legato.exceptions import AgentFileError
from legato.tools import Tool, Toolset

DOCS = Path(__file__).parents[1] / "docs"

GOOD = """\
version: 1
name: mailer
model: test:echo
instructions: Be brief.
tools:
  - import: filetools:send
approvals:
  rules:
    - tool: send
      action: auto
budget:
  model_calls: 10
max_steps: 8
"""


@pytest.fixture
def tools_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "filetools.py").write_text(
        "from legato import tool\n\n"
        "@tool(side_effects='irreversible')\n"
        "def send(to: str) -> str:\n"
        "    '''Send.'''\n"
        "    return 'sent'\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write(directory: Path, text: str, name: str = "agent.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def _send(agent: Agent[str]) -> Tool:
    tool = agent.toolset.get("send")
    assert tool is not None
    return tool


def test_a_file_builds_the_agent_it_describes(tools_dir: Path) -> None:
    loaded = load_agent_file(_write(tools_dir, GOOD))
    agent = loaded.agent
    assert agent.name == "mailer" and agent.instructions == "Be brief."
    assert agent.max_steps == 8
    assert agent.model.name == "test:echo"
    assert agent.budget == BudgetLimits(model_calls=10)
    assert agent.run_sync("hi").output == "echo: hi"
    assert Agent.from_file(tools_dir / "agent.yaml").name == "mailer"


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        (GOOD + "colour: blue\n", 14, "unknown key 'colour'"),
        (GOOD.replace("  - import: filetools:send", "  - import: a:b\n  - nmae: x"), 7, "tools[1]"),
        (GOOD.replace("    - tool: send", "    - tool: send\n      acton: ask"), 10, "acton"),
        (GOOD.replace("version: 1", "version: 2"), 1, "version"),
        (GOOD.replace("version: 1\n", ""), 1, "'version: 1' is required"),
        ("- just\n- a list\n", 1, "a mapping"),
        ("version: 1\nname: [unclosed\n", 3, "not valid YAML"),
    ],
)
def test_a_bad_file_names_its_file_line_and_key(
    tmp_path: Path, text: str, line: int, needle: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(AgentFileError) as caught:
        load_agent_file(path)
    message = str(caught.value)
    assert needle in message
    assert message.startswith(f"{path}:{line}:"), message


def test_a_python_tag_is_refused_never_run(tmp_path: Path) -> None:
    text = "version: 1\nname: !!python/object/apply:builtins.len [[1, 2, 3]]\n"
    with pytest.raises(AgentFileError, match="python/object/apply"):
        parse_agent_file(text, path="tagged.yaml")
    # the twin: a full loader would have called the function named in the file
    assert yaml.load(text, Loader=yaml.UnsafeLoader)["name"] == 3  # noqa: TID251 - the twin


def test_secrets_are_only_whole_environment_references(tmp_path: Path) -> None:
    base = (
        "version: 1\nmodel:\n  name: openai-chat:gpt-4.1-mini\n  base_url: http://127.0.0.1:9/v1\n"
    )
    literal = _write(tmp_path, base + "  api_key: sk-in-the-file\n", "literal.yaml")
    with pytest.raises(AgentFileError, match=r"model.api_key: secrets are written as '\$\{"):
        load_agent_file(literal, environ={})
    missing = _write(tmp_path, base + "  api_key: ${LEGATO_TEST_KEY}\n", "missing.yaml")
    with pytest.raises(AgentFileError, match="LEGATO_TEST_KEY is not set"):
        load_agent_file(missing, environ={})
    agent = load_agent_file(missing, environ={"LEGATO_TEST_KEY": "sk-from-env"}).agent
    assert agent.model.name.endswith("gpt-4.1-mini")
    # other fields are never interpolated
    plain = _write(tmp_path, "version: 1\nmodel: test:echo\ninstructions: ${HOME}\n", "p.yaml")
    assert load_agent_file(plain, environ={"HOME": "/root"}).agent.instructions == "${HOME}"


def test_a_file_never_loosens_the_policy_set_in_code(tools_dir: Path) -> None:
    path = _write(tools_dir, GOOD)
    code = ApprovalPolicy(rules=[Rule("send", "ask")])
    loaded = load_agent_file(path, approvals=code, budget=BudgetLimits(model_calls=3), max_steps=4)
    policy = loaded.agent.approvals
    assert policy is not None
    assert policy.action(_send(loaded.agent), {"to": "x"})[0] == "ask"
    assert loaded.agent.budget == BudgetLimits(model_calls=3)
    assert loaded.agent.max_steps == 4
    assert len(loaded.notes) == 3 and any("kept ask" in note for note in loaded.notes)
    # the twin: without a policy in code, the file's own rule applies
    alone = load_agent_file(path).agent.approvals
    assert alone is not None and alone.action(_send(loaded.agent), {"to": "x"})[0] == "auto"
    # a file may tighten: code says auto, the file says deny -> deny
    stricter = _write(tools_dir, GOOD.replace("action: auto", "action: deny"), "deny.yaml")
    tightened = load_agent_file(stricter, approvals=ApprovalPolicy(rules=[Rule("send", "auto")]))
    assert tightened.agent.approvals is not None
    assert tightened.agent.approvals.action(_send(tightened.agent), {})[0] == "deny"
    assert tightened.notes == []


def test_legato_run_takes_an_agent_file(tools_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tools_dir)
    _write(tools_dir, GOOD)
    result = CliRunner().invoke(app, ["run", "agent.yaml", "hello file"])
    assert result.exit_code == 0, result.output
    assert "echo: hello file" in result.output
    _write(tools_dir, GOOD + "extra: 1\n", "bad.yaml")
    bad = CliRunner().invoke(app, ["run", "bad.yaml", "hi"])
    assert bad.exit_code == 1 and "unknown key 'extra'" in bad.output


def test_the_published_schema_is_current_and_strict() -> None:
    published = json.loads((DOCS / "agent.schema.json").read_text(encoding="utf-8"))
    assert published == agent_schema()
    assert published["additionalProperties"] is False
    assert published["required"] == ["version"]


def test_mcp_servers_and_the_sandbox_become_tool_sources(tmp_path: Path) -> None:
    import shutil
    import sys

    from legato.mcp import MCPClient  # importing legato.mcp registers the client files use
    from legato.run._sync import run_sync

    server = Path(sys.executable).parent / "mcp-server-time"
    if not server.exists():
        found = shutil.which("mcp-server-time")
        if found is None:
            pytest.skip("mcp-server-time (a dev dependency) is not installed")
        server = Path(found)
    (tmp_path / "notes").mkdir()
    text = (
        "version: 1\nmodel: test:echo\n"
        f"tools:\n  - mcp: {{command: {server}, env: {{LEGATO_TOKEN: '${{LEGATO_TEST_TOKEN}}'}}}}\n"
        "    name: time\n"
        "sandbox: {workspace: notes}\n"
    )
    path = _write(tmp_path, text)
    literal = _write(tmp_path, text.replace("'${LEGATO_TEST_TOKEN}'", "abc123"), "literal.yaml")
    with pytest.raises(AgentFileError, match=r"tools\[0\].mcp.env.LEGATO_TOKEN: secrets"):
        load_agent_file(literal, environ={})
    agent = load_agent_file(path, environ={"LEGATO_TEST_TOKEN": "t0ken"}).agent
    names = [source.name for source in agent.tool_sources]
    assert names[1:] == ["time", "workspace"]

    async def listed() -> list[str]:
        client = agent.tool_sources[1]
        assert isinstance(client, MCPClient)
        async with client:
            return sorted(t.name for t in await client.list_tools())

    assert "get_current_time" in run_sync(listed())
    workspace = agent.tool_sources[2]
    assert isinstance(workspace, Toolset)
    assert {t.name for t in workspace} == {"read_file", "list_dir", "glob", "grep"}  # read-only


def test_an_mcp_entry_needs_the_client_legato_mcp_registers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the runtime layer imports no MCP transport: `legato.mcp` registers the client it uses
    from legato import _agent_spec

    seen: list[tuple[object, str]] = []

    def factory(server: object, name: str) -> Toolset:
        seen.append((server, name))
        return Toolset([], name=name)

    monkeypatch.setattr(_agent_spec, "_MCP_FACTORY", [factory])
    path = _write(
        tmp_path, "version: 1\nmodel: test:echo\ntools:\n  - mcp: {url: 'http://127.0.0.1:9/mcp'}\n"
    )
    agent = load_agent_file(path).agent
    assert [source.name for source in agent.tool_sources][1:] == ["mcp0"]
    assert [name for _, name in seen] == ["mcp0"]


def test_an_mcp_entry_finds_the_installed_client_without_importing_legato_mcp(
    tmp_path: Path,
) -> None:
    # a fresh process: the agent file reaches legato.mcp through the package metadata's
    # entry point (nothing imported it before), and the runtime never names it
    path = _write(
        tmp_path, "version: 1\nmodel: test:echo\ntools:\n  - mcp: {url: 'http://127.0.0.1:9/mcp'}\n"
    )
    code = (
        "import sys\n"
        "from legato import Agent\n"
        "assert 'legato.mcp' not in sys.modules\n"
        f"agent = Agent.from_file({str(path)!r})\n"
        "print(type(agent.tool_sources[-1]).__module__, 'legato.mcp' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["legato.mcp._client", "True"]


def test_an_mcp_entry_twin_without_a_registered_or_installed_client_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    from legato import _agent_spec

    monkeypatch.setattr(_agent_spec, "_MCP_FACTORY", [])

    def no_entry_points(**_: object) -> list[importlib.metadata.EntryPoint]:
        return []

    monkeypatch.setattr(importlib.metadata, "entry_points", no_entry_points)
    path = _write(
        tmp_path, "version: 1\nmodel: test:echo\ntools:\n  - mcp: {url: 'http://127.0.0.1:9/mcp'}\n"
    )
    with pytest.raises(AgentFileError, match=r"tools\[0\].mcp: no MCP client is installed"):
        load_agent_file(path)
