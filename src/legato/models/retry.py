"""Retries for model calls: exponential backoff with full jitter, honouring Retry-After.

Only errors whose class says `retryable` are retried (rate limits, overload, server errors,
timeouts, broken streams); a bad request or a bad key fails at once. A stream that already
yielded events is never retried, because its consumer has seen them: the error goes up (a
`FallbackModel` can then continue the conversation elsewhere).

```python
from legato.models.retry import RetryPolicy, RetryingModel
from legato.testing import ScriptedModel

model = RetryingModel(ScriptedModel(["hi"]), RetryPolicy(max_attempts=4, initial_delay=0.5))
```
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import field

from legato._values import value_class
from legato.exceptions import ModelError, RateLimited
from legato.messages import Usage
from legato.models._base import Model, ModelProfile, ModelRequest, ModelStreamEvent, price_of

__all__ = ["RetryPolicy", "RetryingModel", "retry_after", "retrying_stream"]


def _sleep(seconds: float) -> Awaitable[None]:
    return asyncio.sleep(seconds)


@value_class
class RetryPolicy:
    """How often and how patiently to retry a failed model call."""

    max_attempts: int = 3
    """Attempts in total, the first included (1 means no retry)."""
    initial_delay: float = 0.5
    """Backoff cap of the first retry, in seconds; doubles each attempt."""
    max_delay: float = 30.0
    """Upper bound of any single wait, Retry-After included."""
    honour_retry_after: bool = True
    """Wait at least what the provider asked for in Retry-After (up to `max_delay`)."""
    rng: random.Random = field(default_factory=random.Random, compare=False)
    """Source of jitter (seed it for reproducible tests)."""
    sleep: Callable[[float], Awaitable[None]] = field(default=_sleep, compare=False)
    """How to wait (replace with a fake clock in tests)."""

    def should_retry(self, error: ModelError, attempt: int) -> bool:
        """Whether to try again after `error` on attempt number `attempt` (1-based)."""
        return error.retryable and attempt < self.max_attempts

    def delay(self, error: ModelError, attempt: int) -> float:
        """Seconds to wait before attempt `attempt + 1`: full jitter, at least Retry-After."""
        cap = min(self.max_delay, self.initial_delay * (2 ** (attempt - 1)))
        wait = self.rng.uniform(0.0, cap)
        if self.honour_retry_after and isinstance(error, RateLimited) and error.retry_after:
            wait = max(wait, min(self.max_delay, error.retry_after))
        return wait


NO_RETRY = RetryPolicy(max_attempts=1)
"""A policy that never retries."""


async def retrying_stream(
    open_stream: Callable[[], AsyncIterator[ModelStreamEvent]],
    policy: RetryPolicy,
    map_error: Callable[[Exception, bool], ModelError | None] | None = None,
) -> AsyncIterator[ModelStreamEvent]:
    """Yield from `open_stream()`, retrying retryable failures that happen before any event.

    `map_error(exc, started)` turns a foreign exception (an SDK's) into a `ModelError`;
    returning None lets the exception through unchanged.
    """
    attempt = 1
    while True:
        started = False
        stream = open_stream()
        try:
            async for event in stream:
                started = True
                yield event
            return
        except Exception as exc:
            failure = exc
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        await retry_after(
            failure, started=started, policy=policy, attempt=attempt, map_error=map_error
        )
        attempt += 1


async def retry_after(
    exc: Exception,
    *,
    started: bool,
    policy: RetryPolicy,
    attempt: int,
    map_error: Callable[[Exception, bool], ModelError | None] | None,
) -> None:
    """After attempt `attempt` failed with `exc`: wait before the next one, or raise.

    Raises the legato error for `exc` (chained to it when mapped) when the stream had
    started, when the error is not retryable or when the attempts are spent; a foreign
    exception `map_error` does not know is raised as it is.
    """
    if isinstance(exc, ModelError):
        error: ModelError = exc
    else:
        mapped = map_error(exc, started) if map_error is not None else None
        if mapped is None:
            raise exc
        error = mapped
    if started or not policy.should_retry(error, attempt):
        if error is exc:
            raise error
        raise error from exc
    await policy.sleep(policy.delay(error, attempt))


class RetryingModel:
    """Wraps any `Model` so that its calls are retried under a `RetryPolicy`."""

    def __init__(self, model: Model, policy: RetryPolicy | None = None) -> None:
        self.model = model
        self.policy = policy or RetryPolicy()

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.model.name

    @property
    def profile(self) -> ModelProfile:
        """The wrapped model's profile."""
        return self.model.profile

    def price(self, usage: Usage) -> float | None:
        """The wrapped model's price for `usage` (None when it has none)."""
        return price_of(self.model, usage)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """The wrapped model's stream, retried."""
        return retrying_stream(lambda: self.model.stream(request), self.policy)
