"""The OpenTelemetry side: a sink that makes real spans, the hook, and journal export."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from legato.events import Journal, ModelResponded, RunEvent, RunStarted, ToolCallFinished
from legato.exceptions import MissingDependency
from legato.security import Hook
from legato.tracing._conventions import ERROR_TYPE
from legato.tracing._spans import AttributeValue, SpanBuilder, SpanKey

if TYPE_CHECKING:
    from legato.events import JournalEvent
    from legato.security import HookContext

__all__ = ["CAPTURE_ENV", "GenAITracing", "export_journal"]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' switch for content capture: `SPAN_ONLY` / `SPAN_AND_EVENT` turn it on."""


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ModuleNotFoundError:
        package = "opentelemetry-api"
        raise MissingDependency(package, "otel") from None
    return trace


class _OTelSink:
    """Spans on an OpenTelemetry tracer."""

    def __init__(self, tracer_provider: Any | None) -> None:
        trace = _otel()
        from legato._version import __version__

        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._trace = trace
        self._tracer = provider.get_tracer("legato", __version__)
        self._spans: dict[SpanKey, Any] = {}

    def start(
        self,
        key: SpanKey,
        *,
        name: str,
        kind: Literal["internal", "client"],
        parent: SpanKey | None,
        attributes: dict[str, AttributeValue],
        time_ns: int,
    ) -> None:
        trace = self._trace
        context = trace.set_span_in_context(self._spans[parent]) if parent in self._spans else None
        span_kind = trace.SpanKind.CLIENT if kind == "client" else trace.SpanKind.INTERNAL
        self._spans[key] = self._tracer.start_span(
            name, context=context, kind=span_kind, attributes=attributes, start_time=time_ns
        )

    def end(
        self,
        key: SpanKey,
        *,
        attributes: dict[str, AttributeValue],
        error_type: str | None,
        error_message: str | None,
        time_ns: int,
    ) -> None:
        span = self._spans.pop(key, None)
        if span is None:
            return
        span.set_attributes(attributes)
        if error_type is not None:
            span.set_attribute(ERROR_TYPE, error_type)
            status = self._trace.Status(self._trace.StatusCode.ERROR, error_message)
            span.set_status(status)
        span.end(end_time=time_ns)


def _capture_from_env() -> bool:
    return os.environ.get(CAPTURE_ENV, "NO_CONTENT").upper() in ("SPAN_ONLY", "SPAN_AND_EVENT")


def _redactor(redact: Callable[[str], str] | None, capture: bool) -> Callable[[str], str]:
    if redact is not None:
        return redact
    if not capture:
        return lambda text: text
    from legato.security import SecretRedactor

    return SecretRedactor().redact


class GenAITracing(Hook):
    """OpenTelemetry GenAI spans for every run of an agent (a hook that only observes).

    ```python
    agent = Agent(model, tools=[...], hooks=[GenAITracing()])
    ```

    Spans follow the journal as it is recorded: `invoke_agent` per run, `chat` per model
    call, `execute_tool` per tool call, child runs under their parent's tool span. Content
    (instructions, answers, arguments, results, error messages) is not captured unless
    `capture_content` is True (or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is
    `SPAN_ONLY`); captured content passes through `redact` (default: a `SecretRedactor`).
    Needs the `otel` extra.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any | None = None,
        capture_content: bool | None = None,
        redact: Callable[[str], str] | None = None,
        conversation_id: str | None = None,
    ) -> None:
        capture = _capture_from_env() if capture_content is None else capture_content
        self._builder = SpanBuilder(
            sink=_OTelSink(tracer_provider),
            capture_content=capture,
            redact=_redactor(redact, capture),
            conversation_id=conversation_id,
        )
        self._stream_run = ""
        self._last: tuple[object, str] = (None, "")

    def on_event(self, event: JournalEvent, ctx: HookContext) -> None:
        """Turn the recorded event into span starts and ends."""
        run_id = event.run_id if isinstance(event, RunStarted) else ctx.run_id
        if event is self._last[0] and run_id == self._last[1]:
            return  # the same hook twice in one run (its own, and inherited from a parent)
        self._last = (event, run_id)
        self._builder.feed(run_id, event, time.time_ns())

    def observe(self, event: RunEvent) -> None:
        """Feed an event of `agent.stream()` yourself, instead of as a hook.

        The stream carries every run of the tree (children as `ChildEvent`s), so one
        `observe` loop traces the whole tree.
        """
        if isinstance(event, RunStarted):
            self._stream_run = event.run_id
        self._builder.feed(self._stream_run, event, time.time_ns())


def export_journal(
    journal: Journal,
    *,
    tracer_provider: Any | None = None,
    capture_content: bool = False,
    redact: Callable[[str], str] | None = None,
    start_ns: int | None = None,
) -> None:
    """Emit the spans of a recorded run; times come from the events' durations."""
    builder = SpanBuilder(
        sink=_OTelSink(tracer_provider),
        capture_content=capture_content,
        redact=_redactor(redact, capture_content),
    )
    clock = time.time_ns() if start_ns is None else start_ns
    run_id = ""
    for event in journal:
        if isinstance(event, RunStarted):
            run_id = event.run_id
        if isinstance(event, ModelResponded):
            began = builder.start_time(("chat", run_id, str(event.step)))
            clock = max(clock, (began or clock) + int(event.duration * 1e9))
        elif isinstance(event, ToolCallFinished):
            began = builder.start_time(("tool", run_id, event.call.id))
            clock = max(clock, (began or clock) + int(event.duration * 1e9))
        clock += 1_000
        builder.feed(run_id, event, clock)
