"""Servers that speak OpenAI's Chat Completions: one `ServerProfile` each.

```python
from legato.models.openai_compatible import PROFILES, compatible_model

assert "llamacpp-server" in PROFILES
model = compatible_model("vllm", "Qwen/Qwen2.5-7B-Instruct", base_url="http://127.0.0.1:8000/v1")
assert model.name == "vllm:Qwen/Qwen2.5-7B-Instruct"
```

A profile holds everything that differs between servers: where it listens, which environment
variable holds the key, which `genai-prices` provider prices it, and its quirks. Adding a
server is adding a profile (`register_server`); the translator is shared.
"""

from __future__ import annotations

import dataclasses

from legato.exceptions import UnknownModel
from legato.models._base import ModelProfile
from legato.models._provider import ProviderSettings
from legato.models._registry import register_provider
from legato.models.openai_chat import OpenAIChatModel, ServerProfile

__all__ = ["PROFILES", "ProfileFactory", "compatible_model", "register_server"]

_LOCAL = ModelProfile(native_structured_output=True, context_window=None)

PROFILES: dict[str, ServerProfile] = {
    "vllm": ServerProfile(
        name="vllm", base_url="http://127.0.0.1:8000/v1", model=_LOCAL, send_strict=False
    ),
    "llamacpp-server": ServerProfile(
        # llama-cpp-python's server: repeats the call's name in every streamed chunk (the
        # assembler ignores identical repeats) and, with tool_choice="auto" and stream=True,
        # answers HTTP 200 with no chunks; such requests are sent unstreamed. It rejects
        # `content: null` beside tool calls (HTTP 500) and reports no usage in streams.
        name="llamacpp-server",
        base_url="http://127.0.0.1:8000/v1",
        model=ModelProfile(native_structured_output=True, parallel_tool_calls=False),
        send_parallel_tool_calls=False,
        no_stream_with_auto_tools=True,
        send_strict=False,
        json_object_schema=True,
        null_content=False,
        usage_in_stream=False,
    ),
    "lmstudio": ServerProfile(
        name="lmstudio", base_url="http://127.0.0.1:1234/v1", model=_LOCAL, send_strict=False
    ),
    "ollama-openai": ServerProfile(
        name="ollama-openai",
        base_url="http://127.0.0.1:11434/v1",
        model=ModelProfile(native_structured_output=True),
        send_parallel_tool_calls=False,
        send_strict=False,
    ),
    "groq": ServerProfile(
        name="groq",
        base_url="https://api.groq.com/openai/v1",
        env_var="GROQ_API_KEY",
        price_provider="groq",
        model=ModelProfile(native_structured_output=True),
    ),
    "mistral": ServerProfile(
        name="mistral",
        base_url="https://api.mistral.ai/v1",
        env_var="MISTRAL_API_KEY",
        price_provider="mistral",
        model=ModelProfile(native_structured_output=True, supports_thinking=True),
        stream_usage=False,
        send_strict=False,
        reasoning_chunks=True,
    ),
    "openrouter": ServerProfile(
        name="openrouter",
        base_url="https://openrouter.ai/api/v1",
        env_var="OPENROUTER_API_KEY",
        price_provider="openrouter",
        model=ModelProfile(native_structured_output=True),
    ),
    "together": ServerProfile(
        name="together",
        base_url="https://api.together.xyz/v1",
        env_var="TOGETHER_API_KEY",
        price_provider="together",
        model=ModelProfile(native_structured_output=True),
        send_strict=False,
    ),
    "deepseek": ServerProfile(
        name="deepseek",
        base_url="https://api.deepseek.com/v1",
        env_var="DEEPSEEK_API_KEY",
        price_provider="deepseek",
        model=ModelProfile(native_structured_output=False, supports_thinking=True),
        send_strict=False,
        reasoning_field="reasoning_content",
    ),
    "zai": ServerProfile(
        name="zai",
        base_url="https://api.z.ai/api/paas/v4",
        env_var="ZAI_API_KEY",
        price_provider="zai",
        model=ModelProfile(native_structured_output=False, supports_thinking=True),
        send_strict=False,
        reasoning_field="reasoning_content",
        reasoning_back="always",
    ),
    "cerebras": ServerProfile(
        name="cerebras",
        base_url="https://api.cerebras.ai/v1",
        env_var="CEREBRAS_API_KEY",
        price_provider="cerebras",
        model=ModelProfile(native_structured_output=True, supports_thinking=True),
        reasoning_field="reasoning",
    ),
}
"""Every known server, by provider prefix."""


def compatible_model(
    server: str | ServerProfile,
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    settings: ProviderSettings | None = None,
) -> OpenAIChatModel:
    """A Chat Completions model on a known server (by name) or on a profile you give."""
    profile = PROFILES.get(server) if isinstance(server, str) else server
    if profile is None:
        msg = f"{server}:{model}"
        raise UnknownModel(msg, sorted(PROFILES))
    return OpenAIChatModel(
        model, server=profile, settings=settings, api_key=api_key, base_url=base_url
    )


class ProfileFactory:
    """Resolves `"<server>:<model>"` strings for one profile (what the registry calls)."""

    def __init__(self, server: str) -> None:
        self.server = server

    def __call__(self, model: str) -> OpenAIChatModel:
        """The model on this server."""
        return compatible_model(self.server, model)


def register_server(profile: ServerProfile, *, replace: bool = False) -> None:
    """Add a server profile and make `"<profile.name>:<model>"` strings resolve to it."""
    if profile.name in PROFILES and not replace:
        msg = f"a server profile named {profile.name!r} exists; pass replace=True"
        raise ValueError(msg)
    PROFILES[profile.name] = dataclasses.replace(profile)
    register_provider(profile.name, ProfileFactory(profile.name))


vllm = ProfileFactory("vllm")
llamacpp_server = ProfileFactory("llamacpp-server")
lmstudio = ProfileFactory("lmstudio")
ollama_openai = ProfileFactory("ollama-openai")
groq = ProfileFactory("groq")
mistral = ProfileFactory("mistral")
openrouter = ProfileFactory("openrouter")
together = ProfileFactory("together")
deepseek = ProfileFactory("deepseek")
zai = ProfileFactory("zai")
cerebras = ProfileFactory("cerebras")
