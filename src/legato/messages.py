"""Neutral conversation values shared by every provider.

A conversation is a sequence of `Message` values; each message holds parts. Every value
is an immutable, keyword-only dataclass with a literal `kind` tag, so a list of them
round-trips exactly through JSON (`messages_to_json` / `messages_from_json`).

Provider-specific data that must be echoed back on the next request (a response id,
an encrypted reasoning blob) goes in `provider_details`, the one escape hatch; nothing
else here knows about any provider.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import ConfigDict
from typing_extensions import TypeAliasType

from legato._values import value_class

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter

__all__ = [
    "ContentPart",
    "DocumentPart",
    "ImagePart",
    "JsonValue",
    "Message",
    "ModelResponse",
    "Part",
    "Role",
    "StopReason",
    "TextDelta",
    "TextPart",
    "ThinkingDelta",
    "ThinkingPart",
    "ToolCallDelta",
    "ToolCallPart",
    "ToolDefinition",
    "ToolResultPart",
    "Usage",
    "messages_from_json",
    "messages_to_json",
    "parse_arguments",
]

if TYPE_CHECKING:
    JsonValue: TypeAlias = (
        "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
    )
else:
    JsonValue = TypeAliasType(
        "JsonValue",
        "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]",
    )
"""A value that JSON can represent."""

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from. Tool results travel in `tool` messages."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


_BYTES_AS_BASE64 = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")


class _TaggedByKind:
    """`Annotated` metadata: the union is tagged by its members' `kind` field.

    The same as `Field(discriminator="kind")`, which it hands pydantic when a schema is
    first built: importing `pydantic.fields` (and `pydantic.types`, `annotated_types`) is left
    to the first validation instead of every `import legato.messages`.
    """

    __slots__ = ()

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        from pydantic import Field

        return handler.generate_schema(Annotated[source, Field(discriminator="kind")])

    def __repr__(self) -> str:
        return "TaggedByKind()"


TAGGED_BY_KIND = _TaggedByKind()
"""The discriminator of legato's tagged unions (`kind`)."""


# -- parts -----------------------------------------------------------------------------------


@value_class
class TextPart:
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@value_class
class ImagePart:
    """An image, given inline as bytes or by URL."""

    media_type: str = "image/png"
    """MIME type, e.g. `image/png`."""
    data: bytes | None = None
    """The image bytes, when inline."""
    url: str | None = None
    """Where the provider can fetch the image, when not inline."""
    kind: Literal["image"] = "image"

    __pydantic_config__ = _BYTES_AS_BASE64

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            msg = "an ImagePart needs exactly one of data= or url="
            raise ValueError(msg)

    @property
    def base64(self) -> str | None:
        """The inline bytes as base64 text, or None for a URL image."""
        return _b64(self.data)


@value_class
class DocumentPart:
    """A document (PDF, plain text, ...), given inline as bytes or by URL."""

    media_type: str = "application/pdf"
    """MIME type, e.g. `application/pdf`."""
    data: bytes | None = None
    """The document bytes, when inline."""
    url: str | None = None
    """Where the provider can fetch the document, when not inline."""
    title: str | None = None
    """An optional title shown to the model."""
    kind: Literal["document"] = "document"

    __pydantic_config__ = _BYTES_AS_BASE64

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            msg = "a DocumentPart needs exactly one of data= or url="
            raise ValueError(msg)

    @property
    def base64(self) -> str | None:
        """The inline bytes as base64 text, or None for a URL document."""
        return _b64(self.data)


@value_class
class ThinkingPart:
    """The model's reasoning, as far as the provider reveals it.

    `signature` is opaque; it is sent back unchanged, and only to the provider named in
    `provider`, which needs it to continue a reasoning chain.
    """

    text: str = ""
    signature: str | None = None
    """Opaque provider token proving the reasoning is unmodified."""
    redacted: bool = False
    """The provider withheld the text; `signature` carries the encrypted content."""
    provider: str | None = None
    """The provider that produced this part; its signature is meaningless elsewhere."""
    kind: Literal["thinking"] = "thinking"


@value_class
class ToolCallPart:
    """The model asks for a tool to be called."""

    id: str
    """The call id the provider assigned; results refer to it."""
    name: str
    """The tool's name."""
    arguments: JsonValue = None
    """The arguments parsed from `raw_arguments`; None when they are not valid JSON."""
    raw_arguments: str = "{}"
    """The argument text exactly as the model produced it."""
    kind: Literal["tool_call"] = "tool_call"

    @classmethod
    def from_raw(cls, *, id: str, name: str, raw_arguments: str) -> ToolCallPart:
        """Build a call from the model's argument text, parsing it when it is valid JSON."""
        return cls(
            id=id, name=name, arguments=parse_arguments(raw_arguments), raw_arguments=raw_arguments
        )

    @classmethod
    def from_arguments(
        cls, *, id: str, name: str, arguments: Mapping[str, JsonValue]
    ) -> ToolCallPart:
        """Build a call from already-parsed arguments."""
        args = dict(arguments)
        return cls(
            id=id, name=name, arguments=args, raw_arguments=json.dumps(args, ensure_ascii=False)
        )


ContentPart: TypeAlias = Annotated[TextPart | ImagePart | DocumentPart, TAGGED_BY_KIND]
"""What a user message or a tool result may contain."""


