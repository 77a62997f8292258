"""`RunContext`: what a tool may know about the run calling it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, cast, runtime_checkable

from typing_extensions import TypeVar

from legato.exceptions import ToolError
from legato.messages import Message, Usage
from legato.tools._contract import StateAccess

if TYPE_CHECKING:  # type-only: a tool is handed the run's model, never imports a provider
    from legato.events import Journal, ToolProgress
    from legato.models import Model

__all__ = ["RunBudget", "RunContext", "RunScope"]

DepsT = TypeVar("DepsT", default=None)


class RunScope(Protocol):
    """What a tool may ask of the run it belongs to, beyond its own call.

    Sub-agents use it to stream their events through the parent's stream and to keep
    background children alive no longer than the parent run.
    """

    def emit(self, event: Any) -> None:
        """Send an event into the run's stream (journal events are also journaled)."""
        ...

    def start_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Start a task owned by the run: it is cancelled and awaited when the run ends."""
        ...

    def progress(self, event: ToolProgress) -> None:
        """Stream a call's progress (not journaled); callable from any thread.

        Dropped unless the call is in flight; coalesced when updates come too fast.
        """
        ...


@runtime_checkable
class RunBudget(Protocol):
    """The run's budget as a tool sees it in `RunContext.budget` (a `legato.budgets.Budget`).

    Sub-agents run their children on it, so a whole tree of runs spends from one budget.
    """

    @property
    def used(self) -> Any:
        """What was spent so far (a `legato.budgets.Spend`)."""
        ...

    def remaining(self) -> Any:
        """What can still be reserved (a `legato.budgets.Spend`)."""
        ...


@dataclass(frozen=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """Handed to a tool whose signature has a parameter typed `RunContext[...]`.

    The parameter is found by its type, never by its name, and never appears in the
    schema the model sees.
    """

    deps: DepsT
    """The dependencies passed to `agent.run(..., deps=...)`."""
    run_id: str
    """The id of the run making the call."""
    step: int = 0
    """The model step that issued the call (1 for the first model response)."""
    tool_call_id: str | None = None
    """The id of the call being executed."""
    tool_name: str | None = None
    messages: Sequence[Message] = field(default_factory=lambda: ())
    """The conversation so far, read-only."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the run so far."""
    retry: int = 0
    """In how many model turns in a row this tool has failed just before this call (a turn
    with several failing calls of it counts once; one whose calls all succeeded resets)."""
    scope: RunScope | None = None
    """The run's scope (event stream and owned tasks); None outside a run."""
    state: StateAccess | None = None
    """The run's verified state: a draft the tool may write when it has a contract, a
    read-only snapshot otherwise; None when the agent has no state."""
    journal: Journal | None = None
    """The run's journal so far, to read (never append to it); None outside a run. A
    resumed run's journal starts with what was recorded before the interruption."""
    budget: RunBudget | None = None
    """The run's budget (what its model and tool calls reserve from); None without one.
    Sub-agents started by a tool draw from it too."""
    idempotency_key: str | None = None
    """For a side-effecting call: the key of its effect, the same every time this exact call
    is run (a resumed run re-running an idempotent call after a crash passes the same key).
    Hand it to the outside system (e.g. an `Idempotency-Key` header) so it applies the
    effect once."""
    model: Model | None = None
    """The model the run calls (its `profile` tells the context window); None outside a run."""

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell whoever streams the run how far this call got (a `ToolProgress` event).

        ```python
        @tool
        async def crawl(ctx: RunContext, urls: list[str]) -> int:
            for done, url in enumerate(urls, start=1):
                await fetch(url)
                ctx.report_progress(done, len(urls), f"fetched {url}")
            return len(urls)
        ```

        A plain call, not a coroutine: it only queues the event, so async tools and sync
        tools (which run in a worker thread) use it alike. Nothing is journaled, and the
        call's result does not depend on it. Outside a run (no scope) it does nothing.
        Updates are coalesced to one event per call every 0.1 s, the newest winning;
        the last update before the call returns is always streamed.

        Raises:
            ToolError: `progress` or `total` is not a finite number, or `message` is not
                a string.
        """
        _check_number("progress", progress)
        if total is not None:
            _check_number("total", total)
        if not isinstance(cast(object, message), str | None):
            msg = f"report_progress: message must be a string, got {type(message).__name__}"
            raise ToolError(msg)
        scope = self.scope
        if scope is None or self.tool_call_id is None:
            return
        from legato.events import ToolProgress  # loaded with the run, not with the tools

        scope.progress(
            ToolProgress(
                run_id=self.run_id,
                step=self.step,
                call_id=self.tool_call_id,
                tool=self.tool_name or "",
                progress=float(progress),
                total=None if total is None else float(total),
                message=message,
            )
        )


def _check_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"report_progress: {name} must be a number, got {value!r}"
        raise ToolError(msg)
    if not math.isfinite(value):
        msg = f"report_progress: {name} must be a finite number, got {value!r}"
        raise ToolError(msg)
