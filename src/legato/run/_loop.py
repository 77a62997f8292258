"""The agent loop: decide the next step from the run's state, execute it, record the events.

Every event is appended to the journal, applied to the `RunState` projection and yielded to
the caller, in that order. The loop never keeps facts of its own outside the state, so a
journal replayed through `RunState` gives the same conversation and result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from legato._values import value_class
from legato.contracts import State, StateOptions, StateSession
from legato.contracts._session import merge_tools
from legato.events import (
    Compacted,
    Journal,
    JournalEvent,
    ModelRequested,
    ModelResponded,
    Parked,
    RunEvent,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    UserPrompt,
)
from legato.exceptions import (
    ContextLengthExceeded,
    MaxStepsExceeded,
    OutputRetriesExceeded,
    RunParked,
    StoreError,
    StreamInterrupted,
    ToolDefinitionError,
    UnexpectedModelBehavior,
)
from legato.messages import Message, ModelResponse, ToolCallPart
from legato.models import Model, ModelRequest, ModelSettings, ResponseCompleted
from legato.run._context import ContextStep
from legato.run._outcomes import cancelled_calls, check_failures, output_calls
from legato.run._output import OUTPUT_TOOL, OutputSchema, OutputValidationError
from legato.run._recorder import JournalSink, Recorder
from legato.run._result import RunResult, result_from_state
from legato.run._scope import Scope
from legato.run._state import RunState
from legato.run._tools import ToolExecutor
from legato.tools import RunContext, Tool, ToolSource

if TYPE_CHECKING:
    from legato.approvals import ApprovalPolicy
    from legato.budgets import Budget
    from legato.context import ContextPolicy
    from legato.effects import EffectGate
    from legato.security import Hook
    from legato.store import SessionStore, SessionTurn

__all__ = ["RunConfig", "RunDriver", "Unit"]

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
    approvals: ApprovalPolicy | None = None
    budget: Budget | None = None
    hooks: Sequence[Hook] = ()
    store: JournalSink | None = None
    """Where the journal is written ahead (a `legato.store.RunStore`; None: memory only).
    Children's journals go to the same store."""
    session: str | None = None
    """The stored conversation this run is a turn of."""
    sessions: SessionStore | None = None
    """Where that conversation is kept; it gets the run's messages when the run finishes."""
    carry_context: bool = True
    """Save the run's latest compacted view with its session turn, for the next run."""
    parent_gate: EffectGate | None = None
    """A child run's parent's gate: the child's shares its hold (see `legato.spawn`)."""


@value_class
class Unit:
    """One unit of a run's progress, as `RunDriver.next_unit` plans it."""

    kind: Literal["model", "tool", "tools", "close", "done"]
    """`tools` (never planned, asked for): all the step's unfinished calls, run
    concurrently under the gate as `agent.run` runs them, and the step's close."""
    step: int = 0
    """The step the unit belongs to."""
    call_id: str | None = None
    """The call a `tool` unit runs."""


