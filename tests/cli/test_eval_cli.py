"""`legato eval`: run a dataset, resume it, write the report, compare two reports."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from legato.cli._app import app
from legato.evals import EvalReport

runner = CliRunner(env={"COLUMNS": "200"})
SUITE = "legato.evals.injection:injection_suite"
WIDE = {"COLUMNS": "200"}

DATASET = """
name: echo
cases:
  - id: hi
    input: hi
    expected: "echo: hi"
  - id: bye
    input: bye
    checks: {contains: [hello]}
  - id: broken
    input: 5
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.yaml").write_text(DATASET, encoding="utf-8")
    return tmp_path


def test_eval_runs_a_dataset_writes_the_report_and_resumes(workdir: Path) -> None:
    first = runner.invoke(app, ["eval", "cases.yaml", "--model", "test:echo", "--json", "a.json"])
    assert first.exit_code == 1, first.output  # a case failed
    assert "pass hi #0" in first.output and "fail bye #0" in first.output
    assert "invalid" in first.output and "'hello' is not in the output" in first.output
    report = EvalReport.load(workdir / "a.json")
    assert report.counts["passed"] == 1 and report.counts["invalid"] == 1
    assert (workdir / ".legato" / "legato.db").exists()
    again = runner.invoke(app, ["eval", "cases.yaml", "--model", "test:echo", "--json", "b.json"])
    assert "pass hi #0 (stored)" in again.output
    assert all(r.reused for r in EvalReport.load(workdir / "b.json").results)
    fresh = runner.invoke(
        app, ["eval", "cases.yaml", "-m", "test:echo", "--fresh", "--json", "c.json"]
    )
    assert "(stored)" not in fresh.output
    assert not any(r.reused for r in EvalReport.load(workdir / "c.json").results)


def test_eval_compare_shows_regressions_and_improvements(workdir: Path) -> None:
    runner.invoke(app, ["eval", "cases.yaml", "--model", "test:echo", "--json", "a.json"])
    before = EvalReport.load(workdir / "a.json")
    flipped = tuple(
        dataclasses.replace(
            r, scores=tuple(dataclasses.replace(s, passed=not s.passed) for s in r.scores)
        )
        for r in before.results
    )
    after = dataclasses.replace(before, eval_id="after", results=flipped)
    after.save(workdir / "b.json")
    result = runner.invoke(app, ["eval", "compare", "a.json", "b.json"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "regression" in result.output and "improvement" in result.output
    assert "1 regressions, 1 improvements" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "compare", "a.json"], "two reports"),
        (["eval", "compare", "nope.json", "nope.json"], "cannot read the report"),
        (["eval", "absent.yaml", "-m", "test:echo"], "cannot read the dataset"),
        (["eval", "a.yaml", "b.yaml", "-m", "test:echo"], "one dataset file"),
    ],
)
def test_eval_refuses_bad_input_with_one_line(workdir: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 1 and message in result.output


def test_the_command_lines_of_docs_evals_work_as_written(workdir: Path) -> None:
    """docs/evals.md's `legato eval` lines, in order, each model stood in by test:echo."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "evals.md"
    lines = re.findall(r"^\$ legato (eval .+)$", docs.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(lines) == 7
    outputs: list[str] = []
    for line in lines:
        args = shlex.split(line)
        if "--model" in args:  # one evaluation per model named, all on the echo model
            at = args.index("--model")
            args[at : at + 2] = ["--model", "test:echo", "--id", args[at + 1].replace(":", "-")]
        if args[1] == SUITE:  # the injection suite: every 40th case is enough here
            args += ["--set", "every=40"]
        result = runner.invoke(app, args, env=WIDE)
        assert result.exit_code in (0, 1), result.output  # 1: the dataset has failing cases
        outputs.append(result.output)
    assert "(stored)" not in outputs[0] and "pass hi #0 (stored)" in outputs[1]
    assert re.search(r"pass rate 50% \[\d+%, \d+%\] -> 50% \[\d+%, \d+%\]", outputs[3])
    page = (workdir / "b.html").read_text(encoding="utf-8")
    assert 'data-case="bye"' in page and "journal (" in page
    assert re.search(r"0 regressions, [1-9]\d* improvements", outputs[6]), outputs[6]


def test_eval_runs_a_suite_and_compare_shows_what_the_defence_changes(workdir: Path) -> None:
    off = runner.invoke(app, ["eval", SUITE, "--set", "defence=off", "--set", "every=40"])
    assert off.exit_code == 1, off.output  # the attacks got through
    assert "injection-off-oracle" in off.output
    args = ["eval", SUITE, "--set", "every=40", "--json", "on.json"]
    on = runner.invoke(app, args)
    assert on.exit_code == 0, on.output
    runner.invoke(
        app, ["eval", SUITE, "--set", "defence=off", "--set", "every=40", "--json", "off.json"]
    )
    report = EvalReport.load(workdir / "on.json")
    assert report.metadata == {"defence": "on", "person": "oracle"}
    assert {"attack_resisted", "task_done", "questions", "blocked"} <= {
        s.name for r in report.results for s in r.scores
    }
    attacks = sum("attack" in r.tags for r in report.results)
    diff = runner.invoke(app, ["eval", "compare", "off.json", "on.json"], env=WIDE)
    assert f"0 regressions, {attacks} improvements" in diff.output, diff.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", SUITE, "--set", "defence=maybe"], "unknown defence"),
        (["eval", SUITE, "--set", "defence"], "--set takes key=value"),
        (["eval", SUITE, "--set", "colour=red"], "unexpected keyword argument"),
        (["eval", SUITE, "-m", "test:echo"], "a suite brings its own agent"),
        (["eval", "legato.evals:__name__"], "is not a legato.evals.Suite"),
        (["eval", "legato.evals:nothing"], "nothing"),
        (["eval", "cases.yaml", "-m", "test:echo", "--set", "a=b"], "--set applies to a suite"),
    ],
)
def test_eval_refuses_a_bad_suite_with_one_line(
    workdir: Path, args: list[str], message: str
) -> None:
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 1 and message in result.output, result.output


def test_eval_keeps_its_runs_in_postgresql_and_resumes_from_there(
    workdir: Path, pg_dsn: str
) -> None:
    from legato.store import PostgresStore

    first = runner.invoke(app, ["eval", "cases.yaml", "-m", "test:echo", "--store", pg_dsn])
    assert "pass hi #0" in first.output and "(stored)" not in first.output, first.output
    again = runner.invoke(app, ["eval", "cases.yaml", "-m", "test:echo", "--store", pg_dsn])
    assert "pass hi #0 (stored)" in again.output, again.output
    assert not (workdir / ".legato").exists()  # nothing went to the default SQLite file
    store = PostgresStore(pg_dsn)
    try:
        assert any(r.run_id.startswith("eval:echo-") for r in store.list_runs())
    finally:
        store.close()
