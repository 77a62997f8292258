"""`Agent`: a declarative bundle of model, tools, instructions and output type.

An agent holds configuration only; every run gets its own driver and journal, so one agent
can serve many concurrent runs. The options an agent takes are listed once, in
`AgentOptions`; the options one run may override are listed once, in `RunOptions`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypedDict, cast, overload

from pydantic import BaseModel
from typing_extensions import TypeVar, Unpack

from legato.exceptions import ConfigurationError, JournalError, RunNotResumable
from legato.messages import ContentPart, Message
from legato.tools import Tool, Toolset, ToolSource

# Imported when first used (the first run, a resume), so that defining an agent loads only
# the agent, its tools and its approval policy: the run loop, the journal's events, the
# model registry and contracts load with the first run (docs/benchmarks.md, issue 28).
if TYPE_CHECKING:
    from pathlib import Path

    from legato.approvals import Action, ApprovalPolicy, ParkedRun
    from legato.budgets import Budget, BudgetLimits
    from legato.context import ContextPolicy
    from legato.contracts import State, StateOptions
    from legato.events import Journal, JournalEvent, RunEvent
    from legato.memory import Memory
    from legato.models import Model, ModelSettings
    from legato.run._handle import RunHandle
    from legato.run._loop import RunConfig, RunDriver
    from legato.run._output import OutputMode, OutputSchema
    from legato.run._result import RunResult
    from legato.security import Hook
    from legato.store import Store

__all__ = ["Agent", "AgentOptions", "Prompt", "ResumeOptions", "RunOptions"]

OutputT = TypeVar("OutputT", default=str)
Prompt = str | Message | Sequence[ContentPart]
"""What a run starts from: text, a user message, or content parts (text, images, ...)."""


class AgentOptions(TypedDict, total=False):
    """What an `Agent` is configured with (every key optional)."""

    tools: Sequence[Tool | ToolSource | Callable[..., Any]]
    """Tools, plain functions, `Toolset`s or other tool sources."""
    instructions: str | None
    """The system prompt."""
    name: str
    """A name for journals and traces (default `agent`)."""
    output_mode: OutputMode
    """`tool` (a `final_result` tool, the default) or `native` (provider JSON mode)."""
    max_steps: int
    """Model calls allowed per run (default 50)."""
    model_settings: ModelSettings | None
    """Default generation settings."""
    output_retries: int
    """Invalid final answers tolerated before the run fails (default 1)."""
    tool_timeout: float | None
    """Seconds any tool call may take unless the tool sets its own (default 300; None: no
    limit). A timed-out call becomes an error result; a sync tool's worker thread cannot
    be killed, so its late result is discarded (and its effect may still land), unless the
    tool runs in a worker process (`isolation="process"`), which is killed."""
    approvals: ApprovalPolicy | Mapping[str, Action] | None
    """Which calls run freely, wait for a decision, or never run (`legato.approvals`); a
    mapping is shorthand: `{"send_email": "ask"}`."""
    budget: Budget | BudgetLimits | None
    """Limits per run (`BudgetLimits`: a fresh budget each run), or one `Budget` every run
    of this agent shares."""
    hooks: Sequence[Hook]
    """Security hooks (`legato.security`), in order."""
    state: State[Any] | BaseModel | None
    """The verified state runs start from (`legato.contracts.State`, or an instance of its
    pydantic model); tools with contracts change it."""
    state_options: StateOptions | None
    """How the model sees the state, and the per-run rejection limit."""
    store: Store | None
    """Where run journals and sessions are kept; runs with `session=` and no store use a
    `SQLiteStore` at `.legato/legato.db`."""
    context: ContextPolicy | None
    """When and how to compact the conversation (see `legato.context`)."""
    memory: Memory | None
    """Long-term memory: recall into the instructions and memory tools."""
    isolate_irreversible: bool
    """Run irreversible sync tools that leave `isolation` unset (given directly or in a
    `Toolset`) in a worker process that is killed on cancellation or timeout (default False:
    a thread, whose effect may land after the call was abandoned). See `Tool.isolation`."""


class RunOptions(TypedDict, total=False):
    """What one run may add or override (every key optional)."""

    message_history: Sequence[Message]
    """Earlier messages (e.g. `result.messages`) to continue from."""
    deps: Any
    """Passed to tools as `RunContext.deps`."""
    model: Model | str | None
    """Use another model for this run."""
    model_settings: ModelSettings | None
    """Settings overriding the agent's for this run."""
    max_steps: int | None
    """Override the agent's step allowance for this run."""
    approvals: ApprovalPolicy | Mapping[str, Action] | None
    """The approval policy for this run instead of the agent's."""
    budget: Budget | BudgetLimits | None
    """The budget for this run instead of the agent's."""
    timeout: float | None
    """Seconds the whole run may take; then it is fenced and stopped (`RunTimedOut`)."""
    state: State[Any] | BaseModel | None
    """Start from this verified state instead of the agent's (e.g. an earlier
    `result.state`)."""
    session: str | None
    """Continue the stored conversation of this name (created on first use); the run's
    messages are added to it when the run finishes."""
    run_id: str | None
    """The new run's id (default: a fresh uuid4); a durable engine passes its own."""
    owner: str | None
    """Who drives the run, recorded in its `RunStarted` event (default: host:pid)."""


