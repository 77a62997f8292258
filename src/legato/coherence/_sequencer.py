"""The commit-order sequencer.

Effects are applied in the order the run declared, not the order they completed in (which
would be the tool-effect reordering anomaly).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

__all__ = ["CommitSequencer"]

T = TypeVar("T")


class CommitSequencer:
    """Applies effects by ordinal: 0, 1, 2, ... each after the one before it.

    Work can run concurrently and finish in any order; `commit(ordinal, apply)` waits for
    every lower ordinal to be committed (or skipped) before calling `apply`. With
    `enforce=False`, `apply` runs at once (completion order).
    """

    def __init__(self, *, start: int = 0, enforce: bool = True) -> None:
        self._next = start
        self._skipped: set[int] = set()
        self._changed = asyncio.Condition()
        self.enforce = enforce

    @property
    def next_ordinal(self) -> int:
        """The ordinal whose turn it is."""
        return self._next

    async def commit(self, ordinal: int, apply: Callable[[], T]) -> T:
        """Wait for `ordinal`'s turn, apply, and let the next one go."""
        if not self.enforce:
            return apply()
        async with self._changed:
            await self._changed.wait_for(lambda: self._next == ordinal)
            try:
                return apply()
            finally:
                self._advance()

    async def skip(self, ordinal: int) -> None:
        """Declare that `ordinal` will never commit (its work failed)."""
        async with self._changed:
            self._skipped.add(ordinal)
            if self._next == ordinal:
                self._advance()

    def _advance(self) -> None:
        self._next += 1
        while self._next in self._skipped:
            self._skipped.discard(self._next)
            self._next += 1
        self._changed.notify_all()
