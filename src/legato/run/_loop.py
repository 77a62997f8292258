"""The agent loop: decide the next step from the run's state, execute it, record the events.

Every event is appended to the journal, applied to the `RunState` projection and yielded to
the caller, in that order. The loop never keeps facts of its own outside the state, so a
journal replayed through `RunState` gives the same conversation and result.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from legato.contracts import State, StateOptions, StateSession
from legato.contracts._session import merge_tools
from legato.events import (
    Journal,
    JournalEvent,
    ModelRequested,
    ModelResponded,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    UserPrompt,
    is_journal_event,
)
from legato.exceptions import (
    ContextLengthExceeded,
    MaxStepsExceeded,
    OutputRetriesExceeded,
    StreamInterrupted,
    ToolDefinitionError,
    ToolRetriesExceeded,
    UnexpectedModelBehavior,
)
from legato.messages import Message, ModelResponse, ToolCallPart, ToolResultPart
from legato.models import Model, ModelRequest, ModelSettings, ResponseCompleted
from legato.run._context import ContextStep
from legato.run._output import OUTPUT_TOOL, OutputSchema, OutputValidationError
from legato.run._result import RunResult, result_from_state
from legato.run._scope import Scope
from legato.run._state import RunState
from legato.run._tools import CallResult, ToolExecutor
from legato.tools import RunContext, Tool, ToolSource

if TYPE_CHECKING:
    from legato.context import ContextPolicy

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
    state: State[Any] | None = None
    """The verified state the run starts from (the run works on a fork of it)."""
    state_options: StateOptions | None = None
    context: ContextPolicy | None = None
    """When and how to compact the conversation sent to the model (None: never)."""


class RunDriver(Generic[OutputT]):
    """Drives one run to its end; iterate `events()` to run it."""

    def __init__(self, config: RunConfig[OutputT], *, journal: Journal | None = None) -> None:
        self.config = config
        self.journal = journal or Journal()
        self.state = RunState.from_events(list(self.journal.events))
        self._output: OutputT | None = None
        self._session = StateSession.for_run(
            config.state,
            config.state_options,
            loaded=self.state.state_loaded,
            commits=self.state.state_commits,
        )
        self._executor = ToolExecutor({}, default_timeout=config.tool_timeout)
        self._scope = Scope()
        self._tools_loaded = False
        self._context = ContextStep(config.context, config.model)

    def _record(self, event: JournalEvent) -> JournalEvent:
        self.journal.append(event)
        self.state.apply(event)
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
        if self._session is not None:
            self._record(self._session.state.loaded_event())
        if prompt is not None:
            message = Message.user(prompt) if isinstance(prompt, str) else prompt
            self._record(UserPrompt(message=message))

    async def events(self) -> AsyncGenerator[RunEvent]:
        """Run until the run finishes or fails, yielding every event."""
        for event in self.journal.events:
            yield event
        try:
            while not (self.state.finished or self.state.failed):
                async for event in self._step():
                    yield event
                for event in self._scope.pending():
                    yield self._record_if_journaled(event)
        except Exception as exc:
            yield self._record(RunFailed(error_type=type(exc).__name__, message=str(exc)))
            raise
        finally:
            await self._scope.close()

    def _record_if_journaled(self, event: RunEvent) -> RunEvent:
        """Journal the journal events among those that arrive through the scope."""
        if is_journal_event(event):
            self._record(event)
        return event

    def result(self) -> RunResult[OutputT]:
        """The result of a finished run."""
        output = self._output
        if output is None:
            output = self.config.output.from_json(self.state.output)
        state = self._session.state if self._session is not None else None
        return result_from_state(self.state, output=output, journal=self.journal, state_value=state)

    # -- one step ------------------------------------------------------------------------------

    async def _step(self) -> AsyncIterator[RunEvent]:
        state = self.state
        last = state.last_message
        if last is not None and last.role == "assistant":
            if state.pending_calls:
                # on resume, calls that already finished are not run again
                calls = [c for c in state.pending_calls if c.id not in state.results]
                async for event in self._run_tools(calls):
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
        return {t.name: t for t in merge_tools(list(tools.values()), self._session)}

    async def _call_model(self) -> AsyncIterator[RunEvent]:
        try:
            async for event in self._request_model():
                yield event
        except ContextLengthExceeded:
            if not self._context.retries_overflow:
                raise
            async for event in self._request_model(overflowed=True):
                yield event

    async def _request_model(self, *, overflowed: bool = False) -> AsyncIterator[RunEvent]:
        cfg, state = self.config, self.state
        if state.step >= cfg.max_steps and not overflowed:
            raise MaxStepsExceeded(cfg.max_steps)
        tools = await self._tools()
        self._executor = ToolExecutor(tools, default_timeout=cfg.tool_timeout, state=self._session)
        self._tools_loaded = True
        definitions = [t.definition for t in tools.values()]
        output_tool = cfg.output.tool_definition()
        if output_tool is not None:
            definitions.append(output_tool)
        # context management: compact the conversation if the request would not fit
        messages, compacted = await self._context.prepare(
            self.journal.events,
            state.messages,
            instructions=state.instructions,
            tools=definitions,
            overflowed=overflowed,
            state_values=state.state_values,
        )
        if compacted is not None:
            yield self._record(compacted)
        request = ModelRequest(
            messages=tuple(messages),
            instructions=StateSession.instructions(self._session, state.instructions),
            tools=tuple(definitions),
            tool_choice="required"
            if output_tool is not None and cfg.model.profile.tool_choice_required
            else "auto",
            settings=cfg.settings,
            output=cfg.output.native_spec(),
        )
        step = state.step if overflowed else state.step + 1
        yield self._record(ModelRequested(step=step, model=cfg.model.name))
        started = time.perf_counter()
        response: ModelResponse | None = None
        async for event in cfg.model.stream(request):
            if isinstance(event, ResponseCompleted):
                response = event.response
            else:
                yield event
        if response is None:
            msg = f"{cfg.model.name}: the stream ended without a complete response"
            raise StreamInterrupted(msg)
        if response.usage.requests == 0:
            response = replace(response, usage=replace(response.usage, requests=1))
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
        if not self._tools_loaded:  # a resumed run continues with tool calls
            self._executor = ToolExecutor(await self._tools(), default_timeout=cfg.tool_timeout)
        special = self._output_calls(calls)
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
                scope=self._scope,
            )

        async for event in self._executor.run_calls(
            calls, step=step, context=context, scope=self._scope, special=special
        ):
            yield self._record_if_journaled(event)
        self._check_failures(calls)
        if self._session is not None:
            self._session.check_rejections(state.contract_rejections, state.last_rejection)
        yield self._record(StepFinished(step=step))
        if self._output is not None:
            yield self._record(
                RunFinished(
                    output=cfg.output.to_json(self._output), usage=state.usage, cost=state.cost
                )
            )

    def _output_calls(self, calls: list[ToolCallPart]) -> dict[str, CallResult]:
        """Validate `final_result` calls; a valid one makes every other call `skipped`."""
        if self.config.output.is_text or self.config.output.mode != "tool":
            return {}
        special: dict[str, CallResult] = {}
        for call in calls:
            if call.name != OUTPUT_TOOL or self._output is not None:
                continue
            try:
                self._output = self.config.output.validate_arguments(call.arguments)
            except OutputValidationError as exc:
                special[call.id] = _result(
                    call,
                    f"{exc.message}\nFix the output and call {OUTPUT_TOOL} again.",
                    "invalid_arguments",
                    error=True,
                )
            else:
                special[call.id] = _result(call, "Final result received.", "output")
        if self._output is not None:
            for call in calls:
                if call.id not in special:
                    special[call.id] = _result(
                        call, "Not run: the final result was given in the same response.", "skipped"
                    )
        return special

    def _check_failures(self, calls: list[ToolCallPart]) -> None:
        failures = self.state.failures
        for call in calls:
            count = failures.get(call.name, 0)
            if not count:
                continue
            limit = self._retry_limit(call.name)
            if count > limit:
                last = next(
                    (m for m in reversed(self.state.messages) if m.role == "tool"),
                    Message(role="tool"),
                )
                text = next((r.text for r in last.tool_results if r.call_id == call.id), "")
                if call.name == OUTPUT_TOOL:
                    raise OutputRetriesExceeded(limit, text)
                raise ToolRetriesExceeded(call.name, limit, text)

    def _retry_limit(self, name: str) -> int:
        if name == OUTPUT_TOOL:
            return self.config.output_retries
        tool = self._executor.get(name)
        return tool.max_retries if tool is not None else self.config.unknown_tool_retries


def _result(call: ToolCallPart, text: str, outcome: Any, *, error: bool = False) -> CallResult:
    return CallResult(
        result=ToolResultPart.text_result(
            call_id=call.id, name=call.name, text=text, is_error=error
        ),
        outcome=outcome,
        duration=0.0,
    )
