"""Running an evaluation: every case a journaled run in a store, resumable and replayable.

Each (case, repeat) runs as one agent run whose id is derived from the evaluation's id,
the case's id, the repeat and an attempt number (`eval:<eval>:<case>:<repeat>:<attempt>`).
The store is the bookkeeping: an evaluation started again with the same id takes every
finished run from the store (no model call, its spend counted once in the budget),
continues a run that was cut off mid-flight from its journal, and runs only what is left.
`replay` scores the stored runs with new evaluators and calls no model at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from legato.evals._dataset import Case, Dataset
from legato.evals._evaluators import (
    EvalContext,
    Evaluator,
    Score,
    case_evaluators,
    evaluator_version,
)
from legato.evals._results import CaseResult, EvalReport, Status
from legato.evals._tracing import EvalSpans
from legato.events import (
    Journal,
    ModelResponded,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCallFinished,
)
from legato.exceptions import BudgetExceeded, ConfigurationError, JournalError
from legato.messages import JsonValue
from legato.run._sync import run_sync

if TYPE_CHECKING:
    from legato.agent import Agent
    from legato.budgets import Budget
    from legato.store import Store

__all__ = ["AgentFactory", "Suite", "evaluate", "evaluate_sync", "replay", "run_id_of"]

ResultCallback = Callable[[CaseResult], None]
"""Called with each result as it is known (for progress displays)."""
AgentFactory = Callable[[Case], "Agent[Any]"]
"""Builds the agent one run of a case runs on (called once per case and repeat), for
evaluations whose cases each need their own tools, model or policy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """A dataset with the agent its cases run on and the evaluators that score them.

    What `legato eval module:attribute` runs (the attribute is a `Suite`, or a function
    returning one whose keyword arguments `--set key=value` gives).
    """

    name: str
    dataset: Dataset
    agent: Agent[Any] | AgentFactory
    evaluators: tuple[Evaluator, ...] = ()
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: {})


def run_id_of(eval_id: str, case_id: str, repeat: int, attempt: int = 0) -> str:
    """The id of a case's run in the evaluation's store."""
    return f"eval:{eval_id}:{case_id}:{repeat}:{attempt}"


def _latest_attempt(store: Store, eval_id: str, case_id: str, repeat: int) -> int | None:
    latest: int | None = None
    for attempt in itertools.count():
        if store.run_info(run_id_of(eval_id, case_id, repeat, attempt)) is None:
            return latest
        latest = attempt
    return latest  # pragma: no cover - itertools.count never ends


def _figures(journal: Journal) -> tuple[float | None, int, float]:
    """Cost, tokens and latency of a run, from its journal."""
    costs: list[float] = []
    tokens = 0
    latency = 0.0
    for event in journal:
        if isinstance(event, ModelResponded):
            usage = event.response.usage
            tokens += usage.input_tokens + usage.output_tokens
            latency += event.duration
            if event.response.cost is not None:
                costs.append(event.response.cost)
        elif isinstance(event, ToolCallFinished):
            latency += event.duration
    return (sum(costs) if costs else None), tokens, latency


