"""The runner: bounded concurrency, one budget, repeats, resume after SIGKILL, replay."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from legato import Agent
from legato.budgets import Budget
from legato.evals import (
    Case,
    Dataset,
    EvalContext,
    Score,
    compare,
    contains,
    evaluate_sync,
    evaluator,
    replay,
    run_id_of,
)
from legato.exceptions import ConfigurationError
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel

ROOT = Path(__file__).resolve().parents[2]


def _dataset(n: int = 5) -> Dataset:
    return Dataset(
        name="numbers",
        cases=tuple(Case(id=f"c{i}", input=f"q{i}", expected=f"answer: q{i}") for i in range(n)),
    )


class Counting:
    """A model that answers `answer: <prompt>` and counts its calls itself."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.in_flight = 0
        self.most = 0

    async def __call__(self, request: ModelRequest) -> str:
        text = request.messages[-1].text
        self.calls.append(text)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        for _ in range(5):  # let the other runs in flight get this far too
            await asyncio.sleep(0)
        self.in_flight -= 1
        return f"answer: {text}"


def _agent(counter: Counting) -> Agent[str]:
    return Agent(FunctionModel(counter, name="test:counting"))


def test_every_case_runs_is_scored_and_its_journal_is_stored(tmp_path: Path) -> None:
    counter = Counting()
    store = SQLiteStore(tmp_path / "e.db")
    report = evaluate_sync(_agent(counter), _dataset(), eval_id="one", store=store)
    assert report.counts["passed"] == 5 and report.pass_rate == 1.0
    assert report.model == "test:counting" and len(counter.calls) == 5
    for result in report.results:
        run_id = run_id_of("one", result.case_id, 0)
        assert result.run_id == run_id and store.load_run(run_id).run_id == run_id
    assert [r.case_id for r in report.results] == [f"c{i}" for i in range(5)]


@pytest.mark.parametrize(("limit", "expected_most"), [(2, 2), (5, 5)])
def test_concurrency_is_bounded(tmp_path: Path, limit: int, expected_most: int) -> None:
    counter = Counting()
    store = SQLiteStore(tmp_path / "e.db")
    evaluate_sync(_agent(counter), _dataset(), eval_id="c", store=store, concurrency=limit)
    assert counter.most == expected_most  # the twin with room for all shows they do overlap


def test_repeats_give_a_pass_rate_and_its_variance(tmp_path: Path) -> None:
    answers = iter(["answer: q0", "wrong", "answer: q0", "wrong"])
    agent = Agent(FunctionModel(lambda request: next(answers)))
    dataset = _dataset(1)
    report = evaluate_sync(
        agent, dataset, eval_id="r", store=SQLiteStore(tmp_path / "e.db"), repeats=4, concurrency=1
    )
    (stats,) = report.case_stats()
    assert (stats.runs, stats.scored, stats.pass_rate) == (4, 4, 0.5)
    assert stats.variance == pytest.approx(1 / 3)
    assert report.pass_at_k(1) == 0.5
    assert report.pass_at_k(2) == pytest.approx(1 - 1 / 6)  # 1 - C(2,2)/C(4,2)
    assert report.pass_at_k(3) == 1.0 and report.pass_at_k(5) is None
    with pytest.raises(ConfigurationError, match="repeats"):
        evaluate_sync(agent, dataset, eval_id="r", repeats=0)


def test_an_evaluator_that_raises_marks_that_case_and_the_rest_goes_on(tmp_path: Path) -> None:
    @evaluator
    def picky(ctx: EvalContext) -> bool:
        if ctx.case.id == "c1":
            raise ValueError("cannot judge this one")
        return True

    report = evaluate_sync(
        _agent(Counting()),
        _dataset(3),
        eval_id="x",
        store=SQLiteStore(tmp_path / "e.db"),
        evaluators=[picky],
    )
    marked = report.results[1]
    assert marked.passed is None
    assert Score(name="picky", passed=None, reason="ValueError: cannot judge this one") in (
        marked.scores
    )
    assert report.counts == {
        "passed": 2,
        "failed": 0,
        "unscored": 1,
        "error": 0,
        "budget": 0,
        "missing": 0,
        "invalid": 0,
    }


