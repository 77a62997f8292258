"""Datasets: YAML, JSONL and Python; a refused case is kept with its reason; the published schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from legato.evals import Case, Dataset, dataset_schema
from legato.exceptions import ConfigurationError

DOCS = Path(__file__).resolve().parents[2] / "docs"

YAML = """
name: capitals
cases:
  - id: paris
    input: Capital of France?
    expected: Paris
    tags: [geo]
    metadata: {difficulty: 1}
  - id: rome
    input: Capital of Italy?
    checks:
      contains: [Rome]
      max_tool_calls: 0
  - id: broken
    input: Capital of Spain?
    checks: {contains: Madrid, surprise: 1}
  - input: no id here
"""


def test_yaml_cases_load_and_a_refused_case_is_marked_with_its_reason() -> None:
    dataset = Dataset.from_yaml(YAML)
    assert dataset.name == "capitals"
    assert [c.id for c in dataset.cases] == ["paris", "rome"]
    paris = dataset.cases[0]
    assert paris.expected == "Paris" and paris.tags == ("geo",)
    assert paris.metadata == {"difficulty": 1}
    assert dataset.cases[1].checks.contains == ["Rome"]
    broken, anonymous = dataset.invalid
    assert (broken.position, broken.id) == (2, "broken")
    assert "checks.contains" in broken.reason
    assert (anonymous.position, anonymous.id) == (3, None)
    assert anonymous.reason.startswith("id:")


def test_jsonl_lines_are_cases_and_a_line_that_is_not_json_is_refused() -> None:
    text = (
        json.dumps({"id": "a", "input": "one"})
        + "\n{not json\n"
        + json.dumps({"id": "a", "input": "again"})
        + "\n"
    )
    dataset = Dataset.from_jsonl(text, name="lines")
    assert [c.id for c in dataset.cases] == ["a"]
    first, second = dataset.invalid
    assert first.position == 1 and first.reason.startswith("not JSON")
    assert second.position == 2 and "earlier case" in second.reason


def test_from_file_reads_by_suffix(tmp_path: Path) -> None:
    (tmp_path / "set.yaml").write_text(YAML, encoding="utf-8")
    (tmp_path / "set.jsonl").write_text('{"id": "x", "input": "y"}\n', encoding="utf-8")
    assert Dataset.from_file(tmp_path / "set.yaml").name == "capitals"
    lines = Dataset.from_file(tmp_path / "set.jsonl")
    assert lines.name == "set" and lines.cases[0].input == "y"
    with pytest.raises(ConfigurationError, match="cannot read"):
        Dataset.from_file(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- just a list", "mapping"),
        ("cases: 3", "must be a list"),
        ("cases: []\nextra: 1", "unknown key 'extra'"),
        ("cases: [", "not valid YAML"),
    ],
)
def test_a_file_that_is_not_a_dataset_is_a_typed_error(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Dataset.from_yaml(text)


def test_python_cases_and_duplicate_ids() -> None:
    dataset = Dataset(cases=(Case(id="a", input="x"), Case(id="b", input="y")))
    assert dataset.select(["b"]).cases[0].id == "b"
    with pytest.raises(ConfigurationError, match="two cases"):
        Dataset(cases=(Case(id="a", input="x"), Case(id="a", input="y")))


def test_digest_changes_with_a_case_and_not_with_metadata() -> None:
    one = Dataset(cases=(Case(id="a", input="x", metadata={"k": 1}),))
    same = Dataset(cases=(Case(id="a", input="x", metadata={"k": 2}),))
    other = Dataset(cases=(Case(id="a", input="z"),))
    assert one.digest == same.digest != other.digest


def test_the_published_schema_is_current_and_refuses_unknown_keys() -> None:
    published = json.loads((DOCS / "evals.schema.json").read_text(encoding="utf-8"))
    assert published == dataset_schema()
    good = {"name": "n", "cases": [{"id": "a", "input": "x", "checks": {"contains": ["y"]}}]}
    jsonschema.validate(good, published)
    bad = {"cases": [{"id": "a", "input": "x", "typo": 1}]}
    with pytest.raises(jsonschema.ValidationError, match="typo"):
        jsonschema.validate(bad, published)
