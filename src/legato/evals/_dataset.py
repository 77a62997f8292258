"""Cases and datasets: in Python, YAML or JSONL, validated one case at a time.

A dataset file is checked against `dataset_schema()` (published as
`docs/evals.schema.json`). A case that breaks it is kept aside as an `InvalidCase` with
the reason, and the other cases still run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from legato.exceptions import ConfigurationError, MissingDependency
from legato.messages import JsonValue

__all__ = ["Case", "Checks", "Dataset", "InvalidCase", "dataset_schema"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Checks(_Strict):
    """Properties a case's run must have, checked by the evaluators of the same name.

    Every field is optional; `case_evaluators` turns the ones a case sets into evaluators.
    """

    contains: list[str] = Field(default_factory=lambda: [])
    """Texts the output must contain."""
    matches: str | None = None
    """A regular expression the output must match (anywhere)."""
    json_schema: dict[str, JsonValue] | None = None
    """A JSON Schema the output (parsed when it is a JSON string) must satisfy."""
    tools_called: list[str] = Field(default_factory=lambda: [])
    """Tools the run must call, in this order (other calls may come between)."""
    tools_not_called: list[str] = Field(default_factory=lambda: [])
    """Tools the run must not call."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)
    """US dollars."""
    max_tokens: int | None = Field(default=None, ge=0)
    """Input and output tokens together."""
    max_latency: float | None = Field(default=None, ge=0)
    """Seconds of model and tool calls, as the journal records them."""
    no_contract_rejections: bool = False
    max_approvals: int | None = Field(default=None, ge=0)
    """Approval requests the run may make."""


class CaseSpec(_Strict):
    """One case, as written in a dataset file."""

    id: str = Field(min_length=1)
    """Unique within the dataset; a case's results are stored under it."""
    input: str = Field(min_length=1)
    """The prompt the agent runs on."""
    expected: JsonValue = None
    """The expected output (compared by `equals`); null when only properties are checked."""
    checks: Checks = Field(default_factory=Checks)
    metadata: dict[str, JsonValue] = Field(default_factory=lambda: {})
    tags: list[str] = Field(default_factory=lambda: [])


class DatasetSpec(_Strict):
    """A dataset file (YAML or JSON); JSONL files hold one case per line instead."""

    name: str = "dataset"
    cases: list[CaseSpec]


