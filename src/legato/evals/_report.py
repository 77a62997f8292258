"""Reports: comparing two evaluations, and the terminal table (rich, from the `cli` extra)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from legato.evals._results import CaseResult, EvalReport

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["CaseChange", "Comparison", "compare", "rate_text", "report_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseChange:
    """A case whose pass rate differs between two evaluations."""

    case_id: str
    before: float | None
    """Pass rate in the first evaluation (None: never scored there)."""
    after: float | None
    kind: Literal["regression", "improvement", "changed"]
    """`changed`: scored in one evaluation only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """How evaluation `after` differs from `before`, case by case."""

    before: str
    after: str
    changes: tuple[CaseChange, ...]
    pass_rate_before: float | None
    pass_rate_after: float | None
    p_value: float | None
    """Exact two-sided McNemar test on the cases that flipped (pass/fail over aligned
    (case, repeat) runs); None when nothing is paired."""
    same_dataset: bool
    interval_before: tuple[float, float] | None = None
    """95% interval of `pass_rate_before` (see `EvalReport.pass_rate_interval`)."""
    interval_after: tuple[float, float] | None = None

    @property
    def regressions(self) -> list[CaseChange]:
        """Cases that pass less often in `after`."""
        return [c for c in self.changes if c.kind == "regression"]

    @property
    def improvements(self) -> list[CaseChange]:
        """Cases that pass more often in `after`."""
        return [c for c in self.changes if c.kind == "improvement"]


def _rates(report: EvalReport) -> dict[str, float | None]:
    return {s.case_id: s.pass_rate for s in report.case_stats()}


def _mcnemar(before: EvalReport, after: EvalReport) -> float | None:
    """Exact McNemar p-value over the (case, repeat) runs both scored."""
    theirs = {(r.case_id, r.repeat): r.passed for r in after.results}
    paired = [
        (r.passed, theirs[(r.case_id, r.repeat)])
        for r in before.results
        if r.passed is not None and theirs.get((r.case_id, r.repeat)) is not None
    ]
    if not paired:
        return None
    lost = sum(1 for a, b in paired if a and not b)
    gained = sum(1 for a, b in paired if not a and b)
    n = lost + gained
    if n == 0:
        return 1.0
    k = min(lost, gained)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(before: EvalReport, after: EvalReport) -> Comparison:
    """Case by case, what got worse and what got better from `before` to `after`."""
    old, new = _rates(before), _rates(after)
    changes: list[CaseChange] = []
    for case_id in [*old, *(c for c in new if c not in old)]:
        a, b = old.get(case_id), new.get(case_id)
        if a == b:
            continue
        if a is None or b is None:
            kind: Literal["regression", "improvement", "changed"] = "changed"
        else:
            kind = "regression" if b < a else "improvement"
        changes.append(CaseChange(case_id=case_id, before=a, after=b, kind=kind))
    return Comparison(
        before=before.eval_id,
        after=after.eval_id,
        changes=tuple(changes),
        pass_rate_before=before.pass_rate,
        pass_rate_after=after.pass_rate,
        p_value=_mcnemar(before, after),
        same_dataset=before.dataset_digest == after.dataset_digest,
        interval_before=before.pass_rate_interval,
        interval_after=after.pass_rate_interval,
    )


def rate_text(rate: float | None, interval: tuple[float, float] | None) -> str:
    """`83% [71%, 91%]`: a pass rate and its 95% interval (`-` when unknown)."""
    if rate is None:
        return "-"
    if interval is None:
        return f"{rate:.0%}"
    return f"{rate:.0%} [{interval[0]:.0%}, {interval[1]:.0%}]"


def _verdict(result: CaseResult) -> str:
    if result.status != "ok":
        return f"[yellow]{result.status}[/]"
    return {True: "[green]pass[/]", False: "[red]fail[/]", None: "[yellow]unscored[/]"}[
        result.passed
    ]


def _why(result: CaseResult) -> str:
    if result.status != "ok":
        return result.error
    return "; ".join(f"{s.name}: {s.reason}" for s in result.scores if s.passed is not True)


def report_table(report: EvalReport) -> Table:
    """The report as a rich table, failures first (needs the `cli` extra)."""
    from rich.markup import escape
    from rich.table import Table

    counts = report.counts
    rate = rate_text(report.pass_rate, report.pass_rate_interval)
    caption = (
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['unscored']} unscored, "
        f"{counts['error']} errors, {counts['budget']} stopped by the budget, "
        f"{counts['invalid']} invalid; pass rate {rate} (95% CI); ${report.cost:.4f}"
    )
    table = Table(title=f"evaluation {escape(report.eval_id)}", caption=caption)
    for column in ("case", "repeat", "result", "tokens", "cost", "why"):
        table.add_column(column)
    for r in report.failures_first():
        cost = "-" if r.cost is None else f"${r.cost:.4f}"
        table.add_row(
            escape(r.case_id),
            str(r.repeat),
            _verdict(r),
            str(r.tokens),
            cost,
            escape(_why(r)),
        )
    for invalid in report.invalid:
        name = invalid.id or f"#{invalid.position}"
        table.add_row(escape(name), "-", "[yellow]invalid[/]", "-", "-", escape(invalid.reason))
    return table