def default_owner() -> str:
    """Who runs a run, as recorded in `RunStarted` and `RunResumed`: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process `owner` names is alive.

    None when it cannot be told: another host, or an owner in another form.
    """
    if owner is None:
        return None
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    if int(pid) == os.getpid():
        return False  # this process: the run is not being driven elsewhere
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDriver(Generic[OutputT]):
    """Drives one run to its end; iterate `events()` to run it."""

    def __init__(
        self, config: RunConfig[OutputT], *, journal: Journal | None = None, saved: int = 0
    ) -> None:
        """A driver for a fresh run, or for the run whose past `journal` holds.

        `saved`: how many of `journal`'s events `config.store` holds already.
        """
        self.config = config
        self.journal = journal or Journal()
        self.state = RunState.from_events(list(self.journal.events))
        self.recorder = Recorder(
            self.journal, self.state, sink=config.store, session=config.session, saved=saved
        )
        self._record = self.recorder.record
        self._output: OutputT | None = None
        self._session = StateSession.for_run(
            config.state,
            config.state_options,
            loaded=self.state.state_loaded,
            commits=self.state.state_commits,
        )
        from legato.effects import EffectGate  # the policy layer loads with the first run

        self._scope = Scope(record=self._record)
        self._gate = EffectGate(
            journal=self.journal,
            record=self._record,
            policy=config.approvals,
            budget=config.budget,
            hooks=config.hooks,
            agent=config.agent_name,
            stream=self._scope.publish,
            tree=config.parent_gate.tree if config.parent_gate is not None else None,
        )
        self.recorder.observe(self._gate.observe)
        self._gate.sole_driver = config.store is not None
        self._scope.gate = self._gate
        self._scope.store = config.store
        self._executor: ToolExecutor | None = None
        self._context = ContextStep(config.context, config.model, budget=config.budget)

    def start(
        self,
        prompt: str | Message | None,
        history: Sequence[Message],
        *,
        run_id: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Record the start of a fresh run (nothing is yielded for a resumed journal).

        `run_id`: the run's id (default: a fresh uuid4; a durable engine passes its own).
        `owner`: who drives it (default: host:pid).
        """
        cfg = self.config
        self._record(
            RunStarted(
                run_id=run_id or uuid.uuid4().hex,
                agent=cfg.agent_name,
                model=cfg.model.name,
                instructions=cfg.instructions,
                history=tuple(history),
                owner=owner or default_owner(),
            )
        )
        if self._session is not None:
            self._record(self._session.state.loaded_event())
        if prompt is not None:
            message = Message.user(prompt) if isinstance(prompt, str) else prompt
            self._record(UserPrompt(message=message))

    def carry_over(self, carried: Compacted | None) -> None:
        """Start a session's run from the compacted view its previous run ended with.

        The view is recorded as a `Compacted` event (reason `carried_over`), so the journal
        shows exactly what the model saw, and no summary is computed twice.
        """
        if carried is None or carried.upto > len(self.state.messages):
            return
        self._record(replace(carried, reason="carried_over"))

    def resumed(self, owner: str | None = None) -> RunResumed:
        """Claim the run for this process before it continues (a resumed run's first event).

        With a store, the claim is committed at once: of two processes resuming the same
        stored run, the second gets `JournalConflict` here, before it runs anything.
        """
        event = RunResumed(owner=owner or default_owner())
        self._record(event)
        return event

    def flush(self) -> None:
        """Commit the journal events still buffered for the store."""
        self.recorder.flush()

    def _turn(self) -> SessionTurn | None:
        """The run's new messages as one turn of its session (None: no session)."""
        cfg, state = self.config, self.state
        if cfg.session is None or cfg.sessions is None:
            return None
        from legato.store import SessionTurn

        latest = next((e for e in reversed(self.journal.events) if isinstance(e, Compacted)), None)
        return SessionTurn(
            session=cfg.session,
            messages=tuple(state.messages[state.new_message_index :]),
            context=latest if cfg.carry_context else None,
        )

    def _finish(self, output: OutputT) -> RunFinished:
        """Record the run's end, with its session turn.

        When one store keeps both, the turn is committed in the transaction of the run's
        `RunFinished` (a crash cannot separate them); else it is written right after.
        """
        from legato._effects_parts import current_switches

        cfg, state = self.config, self.state
        turn = self._turn()
        atomic = turn is not None and cfg.sessions is cfg.store and current_switches().atomic_turn
        if atomic:
            self.recorder.turn = turn
        event = RunFinished(output=cfg.output.to_json(output), usage=state.usage, cost=state.cost)
        try:
            self._record(event)
        finally:
            self.recorder.turn = None
        if turn is not None and not atomic and cfg.sessions is not None:
            cfg.sessions.append_turn(
                turn.session, turn.messages, run_id=state.run_id, context=turn.context
            )
        return event

    async def events(self) -> AsyncGenerator[RunEvent]:
        """Run until the run finishes or fails, yielding every event."""
        for event in self.journal.events:
            yield event
        self._scope.pending()  # what the gate recorded while loading is in the journal above
        async for event in self._drive(None):
            yield event

    async def advance(self, unit: Unit) -> AsyncGenerator[RunEvent]:
        """Run one unit of the run (see `next_unit`), yielding its events.

        A unit ends the way a run does when it fails (`RunFailed`, the error raised) or
        parks (`Parked`, `RunParked` raised); a unit that finishes the run commits its
        session turn with `RunFinished`. This is how a durable engine drives a run one
        activity at a time.
        """
        self._scope.pending()
        async for event in self._drive(unit):
            yield event

    def next_unit(self) -> Unit:
        """What the run does next, from its state alone (the plan of one step, per call).

        `model`: ask the model; `tool`: run the unfinished call `call_id`; `close`: end the
        step (the output tool's calls, failure limits, `StepFinished`, the answer); `done`:
        the run finished or failed.
        """
        state = self.state
        if state.finished or state.failed:
            return Unit(kind="done")
        last = state.last_message
        if last is None or last.role != "assistant":
            return Unit(kind="model", step=state.step + 1)
        runnable = self._runnable()
        if runnable:
            return Unit(kind="tool", step=state.step, call_id=runnable[0].id)
        return Unit(kind="close", step=state.step)

    def _runnable(self) -> list[ToolCallPart]:
        """The latest response's calls still to run (not finished, not the output tool's)."""
        state = self.state
        calls = [c for c in state.pending_calls if c.id not in state.results]
        special, _ = output_calls(self.config.output, calls, self._output)
        return [c for c in calls if c.id not in special]

    async def _unit(self, unit: Unit) -> AsyncIterator[RunEvent]:
        planned = self.next_unit()
        if unit.kind == "tools":
            if planned.kind != "tool" or planned.step != unit.step:
                return  # done already (a retried unit): nothing runs again
        elif planned != unit:
            return  # done already (a retried unit): nothing runs again
        step: AsyncIterator[RunEvent]
        if unit.kind == "model":
            step = self._call_model()
        elif unit.kind == "tool" and self._runnable()[1:]:
            call = next(c for c in self.state.pending_calls if c.id == unit.call_id)
            step = self._run_tools([call], close=False)
        else:  # a step's last call closes the step, as `_step` does; so does `close`
            step = self._step()
        async for event in step:
            yield event

    async def _drive(self, once: Unit | None) -> AsyncIterator[RunEvent]:
        """Run steps to the run's end (or the one unit `once`), yielding every event.

        Records how the run stops when it parks or fails.
        """
        try:
            while not (self.state.finished or self.state.failed):
                async for event in self._step() if once is None else self._unit(once):
                    if event is not self._scope.last_yielded:
                        # `event` was recorded just now: what is queued was recorded before it
                        for earlier in self._scope.pending():
                            yield earlier
                    yield event
                for event in self._scope.pending():
                    yield event
                if once is not None:
                    break
        except RunParked as exc:
            for event in await self._stop_owned("parked"):
                yield event
            requests = exc.parked.requests
            yield self._record(Parked(request_ids=tuple(r.id for r in requests)))
            if exc.parked.run_id != self.state.run_id:
                # a child parked: this run parks with it, and resuming it resumes the child
                from legato.approvals import ParkedRun

                here = ParkedRun(run_id=self.state.run_id, journal=self.journal, requests=requests)
                raise RunParked(here, str(exc)) from None
            raise
        except asyncio.CancelledError:
            await self._scope.close("was cancelled")  # the canceller records the run's end
            raise
        except Exception as exc:
            for event in await self._stop_owned("failed"):
                yield event
            yield self._record(RunFailed(error_type=type(exc).__name__, message=str(exc)))
            raise
        finally:
            await self._scope.close()
            with contextlib.suppress(StoreError):  # kept in `recorder.broken`
                self.recorder.flush()

    async def _stop_owned(self, why: str) -> list[RunEvent]:
        """Cancel what the run still owns (background children), before its end is recorded.

        What they record as they stop (a child's `SpawnFinished`) goes into the journal
        now, ahead of the run's own end; the events are returned for the stream.
        """
        await self._scope.close(why)
        return self._scope.pending()

    def stopping(self, why: str) -> None:
        """Note why the run is about to stop (e.g. `was cancelled (...)`), before it does.

        Tasks it owns (sub-agents) that are cancelled as it stops can tell why.
        """
        if self._scope.stopping is None:
            self._scope.stopping = why

    def pending_events(self) -> list[RunEvent]:
        """Events recorded (by the gate, the tools) but not yet streamed."""
        return self._scope.pending()

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
        tools = {t.name: t for t in merge_tools(list(tools.values()), self._session)}
        self._gate.bind(tools)
        self._executor = ToolExecutor(
            tools,
            default_timeout=self.config.tool_timeout,
            state=self._session,
            gate=self._gate,
        )
        return tools

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
        request, reservation = await self._gate.before_model(request, cfg.model)
        yield self._record(ModelRequested(step=step, model=cfg.model.name))
        started = time.perf_counter()
        response: ModelResponse | None = None
        try:
            async for event in self._scope.interleave(cfg.model.stream(request)):
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
        for event in await self._stop_owned("finished"):
            yield event
        yield self._finish(self._output)

    async def _run_tools(
        self, calls: list[ToolCallPart], *, close: bool = True
    ) -> AsyncIterator[RunEvent]:
        cfg, state = self.config, self.state
        step = state.step
        step_calls = list(state.pending_calls)  # all of the response's: some ran before a resume
        executor = self._executor
        if executor is None:  # a resumed run continues with tool calls: list its tools first
            await self._tools()
            executor = self._executor
            if executor is None:  # pragma: no cover - _tools always sets it
                msg = "no tools were loaded"
                raise ToolDefinitionError(msg)
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
                scope=self._scope,
                journal=self.journal,
                budget=cfg.budget,
                model=cfg.model,
            )

        async for event in executor.run_calls(
            calls,
            step=step,
            context=context,
            scope=self._scope,
            record=self._record,
            special=special,
        ):
            yield event  # journaled already (by `record`, by the gate, or by the scope)
        if not close:  # one call of the step (a durable engine's unit): the step goes on
            return
        check_failures(
            state,
            step_calls,
            tools=executor.tools,
            output_retries=cfg.output_retries,
            unknown_tool_retries=cfg.unknown_tool_retries,
        )
        if self._session is not None:
            self._session.check_rejections(state.contract_rejections, state.last_rejection)
        yield self._record(StepFinished(step=step))
        if self._output is not None:
            for event in await self._stop_owned("finished"):
                yield event
            yield self._finish(self._output)
