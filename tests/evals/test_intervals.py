"""Confidence intervals of pass rates: Wilson's for one run per case, clustered by case
with repeats. Twin: counting repeats as independent runs gives a far narrower interval
for the same evidence (the mistake the clustering avoids)."""

from __future__ import annotations

from pathlib import Path

import pytest

from legato import Agent
from legato.evals import (
    Case,
    Dataset,
    EvalReport,
    clustered_interval,
    compare,
    evaluate_sync,
    report_html,
    wilson,
)
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel


def test_wilson_matches_the_published_values() -> None:
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_clustered_interval_never_collapses_when_cases_agree_with_themselves() -> None:
    low, high = clustered_interval([1.0] * 10)  # spread 0: Wilson on ten cases holds it open
    assert high == 1.0 and low == pytest.approx(wilson(10, 10)[0])
    assert clustered_interval([]) == (0.0, 1.0)


def _half_the_cases_always_fail(tmp_path: Path, repeats: int) -> EvalReport:
    """Ten cases, ten repeats: the odd cases always fail, the even ones always pass."""

    def answer(request: ModelRequest) -> str:
        n = int(request.messages[-1].text.removeprefix("q"))
        return "right" if n % 2 == 0 else "wrong"

    dataset = Dataset(
        cases=tuple(Case(id=f"c{i}", input=f"q{i}", expected="right") for i in range(10))
    )
    store = SQLiteStore(tmp_path / f"{repeats}.db")
    try:
        return evaluate_sync(
            Agent(FunctionModel(answer)),
            dataset,
            eval_id=f"r{repeats}",
            store=store,
            repeats=repeats,
        )
    finally:
        store.close()


def test_with_repeats_the_case_is_the_unit(tmp_path: Path) -> None:
    report = _half_the_cases_always_fail(tmp_path, repeats=10)
    assert report.pass_rate == 0.5 and len(report.results) == 100
    interval = report.pass_rate_interval
    assert interval is not None
    low, high = interval
    assert low < 0.2 and high > 0.8  # ten cases' worth of evidence: mean 0.5, sd 0.53
    naive = wilson(50, 100)  # the twin: 100 runs counted as independent
    assert naive[0] > 0.39 and naive[1] < 0.61
    assert high - low > 2.5 * (naive[1] - naive[0])
    stats = {s.case_id: s for s in report.case_stats()}
    assert stats["c0"].interval == pytest.approx(wilson(10, 10))
    assert stats["c1"].interval == pytest.approx(wilson(0, 10))


def test_one_run_per_case_gives_wilson_and_the_reports_show_it(tmp_path: Path) -> None:
    report = _half_the_cases_always_fail(tmp_path, repeats=1)
    assert report.pass_rate_interval == pytest.approx(wilson(5, 10))
    data = report.to_json()
    assert data["pass_rate_interval"] == pytest.approx(list(wilson(5, 10)))
    assert "pass rate 50% [24%, 76%] (95% CI)" in report_html(report)
    diff = compare(report, report)
    assert diff.interval_before == diff.interval_after == report.pass_rate_interval
    assert EvalReport.from_json(data).pass_rate_interval == report.pass_rate_interval
