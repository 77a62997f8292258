"""legato run events as AG-UI events: a pure mapping, no I/O.

The same `AguiMapper` translates a live stream (text deltas, then the journaled
`ModelResponded`) and a stored journal (no deltas: the full text comes with
`ModelResponded`), so a client that reconnects gets the same messages either way. Ids are
deterministic (`<run>:m<step>` for the assistant text of a step, the call id for a tool
call), so a message sent again on reconnect replaces the one the client had.

legato's park/resume is AG-UI's interrupt: `Parked` ends the run with
`RUN_FINISHED{outcome: {type: "interrupt", interrupts: [...]}}`, one interrupt per pending
approval request; the client continues it with `resume[]` in a new `RunAgentInput`.
What AG-UI has no event for (usage and cost, decisions, refusals, rejected state changes)
is sent as `CUSTOM` events named `legato.*`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from legato.approvals import canonical_json
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    ChildEvent,
    ModelRequested,
    ModelResponded,
    Parked,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    SpawnFinished,
    SpawnStarted,
    StateCommitted,
    StateLoaded,
    StateRejected,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRefused,
    UserPrompt,
)
from legato.messages import JsonValue, TextPart, ToolCallPart, Usage

__all__ = ["AguiEvent", "AguiMapper", "journal_to_agui", "usage_json"]

AguiEvent = dict[str, Any]
"""One AG-UI event as its JSON object (camelCase keys, `type` first)."""

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject", "edit"]},
        "message": {"type": "string"},
        "arguments": {"type": "object"},
    },
    "required": ["verdict"],
}
"""What a client sends as the `payload` of a `resume[]` entry for an approval."""


_CANCELLED = frozenset({"RunCancelled", "RunTimedOut"})
"""Failures that are a stop (AG-UI's `cancelled` outcome), not an error."""


def _event(kind: str, **fields: Any) -> AguiEvent:
    return {"type": kind, **{k: v for k, v in fields.items() if v is not None}}


def usage_json(usage: Usage) -> dict[str, JsonValue]:
    """A usage as AG-UI's `TokenUsage` object."""
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.input_tokens + usage.output_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "cachedInputTokens": usage.cache_read_tokens,
        "cacheWriteInputTokens": usage.cache_write_tokens,
    }


def _user_text(event: UserPrompt) -> str:
    return "".join(p.text for p in event.message.parts if isinstance(p, TextPart))


