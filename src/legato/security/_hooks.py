"""Lifecycle hooks: typed points where security code may allow, modify or block.

Seven points, each a method of `Hook` with a typed payload and outcome:

| point                  | payload          | outcomes                          |
|------------------------|------------------|-----------------------------------|
| before_model_request   | `ModelRequest`   | Allow, Modify(request), Block     |
| after_model_response   | `ModelResponse`  | Allow, Modify(response), Block    |
| before_tool_admission  | `ToolAdmission`  | Allow, Modify(arguments), Block, Ask |
| after_tool_result      | `ToolResultPart` | Allow, Modify(result), Block      |
| before_spawn           | `SpawnRequest`   | Allow, Modify(request), Block     |
| on_run_end             | `RunEnd`         | (observes)                        |
| on_event               | a journal event  | (observes; synchronous)           |

A hook overrides only the methods it needs. Blocking a model request or response stops
the run with `HookBlocked`; blocking a tool call refuses it (the model is told); blocking
a tool result replaces it with an error the model sees. Every modify, block and ask is
recorded in the journal as a `HookApplied` event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeAlias, TypeVar

from legato.events import HookApplied, JournalEvent
from legato.exceptions import HookBlocked
from legato.messages import JsonValue, ModelResponse, ToolCallPart, ToolResultPart
from legato.models import ModelRequest
from legato.tools import SideEffects, Tool

__all__ = [
    "Allow",
    "Ask",
    "Block",
    "Hook",
    "HookContext",
    "HookRunner",
    "Modify",
    "RunEnd",
    "SpawnRequest",
    "ToolAdmission",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Allow:
    """Go on unchanged."""

    kind: Literal["allow"] = "allow"


@dataclass(frozen=True, slots=True)
class Modify(Generic[T]):
    """Go on with `value` instead."""

    value: T
    reason: str = ""
    kind: Literal["modify"] = "modify"


@dataclass(frozen=True, slots=True)
class Block:
    """Stop this (the request, the call, the result); `reason` is recorded and shown."""

    reason: str
    kind: Literal["block"] = "block"


@dataclass(frozen=True, slots=True)
class Ask:
    """Admit the tool call only after an approval (a `before_tool_admission` outcome)."""

    reason: str
    kind: Literal["ask"] = "ask"


ALLOW = Allow()


@dataclass(kw_only=True)
class HookContext:
    """What a hook knows about the run; `flags` is shared by every hook of the run."""

    run_id: str
    agent: str = ""
    step: int = 0
    flags: set[str] = field(default_factory=lambda: set())
    """Run-wide marks hooks raise and read (e.g. `injection` after a flagged result);
    restored from the journal on resume."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAdmission:
    """A tool call about to be admitted."""

    call: ToolCallPart
    side_effects: SideEffects
    arguments: JsonValue
    tool: Tool | None = None
    """The tool called (its declared sinks, metadata), when the gate knows it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnRequest:
    """A sub-agent about to be started (the spawn layer calls this point)."""

    agent: str
    prompt: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnd:
    """How a run ended."""

    status: Literal["finished", "failed", "parked", "cancelled"]
    error: str | None = None


RequestOutcome: TypeAlias = Allow | Modify[ModelRequest] | Block
ResponseOutcome: TypeAlias = Allow | Modify[ModelResponse] | Block
AdmissionOutcome: TypeAlias = Allow | Modify[dict[str, JsonValue]] | Block | Ask
ResultOutcome: TypeAlias = Allow | Modify[ToolResultPart] | Block
SpawnOutcome: TypeAlias = Allow | Modify[SpawnRequest] | Block


class Hook:
    """Base of security hooks: override the points you need; the rest allow."""

    @property
    def name(self) -> str:
        """The hook's name in the journal."""
        return type(self).__name__

    async def before_model_request(self, request: ModelRequest, ctx: HookContext) -> RequestOutcome:
        """Inspect or rewrite what is sent to the model."""
        return ALLOW

    async def after_model_response(
        self, response: ModelResponse, ctx: HookContext
    ) -> ResponseOutcome:
        """Inspect or rewrite the model's answer before the run uses it."""
        return ALLOW

    async def before_tool_admission(
        self, admission: ToolAdmission, ctx: HookContext
    ) -> AdmissionOutcome:
        """Allow, rewrite the arguments of, block, or require approval for a tool call."""
        return ALLOW

    async def after_tool_result(self, result: ToolResultPart, ctx: HookContext) -> ResultOutcome:
        """Inspect or rewrite a tool's result before the model sees it."""
        return ALLOW

    async def before_spawn(self, spawn: SpawnRequest, ctx: HookContext) -> SpawnOutcome:
        """Allow, rewrite or block a sub-agent."""
        return ALLOW

    async def on_run_end(self, end: RunEnd, ctx: HookContext) -> None:
        """Observe the end of a run."""

    def on_event(self, event: JournalEvent, ctx: HookContext) -> None:
        """Observe each journal event as it is recorded (synchronous: keep it quick)."""