@value_class
class ToolResultPart:
    """The outcome of one tool call, sent back to the model."""

    call_id: str
    """The `ToolCallPart.id` this answers."""
    name: str
    """The tool's name (some providers need it)."""
    content: tuple[ContentPart, ...] = ()
    """What the tool returned, as parts."""
    is_error: bool = False
    """True when the content describes a failure the model should react to."""
    kind: Literal["tool_result"] = "tool_result"

    @classmethod
    def text_result(
        cls, *, call_id: str, name: str, text: str, is_error: bool = False
    ) -> ToolResultPart:
        """A result made of one piece of text."""
        return cls(call_id=call_id, name=name, content=(TextPart(text=text),), is_error=is_error)

    @property
    def text(self) -> str:
        """All text content joined; non-text parts are left out."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


Part: TypeAlias = Annotated[
    TextPart | ImagePart | DocumentPart | ThinkingPart | ToolCallPart | ToolResultPart,
    TAGGED_BY_KIND,
]
"""Any part of a message."""


# -- messages --------------------------------------------------------------------------------


@value_class
class Message:
    """One message of a conversation."""

    role: Role
    parts: tuple[Part, ...] = ()
    provider_details: dict[str, JsonValue] | None = None
    """Provider data to echo back unchanged (the only provider-specific field)."""

    @classmethod
    def user(cls, content: str | Sequence[TextPart | ImagePart | DocumentPart]) -> Message:
        """A user message from text or parts."""
        parts: tuple[Part, ...] = (
            (TextPart(text=content),) if isinstance(content, str) else tuple(content)
        )
        return cls(role="user", parts=parts)

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls(role="system", parts=(TextPart(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message made of one piece of text."""
        return cls(role="assistant", parts=(TextPart(text=text),))

    @property
    def text(self) -> str:
        """The message's text parts joined."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls in this message, in the order the model issued them."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool results in this message."""
        return [p for p in self.parts if isinstance(p, ToolResultPart)]


class StopReason(StrEnum):
    """Why the model stopped generating."""

    END_TURN = "end_turn"
    TOOL_CALLS = "tool_calls"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"


@value_class
class Usage:
    """Token counts of one or more model calls; `a + b` sums them."""

    input_tokens: int = 0
    """Prompt tokens, including cached ones."""
    output_tokens: int = 0
    """Generated tokens, including reasoning tokens."""
    cache_read_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's cache."""
    reasoning_tokens: int = 0
    """Generated tokens spent on hidden reasoning."""
    requests: int = 0
    """Model calls counted."""
    web_searches: int = 0
    """Searches the provider ran itself (its web search tool), billed per search on top of
    the tokens; their fee is in the call's cost."""
    cache_savings: float = 0.0
    """US dollars the provider's prompt cache saved: the price of these calls had every prompt
    token been billed at the plain input rate, less their actual price (cache reads are cheaper,
    cache writes dearer, so one write-only call is negative). 0 when prices are unknown."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            requests=self.requests + other.requests,
            web_searches=self.web_searches + other.web_searches,
            cache_savings=self.cache_savings + other.cache_savings,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@value_class
class ModelResponse:
    """One complete answer from a model: the assistant message plus what it cost."""

    message: Message
    """The assistant message."""
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason = StopReason.END_TURN
    model_name: str = ""
    """The model that answered, as the provider names it."""
    cost: float | None = None
    """Price of this call in US dollars, when known."""
    provider_response_id: str | None = None


@value_class
class ToolDefinition:
    """What a model is told about a tool: a name, a description and a JSON schema.

    This is the neutral form; each provider applies its own schema dialect to
    `parameters` at the wire.
    """

    name: str
    description: str = ""
    parameters: dict[str, JsonValue] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """JSON schema of the arguments object."""
    strict: bool | None = None
    """Ask for strict schema adherence where the provider supports it."""
    defer_loading: bool = False
    """Keep the tool out of the model's context until the provider's own tool search finds
    it (Anthropic's tool search, OpenAI's `defer_loading`); a provider without one is not
    sent the tool (legato's catalog search, below, loads it there)."""
    search_fallback: bool = False
    """legato's own tool search (`ToolCatalog`'s `search_tools`): sent only to providers
    without a tool search of their own, when deferred tools are in the request."""


def parse_arguments(raw: str) -> JsonValue:
    """Parse a model's argument text; empty text means no arguments; invalid JSON gives None."""
    if not raw.strip():
        return {}
    try:
        value: JsonValue = json.loads(raw)
    except ValueError:
        return None
    return value


# -- JSON round-trip ---------------------------------------------------------------------------


@cache
def _messages_adapter() -> TypeAdapter[list[Message]]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[Message])


def messages_to_json(messages: Sequence[Message]) -> str:
    """Serialize messages to JSON text (bytes as base64)."""
    return _messages_adapter().dump_json(list(messages)).decode()


def messages_from_json(text: str | bytes) -> list[Message]:
    """Rebuild messages from `messages_to_json` output."""
    return _messages_adapter().validate_json(text)


# -- stream deltas: pieces of a response as it streams (models yield them, runs stream them) --


@value_class
class TextDelta:
    """A piece of answer text."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@value_class
class ThinkingDelta:
    """A piece of reasoning text."""

    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@value_class
class ToolCallDelta:
    """A piece of a tool call: its start (with name and id) or a fragment of its arguments."""

    index: int
    """Position of the call among this response's calls (0, 1, ...)."""
    id: str | None = None
    name: str | None = None
    """Set on the first delta of a call."""
    arguments_delta: str = ""
    kind: Literal["tool_call_delta"] = "tool_call_delta"
