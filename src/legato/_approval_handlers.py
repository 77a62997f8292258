"""Who decides an approval request: handlers that decide at once, and the desk for UIs.

An `ApprovalHandler` gets each request as the run asks and returns a decision, or None
to park the run until someone decides through the store. `CallbackApprover` wraps a
Python function, `TerminalApprover` asks on the terminal; `ApprovalDesk` is the
JSON-shaped access a web UI or another process uses to list and decide requests.

A handler must not claim or apply a decision (the gate does, through the store, once).
Policy layer: imports nothing from the runtime or the interfaces.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from legato._approval_decisions import Approve, Decision, Edit, Reject, decision_from_json
from legato._approval_stores import ApprovalStore
from legato._requests import ApprovalRequest, canonical_json
from legato.exceptions import DecisionTokenInvalid

__all__ = ["ApprovalDesk", "ApprovalHandler", "CallbackApprover", "TerminalApprover"]


@runtime_checkable
class ApprovalHandler(Protocol):
    """Decides a request now, or returns None to park the run until someone does."""

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """The decision on `request`, or None."""
        ...


class CallbackApprover:
    """A handler from a Python function (sync or async) of the request."""

    def __init__(
        self, function: Callable[[ApprovalRequest], Decision | None | Awaitable[Decision | None]]
    ) -> None:
        self._function = function

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """Call the function."""
        result = self._function(request)
        if isinstance(result, Awaitable):
            return await result
        return result


class TerminalApprover:
    """Asks on the terminal: approve (y), reject (n) or edit (e, then JSON arguments)."""

    def __init__(
        self,
        *,
        ask: Callable[[str], str] = input,
        show: Callable[[str], None] | None = None,
    ) -> None:
        self._ask = ask
        self._show = show or _to_stderr

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """Prompt until the answer is y, n or a valid edit; end of input is a rejection."""
        self._show(
            f"approval needed: {request.tool}({canonical_json(request.arguments)})\n"
            f"  because: {request.rule}"
        )
        try:
            return await self._prompt()
        except EOFError:
            self._show("end of input: rejected")
            return Reject(message="The user closed the input instead of answering; not run.")

    async def _prompt(self) -> Decision:
        while True:
            answer = await asyncio.to_thread(self._ask, "approve? [y]es / [n]o / [e]dit: ")
            answer = answer.strip().lower()
            if answer in ("y", "yes"):
                return Approve()
            if answer in ("n", "no"):
                reason = await asyncio.to_thread(self._ask, "reason (told to the model): ")
                return Reject(message=reason.strip() or Reject().message)
            if answer in ("e", "edit"):
                text = await asyncio.to_thread(self._ask, "arguments as JSON: ")
                try:
                    edited = json.loads(text)
                except json.JSONDecodeError as exc:
                    self._show(f"not JSON: {exc}")
                    continue
                if isinstance(edited, dict):
                    return Edit(arguments=edited)  # pyright: ignore[reportUnknownArgumentType]
                self._show("the arguments must be a JSON object")


def _to_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")


# -- the API a UI uses -----------------------------------------------------------------------------


class ApprovalDesk:
    """JSON-shaped access to a store, for a web UI or another process."""

    def __init__(self, store: ApprovalStore) -> None:
        self.store = store

    async def pending(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Pending requests as JSON objects (with their tokens)."""
        return [json.loads(r.to_json()) for r in await self.store.pending(run_id)]

    async def decide(self, request_id: str, body: Mapping[str, Any]) -> None:
        """Apply `{"token": ..., "verdict": "approve"|"reject"|"edit", ...}`."""
        token = body.get("token")
        if not isinstance(token, str):
            msg = "a decision needs the request's 'token'"
            raise DecisionTokenInvalid(msg)
        await self.store.decide(request_id, token, decision_from_json(body))
