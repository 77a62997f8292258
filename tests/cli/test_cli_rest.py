"""The rest of the command line: default model, --base-url, stdin, --json, journals of failed
runs, audit wording, flag help, doctor, install hints."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from legato.approvals import ApprovalRequest, Reject, TerminalApprover
from legato.cli._app import app
from legato.cli._common import read_prompt, resolve_model
from legato.cli._doctor import checks
from legato.events import Journal, RunFailed
from legato.exceptions import ConfigurationError, MissingDependency
from legato.models import register_provider
from legato.simulator import SimTurn, WireSimulator
from legato.testing import FunctionModel, call, reply

runner = CliRunner()
NO_KEYS = {
    "LEGATO_MODEL": "",
    "ANTHROPIC_API_KEY": "",
    "OPENAI_API_KEY": "",
    "GEMINI_API_KEY": "",
    "GOOGLE_API_KEY": "",
}


def test_the_default_model_comes_from_legato_model_then_the_keys_set() -> None:
    assert resolve_model(None, environ={"LEGATO_MODEL": "test:echo"}).name == "test:echo"
    result = runner.invoke(app, ["run", "hi"], env={**NO_KEYS, "LEGATO_MODEL": "test:echo"})
    assert result.exit_code == 0, result.output
    assert "echo: hi" in result.output
    # an explicit --model wins over the environment
    result = runner.invoke(
        app, ["run", "hi", "--model", "nosuch:x"], env={"LEGATO_MODEL": "test:echo"}
    )
    assert "unknown model 'nosuch:x'" in result.output


def test_base_url_sends_the_requests_to_that_server() -> None:
    with WireSimulator() as sim:
        sim.enqueue(SimTurn(text="from the simulator"))
        result = runner.invoke(
            app,
            [
                "run",
                "hi",
                "--model",
                "openai-chat:gpt-4.1-mini",
                "--base-url",
                f"{sim.url}/v1",
            ],
            env={"OPENAI_API_KEY": "sk-test"},
        )
        assert result.exit_code == 0, result.output
        assert "from the simulator" in result.output
        sim.assert_complete()
    with pytest.raises(ConfigurationError, match="--base-url does not apply"):
        resolve_model("test:echo", base_url="http://127.0.0.1:1")


def test_the_prompt_comes_from_standard_input() -> None:
    result = runner.invoke(app, ["run", "--model", "test:echo"], input="piped prompt\n")
    assert result.exit_code == 0, result.output
    assert "echo: piped prompt" in result.output
    result = runner.invoke(app, ["run", "-", "--model", "test:echo"], input="dash prompt")
    assert "echo: dash prompt" in result.output
    result = runner.invoke(app, ["run", "--model", "test:echo"], input="")
    assert result.exit_code == 1
    assert "standard input was empty" in result.output

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    with pytest.raises(ConfigurationError, match="no prompt"):
        read_prompt(None, Terminal())


def test_json_prints_one_object_with_the_outcome() -> None:
    result = runner.invoke(app, ["run", "hi", "--model", "test:echo", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished"
    assert summary["output"] == "echo: hi"
    assert summary["usage"]["requests"] == 1
    bad = runner.invoke(app, ["run", "hi", "--model", "nosuch:x", "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["status"] == "error"


def _loops(_: object) -> object:
    return reply(call("shout", {"text": "again"}))


def test_a_failed_run_still_writes_its_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_provider("loops", lambda name: FunctionModel(_loops, name=f"loops:{name}"))  # pyright: ignore[reportArgumentType]
    (tmp_path / "loudtools.py").write_text(
        "def shout(text: str) -> str:\n    '''Shout it.'''\n    return text.upper()\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "failed.jsonl"
    result = runner.invoke(
        app,
        [
            "run",
            "go",
            "--model",
            "loops:x",
            "--tools",
            "loudtools:shout",
            "--max-steps",
            "2",
            "--journal",
            str(journal),
        ],
    )
    assert result.exit_code == 1
    recorded = Journal.from_jsonl(journal.read_text(encoding="utf-8"))
    last = recorded.events[-1]
    assert isinstance(last, RunFailed) and last.error_type == "MaxStepsExceeded"


def test_audit_verify_says_what_is_wrong_not_tampered_for_everything(tmp_path: Path) -> None:
    chain = tmp_path / "audit.jsonl"
    made = runner.invoke(app, ["run", "hi", "--model", "test:echo", "--audit", str(chain)])
    assert made.exit_code == 0, made.output
    ok = runner.invoke(app, ["audit", "verify", str(chain)])
    assert ok.exit_code == 0 and "ok:" in ok.output
    lines = chain.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["event"]["message"]["parts"][0]["text"] = "edited"
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n", "utf-8")
    broken = runner.invoke(app, ["audit", "verify", str(edited)])
    assert broken.exit_code == 1
    assert "chain broken" in broken.output and "line 2" in broken.output
    other = tmp_path / "notes.txt"
    other.write_text("just some notes\n", encoding="utf-8")
    unreadable = runner.invoke(app, ["audit", "verify", str(other)])
    assert unreadable.exit_code == 1
    assert "not an audit chain" in unreadable.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert "empty" in runner.invoke(app, ["audit", "verify", str(empty)]).output
    for result in (broken, unreadable):
        assert "tampered" not in result.output


def test_flags_are_shown_as_flags_in_help() -> None:
    result = runner.invoke(app, ["mcp", "serve", "--help"])
    assert result.exit_code == 0
    line = next(x for x in result.output.splitlines() if x.strip().startswith("--http"))
    assert "<bool>" not in line
    assert "--json  " in runner.invoke(app, ["run", "--help"]).output.replace("<bool>", "?")


def test_doctor_names_keys_without_their_values_and_says_what_to_fix() -> None:
    report = checks(environ={"OPENAI_API_KEY": "sk-very-secret"}, timeout=0.05)
    keys = {c.name: c for c in report if c.area == "key"}
    assert keys["OPENAI_API_KEY"].ok and not keys["ANTHROPIC_API_KEY"].ok
    extras = {c.name: c for c in report if c.area == "extra"}
    assert extras["cli"].ok
    assert all("-e '.[" in c.fix for c in extras.values() if not c.ok)
    assert any(c.area == "sandbox" for c in report)
    result = runner.invoke(
        app, ["doctor", "--timeout", "0.05"], env={**NO_KEYS, "OPENAI_API_KEY": "sk-very-secret"}
    )
    assert result.exit_code == 0, result.output
    assert "OPENAI_API_KEY" in result.output and "sk-very-secret" not in result.output
    assert "default" in result.output and "openai:" in result.output


def test_install_hints_work_from_a_checkout_too() -> None:
    text = str(MissingDependency("typer", "cli"))
    assert "pip install 'legato[cli]'" in text and "pip install -e '.[cli]'" in text


async def test_terminal_approver_end_of_input_is_a_rejection() -> None:
    request = ApprovalRequest.create(
        run_id="r", step=1, call_id="c", tool="send", arguments={}, rule="send -> ask"
    )

    def closed(prompt: str) -> str:
        raise EOFError

    shown: list[str] = []
    decision = await TerminalApprover(ask=closed, show=shown.append)(request)
    assert isinstance(decision, Reject)
    assert "end of input: rejected" in shown
