"""`Agent`: a declarative bundle of model, tools, instructions and output type.

An agent holds configuration only; every run gets its own driver and journal, so one agent
can serve many concurrent runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, cast, overload

from typing_extensions import TypeVar

from legato.events import RunEvent
from legato.exceptions import ConfigurationError
from legato.messages import ContentPart, Message
from legato.models import Model, ModelSettings, infer_model
from legato.run._loop import RunConfig, RunDriver
from legato.run._output import OutputMode, OutputSchema
from legato.run._persist import continue_context, persisted
from legato.run._result import RunResult
from legato.run._sync import iterate_sync, run_sync
from legato.tools import Tool, Toolset, ToolSource

if TYPE_CHECKING:
    from legato.context import ContextPolicy
    from legato.memory import Memory
    from legato.store import Store

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
        store: Store | None = None,
        context: ContextPolicy | None = None,
        memory: Memory | None = None,
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
        store: Store | None = None,
        context: ContextPolicy | None = None,
        memory: Memory | None = None,
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
        store: Store | None = None,
        context: ContextPolicy | None = None,
        memory: Memory | None = None,
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
            store: Where run journals and sessions are kept; runs with `session=` and no
                store use a `SQLiteStore` at `.legato/legato.db`.
            context: When and how to compact the conversation (see `legato.context`).
            memory: Long-term memory: recall into the instructions and memory tools.
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
        self.store = store
        self.context = context
        self.memory = memory
        if context is not None and context.tools():
            self.tool_sources.append(Toolset(context.tools(), name="context"))
        memory_toolset = memory.toolset() if memory is not None else None
        if memory_toolset is not None:
            self.tool_sources.append(memory_toolset)

    @property
    def model(self) -> Model:
        """The agent's model (a model string is resolved the first time it is needed)."""
        if self._model is None:
            self._model = infer_model(self._model_spec)
        return self._model

    def _store(self) -> Store:
        if self.store is None:
            from legato.store import SQLiteStore

            self.store = SQLiteStore()
        return self.store

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
        session: str | None = None,
    ) -> RunDriver[OutputT]:
        message = _prompt_message(prompt)
        carried = None
        if session is not None:
            store = self._store()
            stored = store.load_session(session, create=True)
            carried = store.session_context(session) if not message_history else None
            message_history = [*stored, *message_history]
        instructions = self.instructions
        if self.memory is not None and message is not None:
            instructions = self.memory.instructions_for(instructions, message.text)
        config: RunConfig[OutputT] = RunConfig(
            agent_name=self.name,
            model=infer_model(model) if model is not None else self.model,
            instructions=instructions,
            tool_sources=self.tool_sources,
            output=self._output,
            settings=self.model_settings.merged(model_settings),
            max_steps=max_steps or self.max_steps,
            output_retries=self.output_retries,
            tool_timeout=self.tool_timeout,
            deps=deps,
            context=self.context,
        )
        driver = RunDriver(config)
        driver.start(message, message_history)
        continue_context(driver, carried)
        return driver

    def _events(
        self, driver: RunDriver[OutputT], session: str | None, *, carry: bool
    ) -> AsyncIterator[RunEvent]:
        store = self._store() if session is not None else self.store
        return persisted(driver, runs=store, sessions=store, session=session, carry_context=carry)

    async def run(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] = (),
        deps: Any = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        max_steps: int | None = None,
        session: str | None = None,
    ) -> RunResult[OutputT]:
        """Run the agent to its final answer.

        Args:
            prompt: The user's message; None continues `message_history` as it is.
            message_history: Earlier messages (e.g. `result.messages`) to continue from.
            deps: Passed to tools as `RunContext.deps`.
            model: Use another model for this run.
            model_settings: Settings overriding the agent's for this run.
            max_steps: Override the agent's step allowance for this run.
            session: Continue the stored conversation of this name (created on first
                use); the run's messages are added to it when the run finishes.
        """
        driver = self._driver(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
            session=session,
        )
        async for _ in self._events(driver, session, carry=not message_history):
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
        session: str | None = None,
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
                session=session,
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
        session: str | None = None,
    ) -> AsyncIterator[RunEvent]:
        """Run the agent, yielding every event: text deltas, tool calls, results, the end."""
        driver = self._driver(
            prompt,
            message_history=message_history,
            deps=deps,
            model=model,
            model_settings=model_settings,
            max_steps=max_steps,
            session=session,
        )
        async for event in self._events(driver, session, carry=not message_history):
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
        session: str | None = None,
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
                session=session,
            )
        )

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self._model_spec!r})"
