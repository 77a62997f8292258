"""What a request asks of a provider, checked against its profile before anything is sent.

A request that asks for something the provider does not offer fails here with
`UnsupportedFeature`, naming the provider and the option, instead of being sent and refused
(or, worse, silently ignored).
"""

from __future__ import annotations

from legato.exceptions import UnsupportedFeature
from legato.models._base import ModelProfile, ModelRequest

__all__ = ["check_request"]


def check_request(provider: str, profile: ModelProfile, request: ModelRequest) -> None:
    """Raise `UnsupportedFeature` for the first thing `request` asks that `profile` lacks."""
    if request.settings.thinking_budget and not profile.supports_thinking:
        raise UnsupportedFeature(
            provider, "thinking_budget", "its models do not reason on request (profile)"
        )
    for tool in request.settings.builtin_tools or ():
        if tool.kind not in profile.builtin_tools:
            offered = ", ".join(sorted(profile.builtin_tools)) or "none"
            raise UnsupportedFeature(
                provider, f"the built-in tool {tool.kind!r}", f"it runs: {offered}"
            )
