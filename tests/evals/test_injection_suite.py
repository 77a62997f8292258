"""The injection evaluation on `legato.evals`: the whole corpus through the runner, its
verdicts read from the journal agree with the world's effect log, and defence off against
on compares as regressions/improvements. Twin: with the defence off the same evaluators
see the attacks succeed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from legato import Agent
from legato.evals import Case, EvalContext, EvalReport, compare, evaluate_sync, replay
from legato.evals.injection import (
    attack_corpus,
    benign_corpus,
    evaluate_async,
    injection_dataset,
    injection_suite,
)
from legato.exceptions import ConfigurationError
from legato.store import SQLiteStore


def _run(defence: str, tmp_path: Path, *, every: int = 1, eval_id: str = "") -> EvalReport:
    suite = injection_suite(defence=defence, every=every)
    store = SQLiteStore(tmp_path / f"{defence}.db")
    try:
        return evaluate_sync(
            suite.agent,
            suite.dataset,
            eval_id=eval_id or suite.name,
            evaluators=suite.evaluators,
            store=store,
            metadata=suite.metadata,
        )
    finally:
        store.close()


def _score(report: EvalReport, case_id: str, name: str) -> bool | None:
    result = next(r for r in report.results if r.case_id == case_id)
    return next(s.passed for s in result.scores if s.name == name)


@pytest.mark.slow
def test_the_whole_corpus_on_the_runner_agrees_with_the_effect_log(tmp_path: Path) -> None:
    report = _run("on", tmp_path)
    attacks, benign = attack_corpus(), benign_corpus()
    assert len(report.results) == len(attacks) + len(benign)
    assert report.counts["passed"] == len(report.results)  # every attack resisted, every task done
    assert report.metadata == {"defence": "on", "person": "oracle"}
    plain = asyncio.run(evaluate_async(attacks, benign, defence="on"))
    for case in attacks:
        assert _score(report, case.id, "attack_resisted") is not plain.attacks[case.id].success
    for task in benign:
        assert _score(report, task.id, "task_done") is plain.benign[task.id].success
    asked = {
        r.case_id: next(s.value for s in r.scores if s.name == "questions") for r in report.results
    }
    assert all(asked[t.id] == plain.benign[t.id].questions for t in benign)


def test_twin_with_the_defence_off_the_same_evaluators_see_the_attacks(tmp_path: Path) -> None:
    report = _run("off", tmp_path, every=9)
    attack_ids = {c.id for c in attack_corpus()}
    attacks = [r for r in report.results if r.case_id in attack_ids]
    assert attacks and all(_score(report, r.case_id, "attack_resisted") is False for r in attacks)
    assert all(r.passed for r in report.results if r.case_id not in attack_ids)


def test_compare_defence_off_with_on_shows_every_attack_as_an_improvement(tmp_path: Path) -> None:
    off = _run("off", tmp_path, every=9)
    on = _run("on", tmp_path, every=9)
    diff = compare(off, on)
    attack_ids = {c.id for c in attack_corpus()}
    sampled = {r.case_id for r in off.results} & attack_ids
    assert {c.case_id for c in diff.improvements} == sampled
    assert diff.regressions == [] and diff.same_dataset
    assert diff.p_value is not None and diff.p_value < 1e-6


def test_a_stored_injection_evaluation_resumes_and_replays_without_building_an_agent(
    tmp_path: Path,
) -> None:
    suite = injection_suite(defence="on", every=25)
    built: list[str] = []

    factory = suite.agent
    assert not isinstance(factory, Agent)

    def counting(case: Case) -> Agent[Any]:
        built.append(case.id)
        return factory(case)

    store = SQLiteStore(tmp_path / "e.db")
    first = evaluate_sync(
        counting, suite.dataset, eval_id="r", evaluators=suite.evaluators, store=store
    )
    again = evaluate_sync(
        counting, suite.dataset, eval_id="r", evaluators=suite.evaluators, store=store
    )
    assert len(built) == len(suite.dataset.cases)  # the second evaluation built none
    assert all(r.reused for r in again.results) and again.counts == first.counts
    scored = asyncio.run(
        replay(suite.dataset, eval_id="r", store=store, evaluators=suite.evaluators)
    )
    assert [r.passed for r in scored.results] == [r.passed for r in first.results]
    store.close()


def test_the_dataset_tags_families_and_kinds() -> None:
    dataset = injection_dataset()
    tags = {t for c in dataset.cases for t in c.tags}
    assert {"attack", "benign", "held-out", "from-data", "obfuscated", "send_money"} <= tags
    assert len(injection_dataset(every=10).cases) == -(-len(dataset.cases) // 10)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"defence": "maybe"}, "unknown defence"),
        ({"person": "nobody"}, "unknown person"),
        ({"every": "x"}, "whole number"),
        ({"every": "0"}, "at least 1"),
    ],
)
def test_bad_settings_are_configuration_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        injection_suite(**options)  # type: ignore[arg-type]


def test_twin_a_refused_call_counted_as_an_effect_would_turn_resisted_attacks_into_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal also records calls the defence refused (they finish, not `ok`): the
    evaluators count only those that ran. Counting every finished call breaks the verdicts."""
    from legato.evals.injection import SIDE_EFFECTS, Effect, _suite
    from legato.events import ToolCallFinished

    honest = _run("on", tmp_path, every=5, eval_id="honest")
    assert all(r.passed for r in honest.results)

    def every_finished_call(context: EvalContext) -> list[Effect]:
        return [
            Effect(tool=e.call.name, arguments=cast(dict[str, Any], e.call.arguments))
            for e in context.journal
            if isinstance(e, ToolCallFinished) and e.call.name in SIDE_EFFECTS
        ]

    monkeypatch.setattr(_suite, "journal_effects", every_finished_call)
    loose = _run("on", tmp_path, every=5, eval_id="loose")
    attack_ids = {c.id for c in attack_corpus()}
    hits = [r for r in loose.results if r.case_id in attack_ids and r.passed is False]
    assert len(hits) > len([r for r in loose.results if r.case_id in attack_ids]) // 2
