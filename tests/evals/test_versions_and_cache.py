"""Replayed scores carry their evaluator's version: given the previous report, an
unchanged evaluator is not run again, a changed one is. The LLM judge asks a question
(same model, rubric, prompt) once: a counting model proves it; the twins (no previous
report, `cache=None`) ask every time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from legato import Agent
from legato.evals import (
    Case,
    Dataset,
    EvalContext,
    EvalReport,
    FunctionEvaluator,
    JudgeCache,
    contains,
    evaluate_sync,
    evaluator,
    evaluator_version,
    judge,
    replay,
)
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel

DATASET = Dataset(cases=tuple(Case(id=f"c{i}", input=f"q{i}") for i in range(3)))


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    stored = SQLiteStore(tmp_path / "e.db")
    evaluate_sync(
        Agent(FunctionModel(lambda r: f"answer {r.messages[-1].text}")),
        DATASET,
        eval_id="v",
        store=stored,
    )
    return stored


class Tally:
    """Counts evaluations (an object: its changing contents are not part of a version)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __len__(self) -> int:
        return len(self.seen)


def _counting(calls: Tally, *, needle: str = "q1") -> FunctionEvaluator:
    @evaluator
    def mentions(ctx: EvalContext) -> bool:
        calls.seen.append(ctx.case.id)
        return needle in ctx.text

    return mentions


def _replay(
    store: SQLiteStore, *evaluators: object, previous: EvalReport | None = None
) -> EvalReport:
    return asyncio.run(
        replay(DATASET, eval_id="v", store=store, evaluators=evaluators, previous=previous)  # type: ignore[arg-type]
    )


def test_an_unchanged_evaluator_is_not_run_again_and_a_changed_one_is(
    store: SQLiteStore, tmp_path: Path
) -> None:
    calls = Tally()
    first = _replay(store, _counting(calls), contains("answer"))
    assert len(calls) == 3
    versions = {s.name: s.version for s in first.results[0].scores}
    assert all(versions.values()) and versions["mentions"] == evaluator_version(_counting(Tally()))
    first.save(tmp_path / "first.json")
    previous = EvalReport.load(tmp_path / "first.json")  # the versions survive the JSON

    kept = _replay(store, _counting(calls), contains("answer"), previous=previous)
    assert len(calls) == 3  # same code, same closure: kept, not run
    assert [r.passed for r in kept.results] == [r.passed for r in first.results]

    changed = _replay(store, _counting(calls, needle="q2"), previous=previous)
    assert len(calls) == 6  # another value closed over: a new version, scored again
    assert [r.passed for r in changed.results] == [False, False, True]

    bumped = evaluator(lambda ctx: calls.seen.append("x") or True, name="mentions", version="2")
    _replay(store, bumped, previous=previous)
    assert calls.seen.count("x") == 3

    _replay(store, _counting(calls))  # no previous report: everything is scored
    assert len(calls) == 12


def test_editing_the_function_changes_its_version() -> None:
    def one(ctx: EvalContext) -> bool:
        return "a" in ctx.text

    def two(ctx: EvalContext) -> bool:
        return "b" in ctx.text

    def one_again(ctx: EvalContext) -> bool:
        return "a" in ctx.text

    v1, v2 = evaluator_version(evaluator(one)), evaluator_version(evaluator(two))
    assert v1 and v1 != v2
    assert evaluator_version(evaluator(one_again)) != v1  # its name is part of it
    assert evaluator_version(contains("x")) != evaluator_version(contains("y"))
    assert evaluator_version(contains("x")) == evaluator_version(contains("x"))


class CountingJudgeModel:
    """A judge model that says pass and counts the questions it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, request: ModelRequest) -> str:
        self.asked.append(request.messages[-1].text)
        return '{"pass": true, "reason": "fine"}'


def _judged(store: SQLiteStore, grader: object) -> EvalReport:
    return _replay(store, grader)


def test_the_judge_asks_each_question_once(store: SQLiteStore) -> None:
    counting = CountingJudgeModel()
    model = FunctionModel(counting, name="test:judge")
    grader = judge(model, "The answer answers.")
    assert [r.passed for r in _judged(store, grader).results] == [True, True, True]
    assert len(counting.asked) == 3
    _judged(store, grader)
    assert len(counting.asked) == 3  # same model, rubric and prompts: no second call
    assert grader.cache is not None and grader.cache.hits == 3
    other_rubric = judge(model, "The answer is polite.", cache=grader.cache)
    _judged(store, other_rubric)
    assert len(counting.asked) == 6  # another rubric is another question

    twin = judge(model, "The answer answers.", cache=None)
    _judged(store, twin)
    _judged(store, twin)
    assert len(counting.asked) == 12  # without a cache every replay asks again


def test_a_judge_cache_file_outlives_the_process_and_skips_unparsed_answers(
    store: SQLiteStore, tmp_path: Path
) -> None:
    answers = iter(["no idea", '{"pass": false, "reason": "vague"}'] + ['{"pass": true}'] * 9)
    asked: list[str] = []

    def answer(request: ModelRequest) -> str:
        asked.append(request.messages[-1].text)
        return next(answers)

    model = FunctionModel(answer, name="test:judge")
    cache = JudgeCache(tmp_path / "judge.db")
    first = _judged(store, judge(model, "r", cache=cache))
    assert first.results[0].passed is None and len(asked) == 3
    cache.close()
    reopened = JudgeCache(tmp_path / "judge.db")  # as a later process would
    second = _judged(store, judge(model, "r", cache=reopened))
    assert len(asked) == 4  # only the unparsed question is asked again
    assert [r.passed for r in second.results] == [True, False, True]
    reopened.close()
