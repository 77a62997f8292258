"""What an evaluation produced: one `CaseResult` per (case, repeat), gathered in an `EvalReport`."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias, cast

from legato.evals._dataset import InvalidCase
from legato.evals._evaluators import Score
from legato.evals._stats import Interval, clustered_interval, wilson
from legato.exceptions import ConfigurationError
from legato.messages import JsonValue

__all__ = ["CaseResult", "CaseStats", "EvalReport", "Status"]

Status: TypeAlias = Literal["ok", "error", "budget", "missing"]
"""How a case's run ended: `ok` (it finished and was scored), `error` (the run failed),
`budget` (the evaluation's budget ran out before or during it), `missing` (a replay found
no stored run for it)."""

REPORT_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """One run of one case, and its scores."""

    case_id: str
    repeat: int = 0
    run_id: str | None = None
    """The run's id in the evaluation's store (its journal is there)."""
    status: Status = "ok"
    error: str = ""
    """Why the run did not finish (for a status other than `ok`)."""
    output: JsonValue = None
    scores: tuple[Score, ...] = ()
    cost: float | None = None
    tokens: int = 0
    latency: float = 0.0
    """Seconds of model and tool calls, from the journal."""
    reused: bool = False
    """Taken from the store (a resumed evaluation or a replay): no model call was made for it."""
    tags: tuple[str, ...] = ()

    @property
    def passed(self) -> bool | None:
        """True when every score passed; False when one failed; None when unscored or not run."""
        if self.status != "ok" or any(s.passed is None for s in self.scores):
            return None
        return all(s.passed for s in self.scores)

    def to_json(self) -> dict[str, JsonValue]:
        """A JSON object (see `EvalReport.to_json`)."""
        return {
            "case_id": self.case_id,
            "repeat": self.repeat,
            "run_id": self.run_id,
            "status": self.status,
            "error": self.error,
            "output": self.output,
            "scores": [s.to_json() for s in self.scores],
            "cost": self.cost,
            "tokens": self.tokens,
            "latency": self.latency,
            "reused": self.reused,
            "tags": list(self.tags),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> CaseResult:
        """The inverse of `to_json`."""
        scores = cast(list[dict[str, JsonValue]], data.get("scores") or [])
        cost = data.get("cost")
        tokens = data.get("tokens")
        latency = data.get("latency")
        run_id = data.get("run_id")
        status = data.get("status", "ok")
        if status not in ("ok", "error", "budget", "missing"):
            msg = f"unknown case status {status!r} in the report"
            raise ConfigurationError(msg)
        return cls(
            case_id=str(data["case_id"]),
            repeat=int(cast(int, data.get("repeat") or 0)),
            run_id=run_id if isinstance(run_id, str) else None,
            status=status,
            error=str(data.get("error") or ""),
            output=data.get("output"),
            scores=tuple(Score.from_json(s) for s in scores),
            cost=float(cost) if isinstance(cost, int | float) else None,
            tokens=int(tokens) if isinstance(tokens, int) else 0,
            latency=float(latency) if isinstance(latency, int | float) else 0.0,
            reused=bool(data.get("reused")),
            tags=tuple(str(t) for t in cast(list[str], data.get("tags") or [])),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseStats:
    """A case over its repeats: how often it passed, and how much that varies."""

    case_id: str
    runs: int
    scored: int
    """Runs that finished with every score decided."""
    pass_rate: float | None
    """Mean of pass (1) / fail (0) over the scored runs; None when none was scored."""
    variance: float | None
    """Sample variance of pass/fail over the scored runs (None below two)."""
    interval: Interval = (0.0, 1.0)
    """95% Wilson interval of the case's pass rate over its scored runs ((0, 1) with none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalReport:
    """The results of an evaluation: every (case, repeat), the refused cases, the totals."""

    eval_id: str
    dataset: str
    dataset_digest: str
    agent: str = ""
    model: str = ""
    results: tuple[CaseResult, ...]
    invalid: tuple[InvalidCase, ...] = ()
    evaluators: tuple[str, ...] = ()
    judge_cost: float = 0.0
    """US dollars the LLM judges spent (when their model is priced)."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: {})

    # -- figures ----------------------------------------------------------------------------------

    @property
    def cost(self) -> float:
        """US dollars of the agent's runs (those with a known cost)."""
        return sum(r.cost for r in self.results if r.cost is not None)

    @property
    def counts(self) -> dict[str, int]:
        """Runs by outcome: passed, failed, unscored, error, budget, missing; and invalid cases."""
        names = ("passed", "failed", "unscored", "error", "budget", "missing", "invalid")
        counts: dict[str, int] = dict.fromkeys(names, 0)
        for r in self.results:
            if r.status != "ok":
                counts[r.status] += 1
            elif r.passed is None:
                counts["unscored"] += 1
            else:
                counts["passed" if r.passed else "failed"] += 1
        counts["invalid"] = len(self.invalid)
        return counts

    @property
    def pass_rate(self) -> float | None:
        """Passed over scored runs (errors, budget stops and unscored runs are left out)."""
        c = self.counts
        scored = c["passed"] + c["failed"]
        return c["passed"] / scored if scored else None

    @property
    def pass_rate_interval(self) -> Interval | None:
        """A 95% confidence interval of the pass rate (None when no run was scored).

        With one scored run per case, Wilson's interval on the runs. With repeats, the
        case is the unit (its repeats are not independent): the interval of the mean of
        the cases' pass rates (`legato.evals._stats.clustered_interval`), whose centre
        may differ slightly from `pass_rate` when cases have unequal numbers of runs.
        """
        stats = [s for s in self.case_stats() if s.pass_rate is not None]
        if not stats:
            return None
        if all(s.scored == 1 for s in stats):
            return wilson(sum(s.pass_rate or 0.0 for s in stats), len(stats))
        return clustered_interval([s.pass_rate or 0.0 for s in stats])

    def case_stats(self) -> list[CaseStats]:
        """Per case, over its repeats: pass rate and its variance."""
        by_case: dict[str, list[CaseResult]] = {}
        for r in self.results:
            by_case.setdefault(r.case_id, []).append(r)
        stats: list[CaseStats] = []
        for case_id, runs in by_case.items():
            values = [1.0 if r.passed else 0.0 for r in runs if r.passed is not None]
            stats.append(
                CaseStats(
                    case_id=case_id,
                    runs=len(runs),
                    scored=len(values),
                    pass_rate=statistics.fmean(values) if values else None,
                    variance=statistics.variance(values) if len(values) >= 2 else None,
                    interval=wilson(sum(values), len(values)),
                )
            )
        return stats

    def pass_at_k(self, k: int, /) -> float | None:
        """The chance that at least one of `k` runs of a case passes, averaged over cases.

        Estimated without bias from each case's n scored repeats with c passes:
        1 - C(n-c, k) / C(n, k). Cases with fewer than `k` scored runs are left out (None when
        no case has enough).
        """
        if k < 1:
            msg = "k must be at least 1"
            raise ConfigurationError(msg)
        by_case: dict[str, list[bool]] = {}
        for r in self.results:
            if r.passed is not None:
                by_case.setdefault(r.case_id, []).append(r.passed)
        estimates = [
            1.0 - math.comb(len(runs) - sum(runs), k) / math.comb(len(runs), k)
            for runs in by_case.values()
            if len(runs) >= k
        ]
        return statistics.fmean(estimates) if estimates else None

    def failures_first(self) -> list[CaseResult]:
        """The results with failures, errors and unscored runs before passes."""

        def rank(r: CaseResult) -> int:
            if r.status != "ok":
                return 1
            return {False: 0, None: 2, True: 3}[r.passed]

        return sorted(self.results, key=rank)

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, JsonValue]:
        """The whole report as one JSON object (`from_json` reads it back)."""
        return {
            "version": REPORT_VERSION,
            "eval_id": self.eval_id,
            "dataset": self.dataset,
            "dataset_digest": self.dataset_digest,
            "agent": self.agent,
            "model": self.model,
            "evaluators": list(self.evaluators),
            "counts": cast(dict[str, JsonValue], self.counts),
            "pass_rate": self.pass_rate,
            "pass_rate_interval": (
                None if self.pass_rate_interval is None else list(self.pass_rate_interval)
            ),
            "cost": self.cost,
            "judge_cost": self.judge_cost,
            "results": [r.to_json() for r in self.results],
            "invalid": [
                {"position": i.position, "id": i.id, "reason": i.reason} for i in self.invalid
            ],
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> EvalReport:
        """Read a report written by `to_json`."""
        if data.get("version") != REPORT_VERSION:
            msg = f"not an evaluation report of version {REPORT_VERSION}"
            raise ConfigurationError(msg)
        invalid = cast(list[dict[str, JsonValue]], data.get("invalid") or [])
        judge_cost = data.get("judge_cost")
        return cls(
            eval_id=str(data["eval_id"]),
            dataset=str(data["dataset"]),
            dataset_digest=str(data["dataset_digest"]),
            agent=str(data.get("agent") or ""),
            model=str(data.get("model") or ""),
            evaluators=tuple(str(e) for e in cast(list[str], data.get("evaluators") or [])),
            results=tuple(
                CaseResult.from_json(r)
                for r in cast(list[dict[str, JsonValue]], data.get("results") or [])
            ),
            invalid=tuple(
                InvalidCase(
                    position=int(cast(int, i["position"])),
                    id=i["id"] if isinstance(i["id"], str) else None,
                    reason=str(i["reason"]),
                )
                for i in invalid
            ),
            judge_cost=float(judge_cost) if isinstance(judge_cost, int | float) else 0.0,
            metadata=cast(dict[str, JsonValue], data.get("metadata") or {}),
        )

    def save(self, path: str | Path) -> None:
        """Write the report as JSON."""
        text = json.dumps(self.to_json(), ensure_ascii=False, indent=2, sort_keys=True)
        Path(path).write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        """Read a report written by `save`; a file that is not one raises `ConfigurationError`."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            msg = f"cannot read the report {str(path)!r}: {exc}"
            raise ConfigurationError(msg) from exc
        if not isinstance(data, dict):
            msg = f"{str(path)!r} is not an evaluation report"
            raise ConfigurationError(msg)
        return cls.from_json(cast(dict[str, JsonValue], data))


def results_by_key(results: Sequence[CaseResult]) -> dict[tuple[str, int], CaseResult]:
    """Results keyed by (case id, repeat)."""
    return {(r.case_id, r.repeat): r for r in results}
