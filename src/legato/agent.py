"""`Agent`: a declarative bundle of model, tools, instructions and output type.

An agent holds configuration only; every run gets its own driver and journal, so one agent
can serve many concurrent runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Generic, cast, overload

from typing_extensions import TypeVar

from legato.events import RunEvent
from legato.exceptions import ConfigurationError
from legato.messages import ContentPart, Message
from legato.models import Model, ModelSettings, infer_model
from legato.run._loop import RunConfig, RunDriver
from legato.run._output import OutputMode, OutputSchema
from legato.run._result import RunResult
from legato.run._sync import iterate_sync, run_sync
from legato.tools import Tool, Toolset, ToolSource

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
        tool_timeout: float | None = 300.0,
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
        tool_timeout: float | None = 300.0,
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
        tool_timeout: float | None = 300.0,
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
            tool_timeout: Seconds any tool call may take unless the tool sets its own
                (None: no limit). A timed-out call becomes an error result; a sync tool's
                worker thread cannot be killed, so its late result is discarded.
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

    def run_config(
        self,
        *,
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
    ) -> RunConfig[OutputT]:
        """The configuration a run of this agent uses (to drive or resume a run directly)."""
        return RunConfig(
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
        )

    def as_tool(
        self, *, name: str, description: str, max_depth: int = 3, timeout: float | None = None
    ) -> Tool:
        """This agent as a tool another agent calls with a task; each call is a child run.

        The child's events stream through the caller's run tagged with their lineage, and
        the caller's journal records the child's start and end (see `legato.spawn`).
        """
        from legato.spawn import agent_tool

        return agent_tool(
            self, name=name, description=description, max_depth=max_depth, timeout=timeout
        )

    def _driver(
        self,
        prompt: Prompt | None,
        *,
        message_history: Sequence[Message],
        deps: Any,
        model: Model | str | None,
        model_settings: ModelSettings | None,
        max_steps: int | None,
    ) -> RunDriver[OutputT]:
        config = self.run_config(
            deps=deps, model=model, model_settings=model_settings, max_steps=max_steps
        )
        driver = RunDriver(config)
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
    ) -> RunResult[OutputT]:
        """Run the agent to its final answer.

        Args:
            prompt: The user's message; None continues `message_history` as it is.
            message_history: Earlier messages (e.g. `result.messages`) to continue from.
            deps: Passed to tools as `RunContext.deps`.
            model: Use another model for this run.
            model_settings: Settings overriding the agent's for this run.
            max_steps: Override the agent's step allowance for this run.
        """
        driver = self._driver(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
        )
        async for _ in driver.events():
            pass
        return driver.result()

    def run_sync(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
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
    ) -> AsyncIterator[RunEvent]:
        """Run the agent, yielding every event: text deltas, tool calls, results, the end."""
        driver = self._driver(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
        )
        # closing the stream early (break, aclose) ends the run and cancels what it owns
        async with contextlib.aclosing(cast(AsyncGenerator[RunEvent], driver.events())) as events:
            async for event in events:
                yield event

    def stream_sync(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
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
            )
        )

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self._model_spec!r})"
