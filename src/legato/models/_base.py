"""The `Model` protocol, the neutral request, settings, profiles and stream events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import field, fields, replace
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from legato._values import value_class
from legato.exceptions import StreamInterrupted
from legato.messages import (
    JsonValue,
    Message,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from legato.models.builtin import BuiltinKind, BuiltinTool

__all__ = [
    "Model",
    "ModelProfile",
    "ModelRequest",
    "ModelSettings",
    "ModelStreamEvent",
    "OutputSpec",
    "PricedModel",
    "ResponseCompleted",
    "SchemaDialect",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolChoice",
    "complete",
    "price_of",
]

ToolChoice: TypeAlias = "Literal['auto', 'required', 'none'] | str"
"""`auto` lets the model choose; `required` forces some tool; `none` forbids tools; any
other string forces the tool of that name."""

SchemaDialect = Literal["json_schema", "openai_strict", "anthropic", "gemini"]
"""Which rewrite of the neutral JSON schema a provider accepts (see `legato.models.dialects`)."""


@value_class
class ModelSettings:
    """Generation settings; None means "the provider's default"."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop_sequences: tuple[str, ...] | None = None
    seed: int | None = None
    parallel_tool_calls: bool | None = None
    """Allow several tool calls in one response (where the provider lets us choose)."""
    timeout: float | None = None
    """Seconds to wait for the whole response."""
    thinking_budget: int | None = None
    """Tokens the model may spend reasoning, for models that reason on request."""
    prompt_cache: bool | None = None
    """Mark the request's stable prefix for the provider's prompt cache where it must be
    asked for (Anthropic: the instructions, the tools and a rolling breakpoint on the
    history). None means the model's default, which is on; False turns it off."""
    builtin_tools: tuple[BuiltinTool, ...] | None = None
    """Tools the provider runs itself (`legato.models.builtin`: web search, web fetch, code
    execution, file search, MCP connectors); a provider without one raises
    `UnsupportedFeature` before sending."""
    extra_headers: Mapping[str, str] | None = None
    extra_body: Mapping[str, JsonValue] | None = None
    """Provider-specific request fields, merged into the wire body unchanged."""

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every non-None field of `override` taking precedence."""
        if override is None:
            return self
        changes = {
            f.name: getattr(override, f.name)
            for f in fields(override)
            if getattr(override, f.name) is not None
        }
        return replace(self, **changes) if changes else self


@value_class
class OutputSpec:
    """Ask the provider for JSON matching a schema (native structured output).

    A schema of `{"type": "object"}` alone asks for any JSON object ("JSON mode"): it goes
    as OpenAI's `json_object` format, Gemini's JSON MIME type without a schema, Ollama's
    `format: "json"` (see `OutputSpec.any_object`).
    """

    name: str
    schema: dict[str, JsonValue]
    description: str = ""
    strict: bool = True

    @classmethod
    def any_object(cls, name: str = "json_object") -> OutputSpec:
        """Any JSON object, no schema (JSON mode)."""
        return cls(name=name, schema={"type": "object"}, strict=False)

    @property
    def free_form(self) -> bool:
        """Whether any JSON object will do (the schema says nothing but `object`)."""
        return self.schema == {"type": "object"}


@value_class
class ModelRequest:
    """Everything a model needs for one call, in neutral form."""

    messages: tuple[Message, ...]
    instructions: str | None = None
    """The system prompt; providers place it where their wire format wants it."""
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice = "auto"
    settings: ModelSettings = field(default_factory=ModelSettings)
    output: OutputSpec | None = None
    """When set, the final answer must be JSON matching this schema."""


@value_class
class ModelProfile:
    """What a model can do. Behaviour branches on these flags, never on model names."""

    supports_tools: bool = True
    parallel_tool_calls: bool = True
    tool_choice_required: bool = True
    """The provider can force a tool call."""
    native_structured_output: bool = False
    supports_images: bool = True
    supports_documents: bool = False
    supports_thinking: bool = False
    schema_dialect: SchemaDialect = "json_schema"
    native_json_schema: bool = False
    """Besides its dialect, the provider takes standard JSON Schema (`$ref`, recursion,
    free-form objects) for tools and structured output, as Gemini does through
    `parametersJsonSchema` / `responseJsonSchema`; then the schema goes that way, unrewritten."""
    context_window: int | None = None
    max_output_tokens: int | None = None
    tokenizer: str | None = None
    """The tiktoken encoding of this model family (`o200k_base`, `cl100k_base`), if it has one."""
    builtin_tools: frozenset[BuiltinKind] = frozenset()
    """The tools the provider runs itself (`legato.models.builtin`), by kind."""
    tool_search: bool = False
    """The provider searches deferred tools itself (`ToolDefinition.defer_loading`)."""


# -- stream events --------------------------------------------------------------------------


@value_class
class ResponseCompleted:
    """The last event of every successful stream: the whole response."""

    response: ModelResponse
    kind: Literal["response_completed"] = "response_completed"


ModelStreamEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | ResponseCompleted
"""What `Model.stream` yields."""


@runtime_checkable
class Model(Protocol):
    """A model behind one wire API. Non-streaming use is a fold over `stream`."""

    @property
    def name(self) -> str:
        """`provider:model`, as the registry would resolve it."""
        ...

    @property
    def profile(self) -> ModelProfile:
        """What this model can do."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Send the request and yield events; the last one is `ResponseCompleted`."""
        ...


@runtime_checkable
class PricedModel(Protocol):
    """A model that can price a call before making it (every provider module can)."""

    def price(self, usage: Usage) -> float | None:
        """Dollars a call with this usage would cost; None when the price is unknown."""
        ...


def price_of(model: Model, usage: Usage) -> float | None:
    """What `model` would charge for `usage`; None when it cannot price calls."""
    return model.price(usage) if isinstance(model, PricedModel) else None


async def complete(model: Model, request: ModelRequest) -> ModelResponse:
    """Send a request and return the whole response (drains `model.stream`)."""
    stream = model.stream(request)
    try:
        async for event in stream:
            if isinstance(event, ResponseCompleted):
                return event.response
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    msg = f"{model.name}: the stream ended without a complete response"
    raise StreamInterrupted(msg)
