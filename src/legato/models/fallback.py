"""`FallbackModel`: when one model fails, the next one continues the same conversation.

Every call carries the whole conversation in neutral form, so the next model gets all of it,
translated into its own wire format: earlier answers, tool calls made on another provider
and their results. Reasoning signatures stay with the provider that made them.

```python
import asyncio

from legato.exceptions import ModelOverloaded
from legato.models import ModelRequest, complete
from legato.models.fallback import FallbackModel
from legato.messages import Message
from legato.testing import FunctionModel


def down(request: ModelRequest) -> str:
    raise ModelOverloaded("busy")


backup = FunctionModel(lambda request: f"{len(request.messages)} messages seen")
model = FallbackModel([FunctionModel(down), backup])
request = ModelRequest(messages=(Message.user("hi"),))
assert asyncio.run(complete(model, request)).message.text == "1 messages seen"
```
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from legato._values import value_class
from legato.exceptions import ConfigurationError, ModelError, UnsupportedFeature
from legato.messages import Usage
from legato.models._base import (
    Model,
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    price_of,
)
from legato.models._registry import infer_model

__all__ = ["FallbackAttempt", "FallbackModel"]


def _retryable(error: ModelError) -> bool:
    return error.retryable


@value_class
class FallbackAttempt:
    """One model that failed during a call, or refused it before sending, and why."""

    model: str
    error: ModelError | UnsupportedFeature


class FallbackModel:
    """Try models in order; a failure before any output moves on to the next one.

    A model that refuses the request before sending it (`UnsupportedFeature`: a built-in
    tool or a reasoning setting it does not offer) always moves on, whatever `fallback_on`
    says: nothing was sent. When every model refuses, one `UnsupportedFeature` names each
    refusal. A failure after the stream has started is raised as it is: its consumer has
    already seen part of an answer. Retries of one model belong in its own settings (or
    `RetryingModel`).
    """

    def __init__(
        self,
        models: Sequence[Model | str],
        *,
        fallback_on: Callable[[ModelError], bool] = _retryable,
    ) -> None:
        """Create the chain.

        Args:
            models: Models or `"provider:model"` strings, tried first to last.
            fallback_on: Which errors move on to the next model (default: retryable ones:
                rate limits, overload, server errors, timeouts, broken streams). It sees
                `ModelError`s only; a refusal before sending always moves on.
        """
        if not models:
            msg = "FallbackModel needs at least one model"
            raise ConfigurationError(msg)
        self.models = [infer_model(m) for m in models]
        self.fallback_on = fallback_on
        self.attempts: list[FallbackAttempt] = []
        """Failures of the most recent call, in order (empty when the first model answered)."""

    @property
    def name(self) -> str:
        """The first model's name (the one normally answering)."""
        return self.models[0].name

    @property
    def profile(self) -> ModelProfile:
        """Capabilities every model in the chain has (the first model's dialect and window)."""
        first = self.models[0].profile
        rest = [m.profile for m in self.models[1:]]
        return ModelProfile(
            supports_tools=all(p.supports_tools for p in [first, *rest]),
            parallel_tool_calls=all(p.parallel_tool_calls for p in [first, *rest]),
            tool_choice_required=all(p.tool_choice_required for p in [first, *rest]),
            native_structured_output=all(p.native_structured_output for p in [first, *rest]),
            supports_images=all(p.supports_images for p in [first, *rest]),
            supports_documents=all(p.supports_documents for p in [first, *rest]),
            supports_thinking=first.supports_thinking,
            schema_dialect=first.schema_dialect,
            context_window=min(
                (p.context_window for p in [first, *rest] if p.context_window), default=None
            ),
            max_output_tokens=first.max_output_tokens,
        )

    def price(self, usage: Usage) -> float | None:
        """The highest price any model of the chain would charge (a call may land on any).

        None when one of them cannot be priced.
        """
        prices = [price_of(m, usage) for m in self.models]
        known = [p for p in prices if p is not None]
        return max(known) if len(known) == len(prices) else None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Stream from the first model that answers."""
        attempts: list[FallbackAttempt] = []
        self.attempts = attempts
        last = len(self.models) - 1
        for position, model in enumerate(self.models):
            started = False
            try:
                async for event in model.stream(request):
                    started = True
                    yield event
            except ModelError as error:
                attempts.append(FallbackAttempt(model=model.name, error=error))
                if started or position == last or not self.fallback_on(error):
                    raise
                continue
            except UnsupportedFeature as refusal:
                attempts.append(FallbackAttempt(model=model.name, error=refusal))
                if started:
                    raise
                if position == last:
                    combined = _every_refusal(attempts)
                    if combined is None:
                        raise
                    raise combined from refusal
                continue
            return


def _every_refusal(attempts: list[FallbackAttempt]) -> UnsupportedFeature | None:
    """When several models refused and none failed otherwise, one refusal naming them all."""
    refusals = [a.error for a in attempts if isinstance(a.error, UnsupportedFeature)]
    if len(attempts) == 1 or len(refusals) < len(attempts):
        return None
    names = ", ".join(a.model for a in attempts)
    each = "; ".join(f"{a.model}: {a.error}" for a in attempts)
    options = dict.fromkeys(r.option for r in refusals)
    return UnsupportedFeature(
        f"FallbackModel({names})", " / ".join(options), f"every model refused ({each})"
    )