class ResumeOptions(TypedDict, total=False):
    """What resuming a parked or interrupted run may set."""

    deps: Any
    """Passed to tools as `RunContext.deps`."""
    approvals: ApprovalPolicy | Mapping[str, Action] | None
    """The approval policy (its store holds the decisions to claim)."""
    budget: Budget | BudgetLimits | None
    """The budget for the rest of the run."""
    timeout: float | None
    """Seconds the rest of the run may take."""
    owner: str | None
    """Who resumes the run, recorded in its `RunResumed` event (default: host:pid)."""
    model: Model | str | None
    """Continue the run on this model (a `Model` or `"provider:model"`) instead of the
    agent's, e.g. when the provider it ran on is down; recorded in its `RunResumed` event."""
    takeover: bool
    """Resume a run that looks live (its last owner is a process on another host, which
    cannot be checked): say so only when that process is known to be gone."""


def _as_state(state: State[Any] | BaseModel | None) -> State[Any] | None:
    """A `State` for the `state=` argument (a model instance is its initial values)."""
    if state is None:
        return None
    from legato.contracts import State

    if isinstance(state, State):
        return state
    return State(state)


def _prompt_message(prompt: Prompt | None) -> Message | None:
    if prompt is None or isinstance(prompt, Message):
        return prompt
    if isinstance(prompt, str):
        return Message.user(prompt)
    return Message.user(list(prompt))


