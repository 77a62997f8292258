"""Resolve `"provider:model"` strings to `Model` objects.

Providers register a factory by name. Built-in providers are listed as import paths and
loaded only when first used, so importing legato never imports a provider SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from legato.exceptions import UnknownModel
from legato.models._base import Model

__all__ = ["ModelFactory", "infer_model", "known_providers", "register_provider"]

ModelFactory = Callable[[str], Model]
"""Builds a model from the part of the string after `provider:`."""

_BUILTIN: dict[str, str] = {
    "test": "legato.testing:model_from_name",
    "openai": "legato.models.openai_responses:from_name",
    "openai-responses": "legato.models.openai_responses:from_name",
    "openai-chat": "legato.models.openai_chat:from_name",
    "anthropic": "legato.models.anthropic:from_name",
    "gemini": "legato.models.gemini:from_name",
    "google": "legato.models.gemini:from_name",
    "ollama": "legato.models.ollama:from_name",
    "vllm": "legato.models.openai_compatible:vllm",
    "llamacpp-server": "legato.models.openai_compatible:llamacpp_server",
    "lmstudio": "legato.models.openai_compatible:lmstudio",
    "ollama-openai": "legato.models.openai_compatible:ollama_openai",
    "groq": "legato.models.openai_compatible:groq",
    "mistral": "legato.models.openai_compatible:mistral",
    "openrouter": "legato.models.openai_compatible:openrouter",
    "together": "legato.models.openai_compatible:together",
    "deepseek": "legato.models.openai_compatible:deepseek",
    "zai": "legato.models.openai_compatible:zai",
    "cerebras": "legato.models.openai_compatible:cerebras",
    "llamacpp": "legato.models.llamacpp:model_from_name",
}
_REGISTERED: dict[str, ModelFactory] = {}


def register_provider(name: str, factory: ModelFactory) -> None:
    """Make `"name:<model>"` strings resolve through `factory`."""
    if not name or ":" in name:
        msg = f"invalid provider name {name!r}"
        raise ValueError(msg)
    _REGISTERED[name] = factory


def known_providers() -> list[str]:
    """Every provider name a model string may start with."""
    return sorted({*_BUILTIN, *_REGISTERED})


def _factory(provider: str) -> ModelFactory | None:
    if provider in _REGISTERED:
        return _REGISTERED[provider]
    target = _BUILTIN.get(provider)
    if target is None:
        return None
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return cast(ModelFactory, getattr(module, attr))


def infer_model(model: Model | str) -> Model:
    """Return `model` itself, or the model a `"provider:model"` string names."""
    if not isinstance(model, str):
        return model
    provider, sep, name = model.partition(":")
    factory = _factory(provider) if sep else None
    if factory is None or not name:
        raise UnknownModel(model, known_providers())
    return factory(name)
