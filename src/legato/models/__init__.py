"""Models: the `Model` protocol, neutral requests and stream events, and the registry.

Provider modules (OpenAI, Anthropic, Gemini, Ollama, llama.cpp, ...) live beside this file,
one per wire API, and are imported only when a model string names them.
"""

from legato.models._base import (
    Model,
    ModelProfile,
    ModelRequest,
    ModelSettings,
    ModelStreamEvent,
    OutputSpec,
    PricedModel,
    ResponseCompleted,
    SchemaDialect,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolChoice,
    complete,
    price_of,
)
from legato.models._default import LOCAL_MODEL, default_model
from legato.models._provider import ProviderSettings
from legato.models._registry import ModelFactory, infer_model, known_providers, register_provider
from legato.models.fallback import FallbackModel
from legato.models.retry import RetryingModel, RetryPolicy

__all__ = [
    "LOCAL_MODEL",
    "FallbackModel",
    "Model",
    "ModelFactory",
    "ModelProfile",
    "ModelRequest",
    "ModelSettings",
    "ModelStreamEvent",
    "OutputSpec",
    "PricedModel",
    "ProviderSettings",
    "ResponseCompleted",
    "RetryPolicy",
    "RetryingModel",
    "SchemaDialect",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolChoice",
    "complete",
    "price_of",
    "default_model",
    "infer_model",
    "known_providers",
    "register_provider",
]