def test_a_budget_exhausted_midway_marks_the_rest_and_loses_nothing_paid_for(
    tmp_path: Path,
) -> None:
    counter = Counting()
    store = SQLiteStore(tmp_path / "e.db")
    agent = _agent(counter)
    budget = Budget(model_calls=3)
    first = evaluate_sync(agent, _dataset(), eval_id="b", store=store, budget=budget, concurrency=1)
    assert [r.status for r in first.results] == ["ok", "ok", "ok", "budget", "budget"]
    assert "BudgetExceeded" in first.results[3].error
    assert budget.used.model_calls == 3 and len(counter.calls) == 3
    # more budget: only the stopped cases run; the three paid for are taken from the store
    more = Budget(model_calls=5)
    second = evaluate_sync(agent, _dataset(), eval_id="b", store=store, budget=more, concurrency=1)
    assert second.counts["passed"] == 5
    assert counter.calls == ["q0", "q1", "q2", "q3", "q4"]
    assert [r.reused for r in second.results] == [True, True, True, False, False]
    assert more.used.model_calls == 5  # what the store shows was spent counts, once


def test_replay_scores_stored_runs_with_new_evaluators_and_calls_no_model(tmp_path: Path) -> None:
    counter = Counting()
    store = SQLiteStore(tmp_path / "e.db")
    dataset = _dataset(3)
    evaluate_sync(_agent(counter), dataset, eval_id="p", store=store)
    assert len(counter.calls) == 3

    @evaluator
    def mentions_two(ctx: EvalContext) -> bool:
        return "2" in ctx.text

    again = asyncio.run(
        replay(dataset, eval_id="p", store=store, evaluators=[mentions_two, contains("answer")])
    )
    assert len(counter.calls) == 3  # zero model calls
    assert [r.passed for r in again.results] == [False, False, True]
    assert all(r.reused for r in again.results)
    assert again.model == "test:counting"
    missing = asyncio.run(replay(_dataset(4), eval_id="p", store=store))
    assert missing.results[3].status == "missing"


def test_compare_finds_regressions_and_improvements(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "e.db")
    dataset = _dataset(4)
    good = evaluate_sync(_agent(Counting()), dataset, eval_id="good", store=store)

    def half(request: ModelRequest) -> str:
        text = request.messages[-1].text
        return f"answer: {text}" if text in ("q0", "q1") else "no idea"

    worse = evaluate_sync(Agent(FunctionModel(half)), dataset, eval_id="worse", store=store)
    diff = compare(good, worse)
    assert [c.case_id for c in diff.regressions] == ["c2", "c3"]
    assert diff.improvements == [] and diff.same_dataset
    assert diff.pass_rate_before == 1.0 and diff.pass_rate_after == 0.5
    assert diff.p_value == 0.5  # two flips out of four: no evidence either way
    back = compare(worse, good)
    assert [c.case_id for c in back.improvements] == ["c2", "c3"]
    assert compare(good, good).changes == () and compare(good, good).p_value == 1.0


def test_a_report_round_trips_through_json(tmp_path: Path) -> None:
    from legato.evals import EvalReport

    report = evaluate_sync(
        _agent(Counting()), _dataset(2), eval_id="j", store=SQLiteStore(tmp_path / "e.db")
    )
    report.save(tmp_path / "r.json")
    assert EvalReport.load(tmp_path / "r.json") == report
    (tmp_path / "bad.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not an evaluation report"):
        EvalReport.load(tmp_path / "bad.json")


# -- resume after SIGKILL ----------------------------------------------------------------------

CHILD = """
import asyncio, sys
from pathlib import Path
from legato import Agent
from legato.evals import Case, Dataset, evaluate
from legato.store import SQLiteStore
from legato.testing import FunctionModel

db, calls, block, resume = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"

async def answer(request):
    text = request.messages[-1].text
    with calls.open("a", encoding="utf-8") as f:  # counted outside the framework
        f.write(text + "\\n")
    if text == block:
        await asyncio.Event().wait()  # stuck here until the process is killed
    return "answer: " + text

cases = tuple(Case(id=f"c{i}", input=f"q{i}", expected=f"answer: q{i}") for i in range(5))
report = asyncio.run(evaluate(
    Agent(FunctionModel(answer)), Dataset(cases=cases), eval_id="kill",
    store=SQLiteStore(db), concurrency=1, resume=resume,
))
print(report.counts["passed"], sum(r.reused for r in report.results))
"""


