"""examples/eval_tool_calling.py: the bench's tool-calling prompts as an evaluation."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from legato.evals import Dataset
from legato.messages import ModelResponse
from legato.models import ModelRequest
from legato.testing import FunctionModel, call, reply

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example() -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLES / "eval_tool_calling.py"), run_name="eval_example")


def test_the_dataset_is_valid_and_the_scripted_model_passes_every_case(
    example: dict[str, Any], tmp_path: Path
) -> None:
    dataset = Dataset.from_file(EXAMPLES / "tool_calling.yaml")
    assert len(dataset.cases) == 6 and dataset.invalid == ()
    report = example["run"](example["scripted_model"](), store_path=tmp_path / "e.db")
    assert report.counts["passed"] == 6, [r.scores for r in report.results if not r.passed]
    names = {s.name for r in report.results for s in r.scores}
    assert {"right_arguments", "tool_calls", "max_tool_calls"} <= names


def test_a_model_with_the_wrong_arguments_fails_on_them_alone(
    example: dict[str, Any], tmp_path: Path
) -> None:
    def careless(request: ModelRequest) -> ModelResponse | str:
        if len(request.messages) == 1:
            return reply(call("get_weather", {"city": "Lyon"}))
        return "It is rain and humid, 90 45 Monday Friday."

    report = example["run"](FunctionModel(careless), store_path=tmp_path / "e.db")
    weather = report.results[0]
    failed = {s.name for s in weather.scores if s.passed is False}
    assert failed == {"right_arguments"}
    assert "city" in next(s.reason for s in weather.scores if s.name == "right_arguments")
    reminder = report.results[4]  # the wrong tool for a reminder
    assert {s.name for s in reminder.scores if s.passed is False} == {
        "right_arguments",
        "tool_calls",
    }


@pytest.mark.slow
def test_the_local_model_calls_the_right_tool_with_the_right_arguments(
    example: dict[str, Any], tmp_path: Path
) -> None:
    """SmolLM2-135M in process (greedy): the figures docs/evals.md publishes, on two cases."""
    report = example["run"](
        example["local_model"](),
        store_path=tmp_path / "e.db",
        cases=["remind-monday", "convert-usd"],
    )
    assert report.model == "llamacpp:smollm2" and report.counts["error"] == 0
    for result in report.results:
        verdicts = {s.name: s.passed for s in result.scores}
        assert verdicts["right_arguments"] and verdicts["tool_calls"], result.scores
    assert report.results[0].tokens > 0 and report.results[0].latency > 0
