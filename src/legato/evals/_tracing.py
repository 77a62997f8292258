"""Evaluation spans in the OpenTelemetry output (the `otel` extra, imported only when used).

One `evaluation <id>` span for the whole evaluation, one `evaluate_case <case>` span per
(case, repeat) under it, with the result as attributes. A case's span is the current span
while its run goes, so the run's own GenAI spans (an agent traced with
`legato.tracing.GenAITracing` on the same provider) nest under it.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from legato.exceptions import MissingDependency

if TYPE_CHECKING:
    from legato.evals._dataset import Case, Dataset
    from legato.evals._results import CaseResult, EvalReport

__all__ = ["EvalSpans"]


class EvalSpans:
    """Spans of one evaluation on `tracer_provider` (None: the global provider)."""

    def __init__(self, tracer_provider: Any | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError:
            package = "opentelemetry-api"
            raise MissingDependency(package, "otel") from None
        from legato._version import __version__

        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._trace = trace
        self._tracer = provider.get_tracer("legato.evals", __version__)
        self._root: Any = None

    @contextmanager
    def evaluation(self, eval_id: str, dataset: Dataset) -> Generator[None]:
        """The span of the whole evaluation."""
        attributes = {
            "legato.eval.id": eval_id,
            "legato.eval.dataset": dataset.name,
            "legato.eval.dataset_digest": dataset.digest,
            "legato.eval.cases": len(dataset.cases),
            "legato.eval.invalid_cases": len(dataset.invalid),
        }
        self._root = self._tracer.start_span(f"evaluation {eval_id}", attributes=attributes)
        try:
            yield
        finally:
            self._root.end()

    def finish(self, report: EvalReport) -> None:
        """Put the totals on the evaluation's span."""
        if self._root is None:
            return
        for name, count in report.counts.items():
            self._root.set_attribute(f"legato.eval.{name}", count)
        if report.pass_rate is not None:
            self._root.set_attribute("legato.eval.pass_rate", report.pass_rate)
        interval = report.pass_rate_interval
        if interval is not None:
            self._root.set_attribute("legato.eval.pass_rate_low", interval[0])
            self._root.set_attribute("legato.eval.pass_rate_high", interval[1])

    @contextmanager
    def case(self, case: Case, repeat: int) -> Generator[Any]:
        """A case's span, current while its run goes (yields it for `record`)."""
        trace = self._trace
        context = trace.set_span_in_context(self._root) if self._root is not None else None
        attributes = {"legato.eval.case": case.id, "legato.eval.repeat": repeat}
        span = self._tracer.start_span(
            f"evaluate_case {case.id}", context=context, attributes=attributes
        )
        with trace.use_span(span, end_on_exit=True):
            yield span

    def record(self, span: Any, result: CaseResult) -> None:
        """Put a case's result on its span."""
        span.set_attribute("legato.eval.status", result.status)
        span.set_attribute("legato.eval.reused", result.reused)
        if result.run_id is not None:
            span.set_attribute("legato.run.id", result.run_id)
        if result.passed is not None:
            span.set_attribute("legato.eval.passed", result.passed)
        for score in result.scores:
            if score.passed is not None:
                span.set_attribute(f"legato.eval.score.{score.name}", score.passed)
        if result.status != "ok":
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, result.error))