@dataclass(kw_only=True)
class _Evaluation:
    """One evaluation in progress (shared by `evaluate` and `replay`)."""

    dataset: Dataset
    store: Store
    eval_id: str
    evaluators: Sequence[Evaluator]
    budget: Budget | None
    on_result: ResultCallback | None

    async def score(
        self,
        case: Case,
        journal: Journal,
        *,
        repeat: int,
        run_id: str,
        reused: bool,
        kept: Mapping[str, Score] | None = None,
    ) -> CaseResult:
        """Score a finished (or failed) run from its journal.

        `kept`: scores this run already has, by name; one whose version is the version of
        the evaluator of that name is kept instead of evaluated again.
        """
        cost, tokens, latency = _figures(journal)
        base = CaseResult(
            case_id=case.id,
            repeat=repeat,
            run_id=run_id,
            cost=cost,
            tokens=tokens,
            latency=latency,
            reused=reused,
            tags=case.tags,
        )
        end = journal.events[-1] if len(journal) else None
        if isinstance(end, RunFailed):
            status: Status = "budget" if end.error_type == "BudgetExceeded" else "error"
            return _with(base, status=status, error=f"{end.error_type}: {end.message}")
        if not isinstance(end, RunFinished):
            return _with(base, status="error", error="the run did not finish")
        context = EvalContext(case=case, output=end.output, journal=journal, budget=self.budget)
        evaluators = (*case_evaluators(case), *self.evaluators)
        scores = [await self._one(e, context, kept or {}) for e in evaluators]
        return _with(base, status="ok", output=end.output, scores=tuple(scores))

    async def _one(
        self, evaluator: Evaluator, context: EvalContext, kept: Mapping[str, Score]
    ) -> Score:
        name = getattr(evaluator, "name", type(evaluator).__name__)
        version = evaluator_version(evaluator)
        before = kept.get(name)
        if version and before is not None and before.version == version:
            return replace(before, cost=0.0)  # the same evaluator on the same journal
        try:
            score = await evaluator.evaluate(context)
        except BudgetExceeded as exc:
            return Score(name=name, passed=None, reason=f"the budget ran out: {exc}")
        except Exception as exc:  # an evaluator's bug marks this case, the rest goes on
            return Score(name=name, passed=None, reason=f"{type(exc).__name__}: {exc}")
        return replace(score, version=version)

    def emit(self, result: CaseResult) -> CaseResult:
        if self.on_result is not None:
            self.on_result(result)
        return result

    def report(self, results: Sequence[CaseResult], *, agent: str, model: str) -> EvalReport:
        order = {c.id: i for i, c in enumerate(self.dataset.cases)}
        ordered = sorted(results, key=lambda r: (order.get(r.case_id, 0), r.repeat))
        return EvalReport(
            eval_id=self.eval_id,
            dataset=self.dataset.name,
            dataset_digest=self.dataset.digest,
            agent=agent,
            model=model,
            results=tuple(ordered),
            invalid=self.dataset.invalid,
            evaluators=tuple(getattr(e, "name", "?") for e in self.evaluators),
            judge_cost=sum(s.cost for r in ordered for s in r.scores),
        )


def _with(base: CaseResult, **changes: Any) -> CaseResult:
    return replace(base, **changes)


@dataclass(kw_only=True)
class _Runner(_Evaluation):
    agents: AgentFactory
    resume: bool
    names: tuple[str, str] = ("", "")
    """(agent, model) of the last agent built, for the report."""

    def agent_for(self, case: Case) -> Agent[Any]:
        agent = _with_store(self.agents(case), self.store)
        self.names = (agent.name, agent.model.name)
        return agent

    async def case(self, case: Case, repeat: int) -> CaseResult:
        store = self.store
        latest = _latest_attempt(store, self.eval_id, case.id, repeat)
        if self.resume and latest is not None:
            if self.budget is not None:  # every attempt stored was paid for: it counts, once
                for attempt in range(latest + 1):
                    paid = store.load_run(run_id_of(self.eval_id, case.id, repeat, attempt))
                    self.budget.count_spent(self.budget.spent_in(paid.events))
            run_id = run_id_of(self.eval_id, case.id, repeat, latest)
            journal = store.load_run(run_id)
            end = journal.events[-1] if len(journal) else None
            retry = isinstance(end, RunFailed) and end.error_type == "BudgetExceeded"
            if not retry:
                if isinstance(end, RunFinished | RunFailed):
                    return await self.score(
                        case, journal, repeat=repeat, run_id=run_id, reused=True
                    )
                return await self._continue(case, repeat, run_id)
        attempt = 0 if latest is None else latest + 1
        return await self._fresh(case, repeat, run_id_of(self.eval_id, case.id, repeat, attempt))

    async def _fresh(self, case: Case, repeat: int, run_id: str) -> CaseResult:
        try:
            await self.agent_for(case).run(case.input, run_id=run_id, budget=self.budget)
        except Exception as exc:  # a run that fails marks its case; the rest goes on
            return await self._after_failure(case, repeat, run_id, exc)
        return await self.score(
            case, self.store.load_run(run_id), repeat=repeat, run_id=run_id, reused=False
        )

    async def _continue(self, case: Case, repeat: int, run_id: str) -> CaseResult:
        """Continue a run that was cut off mid-flight (its finished calls are not made again)."""
        try:
            await self.agent_for(case).resume(run_id, budget=self.budget)
        except Exception as exc:  # as for a fresh run
            return await self._after_failure(case, repeat, run_id, exc)
        return await self.score(
            case, self.store.load_run(run_id), repeat=repeat, run_id=run_id, reused=False
        )

    async def _after_failure(
        self, case: Case, repeat: int, run_id: str, exc: Exception
    ) -> CaseResult:
        try:
            journal = self.store.load_run(run_id)
        except JournalError:
            journal = Journal()
        if len(journal) and isinstance(journal.events[-1], RunFailed):
            return await self.score(case, journal, repeat=repeat, run_id=run_id, reused=False)
        status: Status = "budget" if isinstance(exc, BudgetExceeded) else "error"
        return CaseResult(
            case_id=case.id,
            repeat=repeat,
            run_id=run_id if len(journal) else None,
            status=status,
            error=f"{type(exc).__name__}: {exc}",
            tags=case.tags,
        )