class Agent(Generic[OutputT]):
    """An LLM agent: a model, tools, instructions and the type of its answer.

    ```python
    agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], instructions="Be brief.")
    result = agent.run_sync("Weather in Paris?")
    ```

    The keyword options are described in `AgentOptions`; `output_type` (default `str`)
    is the type of the final answer: anything pydantic can validate.
    """

    @overload
    def __init__(self: Agent[str], model: Model | str, **options: Unpack[AgentOptions]) -> None: ...

    @overload
    def __init__(
        self, model: Model | str, *, output_type: type[OutputT], **options: Unpack[AgentOptions]
    ) -> None: ...

    def __init__(
        self, model: Model | str, *, output_type: type[Any] = str, **options: Unpack[AgentOptions]
    ) -> None:
        """Configure an agent: a `Model` or a `"provider:model"` string (resolved on first use)."""
        max_steps = options.get("max_steps", 50)
        if max_steps < 1:
            msg = "max_steps must be at least 1"
            raise ConfigurationError(msg)
        name = options.get("name", "agent")
        self.name = name
        self.instructions = options.get("instructions")
        self.max_steps = max_steps
        self._model_settings = options.get("model_settings")
        self.output_retries = options.get("output_retries", 1)
        self.tool_timeout = options.get("tool_timeout", 300.0)
        from legato.approvals import ApprovalPolicy

        self.approvals = ApprovalPolicy.of(options.get("approvals"))
        self.budget = options.get("budget")
        self.hooks: tuple[Hook, ...] = tuple(options.get("hooks", ()))
        self.state = _as_state(options.get("state"))
        self.state_options = options.get("state_options")
        self._model_spec = model
        self._model: Model | None = None if isinstance(model, str) else model
        self._output_type: type[Any] = output_type
        self._output_mode: OutputMode = options.get("output_mode", "tool")
        self._output_schema: OutputSchema[OutputT] | None = None
        if output_type is not str:  # checked now: a type pydantic cannot validate fails here
            self._output_schema = self._output
        tools = options.get("tools", ())
        loose = [t for t in tools if isinstance(t, Tool) or not isinstance(t, ToolSource)]
        sources = [t for t in tools if not isinstance(t, Tool) and isinstance(t, ToolSource)]
        if options.get("isolate_irreversible", False):
            loose = [t.isolated_if_irreversible() if isinstance(t, Tool) else t for t in loose]
            sources = [
                Toolset([t.isolated_if_irreversible() for t in s], name=s.name)
                if isinstance(s, Toolset)
                else s
                for s in sources
            ]
        self.toolset = Toolset(loose, name=f"{name}-tools")
        self.tool_sources: list[ToolSource] = [self.toolset, *sources]
        self.store = options.get("store")
        self.context = options.get("context")
        self.memory = options.get("memory")
        if self.context is not None and self.context.tools():
            self.tool_sources.append(Toolset(self.context.tools(), name="context"))
        memory_toolset = self.memory.toolset() if self.memory is not None else None
        if memory_toolset is not None:
            self.tool_sources.append(memory_toolset)

    @property
    def model(self) -> Model:
        """The agent's model (a model string is resolved the first time it is needed)."""
        if self._model is None:
            from legato.models import infer_model

            self._model = infer_model(self._model_spec)
        return self._model

    @property
    def model_settings(self) -> ModelSettings:
        """Settings of every model call (temperature, max tokens, ...); the defaults if unset."""
        if self._model_settings is None:
            from legato.models import ModelSettings

            self._model_settings = ModelSettings()
        return self._model_settings

    @model_settings.setter
    def model_settings(self, settings: ModelSettings) -> None:
        self._model_settings = settings

    @property
    def _output(self) -> OutputSchema[OutputT]:
        """How the final answer is validated (free text needs nothing until the first run)."""
        if self._output_schema is None:
            from legato.run._output import OutputSchema

            built = OutputSchema.build(self._output_type, self._output_mode)
            self._output_schema = cast("OutputSchema[OutputT]", built)
        return self._output_schema

    def _store(self) -> Store:
        if self.store is None:
            from legato.store import SQLiteStore

            self.store = SQLiteStore()
        return self.store

    @property
    def output_type(self) -> type[OutputT]:
        """The type of the final answer."""
        return cast("type[OutputT]", self._output_type)

    # -- running -----------------------------------------------------------------------------------

    def run_config(self, **options: Unpack[RunOptions]) -> RunConfig[OutputT]:
        """The configuration a run of this agent uses (to drive or resume a run directly)."""
        from legato.approvals import ApprovalPolicy
        from legato.budgets import Budget, BudgetLimits
        from legato.models import infer_model
        from legato.run._loop import RunConfig

        model = options.get("model")
        state = options.get("state")
        budget = options.get("budget")
        chosen = budget if budget is not None else self.budget
        return RunConfig(
            agent_name=self.name,
            model=infer_model(model) if model is not None else self.model,
            instructions=self.instructions,
            tool_sources=self.tool_sources,
            output=self._output,
            settings=self.model_settings.merged(options.get("model_settings")),
            max_steps=options.get("max_steps") or self.max_steps,
            output_retries=self.output_retries,
            tool_timeout=self.tool_timeout,
            deps=options.get("deps"),
            state=_as_state(state) if state is not None else self.state,
            state_options=self.state_options,
            context=self.context,
            approvals=ApprovalPolicy.of(options.get("approvals")) or self.approvals,
            budget=Budget(chosen) if isinstance(chosen, BudgetLimits) else chosen,
            hooks=self.hooks,
        )

    def as_tool(
        self,
        *,
        name: str,
        description: str,
        max_depth: int = 3,
        timeout: float | None = None,
        own_policy: bool = False,
    ) -> Tool:
        """This agent as a tool another agent calls with a task; each call is a child run.

        The child's events stream through the caller's run tagged with their lineage, and
        the caller's journal records the child's start and end (see `legato.spawn`). The
        child runs under the caller's gate: its approval policy nested in the caller's (the
        stricter action wins), the caller's hooks, budget and hold. `own_policy=True` is
        the explicit, logged opt-out that lets its own policy be wider than the caller's.
        """
        from legato.spawn import agent_tool

        return agent_tool(
            self,
            name=name,
            description=description,
            max_depth=max_depth,
            timeout=timeout,
            own_policy=own_policy,
        )

    def _driver(self, prompt: Prompt | None, options: RunOptions) -> RunDriver[OutputT]:
        config = self.run_config(**options)
        message = _prompt_message(prompt)
        history = list(options.get("message_history", ()))
        session = options.get("session")
        carried = None
        if session is not None:
            store = self._store()
            stored = store.load_session(session, create=True)
            carried = store.session_context(session) if not history else None
            history = [*stored, *history]
        if message is None and not history:
            msg = "nothing to run: pass a prompt or a message_history to continue"
            raise ConfigurationError(msg)
        if self.memory is not None and message is not None:
            instructions = self.memory.instructions_for(self.instructions, message.text)
            config = replace(config, instructions=instructions)
        store = self._store() if session is not None else self.store
        if store is not None:  # without one, the defaults hold (and a run costs no copy)
            config = replace(
                config,
                store=store,
                session=session,
                sessions=store if session is not None else None,
                carry_context=not options.get("message_history"),
            )
        from legato.run._loop import RunDriver

        driver = RunDriver(config)
        driver.start(message, history, run_id=options.get("run_id"), owner=options.get("owner"))
        driver.carry_over(carried)
        return driver

    def new_driver(
        self, prompt: Prompt | None = None, /, **options: Unpack[RunOptions]
    ) -> RunDriver[OutputT]:
        """The driver of a new run, its start recorded (nothing runs yet; no timeout).

        For a durable engine that advances the run one unit at a time
        (`RunDriver.next_unit`, `RunDriver.advance`).
        """
        return self._driver(prompt, options)

    def start(
        self, prompt: Prompt | None = None, /, **options: Unpack[RunOptions]
    ) -> RunHandle[OutputT]:
        """Start a run on the running event loop and return its handle (see `run`).

        `await handle.result()`, iterate `handle.events()`, or `handle.cancel()`.
        """
        from legato.run._handle import RunHandle

        driver = self._driver(prompt, options)
        return RunHandle(driver, timeout=options.get("timeout"))

    async def run(
        self, prompt: Prompt | None = None, /, **options: Unpack[RunOptions]
    ) -> RunResult[OutputT]:
        """Run the agent to its final answer (options: see `RunOptions`).

        `prompt` is the user's message; None continues `message_history` as it is.
        Raises `RunParked` when a call waits for an approval nobody has given yet: decide
        it through the policy's store, then `resume` the run.
        """
        return await _finish(self.start(prompt, **options))

    def run_sync(
        self, prompt: Prompt | None = None, /, **options: Unpack[RunOptions]
    ) -> RunResult[OutputT]:
        """`run` for synchronous code; works inside a running event loop too."""
        from legato.run._sync import run_sync

        return run_sync(self.run(prompt, **options))

    async def stream(
        self, prompt: Prompt | None = None, /, **options: Unpack[RunOptions]
    ) -> AsyncGenerator[RunEvent]:
        """Run the agent, yielding every event: text deltas, tool calls, results, the end.

        Closing the stream early (break, aclose) cancels the run with the same fence as
        `cancel()`, and the run ends before the stream does.
        """
        handle = self.start(prompt, **options)
        try:
            async for event in handle.events():
                yield event
        finally:
            if not handle.done:
                handle.cancel("the stream was closed")
                await handle.wait()

    async def resume(
        self, run: str | Journal | ParkedRun, /, **options: Unpack[ResumeOptions]
    ) -> RunResult[OutputT]:
        """Continue a parked or interrupted run, by id or from its journal.

        `run` is a run id in the agent's store, a `Journal`, a `ParkedRun` or JSONL text.
        Effects the journal shows as finished are never run again; one admitted and never
        finished (a crash) is reconciled by its tool's declared kind. Approval decisions are
        claimed from the policy's store, each exactly once. Raises `RunParked` again while
        decisions are missing, `RunNotResumable` for an unknown, ended or edited run, and
        `JournalConflict` when another process resumed the same stored run first (nothing
        runs then). With a store, the resumed run is written ahead like any other and, when
        it finishes, its session gets the turn.
        """
        return await _finish(self.start_resumed(run, **options))

    def resume_sync(
        self, run: str | Journal | ParkedRun, /, **options: Unpack[ResumeOptions]
    ) -> RunResult[OutputT]:
        """`resume` for synchronous code."""
        from legato.run._sync import run_sync

        return run_sync(self.resume(run, **options))

    def start_resumed(
        self, run: str | Journal | ParkedRun, /, **options: Unpack[ResumeOptions]
    ) -> RunHandle[OutputT]:
        """`resume`, returning the handle."""
        from legato.run._handle import RunHandle

        driver = self.resumed_driver(run, **options)
        return RunHandle(driver, timeout=options.get("timeout"))

    def resumed_driver(
        self,
        run: str | Journal | ParkedRun,
        /,
        *,
        stored: Sequence[JournalEvent] | None = None,
        **options: Unpack[ResumeOptions],
    ) -> RunDriver[OutputT]:
        """The driver of a resumed run, its claim recorded (see `resume`; no timeout).

        For a durable engine that advances the run one unit at a time
        (`RunDriver.next_unit`, `RunDriver.advance`). `stored`: the run's journal exactly
        as the agent's store holds it now (a worker's cache, checked against the store's
        event count), used instead of loading it; `run` is then the run id.
        """
        if stored is not None and self.store is not None:
            info = self.store.run_info(str(run))
            if info is None or info.events != len(stored):
                raise RunNotResumable(str(run), "the journal given is not the stored one")
            events, saved, session = list(stored), len(stored), info.session
        else:
            events, saved, session = self._resume_prefix(run)
        _check_not_live(events, takeover=bool(options.get("takeover")))
        config = self.run_config(
            deps=options.get("deps"),
            approvals=options.get("approvals"),
            budget=options.get("budget"),
            model=options.get("model"),
        )
        from legato.budgets import BudgetLimits

        chosen = options.get("budget")
        chosen = chosen if chosen is not None else self.budget
        if isinstance(chosen, BudgetLimits) and config.budget is not None:
            # Limits per run: the run's fresh budget starts with what the run had spent
            # before it was interrupted. A shared `Budget` object already holds that.
            config.budget.count_spent(config.budget.spent_in(events))
        if self.store is not None:
            config = replace(
                config,
                store=self.store,
                session=session,
                sessions=self.store if session is not None else None,
            )
        from legato.events import Journal
        from legato.run._loop import RunDriver

        driver = RunDriver(config, journal=Journal(events), saved=saved)
        from legato._effects_parts import current_switches

        if current_switches().resume_claim:
            driver.resumed(options.get("owner"))  # the claim: a losing resumer stops here
        return driver

    def _resume_prefix(
        self, run: str | Journal | ParkedRun
    ) -> tuple[list[JournalEvent], int, str | None]:
        """The journal to continue, how much of it the store holds, and its session.

        A run id is loaded from the store. A journal passed in must agree with what the
        store holds of that run (the store's copy is the truth; an older or edited copy is
        refused); a run the store does not know is stored whole before it continues.
        """
        from legato.approvals import ParkedRun
        from legato.events import Journal, RunFailed, RunFinished, RunStarted

        run_id: str | None
        if isinstance(run, ParkedRun):
            journal: Journal | None = run.journal
        elif isinstance(run, Journal):
            journal = run
        elif run.lstrip().startswith("{"):
            journal = Journal.from_jsonl(run)
        else:
            journal = None
        if journal is None:
            run_id = str(run).strip()
            if self.store is None:
                raise RunNotResumable(run_id, "the agent has no store to load it from")
            try:
                stored = list(self.store.load_run(run_id).events)
            except JournalError as exc:
                raise RunNotResumable(run_id, str(exc)) from exc
            events = stored
        else:
            events = list(journal.events)
            run_id = journal.run_id
            stored = None
        first = events[0] if events else None
        if not isinstance(first, RunStarted):
            raise RunNotResumable(run_id, "its journal does not begin with RunStarted")
        if any(isinstance(e, RunFailed | RunFinished) for e in events):
            raise RunNotResumable(run_id, "it has already finished or failed")
        if self.store is None:
            return events, 0, None
        info = self.store.run_info(first.run_id)
        if stored is None and info is not None:
            stored = list(self.store.load_run(first.run_id).events)
        if stored is None:  # not in this store yet: it is stored whole, then continued
            self.store.append_events(first.run_id, events, start=0)
            return events, len(events), None
        session = info.session if info is not None else None
        if stored is events:  # resumed by id: the store's copy is the journal
            return events, len(events), session
        if not _same_prefix(stored, events):
            why = (
                "the journal passed differs from the stored one (edited, or an older copy: "
                f"the store holds {len(stored)} events, it has {len(events)}); resume it by id"
            )
            raise RunNotResumable(first.run_id, why)
        if len(events) > len(stored):  # events recorded in memory after the last commit
            self.store.append_events(first.run_id, events[len(stored) :], start=len(stored))
        return events, len(events), session

    def fork(self, run_id: str, at: int) -> str:
        """Fork a stored run at its event `at` (1-based) into a new stored run; its id.

        The new run shares the first `at` events and re-executes none of them; `resume`
        continues it. A fork point inside a call's flight, or after the run's end, is a
        `JournalError`.
        """
        from legato.run import fork_stored

        if self.store is None:
            raise RunNotResumable(run_id, "the agent has no store to fork it in")
        return fork_stored(self.store, run_id, at)

    def stream_sync(
        self, prompt: Prompt | None = None, /, **options: Unpack[RunOptions]
    ) -> Iterator[RunEvent]:
        """`stream` for synchronous code; works inside a running event loop too."""
        from legato.run._handle import HandleEvents
        from legato.run._sync import iterate_sync

        # `stream`'s events, with those already buffered taken as a batch (`HandleEvents`)
        return iterate_sync(HandleEvents(lambda: self.start(prompt, **options)))

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        approvals: ApprovalPolicy | None = None,
        budget: BudgetLimits | None = None,
        max_steps: int | None = None,
    ) -> Agent[str]:
        """An agent from a YAML agent file (see `legato.agent_file`).

        `approvals`, `budget` and `max_steps` set here are floors: the file may tighten
        them and never loosen them.
        """
        from legato._agent_spec import read_agent_file

        recipe = read_agent_file(path, approvals=approvals, budget=budget, max_steps=max_steps)
        return recipe.build(Agent)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self._model_spec!r})"


