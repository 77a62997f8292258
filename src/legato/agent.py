"""`Agent`: a declarative bundle of model, tools, instructions and output type.

An agent holds configuration only; every run gets its own driver and journal, so one agent
can serve many concurrent runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, cast, overload

from typing_extensions import TypeVar

from legato.events import Journal, RunEvent, RunFailed, RunFinished
from legato.exceptions import ConfigurationError, JournalError
from legato.messages import ContentPart, Message
from legato.models import Model, ModelSettings, infer_model
from legato.run._loop import RunConfig, RunDriver
from legato.run._output import OutputMode, OutputSchema
from legato.run._result import RunResult
from legato.run._sync import iterate_sync, run_sync
from legato.tools import Tool, Toolset, ToolSource

if TYPE_CHECKING:  # imported when first used, so `import legato` stays light
    from legato.approvals import Action, ApprovalPolicy, ParkedRun
    from legato.budgets import Budget, BudgetLimits
    from legato.run._handle import RunHandle
    from legato.security import Hook

__all__ = ["Agent", "Prompt"]

OutputT = TypeVar("OutputT", default=str)
Prompt = str | Message | Sequence[ContentPart]
"""What a run starts from: text, a user message, or content parts (text, images, ...)."""


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
    """

    @overload
    def __init__(
        self: Agent[str],
        model: Model | str,
        *,
        tools: Sequence[Tool | ToolSource | Callable[..., Any]] = (),
        instructions: str | None = None,
        name: str = "agent",
        output_mode: OutputMode = "tool",
        max_steps: int = 50,
        model_settings: ModelSettings | None = None,
        output_retries: int = 1,
        tool_timeout: float | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        hooks: Sequence[Hook] = (),
    ) -> None: ...

    @overload
    def __init__(
        self,
        model: Model | str,
        *,
        tools: Sequence[Tool | ToolSource | Callable[..., Any]] = (),
        instructions: str | None = None,
        name: str = "agent",
        output_type: type[OutputT],
        output_mode: OutputMode = "tool",
        max_steps: int = 50,
        model_settings: ModelSettings | None = None,
        output_retries: int = 1,
        tool_timeout: float | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        hooks: Sequence[Hook] = (),
    ) -> None: ...

    def __init__(
        self,
        model: Model | str,
        *,
        tools: Sequence[Tool | ToolSource | Callable[..., Any]] = (),
        instructions: str | None = None,
        name: str = "agent",
        output_type: type[Any] = str,
        output_mode: OutputMode = "tool",
        max_steps: int = 50,
        model_settings: ModelSettings | None = None,
        output_retries: int = 1,
        tool_timeout: float | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        hooks: Sequence[Hook] = (),
    ) -> None:
        """Configure an agent.

        Args:
            model: A `Model`, or a `"provider:model"` string resolved on first use.
            tools: Tools, plain functions, `Toolset`s or other tool sources.
            instructions: The system prompt.
            name: A name for journals and traces.
            output_type: The type of the final answer (`str` for free text); anything
                pydantic can validate: a model, dataclass, TypedDict, list, int, ...
            output_mode: `tool` (a `final_result` tool) or `native` (provider JSON mode).
            max_steps: Model calls allowed per run.
            model_settings: Default generation settings.
            output_retries: Invalid final answers tolerated before the run fails.
            tool_timeout: Seconds any tool call may take unless the tool sets its own.
            approvals: Which calls run freely, wait for a decision, or never run
                (`legato.approvals`); a mapping is shorthand: `{"send_email": "ask"}`.
            budget: Limits per run (`BudgetLimits`: a fresh budget each run), or one
                `Budget` every run of this agent shares.
            hooks: Security hooks (`legato.security`), in order.
        """
        if max_steps < 1:
            msg = "max_steps must be at least 1"
            raise ConfigurationError(msg)
        self.name = name
        self.instructions = instructions
        self.max_steps = max_steps
        self.model_settings = model_settings or ModelSettings()
        self.output_retries = output_retries
        self.tool_timeout = tool_timeout
        from legato.approvals import ApprovalPolicy

        self.approvals = ApprovalPolicy.of(approvals)
        self.budget = budget
        self.hooks: tuple[Hook, ...] = tuple(hooks)
        self._model_spec = model
        self._model: Model | None = None if isinstance(model, str) else model
        self._output = cast(OutputSchema[OutputT], OutputSchema.build(output_type, output_mode))
        loose = [t for t in tools if isinstance(t, Tool) or not isinstance(t, ToolSource)]
        sources = [t for t in tools if not isinstance(t, Tool) and isinstance(t, ToolSource)]
        self.toolset = Toolset(loose, name=f"{name}-tools")
        self.tool_sources: list[ToolSource] = [self.toolset, *sources]

    @property
    def model(self) -> Model:
        """The agent's model (a model string is resolved the first time it is needed)."""
        if self._model is None:
            self._model = infer_model(self._model_spec)
        return self._model

    @property
    def output_type(self) -> type[OutputT]:
        """The type of the final answer."""
        return self._output.output_type

    # -- running -----------------------------------------------------------------------------------

    def _driver(
        self,
        prompt: Prompt | None,
        *,
        message_history: Sequence[Message],
        deps: Any,
        model: Model | str | None,
        model_settings: ModelSettings | None,
        max_steps: int | None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        journal: Journal | None = None,
    ) -> RunDriver[OutputT]:
        from legato.approvals import ApprovalPolicy
        from legato.budgets import Budget, BudgetLimits

        chosen = budget if budget is not None else self.budget
        config: RunConfig[OutputT] = RunConfig(
            agent_name=self.name,
            model=infer_model(model) if model is not None else self.model,
            instructions=self.instructions,
            tool_sources=self.tool_sources,
            output=self._output,
            settings=self.model_settings.merged(model_settings),
            max_steps=max_steps or self.max_steps,
            output_retries=self.output_retries,
            tool_timeout=self.tool_timeout,
            deps=deps,
            approvals=ApprovalPolicy.of(approvals) or self.approvals,
            budget=Budget(chosen) if isinstance(chosen, BudgetLimits) else chosen,
            hooks=self.hooks,
        )
        driver = RunDriver(config, journal=journal)
        if journal is None:
            driver.start(_prompt_message(prompt), message_history)
        return driver

    async def run(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the run's own fenced timeout
    ) -> RunResult[OutputT]:
        """Run the agent to its final answer.

        Args:
            prompt: The user's message; None continues `message_history` as it is.
            message_history: Earlier messages (e.g. `result.messages`) to continue from.
            deps: Passed to tools as `RunContext.deps`.
            model: Use another model for this run.
            model_settings: Settings overriding the agent's for this run.
            max_steps: Override the agent's step allowance for this run.
            approvals: The approval policy for this run instead of the agent's.
            budget: The budget for this run instead of the agent's.
            timeout: Seconds the whole run may take; then it is fenced and stopped
                (`RunTimedOut`).

        Raises `RunParked` when a call waits for an approval nobody has given yet:
        decide it through the policy's store, then `resume` the run.
        """
        handle = self.start(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
            approvals=approvals,
            budget=budget,
            timeout=timeout,
        )
        return await _finish(handle)

    def start(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,
    ) -> RunHandle[OutputT]:
        """Start a run on the running event loop and return its handle (see `run`).

        `await handle.result()`, iterate `handle.events()`, or `handle.cancel()`.
        """
        driver = self._driver(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
            approvals=approvals,
            budget=budget,
        )
        from legato.run._handle import RunHandle

        return RunHandle(driver, timeout=timeout)

    async def resume(
        self,
        journal: Journal | ParkedRun | str,
        *,
        deps: Any = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the run's own fenced timeout
    ) -> RunResult[OutputT]:
        """Continue a parked (or interrupted) run from its journal (or its JSONL text).

        Effects the journal shows as admitted are never run again; approval decisions
        are claimed from the policy's store, each exactly once. Raises `RunParked` again
        while decisions are missing.
        """
        return await _finish(
            self.start_resumed(
                journal, deps=deps, approvals=approvals, budget=budget, timeout=timeout
            )
        )

    def start_resumed(
        self,
        journal: Journal | ParkedRun | str,
        *,
        deps: Any = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,
    ) -> RunHandle[OutputT]:
        """`resume`, returning the handle."""
        from legato.approvals import ParkedRun
        from legato.run._handle import RunHandle

        if isinstance(journal, ParkedRun):
            journal = journal.journal
        elif isinstance(journal, str):
            journal = Journal.from_jsonl(journal)
        events = list(journal.events)
        if any(isinstance(e, RunFailed | RunFinished) for e in events):
            msg = "cannot resume a run that has already finished or failed"
            raise JournalError(msg)
        driver = self._driver(
            None,
            message_history=(),
            deps=deps,
            model=None,
            model_settings=None,
            max_steps=None,
            approvals=approvals,
            budget=budget,
            journal=Journal(events),
        )
        return RunHandle(driver, timeout=timeout)

    def run_sync(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,
    ) -> RunResult[OutputT]:
        """`run` for synchronous code; works inside a running event loop too."""
        return run_sync(
            self.run(
                prompt,
                message_history=message_history,
                deps=deps,
                model=model,
                model_settings=model_settings,
                max_steps=max_steps,
                approvals=approvals,
                budget=budget,
                timeout=timeout,
            )
        )

    async def stream(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the run's own fenced timeout
    ) -> AsyncGenerator[RunEvent]:
        """Run the agent, yielding every event: text deltas, tool calls, results, the end.

        Closing the stream early cancels the run (with the same fence as `cancel()`).
        """
        handle = self.start(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
            approvals=approvals,
            budget=budget,
            timeout=timeout,
        )
        try:
            async for event in handle.events():
                yield event
        finally:
            if not handle.done:
                handle.cancel("the stream was closed")
                await handle.wait()

    def stream_sync(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
        approvals: ApprovalPolicy | Mapping[str, Action] | None = None,
        budget: Budget | BudgetLimits | None = None,
        timeout: float | None = None,
    ) -> Iterator[RunEvent]:
        """`stream` for synchronous code; works inside a running event loop too."""
        return iterate_sync(
            self.stream(
                prompt,
                message_history=message_history,
                deps=deps,
                model=model,
                model_settings=model_settings,
                max_steps=max_steps,
                approvals=approvals,
                budget=budget,
                timeout=timeout,
            )
        )

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self._model_spec!r})"


async def _finish(handle: RunHandle[OutputT]) -> RunResult[OutputT]:
    """The handle's result; cancelling the caller cancels the run (and waits for it to stop)."""
    try:
        return await handle.result()
    except asyncio.CancelledError:
        handle.cancel("the caller was cancelled")
        await asyncio.shield(handle.wait())
        raise