def _check(repeats: int, concurrency: int) -> None:
    if repeats < 1:
        msg = "repeats must be at least 1"
        raise ConfigurationError(msg)
    if concurrency < 1:
        msg = "concurrency must be at least 1"
        raise ConfigurationError(msg)


def _default_store(store: Store | None) -> Store:
    if store is not None:
        return store
    from legato.store import SQLiteStore

    return SQLiteStore()


async def evaluate(
    agent: Agent[Any] | AgentFactory,
    dataset: Dataset,
    /,
    *,
    eval_id: str,
    evaluators: Sequence[Evaluator] = (),
    store: Store | None = None,
    repeats: int = 1,
    concurrency: int = 4,
    budget: Budget | None = None,
    resume: bool = True,
    on_result: ResultCallback | None = None,
    tracing: bool = False,
    tracer_provider: Any | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
) -> EvalReport:
    """Run `agent` on every case of `dataset` (`repeats` times each) and score the runs.

    `agent` is an `Agent`, or an `AgentFactory` called for each (case, repeat) when cases
    need an agent of their own (their own tools, model or policy).

    Each case's checks (`Case.checks`, its `expected`) are evaluated, then `evaluators`.
    At most `concurrency` runs are in flight at once, and every run (and judge call)
    spends from the one `budget`. Journals go to `store` (default: the agent's store, else
    a `SQLiteStore` at `.legato/legato.db`) under ids derived from `eval_id`: calling `evaluate` again with
    the same id resumes it (finished runs are taken from the store without a model call,
    a run cut off mid-flight continues from its journal, a run stopped by the budget runs
    again). `resume=False` ignores what is stored and runs every case anew.

    `tracing=True` (or a `tracer_provider`) adds evaluation spans to the OpenTelemetry
    output (the `otel` extra): one for the evaluation, one per (case, repeat) under it,
    under which a traced agent's run spans nest.
    """
    _check(repeats, concurrency)
    from legato.agent import Agent

    if isinstance(agent, Agent):
        shared: Agent[Any] = cast("Agent[Any]", agent)
        chosen = _default_store(store if store is not None else shared.store)
        factory: AgentFactory = _same_agent(shared)
    else:
        chosen = _default_store(store)
        factory = agent
    runner = _Runner(
        dataset=dataset,
        store=chosen,
        eval_id=eval_id,
        evaluators=evaluators,
        budget=budget,
        on_result=on_result,
        agents=factory,
        resume=resume,
    )
    gate = asyncio.Semaphore(concurrency)
    spans = EvalSpans(tracer_provider) if tracing or tracer_provider is not None else None

    async def one(case: Case, repeat: int) -> CaseResult:
        async with gate:
            if spans is None:
                return runner.emit(await runner.case(case, repeat))
            with spans.case(case, repeat) as span:
                result = await runner.case(case, repeat)
                spans.record(span, result)
            return runner.emit(result)

    jobs = [one(case, repeat) for case in dataset.cases for repeat in range(repeats)]
    with spans.evaluation(eval_id, dataset) if spans is not None else contextlib.nullcontext():
        results = await asyncio.gather(*jobs)
        if isinstance(agent, Agent):
            runner.names = (cast("Agent[Any]", agent).name, cast("Agent[Any]", agent).model.name)
        report = runner.report(results, agent=runner.names[0], model=runner.names[1])
        if metadata:
            report = replace(report, metadata=dict(metadata))
        if spans is not None:
            spans.finish(report)
    return report


