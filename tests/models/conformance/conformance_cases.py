"""The providers the conformance suite runs against: adding a provider = adding a case here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from legato.exceptions import ModelError
from legato.models import Model
from legato.models._provider import ProviderSettings
from legato.models.anthropic import AnthropicModel
from legato.models.gemini import GeminiModel
from legato.models.ollama import OllamaModel
from legato.models.openai_chat import OpenAIChatModel
from legato.models.openai_compatible import compatible_model
from legato.models.openai_responses import OpenAIResponsesModel
from legato.simulator import ErrorKind

Factory = Callable[[str, ProviderSettings], Model]


@dataclass(frozen=True, kw_only=True)
class Case:
    """One provider module as the suite sees it."""

    id: str
    api: str
    """The wire API the simulator should see (`RecordedRequest.api`)."""
    make: Factory
    """Build the model against a simulator URL with these settings."""
    model: str
    price_provider: str | None
    """genai-prices provider id the cost must come from; None means free (cost 0 or None)."""
    streams_arguments: bool = True
    """The wire streams argument fragments (Gemini and Ollama send each call whole)."""
    cached_tokens: bool = True
    reasoning_tokens: bool = True
    finish_filter: bool = True
    """The wire can say "content filtered" as a finish reason."""
    http_errors: frozenset[ErrorKind] = frozenset(
        {"rate_limit", "overloaded", "server", "context_length", "auth", "invalid", "not_found"}
    )
    stop_sequences: bool = True
    """The wire API accepts stop sequences (OpenAI's Responses API has none)."""
    thinking_signature: bool = False
    """Reasoning carries an opaque signature to send back (Anthropic, Gemini, Responses)."""
    output_as_tool: bool = False
    """Native structured output travels as a forced tool call (Anthropic)."""
    extra: dict[str, Any] = field(default_factory=lambda: {})

    def __str__(self) -> str:
        return self.id


def _openai_chat(url: str, settings: ProviderSettings) -> Model:
    return OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-test-key", settings=settings)


def _responses(url: str, settings: ProviderSettings) -> Model:
    return OpenAIResponsesModel(
        "gpt-4o", base_url=f"{url}/v1", api_key="sk-test-key", settings=settings
    )


def _groq(url: str, settings: ProviderSettings) -> Model:
    # `/groq/` makes the simulator speak Groq's variant (usage under `x_groq` when streamed).
    return compatible_model(
        "groq",
        "llama-3.3-70b-versatile",
        base_url=f"{url}/groq/v1",
        api_key="gsk-test",
        settings=settings,
    )


def _mistral(url: str, settings: ProviderSettings) -> Model:
    # Mistral's variant: reasoning as typed content chunks (thinking, then text).
    return compatible_model(
        "mistral",
        "mistral-large-latest",
        base_url=f"{url}/mistral/v1",
        api_key="m",
        settings=settings,
    )


def _openrouter(url: str, settings: ProviderSettings) -> Model:
    # OpenRouter's variant: keep-alive comments, numeric in-stream error codes, usage cost.
    return compatible_model(
        "openrouter",
        "openai/gpt-4o",
        base_url=f"{url}/openrouter/v1",
        api_key="o",
        settings=settings,
    )


def _llamacpp(url: str, settings: ProviderSettings) -> Model:
    return compatible_model("llamacpp-server", "smollm2", base_url=f"{url}/v1", settings=settings)


def _anthropic(url: str, settings: ProviderSettings) -> Model:
    return AnthropicModel(
        "claude-sonnet-4-6", base_url=url, api_key="sk-ant-test-key", settings=settings
    )


def _gemini(url: str, settings: ProviderSettings) -> Model:
    return GeminiModel("gemini-2.5-flash", base_url=url, api_key="AIza-test-key", settings=settings)


def _ollama(url: str, settings: ProviderSettings) -> Model:
    return OllamaModel("qwen3:0.6b", base_url=url, settings=settings)


_OPENAI_ERRORS: frozenset[ErrorKind] = frozenset(
    {
        "rate_limit",
        "overloaded",
        "server",
        "context_length",
        "auth",
        "invalid",
        "not_found",
        "content_filter",
    }
)

CASES: list[Case] = [
    Case(
        id="openai-responses",
        api="openai_responses",
        make=_responses,
        model="gpt-4o",
        price_provider="openai",
        http_errors=_OPENAI_ERRORS,
        thinking_signature=True,
        stop_sequences=False,
    ),
    Case(
        id="openai-chat",
        api="openai_chat",
        make=_openai_chat,
        model="gpt-4o",
        price_provider="openai",
        http_errors=_OPENAI_ERRORS,
    ),
    Case(
        id="groq",
        api="openai_chat",
        make=_groq,
        model="llama-3.3-70b-versatile",
        price_provider="groq",
        http_errors=_OPENAI_ERRORS,
    ),
    Case(
        id="mistral",
        api="openai_chat",
        make=_mistral,
        model="mistral-large-latest",
        price_provider="mistral",
        http_errors=_OPENAI_ERRORS,
        cached_tokens=False,
        reasoning_tokens=False,
    ),
    Case(
        id="openrouter",
        api="openai_chat",
        make=_openrouter,
        model="openai/gpt-4o",
        price_provider="openrouter",
        http_errors=_OPENAI_ERRORS,
    ),
    Case(
        id="llamacpp-server",
        api="openai_chat",
        make=_llamacpp,
        model="smollm2",
        price_provider=None,
        http_errors=_OPENAI_ERRORS,
    ),
    Case(
        id="anthropic",
        api="anthropic",
        make=_anthropic,
        model="claude-sonnet-4-6",
        price_provider="anthropic",
        reasoning_tokens=False,
        output_as_tool=True,
        thinking_signature=True,
    ),
    Case(
        id="gemini",
        api="gemini",
        make=_gemini,
        model="gemini-2.5-flash",
        price_provider="google",
        streams_arguments=False,
        thinking_signature=True,
    ),
    Case(
        id="ollama",
        api="ollama",
        make=_ollama,
        model="qwen3:0.6b",
        price_provider=None,
        streams_arguments=False,
        cached_tokens=False,
        reasoning_tokens=False,
        finish_filter=False,
    ),
]

ERROR_CLASSES: dict[ErrorKind, str] = {
    "rate_limit": "RateLimited",
    "overloaded": "ModelOverloaded",
    "server": "ProviderServerError",
    "context_length": "ContextLengthExceeded",
    "auth": "AuthenticationFailed",
    "invalid": "InvalidRequest",
    "not_found": "InvalidRequest",
    "content_filter": "ContentFiltered",
}


def error_name(error: ModelError) -> str:
    """The class name the suite compares (so a subclass cannot pass for its parent)."""
    return type(error).__name__
