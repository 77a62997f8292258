"""From run events to GenAI spans: a pure builder that tells a sink when spans start and end.

One `invoke_agent` span per run; under it one `chat` span per model call and one
`execute_tool` span per tool call; a child run's `invoke_agent` span sits under the
parent's `execute_tool` span of the call that spawned it. Nothing here imports
OpenTelemetry: `legato.tracing._otel` is the sink that does.

Content (instructions, answers, tool arguments and results, error messages) is left out
unless capture is on, and then every string goes through the redactor first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

import legato.tracing._conventions as sc
from legato.events import (
    ChildEvent,
    ModelRequested,
    ModelResponded,
    Parked,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    SpawnStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from legato.messages import Usage

__all__ = ["AttributeValue", "SpanBuilder", "SpanKey", "SpanSink"]

SpanKey: TypeAlias = tuple[str, ...]
"""("agent", run_id) / ("chat", run_id, step) / ("tool", run_id, call_id)."""
AttributeValue: TypeAlias = str | int | float | bool | tuple[str, ...]

_OK_OUTCOMES = frozenset({"ok", "output"})


class SpanSink(Protocol):
    """Where spans go (an OpenTelemetry tracer, or a list in tests)."""

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
        """Open a span."""
        ...

    def end(
        self,
        key: SpanKey,
        *,
        attributes: dict[str, AttributeValue],
        error_type: str | None,
        error_message: str | None,
        time_ns: int,
    ) -> None:
        """Close a span; `error_message` is None unless content capture is on."""
        ...


def _usage(usage: Usage) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        sc.USAGE_INPUT_TOKENS: usage.input_tokens,
        sc.USAGE_OUTPUT_TOKENS: usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes[sc.USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_tokens
    if usage.reasoning_tokens:
        attributes[sc.USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
    return attributes


@dataclass(kw_only=True)
class SpanBuilder:
    """Feeds a sink from the events of one run tree, as they are recorded or replayed."""

    sink: SpanSink
    capture_content: bool = False
    redact: Callable[[str], str] = field(default=lambda text: text)
    conversation_id: str | None = None
    _open: dict[SpanKey, int] = field(default_factory=lambda: {})
    _parents: dict[str, SpanKey] = field(default_factory=lambda: {})
    _models: dict[str, str] = field(default_factory=lambda: {})

    def _content(self, text: str) -> str:
        return self.redact(text)

    def _start(
        self,
        key: SpanKey,
        *,
        name: str,
        kind: Literal["internal", "client"],
        parent: SpanKey | None,
        attributes: dict[str, AttributeValue],
        time_ns: int,
    ) -> None:
        if key in self._open:
            return
        self._open[key] = time_ns
        if parent is not None and parent not in self._open:
            parent = None
        self.sink.start(
            key, name=name, kind=kind, parent=parent, attributes=attributes, time_ns=time_ns
        )

    def _end(
        self,
        key: SpanKey,
        *,
        attributes: dict[str, AttributeValue] | None = None,
        error_type: str | None = None,
        error_message: str | None = None,
        time_ns: int,
    ) -> None:
        if self._open.pop(key, None) is None:
            return
        message = self._content(error_message) if error_message and self.capture_content else None
        self.sink.end(
            key,
            attributes=attributes or {},
            error_type=error_type,
            error_message=message,
            time_ns=time_ns,
        )

    def start_time(self, key: SpanKey) -> int | None:
        """When an open span started (None: not open)."""
        return self._open.get(key)

    def feed(self, run_id: str, event: RunEvent, time_ns: int) -> None:
        """One event of run `run_id` (a `ChildEvent` carries its own run)."""
        match event:
            case ChildEvent():
                lineage = event.lineage
                if lineage.parent_call_id is not None:
                    self._parents.setdefault(
                        lineage.run_id, ("tool", lineage.parent_run_id, lineage.parent_call_id)
                    )
                self.feed(lineage.run_id, event.event, time_ns)
            case SpawnStarted():
                lineage = event.lineage
                if lineage.parent_call_id is not None:
                    self._parents[lineage.run_id] = ("tool", run_id, lineage.parent_call_id)
            case RunStarted():
                self._run_started(event, time_ns)
            case ModelRequested():
                self._model_requested(run_id, event, time_ns)
            case ModelResponded():
                self._model_responded(run_id, event, time_ns)
            case ToolCallStarted():
                self._tool_started(run_id, event, time_ns)
            case ToolCallFinished():
                self._tool_finished(run_id, event, time_ns)
            case RunFinished() | RunFailed() | Parked():
                self._run_ended(run_id, event, time_ns)
            case _:
                pass

    def _run_started(self, event: RunStarted, time_ns: int) -> None:
        self._models[event.run_id] = event.model
        attributes: dict[str, AttributeValue] = {
            sc.OPERATION_NAME: "invoke_agent",
            sc.AGENT_NAME: event.agent,
            sc.PROVIDER_NAME: sc.provider_name(event.model),
            sc.REQUEST_MODEL: event.model.partition(":")[2] or event.model,
            "legato.run.id": event.run_id,
        }
        if self.conversation_id is not None:
            attributes[sc.CONVERSATION_ID] = self.conversation_id
        if self.capture_content and event.instructions:
            attributes[sc.SYSTEM_INSTRUCTIONS] = self._content(
                json.dumps([{"type": "text", "content": event.instructions}])
            )
        self._start(
            ("agent", event.run_id),
            name=f"invoke_agent {event.agent}",
            kind="internal",
            parent=self._parents.get(event.run_id),
            attributes=attributes,
            time_ns=time_ns,
        )

    def _model_requested(self, run_id: str, event: ModelRequested, time_ns: int) -> None:
        model = event.model.partition(":")[2] or event.model
        self._start(
            ("chat", run_id, str(event.step)),
            name=f"chat {model}",
            kind="client",
            parent=("agent", run_id),
            attributes={
                sc.OPERATION_NAME: "chat",
                sc.PROVIDER_NAME: sc.provider_name(event.model),
                sc.REQUEST_MODEL: model,
            },
            time_ns=time_ns,
        )

    def _model_responded(self, run_id: str, event: ModelResponded, time_ns: int) -> None:
        key = ("chat", run_id, str(event.step))
        if key not in self._open:  # a response with no request event (a replayed journal)
            model = self._models.get(run_id, "")
            self._model_requested(
                run_id,
                ModelRequested(step=event.step, model=model),
                time_ns - int(event.duration * 1e9),
            )
        response = event.response
        attributes = _usage(response.usage)
        attributes[sc.RESPONSE_FINISH_REASONS] = (str(response.stop_reason.value),)
        if response.model_name:
            attributes[sc.RESPONSE_MODEL] = (
                response.model_name.partition(":")[2] or response.model_name
            )
        if self.capture_content:
            message = response.message
            parts: list[dict[str, object]] = []
            if message.text:
                parts.append({"type": "text", "content": message.text})
            for c in message.tool_calls:
                parts.append(
                    {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.raw_arguments}
                )
            attributes[sc.OUTPUT_MESSAGES] = self._content(
                json.dumps([{"role": "assistant", "parts": parts}], ensure_ascii=False)
            )
        self._end(key, attributes=attributes, time_ns=time_ns)

    def _tool_started(self, run_id: str, event: ToolCallStarted, time_ns: int) -> None:
        attributes: dict[str, AttributeValue] = {
            sc.OPERATION_NAME: "execute_tool",
            sc.TOOL_NAME: event.call.name,
            sc.TOOL_CALL_ID: event.call.id,
            sc.TOOL_TYPE: "function",
        }
        if self.capture_content:
            attributes[sc.TOOL_CALL_ARGUMENTS] = self._content(event.call.raw_arguments)
        self._start(
            ("tool", run_id, event.call.id),
            name=f"execute_tool {event.call.name}",
            kind="internal",
            parent=("agent", run_id),
            attributes=attributes,
            time_ns=time_ns,
        )

    def _tool_finished(self, run_id: str, event: ToolCallFinished, time_ns: int) -> None:
        key = ("tool", run_id, event.call.id)
        if key not in self._open:
            self._tool_started(
                run_id,
                ToolCallStarted(step=event.step, call=event.call),
                time_ns - int(event.duration * 1e9),
            )
        attributes: dict[str, AttributeValue] = {"legato.tool.outcome": event.outcome}
        if self.capture_content:
            attributes[sc.TOOL_CALL_RESULT] = self._content(event.result.text)
        failed = event.result.is_error or event.outcome not in _OK_OUTCOMES
        self._end(
            key,
            attributes=attributes,
            error_type=event.outcome if failed else None,
            error_message=event.result.text if failed else None,
            time_ns=time_ns,
        )

    def _run_ended(
        self, run_id: str, event: RunFinished | RunFailed | Parked, time_ns: int
    ) -> None:
        error_type = event.error_type if isinstance(event, RunFailed) else None
        for key in [k for k in self._open if k[0] != "agent" and k[1] == run_id]:
            self._end(key, error_type=error_type or "interrupted", time_ns=time_ns)
        attributes: dict[str, AttributeValue] = {}
        match event:
            case RunFinished():
                attributes = _usage(event.usage)
                attributes["legato.run.outcome"] = "finished"
            case Parked():
                attributes["legato.run.outcome"] = "parked"
            case RunFailed():
                attributes["legato.run.outcome"] = "failed"
        self._end(
            ("agent", run_id),
            attributes=attributes,
            error_type=error_type,
            error_message=event.message if isinstance(event, RunFailed) else None,
            time_ns=time_ns,
        )