class HookRunner:
    """Runs a run's hooks point by point, feeding each modification to the next hook."""

    def __init__(
        self,
        hooks: Sequence[Hook],
        ctx: HookContext,
        record: Callable[[JournalEvent], object],
    ) -> None:
        self.hooks = tuple(hooks)
        self.ctx = ctx
        self._record = record

    def _note(
        self,
        hook: Hook,
        point: str,
        action: Literal["modify", "block", "ask"],
        detail: str,
        call_id: str | None = None,
        flags: tuple[str, ...] = (),
    ) -> None:
        self._record(
            HookApplied(
                hook=hook.name,
                point=point,
                action=action,
                detail=detail,
                call_id=call_id,
                flags=flags,
            )
        )

    async def _through(
        self,
        point: str,
        value: T,
        apply: Callable[[Hook, T], Awaitable[Allow | Modify[T] | Block]],
    ) -> T:
        """`value` passed through every hook at `point`: a Modify replaces it, a Block raises."""
        for hook in self.hooks:
            outcome = await apply(hook, value)
            if isinstance(outcome, Block):
                self._note(hook, point, "block", outcome.reason)
                raise HookBlocked(hook.name, point, outcome.reason)
            if isinstance(outcome, Modify):
                self._note(hook, point, "modify", outcome.reason)
                value = outcome.value
        return value

    async def before_model_request(self, request: ModelRequest) -> ModelRequest:
        """The request after every hook; `HookBlocked` if one blocks."""
        return await self._through(
            "before_model_request", request, lambda hook, r: hook.before_model_request(r, self.ctx)
        )

    async def after_model_response(self, response: ModelResponse) -> ModelResponse:
        """The response after every hook; `HookBlocked` if one blocks."""
        return await self._through(
            "after_model_response", response, lambda hook, r: hook.after_model_response(r, self.ctx)
        )

    async def before_tool_admission(self, admission: ToolAdmission) -> AdmissionOutcome:
        """Block or Ask from the first hook that says so; else the (possibly modified) args."""
        arguments = admission.arguments
        modified = False
        call_id = admission.call.id
        for hook in self.hooks:
            outcome = await hook.before_tool_admission(admission, self.ctx)
            if isinstance(outcome, Block | Ask):
                self._note(hook, "before_tool_admission", outcome.kind, outcome.reason, call_id)
                return outcome
            if isinstance(outcome, Modify):
                self._note(hook, "before_tool_admission", "modify", outcome.reason, call_id)
                arguments = outcome.value
                modified = True
                admission = ToolAdmission(
                    call=admission.call,
                    side_effects=admission.side_effects,
                    arguments=arguments,
                    tool=admission.tool,
                )
        return Modify(dict(arguments)) if modified and isinstance(arguments, dict) else ALLOW

    async def after_tool_result(self, result: ToolResultPart) -> ToolResultPart:
        """The result after every hook (a block turns it into an error result)."""
        for hook in self.hooks:
            before = set(self.ctx.flags)
            outcome = await hook.after_tool_result(result, self.ctx)
            raised = tuple(sorted(self.ctx.flags - before))
            if isinstance(outcome, Block):
                self._note(
                    hook, "after_tool_result", "block", outcome.reason, result.call_id, raised
                )
                return ToolResultPart.text_result(
                    call_id=result.call_id,
                    name=result.name,
                    text=f"The result was withheld by a security hook: {outcome.reason}",
                    is_error=True,
                )
            if isinstance(outcome, Modify):
                self._note(
                    hook, "after_tool_result", "modify", outcome.reason, result.call_id, raised
                )
                result = outcome.value
        return result

    async def before_spawn(self, spawn: SpawnRequest) -> SpawnRequest:
        """The spawn request after every hook; `HookBlocked` if one blocks."""
        return await self._through(
            "before_spawn", spawn, lambda hook, r: hook.before_spawn(r, self.ctx)
        )

    async def on_run_end(self, end: RunEnd) -> None:
        """Tell every hook the run ended."""
        for hook in self.hooks:
            await hook.on_run_end(end, self.ctx)

    def on_event(self, event: JournalEvent) -> None:
        """Tell every hook about a journal event."""
        for hook in self.hooks:
            hook.on_event(event, self.ctx)
