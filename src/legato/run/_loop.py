"""The agent loop: decide the next step from the run's state, execute it, record the events.

Every event is appended to the journal, applied to the `RunState` projection and yielded to
the caller, in that order. The loop never keeps facts of its own outside the state, so a
journal replayed through `RunState` gives the same conversation and result.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from legato.events import (
    Journal,
    JournalEvent,
    ModelRequested,
    ModelResponded,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunStarted,
    StepFinished,
    UserPrompt,
)
from legato.exceptions import (
    MaxStepsExceeded,
    OutputRetriesExceeded,
    StreamInterrupted,
    ToolDefinitionError,
    UnexpectedModelBehavior,
)
from legato.exceptions import RunParked as Parked
from legato.messages import Message, ModelResponse, ToolCallPart
from legato.models import Model, ModelRequest, ModelSettings, ResponseCompleted
from legato.run._outcomes import cancelled_calls, check_failures, output_calls
from legato.run._output import OUTPUT_TOOL, OutputSchema, OutputValidationError
from legato.run._result import RunResult, result_from_state
from legato.run._state import RunState
from legato.run._tools import ToolExecutor
from legato.tools import RunContext, Tool, ToolSource

if TYPE_CHECKING:
    from legato.approvals import ApprovalPolicy
    from legato.budgets import Budget
    from legato.effects import EffectGate
    from legato.security import Hook

__all__ = ["RunConfig", "RunDriver"]

OutputT = TypeVar("OutputT", default=str)


@dataclass(frozen=True, kw_only=True)
class RunConfig(Generic[OutputT]):
    """Everything a run needs, resolved from the agent and the call."""

    agent_name: str
    model: Model
    instructions: str | None
    tool_sources: Sequence[ToolSource]
    output: OutputSchema[OutputT]
    settings: ModelSettings = field(default_factory=ModelSettings)
    max_steps: int = 50
    output_retries: int = 1
    unknown_tool_retries: int = 1
    tool_timeout: float | None = None
    deps: Any = None
    approvals: ApprovalPolicy | None = None
    budget: Budget | None = None
    hooks: Sequence[Hook] = ()


class RunDriver(Generic[OutputT]):
    """Drives one run to its end; iterate `events()` to run it."""

    def __init__(self, config: RunConfig[OutputT], *, journal: Journal | None = None) -> None:
        self.config = config
        self.journal = journal or Journal()
        self.state = RunState.from_events(list(self.journal.events))
        self._output: OutputT | None = None
        from legato.effects import EffectGate  # the policy layer loads with the first run

        self._gate = EffectGate(
            journal=self.journal,
            record=self._record,
            policy=config.approvals,
            budget=config.budget,
            hooks=config.hooks,
            agent=config.agent_name,
        )
        self._executor: ToolExecutor | None = None

    def _record(self, event: JournalEvent) -> JournalEvent:
        self.journal.append(event)
        self.state.apply(event)
        self._gate.observe(event)
        return event

    def start(self, prompt: str | Message | None, history: Sequence[Message]) -> None:
        """Record the start of a fresh run (nothing is yielded for a resumed journal)."""
        cfg = self.config
        self._record(
            RunStarted(
                run_id=uuid.uuid4().hex,
                agent=cfg.agent_name,
                model=cfg.model.name,
                instructions=cfg.instructions,
                history=tuple(history),
            )
        )
        if prompt is not None:
            message = Message.user(prompt) if isinstance(prompt, str) else prompt
            self._record(UserPrompt(message=message))

    async def events(self) -> AsyncIterator[RunEvent]:
        """Run until the run finishes or fails, yielding every event."""
        for event in self.journal.events:
            yield event
        self._gate.drain()
        try:
            while not (self.state.finished or self.state.failed):
                async for event in self._step():
                    for earlier in self._gate.drain():
                        yield earlier
                    yield event
        except Parked:
            parked = self._gate.parked
            ids = tuple(r.id for r in parked.requests) if parked is not None else ()
            yield self._record(RunParked(request_ids=ids))
            raise
        except Exception as exc:
            yield self._record(RunFailed(error_type=type(exc).__name__, message=str(exc)))
            raise

    @property
    def gate(self) -> EffectGate:
        """The run's effect gate."""
        return self._gate

    def close_cancelled(self, error: Exception) -> list[JournalEvent]:
        """Record how a cancelled run ends: its unfinished calls, then `RunFailed`."""
        events: list[JournalEvent] = [
            self._record(e) for e in cancelled_calls(self.journal, str(error))
        ]
        events.append(self._record(RunFailed(error_type=type(error).__name__, message=str(error))))
        return events

    def result(self) -> RunResult[OutputT]:
        """The result of a finished run."""
        output = self._output
        if output is None:
            output = self.config.output.from_json(self.state.output)
        return result_from_state(self.state, output=output, journal=self.journal)

    # -- one step ------------------------------------------------------------------------------

    async def _step(self) -> AsyncIterator[RunEvent]:
        state = self.state
        last = state.last_message
        if last is not None and last.role == "assistant":
            if state.pending_calls:
                unfinished = [c for c in state.pending_calls if c.id not in state.results]
                async for event in self._run_tools(unfinished):
                    yield event
            else:
                async for event in self._handle_answer(last):
                    yield event
            return
        async for event in self._call_model():
            yield event

    async def _tools(self) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for source in self.config.tool_sources:
            for t in await source.list_tools():
                if t.name in tools or t.name == OUTPUT_TOOL and not self.config.output.is_text:
                    msg = f"two tools are named {t.name!r} (the second comes from {source.name!r})"
                    raise ToolDefinitionError(msg)
                tools[t.name] = t
        self._gate.bind(tools)
        self._executor = ToolExecutor(
            tools, default_timeout=self.config.tool_timeout, gate=self._gate
        )
        return tools

    async def _call_model(self) -> AsyncIterator[RunEvent]:
        cfg, state = self.config, self.state
        if state.step >= cfg.max_steps:
            raise MaxStepsExceeded(cfg.max_steps)
        tools = await self._tools()
        definitions = [t.definition for t in tools.values()]
        output_tool = cfg.output.tool_definition()
        if output_tool is not None:
            definitions.append(output_tool)
        request = ModelRequest(
            messages=tuple(state.messages),
            instructions=state.instructions,
            tools=tuple(definitions),
            tool_choice="required"
            if output_tool is not None and cfg.model.profile.tool_choice_required
            else "auto",
            settings=cfg.settings,
            output=cfg.output.native_spec(),
        )
        step = state.step + 1
        request, reservation = await self._gate.before_model(request, cfg.model)
        yield self._record(ModelRequested(step=step, model=cfg.model.name))
        started = time.perf_counter()
        response: ModelResponse | None = None
        try:
            async for event in cfg.model.stream(request):
                if isinstance(event, ResponseCompleted):
                    response = event.response
                else:
                    yield event
        finally:
            if response is None and reservation is not None:
                reservation.release()
        if response is None:
            msg = f"{cfg.model.name}: the stream ended without a complete response"
            raise StreamInterrupted(msg)
        if response.usage.requests == 0:
            response = replace(response, usage=replace(response.usage, requests=1))
        response = await self._gate.after_model(response, reservation)
        yield self._record(
            ModelResponded(step=step, response=response, duration=time.perf_counter() - started)
        )

    async def _handle_answer(self, message: Message) -> AsyncIterator[RunEvent]:
        cfg = self.config
        text = message.text
        try:
            if cfg.output.mode == "tool" and not cfg.output.is_text:
                msg = f"Give your final answer by calling the {OUTPUT_TOOL} tool."
                raise OutputValidationError(msg)
            if not text.strip() and cfg.output.is_text:
                msg = "Your response was empty. Please answer."
                raise OutputValidationError(msg)
            self._output = cfg.output.validate_text(text)
        except OutputValidationError as exc:
            if self.state.output_failures >= cfg.output_retries:
                if not text.strip():
                    msg = f"the model returned an empty response {self.state.output_failures + 1} times"
                    raise UnexpectedModelBehavior(msg) from exc
                raise OutputRetriesExceeded(cfg.output_retries, exc.message) from exc
            yield self._record(UserPrompt(message=Message.user(exc.message), retry=True))
            return
        yield self._record(StepFinished(step=self.state.step))
        yield self._record(
            RunFinished(
                output=cfg.output.to_json(self._output),
                usage=self.state.usage,
                cost=self.state.cost,
            )
        )

    async def _run_tools(self, calls: list[ToolCallPart]) -> AsyncIterator[RunEvent]:
        cfg, state = self.config, self.state
        step = state.step
        executor = self._executor
        if executor is None:  # a resumed run: its tools were not listed yet
            await self._tools()
            executor = self._executor
            assert executor is not None
        special, self._output = output_calls(cfg.output, calls, self._output)
        messages = tuple(state.messages)

        def context(call: ToolCallPart) -> RunContext[Any]:
            return RunContext(
                deps=cfg.deps,
                run_id=state.run_id,
                step=step,
                tool_call_id=call.id,
                tool_name=call.name,
                messages=messages,
                usage=state.usage,
                retry=state.failures.get(call.name, 0),
            )

        async for event in executor.run_calls(calls, step=step, context=context, special=special):
            # the gate journals its own events when they happen (write-ahead); not again here
            from legato.effects import GATE_EVENT_TYPES

            yield event if isinstance(event, GATE_EVENT_TYPES) else self._record(event)
        check_failures(
            state,
            calls,
            tools=executor.tools,
            output_retries=cfg.output_retries,
            unknown_tool_retries=cfg.unknown_tool_retries,
        )
        yield self._record(StepFinished(step=step))
        if self._output is not None:
            yield self._record(
                RunFinished(
                    output=cfg.output.to_json(self._output), usage=state.usage, cost=state.cost
                )
            )
