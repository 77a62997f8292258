from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from legato import __version__
from legato.cli._app import app, load_object
from legato.exceptions import ConfigurationError

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"legato {__version__}"


def test_run_streams_and_writes_a_journal_that_trace_prints(tmp_path: Path) -> None:
    journal = tmp_path / "run.jsonl"
    result = runner.invoke(
        app, ["run", "hello there", "--model", "test:echo", "--journal", str(journal)]
    )
    assert result.exit_code == 0, result.output
    assert "echo: hello there" in result.output
    assert "done: 1 model calls" in result.output
    traced = runner.invoke(app, ["trace", str(journal)])
    assert traced.exit_code == 0, traced.output
    assert "user: hello there" in traced.output
    assert "finished:" in traced.output


def test_run_loads_tools_from_module_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mytools.py").write_text(
        "def shout(text: str) -> str:\n    '''Shout it.'''\n    return text.upper()\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", "hi", "--model", "test:echo", "--tools", "mytools:shout"])
    assert result.exit_code == 0, result.output


def test_bad_inputs_give_clear_errors(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "hi", "--model", "nosuch:thing"])
    assert result.exit_code == 1
    assert "unknown model 'nosuch:thing'" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n", encoding="utf-8")
    traced = runner.invoke(app, ["trace", str(bad)])
    assert traced.exit_code == 1
    assert "line 1" in traced.output
    with pytest.raises(ConfigurationError, match="module:attribute"):
        load_object("no_colon")
    with pytest.raises(ConfigurationError, match="cannot import"):
        load_object("surely_not_a_module_xyz:thing")
    with pytest.raises(ConfigurationError, match="no attribute"):
        load_object("json:nothing_here")


def test_streamed_progress_renders_as_one_line_per_event() -> None:
    import io

    from rich.console import Console

    from legato.cli._render import render_event
    from legato.events import ChildEvent, Lineage, ToolProgress

    out = io.StringIO()
    console = Console(file=out, width=200, no_color=True)
    progress = ToolProgress(
        run_id="r", step=1, call_id="c", tool="crawl", progress=2, total=5, message="page b"
    )
    render_event(console, progress)
    render_event(console, ToolProgress(run_id="r", step=1, call_id="c", tool="crawl", progress=7))
    lineage = Lineage(run_id="k", parent_run_id="r", parent_step=1, parent_call_id="c", agent="kid")
    render_event(console, ChildEvent(lineage=lineage, event=progress))
    lines = out.getvalue().splitlines()
    assert lines[0].strip() == "… crawl 40% (2/5): page b"
    assert lines[1].strip() == "… crawl 7"
    assert lines[2].startswith("  [kid]") and lines[2].endswith("crawl 40% (2/5): page b")


def test_a_decision_line_shows_edited_arguments_as_sent_and_a_rejections_reason() -> None:
    from legato.cli._render import gate_line
    from legato.events import ApprovalDecided

    def line(**fields: Any) -> str:
        return gate_line(ApprovalDecided(request_id="apr_1", call_id="c1", **fields))

    edited = line(verdict="edit", arguments={"to": "bob@example.com"})
    assert edited == 'approval edit (apr_1): run with {"to": "bob@example.com"}'
    assert line(verdict="reject", message="not him") == "approval reject (apr_1): not him"
    assert line(verdict="approve") == "approval approve (apr_1)"