@dataclass(kw_only=True)
class AguiMapper:
    """Translates the events of one run (live or from its journal) into AG-UI events.

    Feed every event in order with `feed`; it returns the AG-UI events it stands for
    (often none). `cancelled()` closes a run that was cancelled (a cancelled journal has
    no terminal event).
    """

    thread_id: str
    run_id: str
    _step: int = field(default=0, init=False)
    _open_text: str | None = field(default=None, init=False)
    _streamed_text: bool = field(default=False, init=False)
    """This step's text came as deltas (so `ModelResponded` does not send it again)."""
    _live_calls: dict[int, str] = field(default_factory=lambda: {}, init=False)
    """This step's tool calls announced from deltas: position in the response -> call id."""
    _children: dict[str, AguiMapper] = field(default_factory=lambda: {}, init=False)
    """A mapper per child run, for its streamed text and tool calls."""
    _segment_open: bool = field(default=False, init=False)
    _requests: dict[str, tuple[ApprovalRequested, str | None]] = field(
        default_factory=lambda: {}, init=False
    )
    """Approval requests seen, with the sub-agent run that asked (None: this run)."""
    _usage: Usage = field(default_factory=Usage, init=False)
    _cost: float | None = field(default=None, init=False)
    _prompts: int = field(default=0, init=False)

    def start(self) -> list[AguiEvent]:
        """`RUN_STARTED`, unless the run's current segment has started already."""
        if self._segment_open:
            return []
        self._segment_open = True
        return [_event("RUN_STARTED", threadId=self.thread_id, runId=self.run_id)]

    def feed(self, event: RunEvent) -> list[AguiEvent]:
        """The AG-UI events standing for one legato event."""
        out = [] if isinstance(event, RunStarted) else self.start()
        out.extend(self._map(event))
        return out

    def _map(self, event: RunEvent) -> list[AguiEvent]:  # noqa: C901 - one flat dispatch
        if isinstance(event, RunStarted):
            return self.start()
        if isinstance(event, UserPrompt):
            return self._user(event)
        if isinstance(event, ModelRequested):
            self._step = event.step
            self._streamed_text = False
            self._live_calls = {}
            return [_event("STEP_STARTED", stepName=f"step {event.step}")]
        if isinstance(event, TextDelta):
            self._streamed_text = self._streamed_text or bool(event.text)
            return self._delta(event.text)
        if isinstance(event, ToolCallDelta):
            return self._call_delta(event)
        if isinstance(event, ModelResponded):
            return self._responded(event)
        if isinstance(event, ToolCallFinished):
            return self._tool_result(event)
        if isinstance(event, StepFinished):
            return [_event("STEP_FINISHED", stepName=f"step {event.step}")]
        if isinstance(event, ApprovalRequested):
            self._requests[event.request_id] = (event, None)
            return []
        if isinstance(event, ApprovalDecided | ToolCallRefused | StateRejected | CancelRequested):
            return [_custom(event)]
        if isinstance(event, StateLoaded):
            return [_event("STATE_SNAPSHOT", snapshot=event.values)]
        if isinstance(event, StateCommitted):
            return _state_commit(event)
        if isinstance(event, SpawnStarted | SpawnFinished):
            return [_spawn(event, parent=None)]
        if isinstance(event, ChildEvent):
            return self._child(event)
        if isinstance(event, Parked):
            return self._parked(event)
        if isinstance(event, RunFinished):
            return self._finished(event)
        if isinstance(event, RunFailed):
            if event.error_type in _CANCELLED:
                return self.cancelled(event.message)
            self._segment_open = False
            return [
                *self._close_text(),
                _event("RUN_ERROR", message=event.message, code=event.error_type),
            ]
        return []

    def _child(self, event: ChildEvent) -> list[AguiEvent]:
        """A child's text and tool calls, tagged with its `subagentRunId`.

        Streamed only: the child's own journal has them, the parent's does not.
        """
        inner = event.event
        child_id = event.lineage.run_id
        if isinstance(inner, SpawnStarted | SpawnFinished):
            return [_spawn(inner, parent=child_id)]
        if isinstance(inner, ApprovalRequested):  # a child's park parks this run too
            self._requests[inner.request_id] = (inner, child_id)
            return []
        if isinstance(inner, ApprovalDecided):
            return [{**_custom(inner), "subagentRunId": child_id}]
        if not isinstance(
            inner, ModelRequested | TextDelta | ToolCallDelta | ModelResponded | ToolCallFinished
        ):
            return []
        mapper = self._children.get(child_id)
        if mapper is None:
            mapper = AguiMapper(thread_id=self.thread_id, run_id=child_id)
            self._children[child_id] = mapper
        out = mapper.feed(inner)
        keep = ("TEXT_MESSAGE", "TOOL_CALL")
        return [{**e, "subagentRunId": child_id} for e in out if e["type"].startswith(keep)]

    def _user(self, event: UserPrompt) -> list[AguiEvent]:
        self._prompts += 1
        message_id = f"{self.run_id}:u{self._prompts}"
        return [
            _event("TEXT_MESSAGE_START", messageId=message_id, role="user"),
            _event("TEXT_MESSAGE_CONTENT", messageId=message_id, delta=_user_text(event) or " "),
            _event("TEXT_MESSAGE_END", messageId=message_id),
        ]

    def _message_id(self) -> str:
        return f"{self.run_id}:m{self._step}"

    def _delta(self, text: str) -> list[AguiEvent]:
        if not text:
            return []
        out: list[AguiEvent] = []
        if self._open_text is None:
            self._open_text = self._message_id()
            out.append(_event("TEXT_MESSAGE_START", messageId=self._open_text, role="assistant"))
        out.append(_event("TEXT_MESSAGE_CONTENT", messageId=self._open_text, delta=text))
        return out

    def _close_text(self) -> list[AguiEvent]:
        if self._open_text is None:
            return []
        message_id, self._open_text = self._open_text, None
        return [_event("TEXT_MESSAGE_END", messageId=message_id)]

    def _call_delta(self, event: ToolCallDelta) -> list[AguiEvent]:
        """A tool call as the model writes it: announced on its first delta, then its args."""
        known = self._live_calls.get(event.index)
        if known is None:
            if not event.id or not event.name:
                return []  # a call without its id yet: sent whole with the response
            self._live_calls[event.index] = event.id
            out = self._close_text()
            out.append(
                _event(
                    "TOOL_CALL_START",
                    toolCallId=event.id,
                    toolCallName=event.name,
                    parentMessageId=self._message_id(),
                )
            )
            if event.arguments_delta:
                out.append(
                    _event("TOOL_CALL_ARGS", toolCallId=event.id, delta=event.arguments_delta)
                )
            return out
        if not event.arguments_delta:
            return []
        return [_event("TOOL_CALL_ARGS", toolCallId=known, delta=event.arguments_delta)]

    def _responded(self, event: ModelResponded) -> list[AguiEvent]:
        self._step = event.step
        out = self._close_text()
        parts = event.response.message.parts
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        if text and not self._streamed_text:  # from a journal, or a model that did not stream
            out.extend(self._delta(text))
            out.extend(self._close_text())
        calls = [p for p in parts if isinstance(p, ToolCallPart)]
        for index, part in enumerate(calls):
            live = self._live_calls.get(index)
            if live is not None:  # its start and arguments were streamed
                out.append(_event("TOOL_CALL_END", toolCallId=live))
            else:
                out.extend(_tool_call(part, parent=self._message_id()))
        self._live_calls = {}
        self._usage = self._usage + event.response.usage
        if event.response.cost is not None:
            self._cost = (self._cost or 0.0) + event.response.cost
        out.append(self._usage_event(event.response.usage, event.response.cost))
        return out

    def _usage_event(self, step: Usage | None, step_cost: float | None) -> AguiEvent:
        value: dict[str, JsonValue] = {
            "total": usage_json(self._usage),
            "requests": self._usage.requests,
            "cost": self._cost,
        }
        if step is not None:
            value["step"] = usage_json(step)
            value["stepCost"] = step_cost
        return _event("CUSTOM", name="legato.usage", value=value)

    def _tool_result(self, event: ToolCallFinished) -> list[AguiEvent]:
        return [
            _event(
                "TOOL_CALL_RESULT",
                messageId=f"{self.run_id}:r:{event.call.id}",
                toolCallId=event.call.id,
                content=event.result.text,
                role="tool",
            ),
            _event(
                "CUSTOM",
                name="legato.tool_outcome",
                value={
                    "toolCallId": event.call.id,
                    "outcome": event.outcome,
                    "duration": round(event.duration, 4),
                },
            ),
        ]

    def _parked(self, event: Parked) -> list[AguiEvent]:
        interrupts: list[dict[str, JsonValue]] = []
        for request_id in event.request_ids:
            item: dict[str, JsonValue] = {
                "id": request_id,
                "reason": "approval",
                "responseSchema": DECISION_SCHEMA,
            }
            if request_id in self._requests:
                asked, child = self._requests[request_id]
                if child is not None:
                    item["subagentRunId"] = child
                item["toolCallId"] = asked.call.id
                item["message"] = (
                    f"{asked.call.name}({canonical_json(asked.call.arguments)}) "
                    f"needs approval: {asked.rule}"
                )
            interrupts.append(item)
        self._segment_open = False
        return [
            *self._close_text(),
            _event(
                "RUN_FINISHED",
                threadId=self.thread_id,
                runId=self.run_id,
                outcome={"type": "interrupt", "interrupts": interrupts},
            ),
        ]

    def _finished(self, event: RunFinished) -> list[AguiEvent]:
        self._usage = event.usage
        self._cost = event.cost
        self._segment_open = False
        return [
            *self._close_text(),
            self._usage_event(None, None),
            _event(
                "RUN_FINISHED",
                threadId=self.thread_id,
                runId=self.run_id,
                result=event.output,
                usage=[usage_json(event.usage)],
                outcome={"type": "success"},
            ),
        ]

    def cancelled(self, reason: str) -> list[AguiEvent]:
        """The end of a run that was cancelled (or timed out)."""
        out = [*self.start(), *self._close_text()]
        self._segment_open = False
        out.append(
            _event(
                "RUN_FINISHED",
                threadId=self.thread_id,
                runId=self.run_id,
                outcome={"type": "cancelled"},
                result={"reason": reason},
            )
        )
        return out

    def failed(self, error: BaseException) -> list[AguiEvent]:
        """The end of a run that stopped with an error the journal does not show."""
        out = [*self.start(), *self._close_text()]
        self._segment_open = False
        out.append(_event("RUN_ERROR", message=str(error), code=type(error).__name__))
        return out