def _check_not_live(events: Sequence[JournalEvent], *, takeover: bool) -> None:
    """Refuse to resume a run another live process is still driving.

    A parked run is resumable; an interrupted one only when the process that last drove it
    (its `RunStarted` or latest `RunResumed` owner) is gone. On this host that is checked;
    a process on another host cannot be, so such a run needs `takeover=True`.
    """
    from legato._effects_parts import current_switches
    from legato.events import Parked, RunResumed, RunStarted
    from legato.run._loop import owner_alive

    if takeover or not events or isinstance(events[-1], Parked):
        return
    if not current_switches().refuse_live:
        return
    owner: str | None = None
    for event in events:
        if isinstance(event, RunStarted | RunResumed):
            owner = event.owner
    alive = owner_alive(owner)
    run_id = events[0].run_id if isinstance(events[0], RunStarted) else None
    if alive:
        why = f"it is running in process {owner}; resume it once that process has stopped"
        raise RunNotResumable(run_id, why)
    if alive is None and owner is not None:
        why = (
            f"it was last driven by {owner}, which this host cannot check; pass "
            "takeover=True once that process is known to have stopped"
        )
        raise RunNotResumable(run_id, why)


def _same_prefix(stored: Sequence[JournalEvent], given: Sequence[JournalEvent]) -> bool:
    """Whether the shorter of two journals is the start of the longer (`given` not shorter)."""
    if len(given) < len(stored):
        return False
    from legato.events import Journal

    # compared as stored: the JSON form is what the store's copy was read back from
    ours = Journal(given[: len(stored)]).to_jsonl()
    return ours == Journal(stored).to_jsonl()


async def _finish(handle: RunHandle[OutputT]) -> RunResult[OutputT]:
    """The handle's result; cancelling the caller cancels the run (and waits for it to stop)."""
    try:
        return await handle.result()
    except asyncio.CancelledError:
        handle.cancel("the caller was cancelled")
        await asyncio.shield(handle.wait())
        raise
