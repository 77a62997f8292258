"""One set of defaults and clear errors across `run`, `chat`, `serve`, `runs` and `doctor`."""

from __future__ import annotations

import io
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from legato import Agent, tool
from legato.approvals import ApprovalPolicy
from legato.cli._app import app
from legato.cli._doctor import EXTRAS, local_servers
from legato.cli._lines import LineReader
from legato.cli._turn import ConsoleApprover, TurnView, drive_turn
from legato.events import ApprovalDecided, Journal, RunResumed, RunStarted
from legato.models.openai_compatible import PROFILES
from legato.run import fork_journal
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
NO_KEYS = {
    "LEGATO_MODEL": "",
    "ANTHROPIC_API_KEY": "",
    "OPENAI_API_KEY": "",
    "GEMINI_API_KEY": "",
    "GOOGLE_API_KEY": "",
}

TOOLS = '''
import os
from pathlib import Path
from legato import tool

@tool(side_effects="irreversible")
def send(to: str) -> str:
    """Send a message.

    Args:
        to: The recipient.
    """
    with Path("sent.txt").open("a") as f:
        f.write(to + "\\n")
    return "sent to " + to
'''

SENDING = reply("Sending.", call("send", {"to": "bob"}))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # pyright: ignore[reportUnknownMemberType] - pytest leaves it untyped
    (tmp_path / "sendtools.py").write_text(TOOLS, encoding="utf-8")
    model = ScriptedModel([SENDING, "Done."], name="scripted:send")

    def scripted(*args: object, **kwargs: object) -> ScriptedModel:
        return model

    monkeypatch.setattr("legato.cli._run.resolve_model", scripted)
    return tmp_path


def _sent(workdir: Path) -> list[str]:
    path = workdir / "sent.txt"
    return path.read_text().split() if path.exists() else []


# -- irreversible tools ask, on every command ----------------------------------------------------


def test_run_asks_before_an_irreversible_tool_by_default(workdir: Path) -> None:
    journal = workdir / "run.jsonl"
    result = runner.invoke(
        app,
        ["run", "send it", "--tools", "sendtools:send", "--journal", str(journal)],
        input="n\nnot now\n",
    )
    assert result.exit_code == 0, result.output
    assert "? approve send" in result.output
    assert _sent(workdir) == []
    decided = [e for e in Journal.from_jsonl(journal.read_text()) if isinstance(e, ApprovalDecided)]
    assert [d.verdict for d in decided] == ["reject"]


def test_twin_auto_lets_that_tool_run_without_asking(workdir: Path) -> None:
    result = runner.invoke(app, ["run", "send it", "--tools", "sendtools:send", "--auto", "send"])
    assert result.exit_code == 0, result.output
    assert "? approve" not in result.output
    assert _sent(workdir) == ["bob"]


