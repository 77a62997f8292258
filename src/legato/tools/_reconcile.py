"""Reconciling an effect whose outcome is unknown after a crash.

An irreversible call that was admitted and never finished (the process died while it ran)
may or may not have taken effect. legato never runs it again blindly: the tool's
`reconcile` hook, when it has one, looks at the outside world (the payment provider, the
shipping system) by the call's idempotency key and arguments, and says what happened.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from legato._values import value_class

__all__ = ["Reconciled", "Reconciler", "reconcile_call"]


@value_class(kw_only=False)
class Reconciled:
    """What a reconcile hook found out about an effect.

    It `ran` (the model is shown `result`), or it did not (the call then runs again, with
    the same idempotency key).
    """

    ran: bool
    result: Any = None


Reconciler: TypeAlias = Callable[
    [str, Mapping[str, Any]], "Reconciled | None | Awaitable[Reconciled | None]"
]
"""`reconcile(idempotency_key, arguments)`: a `Reconciled`, or None when it cannot tell
(a person is then asked)."""


async def reconcile_call(
    hook: Reconciler, key: str, arguments: Mapping[str, Any]
) -> Reconciled | None:
    """Call a reconcile hook, sync or async."""
    found = hook(key, arguments)
    if inspect.isawaitable(found):
        found = await found
    return found
