"""What a request asks of a provider, checked against its profile before anything is sent.

A request that asks for something the provider does not offer fails here with
`UnsupportedFeature`, naming the provider and the option, instead of being sent and refused
(or, worse, silently ignored).
"""

from __future__ import annotations

import dataclasses

from legato.exceptions import UnsupportedFeature
from legato.models._base import ModelProfile, ModelRequest

__all__ = ["check_request", "tools_for"]


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


def tools_for(request: ModelRequest, profile: ModelProfile) -> ModelRequest:
    """The request with the tools this provider is sent, when some are deferred.

    A provider with its own tool search (`profile.tool_search`) gets the deferred tools
    (marked so) and not legato's `search_tools`; one without gets `search_tools` and not the
    deferred tools, which legato's catalog loads when the model asks for them.
    """
    if not any(t.defer_loading for t in request.tools):
        return request
    if profile.tool_search:
        kept = tuple(t for t in request.tools if not t.search_fallback)
    else:
        kept = tuple(t for t in request.tools if not t.defer_loading)
    return dataclasses.replace(request, tools=kept)