def test_serve_builds_the_same_agent_with_the_same_default_model(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[Agent[Any]] = []
    monkeypatch.setattr(
        "legato.web.serve",
        lambda agent, **kw: served.append(agent),  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    )
    (workdir / "mailer.yaml").write_text(
        "version: 1\nname: mailer\nmodel: test:echo\ntools:\n  - import: sendtools:send\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["serve", "mailer.yaml", "--store", ":memory:"])
    assert result.exit_code == 0, result.output
    agent = served[0]
    assert agent.name == "mailer"
    assert isinstance(agent.approvals, ApprovalPolicy)
    assert agent.approvals.default == "ask"
    # without a file or --model: the model `run` and `chat` would use (not test:echo)
    result = runner.invoke(app, ["serve", "--store", ":memory:"], env=NO_KEYS)
    assert result.exit_code == 0, result.output
    assert served[1].model is served[0].model or served[1].model.name == "scripted:send"
    help_text = runner.invoke(app, ["serve", "--help"]).output
    assert "--base-url" in help_text and "agent_file" in help_text.lower()


# -- bad input: one clear line -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "chat", "serve"])
def test_an_ask_for_no_tool_is_refused_at_startup(workdir: Path, command: str) -> None:
    args = [command, "--tools", "sendtools:send", "--ask", "nosuchtool", "--store", "db.sqlite"]
    if command == "run":
        args.insert(1, "hi")
        args = args[:-2]
    result = runner.invoke(app, args, input="")
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "'nosuchtool' names no tool of the agent; its tools: send" in lines[0]


def test_twin_an_ask_for_a_tool_of_the_agent_is_accepted(workdir: Path) -> None:
    result = runner.invoke(
        app, ["run", "hi", "--tools", "sendtools:send", "--ask", "send"], input="y\n"
    )
    assert result.exit_code == 0, result.output
    assert _sent(workdir) == ["bob"]


def test_a_tools_module_that_raises_is_one_line_at_its_own_frame(workdir: Path) -> None:
    (workdir / "broken.py").write_text("import os\nvalue = 1 / 0\n", encoding="utf-8")
    result = runner.invoke(app, ["run", "hi", "--tools", "broken:thing"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert re.search(r"cannot import 'broken': .*broken\.py:2: ZeroDivisionError", lines[0])
    (workdir / "syntax.py").write_text("def f(:\n", encoding="utf-8")
    result = runner.invoke(app, ["run", "hi", "--tools", "syntax:f"])
    assert result.exit_code == 1 and "syntax.py:1: SyntaxError" in result.output


def test_an_empty_prompt_argument_is_an_error_like_empty_stdin(workdir: Path) -> None:
    for prompt in ("", "   "):
        result = runner.invoke(app, ["run", prompt])
        assert result.exit_code == 1
        assert "no prompt: the prompt argument is empty" in result.output
    result = runner.invoke(app, ["run", "-"], input="")
    assert result.exit_code == 1 and "standard input was empty" in result.output


def test_an_agent_file_with_an_unknown_key_is_one_clear_line(workdir: Path) -> None:
    (workdir / "bad.yaml").write_text("version: 1\nname: x\nmodle: test:echo\n")
    for args in (["run", "bad.yaml", "hi"], ["chat", "bad.yaml"], ["serve", "bad.yaml"]):
        result = runner.invoke(app, args, input="")
        assert result.exit_code == 1, result.output
        assert "unknown key 'modle'" in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_store_path_that_is_a_directory_is_a_clear_error(workdir: Path) -> None:
    (workdir / "adir").mkdir()
    for args in (
        ["run", "hi", "--store", "adir"],
        ["chat", "--store", "adir"],
        ["runs", "list", "--store", "adir"],
        ["serve", "--store", "adir"],
    ):
        result = runner.invoke(app, args, input="")
        assert result.exit_code == 1, (args, result.output)
        assert "'adir' is a directory" in result.output, result.output


# -- stored runs: --store on run, ids by prefix, readable events -----------------------------------


def test_run_keeps_the_run_in_a_store_and_runs_takes_a_prefix(workdir: Path) -> None:
    result = runner.invoke(
        app,
        ["run", "hi", "--tools", "sendtools:send", "--auto", "send", "--store", "r.db", "--json"],
    )
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.output)["run_id"]
    listed = runner.invoke(app, ["runs", "list", "--store", "r.db"], env={"COLUMNS": "80"})
    assert run_id in listed.output  # whole, at 80 columns
    shown = runner.invoke(app, ["runs", "show", run_id[:6], "--store", "r.db"])
    assert shown.exit_code == 0, shown.output
    assert f"run {run_id}" in shown.output
    missing = runner.invoke(app, ["runs", "show", "zzzz", "--store", "r.db"])
    assert missing.exit_code == 1 and "no stored run with an id starting 'zzzz'" in missing.output


def _stored_with_ids(db: Path, *ids: str) -> None:
    store = SQLiteStore(db)
    done = Agent(ScriptedModel([SENDING, "Done."]), store=store).run_sync("hi")
    journal = store.load_run(done.run_id)
    for run_id in ids:
        fork = fork_journal(journal, 3, run_id=run_id)
        store.append_events(run_id, fork.events, start=0)


def test_an_ambiguous_prefix_lists_the_candidates(workdir: Path) -> None:
    _stored_with_ids(workdir / "r.db", "abc111", "abc222")
    result = runner.invoke(app, ["runs", "show", "abc", "--store", "r.db"])
    assert result.exit_code == 1
    assert "'abc' is the start of 2 run ids: abc111, abc222" in result.output
    result = runner.invoke(app, ["runs", "show", "abc2", "--store", "r.db"])
    assert result.exit_code == 0 and "run abc222" in result.output


def test_a_fork_says_what_it_made_and_shows_as_forked_until_resumed(workdir: Path) -> None:
    db = workdir / "r.db"
    store = SQLiteStore(db)
    done = Agent(ScriptedModel(["first"]), store=store).run_sync("hi")
    result = runner.invoke(app, ["runs", "fork", done.run_id[:8], "--at", "3", "--store", str(db)])
    assert result.exit_code == 0, result.output
    new_id = re.search(r"into (\w+)", result.output).group(1)  # type: ignore[union-attr]
    assert "legato runs resume " + new_id in " ".join(result.output.split())
    listed = runner.invoke(app, ["runs", "list", "--store", str(db), "--json"])
    statuses = {
        json.loads(line)["run_id"]: json.loads(line)["status"]
        for line in listed.output.splitlines()
    }
    assert statuses[new_id] == "forked (not resumed)"
    shown = runner.invoke(app, ["runs", "show", new_id, "--store", str(db)])
    assert f"forked from {done.run_id}" in " ".join(shown.output.split())
    Agent(ScriptedModel(["second"]), store=store).resume_sync(new_id)
    listed = runner.invoke(app, ["runs", "list", "--store", str(db), "--json"])
    statuses = {
        json.loads(line)["run_id"]: json.loads(line)["status"]
        for line in listed.output.splitlines()
    }
    assert statuses[new_id] == "finished"  # twin: resumed, it is what it is
    shown = runner.invoke(app, ["runs", "show", new_id, "--store", str(db)])
    assert "resumed by " in shown.output
    assert "RunResumed" not in shown.output
    assert any(isinstance(e, RunResumed) for e in store.load_run(new_id))
    assert isinstance(store.load_run(new_id).events[0], RunStarted)


# -- doctor --------------------------------------------------------------------------------------


def test_doctor_checks_every_extra_and_the_ports_legato_uses() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS) == set(extras) - {"dev", "demo"}
    servers = local_servers()
    url = PROFILES["llamacpp-server"].base_url
    assert url is not None
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert any("llamacpp-server" in name and p == port for name, p in servers.items())
    assert 8080 not in servers.values()
    result = runner.invoke(app, ["doctor", "--timeout", "0.01"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for extra in ("web", "temporal", "otel"):
        assert re.search(rf"extra\s+{extra}\s", result.output), result.output


# -- edited arguments that fail the schema go back to the person ----------------------------------


async def test_edited_arguments_that_fail_the_schema_are_asked_again() -> None:
    @tool(side_effects="irreversible")
    def send(to: str) -> str:
        """Send a message.

        Args:
            to: The recipient.
        """
        return f"sent to {to}"

    out = io.StringIO()
    console = Console(file=out, width=300, no_color=True, highlight=False)
    approver = ConsoleApprover()
    approver.tools = {"send": send}
    policy = ApprovalPolicy(default="ask", handler=approver)
    agent = Agent(ScriptedModel([SENDING, "Sent."]), tools=[send], approvals=policy)
    answers = io.StringIO('e\n{"too": "carol"}\ne\n{"to": "carol"}\n')
    reader = LineReader(answers, show=lambda t: console.print(t, end="", markup=False))
    handle = agent.start("send it")
    outcome = await drive_turn(handle, view=TurnView(console), reader=reader, approver=approver)
    assert outcome.status == "finished"
    text = out.getvalue()
    assert "not valid for send" in text
    assert '⚙ send({"to": "carol"}) (edited) → [ok] sent to carol' in text
    # the model never saw the bad attempt: one decision, the good one
    decided = [e for e in handle.journal if isinstance(e, ApprovalDecided)]
    assert [(d.verdict, d.arguments) for d in decided] == [("edit", {"to": "carol"})]


def test_the_chat_says_side_effecting_calls_ask(workdir: Path) -> None:
    from legato.cli._chat import ChatSession
    from legato.cli._run import AgentRequest, build_agent

    out = io.StringIO()
    console = Console(file=out, width=200, no_color=True, highlight=False)
    approver = ConsoleApprover()
    request = AgentRequest(tools=["sendtools:send"], auto=[])
    agent = build_agent(request, approver=approver, console=console)
    reader = LineReader(io.StringIO(""), show=lambda t: None)
    chat = ChatSession(agent=agent, console=console, reader=reader, approver=approver, session="s")
    chat.command("/approvals")
    assert "side-effecting calls no rule matches: ask" in out.getvalue()
    assert approver.tools == {"send": agent.toolset.get("send")}


def test_serve_takes_base_url_and_tools_like_run(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[object, object]] = []

    def recording(spec: object = None, *, base_url: object = None, **kwargs: object) -> object:
        asked.append((spec, base_url))
        return ScriptedModel(["hi"], name="scripted:x")

    monkeypatch.setattr("legato.cli._run.resolve_model", recording)
    served: list[Agent[Any]] = []
    monkeypatch.setattr("legato.web.serve", lambda agent, **kw: served.append(agent))  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    result = runner.invoke(
        app,
        [
            "serve",
            "--model",
            "openai-chat:local",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--tools",
            "sendtools:send",
            "--store",
            ":memory:",
        ],
    )
    assert result.exit_code == 0, result.output
    assert asked == [("openai-chat:local", "http://127.0.0.1:9/v1")]
    assert [t.name for t in served[0].toolset] == ["send"]