def dataset_schema() -> dict[str, Any]:
    """The JSON Schema of dataset files (for editors; each JSONL line is one `cases` item)."""
    schema = DatasetSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "legato evaluation dataset"
    return schema


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One input to evaluate the agent on, with what its run should produce."""

    id: str
    input: str
    expected: JsonValue = None
    """The expected output; None when only `checks` (or custom evaluators) decide."""
    checks: Checks = field(default_factory=Checks)
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidCase:
    """A case the schema refused: where it was and why (it is reported, never run)."""

    position: int
    """0-based index in the file (the line number less one for JSONL)."""
    id: str | None
    reason: str


def _case_of(spec: CaseSpec) -> Case:
    return Case(
        id=spec.id,
        input=spec.input,
        expected=spec.expected,
        checks=spec.checks,
        metadata=dict(spec.metadata),
        tags=tuple(spec.tags),
    )


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "case"
    return f"{where}: {first['msg']}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """Cases to evaluate (and those the schema refused, kept with the reason)."""

    name: str = "dataset"
    cases: tuple[Case, ...]
    invalid: tuple[InvalidCase, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                msg = f"dataset {self.name!r}: two cases have the id {case.id!r}"
                raise ConfigurationError(msg)
            seen.add(case.id)

    @classmethod
    def from_records(cls, records: Iterable[object], *, name: str = "dataset") -> Dataset:
        """Validate each record as a case; refused ones become `invalid` with the reason.

        A record whose id repeats an earlier case's is refused too.
        """
        cases: list[Case] = []
        invalid: list[InvalidCase] = []
        ids: set[str] = set()
        for position, record in enumerate(records):
            raw_id = cast(dict[str, object], record).get("id") if isinstance(record, dict) else None
            case_id = raw_id if isinstance(raw_id, str) else None
            try:
                spec = CaseSpec.model_validate(record)
            except ValidationError as exc:
                invalid.append(InvalidCase(position=position, id=case_id, reason=_reason(exc)))
                continue
            if spec.id in ids:
                reason = f"id: the id {spec.id!r} is used by an earlier case"
                invalid.append(InvalidCase(position=position, id=spec.id, reason=reason))
                continue
            ids.add(spec.id)
            cases.append(_case_of(spec))
        return cls(name=name, cases=tuple(cases), invalid=tuple(invalid))

    @classmethod
    def from_yaml(cls, text: str, *, name: str | None = None) -> Dataset:
        """A dataset from YAML (or JSON) text: a mapping with `name` and `cases`."""
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - pyyaml ships with the extra
            package = "pyyaml"
            raise MissingDependency(package, "evals") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            msg = f"the dataset is not valid YAML: {exc}"
            raise ConfigurationError(msg) from exc
        return cls._from_mapping(data, name=name)

    @classmethod
    def from_jsonl(cls, text: str, *, name: str = "dataset") -> Dataset:
        """A dataset from JSON lines, one case per line; a line that is not JSON is refused."""
        records: list[object] = []
        broken: dict[int, str] = {}
        for line in (raw for raw in text.split("\n") if raw.strip()):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                broken[len(records)] = f"not JSON: {exc.msg}"
                records.append(None)
        dataset = cls.from_records(records, name=name)
        invalid = [
            InvalidCase(position=i.position, id=i.id, reason=broken.get(i.position, i.reason))
            for i in dataset.invalid
        ]
        return cls(name=name, cases=dataset.cases, invalid=tuple(invalid))

    @classmethod
    def from_file(cls, path: str | Path) -> Dataset:
        """Load `.yaml`/`.yml`/`.json` (a mapping) or `.jsonl` (one case per line)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            msg = f"cannot read the dataset {str(path)!r}: {exc.strerror}"
            raise ConfigurationError(msg) from exc
        if path.suffix == ".jsonl":
            return cls.from_jsonl(text, name=path.stem)
        return cls.from_yaml(text, name=None)._named_if_default(path.stem)

    def _named_if_default(self, name: str) -> Dataset:
        if self.name != "dataset":
            return self
        return Dataset(name=name, cases=self.cases, invalid=self.invalid)

    @classmethod
    def _from_mapping(cls, data: object, *, name: str | None) -> Dataset:
        if not isinstance(data, dict):
            msg = "a dataset file is a mapping with 'cases' (a list of cases)"
            raise ConfigurationError(msg)
        mapping = {str(k): v for k, v in cast(dict[object, object], data).items()}
        unknown = sorted(set(mapping) - {"name", "cases"})
        if unknown:
            msg = f"unknown key {unknown[0]!r} in the dataset (expected 'name' and 'cases')"
            raise ConfigurationError(msg)
        cases = mapping.get("cases")
        if not isinstance(cases, list):
            msg = "the dataset's 'cases' must be a list"
            raise ConfigurationError(msg)
        given = mapping.get("name")
        title = name or (given if isinstance(given, str) else "dataset")
        return cls.from_records(cast(list[object], cases), name=title)

    @property
    def digest(self) -> str:
        """A SHA-256 of the cases (ids, inputs, expectations): changes when a case does."""
        payload = [
            {
                "id": c.id,
                "input": c.input,
                "expected": c.expected,
                "checks": c.checks.model_dump(mode="json"),
            }
            for c in self.cases
        ]
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def select(self, ids: Sequence[str]) -> Dataset:
        """Only the cases with these ids (in the dataset's order)."""
        wanted = set(ids)
        return Dataset(
            name=self.name, cases=tuple(c for c in self.cases if c.id in wanted), invalid=()
        )
