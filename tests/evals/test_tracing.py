"""Evaluation spans in the OpenTelemetry output; a traced agent's run spans nest under them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from legato import Agent
from legato.evals import Case, Dataset, evaluate_sync, wilson
from legato.store import SQLiteStore
from legato.testing import FunctionModel
from legato.tracing import GenAITracing


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


DATASET = Dataset(
    name="two",
    cases=(Case(id="a", input="a", expected="echo a"), Case(id="b", input="b", expected="no")),
)


def test_an_evaluation_span_holds_a_span_per_case_and_the_runs_nest_under_them(
    spans: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    provider, exporter = spans
    model = FunctionModel(lambda r: f"echo {r.messages[-1].text}")
    agent = Agent(model, hooks=[GenAITracing(tracer_provider=provider)])
    evaluate_sync(
        agent,
        DATASET,
        eval_id="t",
        store=SQLiteStore(tmp_path / "e.db"),
        tracer_provider=provider,
        concurrency=2,
    )
    finished = exporter.get_finished_spans()
    (root,) = [s for s in finished if s.name == "evaluation t"]
    assert root.attributes is not None
    assert root.attributes["legato.eval.passed"] == 1
    assert root.attributes["legato.eval.failed"] == 1
    low, high = wilson(1, 2)
    assert root.attributes["legato.eval.pass_rate_low"] == pytest.approx(low)
    assert root.attributes["legato.eval.pass_rate_high"] == pytest.approx(high)
    cases = {s.name: s for s in finished if s.name.startswith("evaluate_case")}
    assert set(cases) == {"evaluate_case a", "evaluate_case b"}
    for span in cases.values():
        assert span.parent is not None and root.context is not None
        assert span.parent.span_id == root.context.span_id
    b = cases["evaluate_case b"]
    assert b.attributes is not None and b.attributes["legato.eval.passed"] is False
    runs = [s for s in finished if s.name.startswith("invoke_agent")]
    assert len(runs) == 2
    case_ids = {s.context.span_id for s in cases.values() if s.context is not None}
    assert all(r.parent is not None and r.parent.span_id in case_ids for r in runs)


def test_without_tracing_the_runs_are_traced_alone(
    spans: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    provider, exporter = spans
    agent = Agent(FunctionModel(lambda r: "x"), hooks=[GenAITracing(tracer_provider=provider)])
    evaluate_sync(agent, DATASET, eval_id="t", store=SQLiteStore(tmp_path / "e.db"))
    finished = exporter.get_finished_spans()
    assert not [s for s in finished if "evaluat" in s.name]
    runs = [s for s in finished if s.name.startswith("invoke_agent")]
    assert len(runs) == 2 and all(r.parent is None for r in runs)