def _child(tmp_path: Path, *, block: str, resume: bool) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = [str(tmp_path / "e.db"), str(tmp_path / "calls.txt"), block, "1" if resume else "0"]
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _kill_when_stuck(tmp_path: Path) -> None:
    child = _child(tmp_path, block="q3", resume=True)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
    while "q3" not in _calls(tmp_path):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child never reached case c3"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.communicate()  # reaps it and closes its pipes
    assert _calls(tmp_path) == ["q0", "q1", "q2", "q3"]
    (tmp_path / "calls.txt").unlink()


@pytest.mark.parametrize("resume", [True, False])
def test_a_killed_evaluation_resumes_without_rerunning_finished_cases(
    tmp_path: Path, resume: bool
) -> None:
    _kill_when_stuck(tmp_path)
    again = _child(tmp_path, block="none", resume=resume)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    if resume:  # c0-c2 from the store; c3 continues from its journal; c4 runs
        assert _calls(tmp_path) == ["q3", "q4"]
        assert out.split() == ["5", "3"]
    else:  # the twin without the bookkeeping pays for every case again
        assert _calls(tmp_path) == ["q0", "q1", "q2", "q3", "q4"]
        assert out.split() == ["5", "0"]


def test_a_judge_spends_from_the_evaluation_budget_and_its_cost_is_reported_apart(
    tmp_path: Path,
) -> None:
    from legato.evals import judge
    from legato.testing import ScriptedModel, reply

    verdict = reply('{"pass": true, "reason": "fine"}', cost=0.01)
    grader = judge(ScriptedModel([verdict, verdict, verdict]), "Answers the question.")
    budget = Budget(model_calls=3)
    report = evaluate_sync(
        _agent(Counting()),
        _dataset(2),
        eval_id="judged",
        store=SQLiteStore(tmp_path / "e.db"),
        evaluators=[grader],
        budget=budget,
        concurrency=1,
    )
    first, second = report.results
    assert first.passed is True and report.judge_cost == pytest.approx(0.01)
    # the third call (the second case's agent run) fits; its judge call does not
    (judged,) = [s for s in second.scores if s.name == "judge"]
    assert judged.passed is None and "budget ran out" in judged.reason
    assert budget.used.model_calls == 3


def test_without_a_store_the_agents_own_store_keeps_the_journals(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "agent.db")
    agent = Agent(FunctionModel(Counting(), name="test:counting"), store=store)
    evaluate_sync(agent, _dataset(1), eval_id="own")
    assert store.run_info(run_id_of("own", "c0", 0)) is not None
    assert agent.store is store  # the caller's agent is left as it was


def test_a_run_that_fails_marks_its_case_and_the_rest_goes_on(tmp_path: Path) -> None:
    def flaky(request: ModelRequest) -> str:
        if request.messages[-1].text == "q1":
            raise RuntimeError("the model fell over")
        return f"answer: {request.messages[-1].text}"

    report = evaluate_sync(
        Agent(FunctionModel(flaky)), _dataset(3), eval_id="f", store=SQLiteStore(tmp_path / "e.db")
    )
    assert [r.status for r in report.results] == ["ok", "error", "ok"]
    assert "the model fell over" in report.results[1].error
    assert report.pass_rate == 1.0 and report.counts["error"] == 1


def test_what_a_budget_stopped_run_spent_still_counts_when_it_is_run_again(
    tmp_path: Path,
) -> None:
    from legato.messages import ModelResponse
    from legato.testing import call, reply

    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    def two_steps(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].role == "user" and not request.messages[-1].tool_results:
            return reply(call("note", {"text": "x"}))
        return f"answer: {request.messages[0].text}"

    store = SQLiteStore(tmp_path / "e.db")
    agent = Agent(FunctionModel(two_steps), tools=[note])
    dataset = _dataset(2)

    def run(calls: int) -> list[str]:
        report = evaluate_sync(
            agent,
            dataset,
            eval_id="p",
            store=store,
            budget=Budget(model_calls=calls),
            concurrency=1,
        )
        return [r.status for r in report.results]

    assert run(3) == ["ok", "budget"]  # c1 made its first call, then ran out
    # 2 (c0) + 1 (c1's stopped attempt) already spent: 4 leaves one call, c1 needs two
    assert run(4) == ["ok", "budget"]
    assert run(7) == ["ok", "ok"]  # 2 + 1 + 1 (the second stopped attempt) + 2 = 6