def _same_agent(agent: Agent[Any]) -> AgentFactory:
    def factory(case: Case) -> Agent[Any]:
        del case
        return agent

    return factory


def evaluate_sync(
    agent: Agent[Any] | AgentFactory, dataset: Dataset, /, **options: Any
) -> EvalReport:
    """`evaluate` for synchronous code (works inside a running event loop too)."""
    return run_sync(evaluate(agent, dataset, **options))


def _with_store(agent: Agent[Any], store: Store) -> Agent[Any]:
    """A shallow copy of `agent` that keeps its runs in `store` (the caller's agent is unchanged)."""
    clone = copy.copy(agent)
    clone.store = store
    return clone


async def replay(
    dataset: Dataset,
    /,
    *,
    eval_id: str,
    store: Store,
    evaluators: Sequence[Evaluator] = (),
    repeats: int = 1,
    budget: Budget | None = None,
    on_result: ResultCallback | None = None,
    previous: EvalReport | None = None,
) -> EvalReport:
    """Score the stored runs of evaluation `eval_id` again, with `evaluators`: no agent runs.

    No model is called (a judge among `evaluators` calls its own). A case with no stored
    run, or one still unfinished, is marked `missing`. Every score carries its
    evaluator's version (`evaluator_version`); given the `previous` report of these runs
    (a saved replay or evaluation), a score whose evaluator has the same version and whose
    run is the same is kept as it is, and only changed or new evaluators evaluate.
    """
    kept_scores: dict[str, dict[str, Score]] = {}
    if previous is not None:
        for before in previous.results:
            if before.run_id is not None:
                kept_scores[before.run_id] = {sc.name: sc for sc in before.scores}
    _check(repeats, 1)
    evaluation = _Evaluation(
        dataset=dataset,
        store=store,
        eval_id=eval_id,
        evaluators=evaluators,
        budget=budget,
        on_result=on_result,
    )
    results: list[CaseResult] = []
    agent = model = ""
    for case in dataset.cases:
        for repeat in range(repeats):
            latest = _latest_attempt(store, eval_id, case.id, repeat)
            journal = (
                store.load_run(run_id_of(eval_id, case.id, repeat, latest))
                if latest is not None
                else Journal()
            )
            end = journal.events[-1] if len(journal) else None
            if latest is None or not isinstance(end, RunFinished | RunFailed):
                missing = CaseResult(
                    case_id=case.id,
                    repeat=repeat,
                    status="missing",
                    error="no finished run of this case is stored",
                    tags=case.tags,
                )
                results.append(evaluation.emit(missing))
                continue
            first = journal.events[0]
            if isinstance(first, RunStarted):
                agent, model = first.agent, first.model
            run_id = run_id_of(eval_id, case.id, repeat, latest)
            scored = await evaluation.score(
                case,
                journal,
                repeat=repeat,
                run_id=run_id,
                reused=True,
                kept=kept_scores.get(run_id),
            )
            results.append(evaluation.emit(scored))
    return evaluation.report(results, agent=agent, model=model)
