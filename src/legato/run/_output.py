"""Structured output: the schema a run's final answer must match, and its validation."""

from __future__ import annotations

import json
from typing import Any, Generic, Literal, TypeAlias, cast

from pydantic import PydanticUserError, TypeAdapter, ValidationError
from typing_extensions import TypeVar

from legato._values import value_class
from legato.exceptions import ConfigurationError
from legato.messages import JsonValue, ToolDefinition
from legato.models import OutputSpec

__all__ = ["OUTPUT_TOOL", "OutputMode", "OutputSchema", "OutputValidationError"]

OutputT = TypeVar("OutputT", default=str)

OutputMode: TypeAlias = Literal["tool", "native"]
"""`tool`: the model calls a `final_result` tool whose arguments are the output.
`native`: the provider's JSON mode constrains the final text (falls back to `tool` for
models without it)."""

OUTPUT_TOOL = "final_result"
"""The name of the tool that carries structured output."""


class OutputValidationError(Exception):
    """Internal: the model's output did not validate; `message` goes back to the model."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: (
                _strip_titles(v)
                if k != "properties"
                else {pk: _strip_titles(pv) for pk, pv in cast(dict[str, Any], v).items()}
            )
            for k, v in cast(dict[str, Any], node).items()
            if k != "title"
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in cast(list[Any], node)]
    return node


def _problems(exc: ValidationError) -> str:
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "output"
        lines.append(f"- {loc}: {err['msg']}")
    return "\n".join(lines)


@value_class
class OutputSchema(Generic[OutputT]):
    """How a run's final answer is obtained and checked."""

    output_type: type[OutputT]
    mode: OutputMode
    adapter: TypeAdapter[OutputT] | None
    """None for plain text output."""
    parameters: dict[str, JsonValue] | None
    """The JSON schema of the output tool's arguments (or of the native JSON answer)."""
    wrapped: bool
    """Non-object outputs travel wrapped as `{"response": value}`."""

    @classmethod
    def build(cls, output_type: type[OutputT], mode: OutputMode = "tool") -> OutputSchema[OutputT]:
        """Prepare validation for `output_type` (str means free text)."""
        if output_type is str:
            return cls(
                output_type=output_type, mode=mode, adapter=None, parameters=None, wrapped=False
            )
        try:
            adapter = TypeAdapter(output_type)
            schema = cast(dict[str, JsonValue], _strip_titles(adapter.json_schema()))
        except PydanticUserError as exc:  # also covers schema generation errors
            msg = f"output_type {output_type!r} cannot be validated or described: {exc}"
            raise ConfigurationError(msg) from exc
        wrapped = schema.get("type") != "object"
        if wrapped:
            defs = schema.pop("$defs", None)
            outer: dict[str, JsonValue] = {
                "type": "object",
                "properties": {"response": schema},
                "required": ["response"],
                "additionalProperties": False,
            }
            if defs is not None:
                outer["$defs"] = defs
            schema = outer
        return cls(
            output_type=output_type, mode=mode, adapter=adapter, parameters=schema, wrapped=wrapped
        )

    @property
    def is_text(self) -> bool:
        """Whether the output is free text."""
        return self.adapter is None

    def tool_definition(self) -> ToolDefinition | None:
        """The `final_result` tool, when output travels through a tool call."""
        if self.parameters is None or self.mode != "tool":
            return None
        return ToolDefinition(
            name=OUTPUT_TOOL,
            description="Call this tool once to give your final answer.",
            parameters=self.parameters,
        )

    def native_spec(self) -> OutputSpec | None:
        """The provider-side JSON schema, when native mode is used."""
        if self.parameters is None or self.mode != "native":
            return None
        return OutputSpec(name=OUTPUT_TOOL, schema=self.parameters)

    def validate_arguments(self, arguments: JsonValue) -> OutputT:
        """Validate the `final_result` call's arguments."""
        assert self.adapter is not None
        if not isinstance(arguments, dict):
            msg = "the final_result arguments must be a JSON object"
            raise OutputValidationError(msg)
        value: JsonValue = arguments.get("response") if self.wrapped else arguments
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise OutputValidationError(_problems(exc)) from exc

    def validate_text(self, text: str) -> OutputT:
        """Validate a text answer (free text, or JSON in native mode)."""
        if self.adapter is None:
            return cast(OutputT, text)
        try:
            parsed: JsonValue = json.loads(text)
        except ValueError as exc:
            msg = f"the answer is not valid JSON: {exc}"
            raise OutputValidationError(msg) from exc
        return self.validate_arguments(parsed)

    def to_json(self, value: OutputT) -> JsonValue:
        """The JSON form of a validated output, as journaled."""
        if self.adapter is None:
            return cast(str, value)
        return cast(JsonValue, self.adapter.dump_python(value, mode="json"))

    def from_json(self, value: JsonValue) -> OutputT:
        """Rebuild a typed output from its journaled JSON form."""
        if self.adapter is None:
            return cast(OutputT, value)
        return self.adapter.validate_python(value)