def _tool_call(part: ToolCallPart, *, parent: str) -> list[AguiEvent]:
    return [
        _event(
            "TOOL_CALL_START", toolCallId=part.id, toolCallName=part.name, parentMessageId=parent
        ),
        _event("TOOL_CALL_ARGS", toolCallId=part.id, delta=part.raw_arguments),
        _event("TOOL_CALL_END", toolCallId=part.id),
    ]


def _custom(
    event: ApprovalDecided | ToolCallRefused | StateRejected | CancelRequested,
) -> AguiEvent:
    if isinstance(event, ApprovalDecided):
        value: dict[str, JsonValue] = {
            "requestId": event.request_id,
            "toolCallId": event.call_id,
            "verdict": event.verdict,
            "message": event.message,
            "arguments": event.arguments,
        }
        return _event("CUSTOM", name="legato.approval_decided", value=value)
    if isinstance(event, ToolCallRefused):
        value = {"toolCallId": event.call_id, "reason": event.reason, "message": event.message}
        return _event("CUSTOM", name="legato.tool_refused", value=value)
    if isinstance(event, StateRejected):
        value = {
            "toolCallId": event.call_id,
            "tool": event.tool,
            "stage": event.stage,
            "predicate": event.predicate,
            "message": event.message,
            "version": event.version,
        }
        return _event("CUSTOM", name="legato.state_rejected", value=value)
    return _event("CUSTOM", name="legato.cancelled", value={"reason": event.reason})


