"""What an application answers when a server asks: sampling, elicitation, roots; progress.

Servers may ask the client to run the model (sampling) or to ask the user (elicitation).
legato routes both to handlers the application provides, as neutral values; with no
handler the capability is not advertised and the request is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from legato.messages import JsonValue, Message
from legato.models import Model, ModelRequest, ModelSettings

__all__ = [
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "ProgressHandler",
    "ProgressUpdate",
    "SamplingHandler",
    "SamplingRequest",
    "accept_defaults",
    "sample_with",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class SamplingRequest:
    """A server asks the client's model for a completion."""

    server: str
    """The name of the server asking."""
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    max_tokens: int = 0
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()


SamplingHandler: TypeAlias = Callable[[SamplingRequest], Awaitable[str | Message]]
"""Answers a sampling request with the assistant's text (or message). Raise to refuse."""


def sample_with(model: Model) -> SamplingHandler:
    """A sampling handler that answers with a legato model (e.g. the agent's own).

    The server's messages, system prompt, token limit, temperature and stop sequences
    are passed on; the server's model preferences are not (the application chose the model).
    """
    from legato.models import complete

    async def sample(request: SamplingRequest) -> Message:
        settings = ModelSettings(
            max_tokens=request.max_tokens or None,
            temperature=request.temperature,
            stop_sequences=request.stop_sequences or None,
        )
        response = await complete(
            model,
            ModelRequest(
                messages=request.messages, instructions=request.system_prompt, settings=settings
            ),
        )
        return response.message

    return sample


@dataclass(frozen=True, kw_only=True, slots=True)
class ElicitationRequest:
    """A server asks the user for structured input."""

    server: str
    message: str
    """What the server wants to know, for the user."""
    schema: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    """The JSON schema of the answer (a flat object of primitives, per the spec)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ElicitationResponse:
    """The user's answer: `accept` with content, `decline`, or `cancel`."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResponse]]
"""Answers an elicitation request."""


async def accept_defaults(request: ElicitationRequest) -> ElicitationResponse:
    """An elicitation handler that accepts with every default the schema declares.

    Useful for unattended runs and tests; a property without a default is left out.
    """
    props = request.schema.get("properties")
    content: dict[str, Any] = {}
    if isinstance(props, dict):
        for key, prop in props.items():
            if isinstance(prop, dict) and "default" in prop:
                content[key] = prop["default"]
    return ElicitationResponse(action="accept", content=content)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProgressUpdate:
    """A progress notification for a request in flight."""

    server: str
    tool: str | None
    """The (MCP) name of the tool being called, for tool calls."""
    tool_call_id: str | None
    """The id of the model's tool call, when the call came from a run."""
    progress: float
    total: float | None = None
    message: str | None = None


ProgressHandler: TypeAlias = Callable[[ProgressUpdate], Awaitable[None] | None]
"""Receives progress updates (sync or async)."""