def _state_commit(event: StateCommitted) -> list[AguiEvent]:
    patch: list[dict[str, JsonValue]] = [
        {"op": "add", "path": "/" + c.key.replace("~", "~0").replace("/", "~1"), "value": c.new}
        for c in event.changes
    ]
    history: dict[str, JsonValue] = {
        "version": event.version,
        "tool": event.tool,
        "toolCallId": event.call_id,
        "changes": [{"key": c.key, "old": c.old, "new": c.new} for c in event.changes],
    }
    return [
        _event("STATE_DELTA", delta=patch),
        _event("CUSTOM", name="legato.state_committed", value=history),
    ]


def _spawn(event: SpawnStarted | SpawnFinished, *, parent: str | None) -> AguiEvent:
    lineage = event.lineage
    if isinstance(event, SpawnStarted):
        return _event(
            "SUBAGENT_STARTED",
            subagentRunId=lineage.run_id,
            name=lineage.agent,
            description=event.task,
            parentSubagentRunId=parent,
            parentToolCallId=lineage.parent_call_id,
        )
    if event.outcome == "ok":
        return _event("SUBAGENT_FINISHED", subagentRunId=lineage.run_id, result=event.output)
    return _event(
        "SUBAGENT_ERROR",
        subagentRunId=lineage.run_id,
        message=event.error or event.outcome,
        code=event.outcome,
    )


def journal_to_agui(thread_id: str, run_id: str, events: Iterable[RunEvent]) -> list[AguiEvent]:
    """Every AG-UI event a stored journal stands for (a stream replayed from the journal)."""
    mapper = AguiMapper(thread_id=thread_id, run_id=run_id)
    out: list[AguiEvent] = []
    for event in events:
        out.extend(mapper.feed(event))
    return out
