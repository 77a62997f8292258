"""The events of a run: the journal, and what `agent.stream()` yields.

A run is an append-only journal of the typed events defined here. Everything else is a
projection of it: the conversation, the usage, the result. The journal serializes to
JSON lines (`Journal.to_jsonl`) and loads back exactly (`Journal.from_jsonl`), so a run
can be inspected, replayed without calling any model or tool (`legato.run.replay`), or
continued.

`agent.stream()` yields the journal events as they are appended, interleaved with
events that are not journaled: the model's `TextDelta` / `ThinkingDelta` /
`ToolCallDelta` (the complete response is, in `ModelResponded`), the `ToolProgress` of
tool calls in flight (their results are, in `ToolCallFinished`), and a child run's
events wrapped in `ChildEvent` (the child's own journal has them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import field
from functools import cache
from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias, get_args

from typing_extensions import TypeIs

from legato._values import value_class
from legato.exceptions import JournalError
from legato.messages import (
    TAGGED_BY_KIND,
    JsonValue,
    Message,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "JOURNAL_EVENT_TYPES",
    "ChildEvent",
    "ComplexityMetrics",
    "ContextSliced",
    "Lineage",
    "SliceEntry",
    "SpawnDecided",
    "SpawnFinished",
    "SpawnOutcome",
    "SpawnStarted",
    "AnyJournalEvent",
    "Compacted",
    "ApprovalDecided",
    "ApprovalRequested",
    "CancelRequested",
    "HookApplied",
    "Parked",
    "RefusalReason",
    "RunResumed",
    "ToolCallAdmitted",
    "ToolCallRefused",
    "Journal",
    "JournalEvent",
    "ModelRequested",
    "ModelResponded",
    "RunEvent",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StateChange",
    "StateCommitted",
    "StateLoaded",
    "StateRejected",
    "StepFinished",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolOutcome",
    "ToolProgress",
    "UserPrompt",
    "is_journal_event",
]


@value_class
class RunStarted:
    """The first event of every run."""

    run_id: str
    agent: str
    """The agent's name."""
    model: str
    """The model's `provider:model` name."""
    instructions: str | None = None
    history: tuple[Message, ...] = ()
    """Messages of earlier turns this run continues from."""
    owner: str | None = None
    """The process that runs it (host:pid), until another one resumes it (`RunResumed`)."""
    forked_from: str | None = None
    """The run this one was forked from (its first `fork_at` events are this one's)."""
    fork_at: int | None = None
    kind: Literal["run_started"] = "run_started"


@value_class
class UserPrompt:
    """A user message: the one that starts the turn, or a retry prompt from the run."""

    message: Message
    retry: bool = False
    """The run itself sent this because the model's answer was unusable (empty or invalid)."""
    kind: Literal["user_prompt"] = "user_prompt"


@value_class
class ModelRequested:
    """A model call is about to be made."""

    step: int
    """1 for the first model call of the run, 2 for the next, ..."""
    model: str
    kind: Literal["model_requested"] = "model_requested"


@value_class
class ModelResponded:
    """A model call completed."""

    step: int
    response: ModelResponse
    duration: float = 0.0
    """Seconds the call took."""
    kind: Literal["model_responded"] = "model_responded"


ToolOutcome: TypeAlias = Literal[
    "ok",
    "error",
    "invalid_arguments",
    "unknown_tool",
    "timeout",
    "cancelled",
    "skipped",
    "output",
    "rejected",
    "refused",
]
"""How a tool call ended. `output` marks the call that delivered the run's final result;
`skipped` marks calls not run because the final result arrived in the same response;
`rejected` marks calls a contract refused (not run, or their state changes discarded);
`refused` marks calls the effect gate did not admit (denied, rejected, held, duplicate)."""


@value_class
class ToolCallStarted:
    """A tool call's function is about to run."""

    step: int
    call: ToolCallPart
    kind: Literal["tool_call_started"] = "tool_call_started"


@value_class
class ToolCallFinished:
    """A tool call ended; `result` is what the model will see.

    Finished events of one response are appended in the order the model issued the
    calls, whatever order they completed in.
    """

    step: int
    call: ToolCallPart
    result: ToolResultPart
    outcome: ToolOutcome = "ok"
    duration: float = 0.0
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@value_class
class ToolProgress:
    """A tool call in flight reported how far it got (stream-only: never journaled).

    A tool reports with `RunContext.report_progress`; an MCP tool's progress
    notifications arrive the same way. For one call, every `ToolProgress` comes after its
    `ToolCallStarted` and before its `ToolCallFinished`. Updates are coalesced to at
    most one event per call every 0.1 seconds (the newest update wins; the last one
    before the call ends is always streamed). Replaying or resuming a run never needs
    them: the call's result is in `ToolCallFinished`.
    """

    run_id: str
    """The run whose tool call reports (a child run's id inside a `ChildEvent`)."""
    step: int
    """The model step that issued the call."""
    call_id: str
    """The tool call's id, as in its `ToolCallStarted`."""
    tool: str
    """The tool's name."""
    progress: float
    """How far the call got, in units of its choosing (MCP: increases with each update)."""
    total: float | None = None
    """The value `progress` reaches when done, when the tool knows it."""
    message: str | None = None
    """What the tool is doing now, for people."""
    kind: Literal["tool_progress"] = "tool_progress"

    @property
    def fraction(self) -> float | None:
        """`progress / total` (e.g. 0.4 for 40%), when the total is known and positive."""
        if self.total is None or self.total <= 0:
            return None
        return self.progress / self.total


@value_class
class StepFinished:
    """A model step and the tool calls it asked for are complete."""

    step: int
    kind: Literal["step_finished"] = "step_finished"


@value_class
class RunFinished:
    """The run produced its final output."""

    output: JsonValue
    """The output in JSON form (a string for text output)."""
    usage: Usage
    cost: float | None = None
    kind: Literal["run_finished"] = "run_finished"


@value_class
class Lineage:
    """Where a child run sits in the tree of runs."""

    run_id: str
    """The child's run id."""
    parent_run_id: str
    parent_step: int
    parent_call_id: str | None
    """The parent's tool call that started the child."""
    agent: str
    depth: int = 1
    """1 for a child of the root run, 2 for a grandchild, ..."""


@value_class
class ChildEvent:
    """An event of a child run, forwarded into its parent's stream (not journaled there).

    The child's own journal has the event; the parent's journal records only the
    child's start and end.
    """

    lineage: Lineage
    event: RunEvent
    kind: Literal["child_event"] = "child_event"


@value_class
class RunFailed:
    """The run stopped with an error."""

    error_type: str
    """The exception's class name, e.g. `MaxStepsExceeded`."""
    message: str
    kind: Literal["run_failed"] = "run_failed"


# -- the effect gate (legato.effects): admission, approvals, cancellation, hooks ---------------

RefusalReason: TypeAlias = Literal[
    "denied", "rejected", "held", "cancelled", "duplicate", "unknown_outcome", "hook"
]
"""Why the gate did not admit a call: a `deny` rule; a rejected approval; held behind a
rejected sibling; the run was cancelled; the effect already ran (its recorded result is
reused); an earlier attempt may have run and the tool is irreversible; a hook blocked it."""


@value_class
class ToolCallAdmitted:
    """The gate admitted a side-effecting call: its effect may now run, once."""

    step: int
    call_id: str
    tool: str
    effect_id: str
    """Stable id of the effect: a hash of run id, call id, tool and canonical arguments."""
    epoch: int
    """The run's cancellation epoch at admission; a later epoch fences the result."""
    via: Literal["policy", "approval", "edit"] = "policy"
    arguments: JsonValue = None
    """The arguments that run, when an approver edited them (None: as the model sent them)."""
    kind: Literal["tool_call_admitted"] = "tool_call_admitted"


@value_class
class ToolCallRefused:
    """The gate did not admit a call; the model is told `message`."""

    step: int
    call_id: str
    tool: str
    effect_id: str
    reason: RefusalReason
    message: str
    kind: Literal["tool_call_refused"] = "tool_call_refused"


@value_class
class ApprovalRequested:
    """A call waits for a decision; nothing side-effecting in the run is admitted meanwhile."""

    step: int
    request_id: str
    call: ToolCallPart
    arguments_hash: str
    """SHA-256 of the canonical JSON arguments the request is bound to."""
    rule: str
    """The policy rule (or hook) that asked, for the approver to see."""
    kind: Literal["approval_requested"] = "approval_requested"


@value_class
class ApprovalDecided:
    """A decision on an approval request was claimed and applied (exactly once)."""

    request_id: str
    call_id: str
    verdict: Literal["approve", "reject", "edit"]
    arguments: JsonValue = None
    """The edited arguments, for `edit`."""
    message: str = ""
    """The approver's note; for `reject` it is what the model is told."""
    kind: Literal["approval_decided"] = "approval_decided"


@value_class
class CancelRequested:
    """The run was fenced: nothing is admitted after this event, late results are discarded."""

    reason: str
    epoch: int
    """The new epoch; effects admitted under an older one cannot commit."""
    kind: Literal["cancel_requested"] = "cancel_requested"


@value_class
class Parked:
    """The run stopped to wait for approval decisions; `agent.resume` continues it.

    (The exception the caller gets is `legato.exceptions.RunParked`.)
    """

    request_ids: tuple[str, ...]
    kind: Literal["run_parked"] = "run_parked"


@value_class
class RunResumed:
    """A process took the run over to continue it (its claim on the journal's next position).

    Written before anything else the resumed run does: of two processes resuming the same
    stored run, only the one whose `RunResumed` is stored first goes on.
    """

    owner: str
    """Who resumed it (host and process id by default)."""
    kind: Literal["run_resumed"] = "run_resumed"


@value_class
class HookApplied:
    """A security hook changed or blocked something (the audit record of hooks)."""

    hook: str
    point: str
    action: Literal["modify", "block", "ask"]
    detail: str = ""
    call_id: str | None = None
    flags: tuple[str, ...] = ()
    """Run-wide flags the hook raised (restored into `HookContext.flags` on resume)."""
    kind: Literal["hook_applied"] = "hook_applied"


@value_class
class Compacted:
    """The context sent to the model was compacted; the full history stays in the journal.

    From this event on, the model sees a view in place of the first `upto` messages of the
    run's conversation: for each view message, `sources` names the conversation message it
    stands for, and `messages` holds its content when it differs from that message (a
    summary, a note, an elided result) or None when it is the same — so the event stays
    small. The summary text (if any) is kept here, so resuming or replaying the run never
    calls the model to summarize again.
    """

    strategy: str
    """The compactor's name, e.g. `keep_recent`, `elide_tool_results`, `summarize`."""
    reason: Literal["threshold", "context_length_exceeded", "carried_over"]
    """Why: the estimate crossed the trigger, the provider refused the request as too long,
    or the view was carried over from the session's previous run."""
    upto: int
    """How many messages of the conversation the new context view covers."""
    messages: tuple[Message | None, ...]
    """Per view message: its content, or None when it is conversation message `sources[i]`."""
    sources: tuple[int, ...]
    """For each message of the view, its index in the conversation (-1 for a synthetic one)."""
    removed: tuple[int, ...]
    """Conversation indexes no longer in the view (dropped or summarized)."""
    elided: tuple[str, ...] = ()
    """Tool call ids whose results were replaced by a stub (fetch with `recall_result`)."""
    summary: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    kind: Literal["compacted"] = "compacted"


@value_class
class StateChange:
    """One key's change in a commit, as JSON values."""

    key: str
    old: JsonValue
    new: JsonValue


@value_class
class StateLoaded:
    """The run's verified state at its start (see `legato.contracts`)."""

    version: int
    values: dict[str, JsonValue]
    """Every declared key's value, as JSON."""
    schema_name: str = "State"
    """The name of the state's declared type."""
    kind: Literal["state_loaded"] = "state_loaded"


@value_class
class StateCommitted:
    """A verified change of the state: one new version, from one tool call (or the application)."""

    version: int
    """The version this commit created."""
    changes: tuple[StateChange, ...]
    tool: str | None = None
    """The tool whose call made the change; None for `State.commit` by application code."""
    call_id: str | None = None
    checks: tuple[str, ...] = ()
    """The predicates that passed before the commit, preconditions first."""
    rechecked: bool = False
    """An earlier commit of the same step changed keys this call reads; the checks ran again."""
    kind: Literal["state_committed"] = "state_committed"


@value_class
class StateRejected:
    """A contract refused a call (`pre`), its result (`post`, `recheck`) or its writes (`write`)."""

    tool: str
    call_id: str | None
    stage: Literal["pre", "post", "recheck", "write"]
    predicate: str | None
    """The predicate that decided, when one did."""
    message: str
    """What the model is told."""
    evidence: dict[str, JsonValue]
    """The values the predicate looked at: state keys, and arguments as `args.<name>`."""
    version: int
    """The state version the check ran against (nothing was committed)."""
    halted: bool = False
    """The contract stopped the run (`Halt`) instead of rejecting the call."""
    kind: Literal["state_rejected"] = "state_rejected"


# -- sub-agents (legato.spawn) -------------------------------------------------------------------


@value_class
class SpawnStarted:
    """This run started a child run (or resumed one from the child's journal)."""

    lineage: Lineage
    task: str
    """The task the child was given."""
    tools: tuple[str, ...] = ()
    """The tools granted to the child (a subset of this run's)."""
    skills: tuple[str, ...] = ()
    """The skills granted to the child."""
    max_steps: int | None = None
    """The child's step allowance (its share of this run's budget)."""
    max_tokens: int | None = None
    """The child's token allowance, when one was set."""
    background: bool = False
    """The parent did not wait for the child in the call that started it."""
    resumed: bool = False
    """The child continues from its journal instead of starting afresh."""
    kind: Literal["spawn_started"] = "spawn_started"


SpawnOutcome: TypeAlias = Literal["ok", "error", "timeout", "budget", "cancelled", "parked"]
"""How a child run ended: `budget` means its budget share could not pay for its next model
call; `cancelled` means this run stopped (finished, failed, parked or was cancelled) while
the child was still running; `parked` means the child stopped for an approval decision
(its journal ends with `Parked`), which parks this run too. A cancelled or parked child's
own journal is left where it stopped, so resuming this run resumes the child, and its
next `SpawnFinished` supersedes this one."""


@value_class
class SpawnFinished:
    """A child run of this run ended."""

    lineage: Lineage
    outcome: SpawnOutcome
    output: JsonValue = None
    """The child's final output in JSON form, when it finished."""
    error: str | None = None
    """Why the child did not finish, when it did not."""
    usage: Usage = field(default_factory=Usage)
    """The child's usage including its own children's (the whole subtree)."""
    steps: int = 0
    """The child's own model steps."""
    tree_steps: int | None = None
    """Model steps of the child and all its descendants: what its step share was charged
    (None in journals written before this field; read `steps` then)."""
    from_journal: bool = False
    """The result was read from the child's finished journal; nothing was re-run."""
    kind: Literal["spawn_finished"] = "spawn_finished"


@value_class
class SliceEntry:
    """One item of a parent's context handed to a child, and why."""

    id: str
    """The item: `m3` (message 3), `call:<id>` (a tool call with its result), `memory:<id>`,
    `state:<key>`."""
    tokens: int
    score: float
    reasons: tuple[str, ...] = ()


@value_class
class ContextSliced:
    """The slice of this run's context that a child received."""

    child_run_id: str
    mode: Literal["selective", "full"]
    entries: tuple[SliceEntry, ...]
    """What was passed, in the order the child sees it."""
    tokens_passed: int
    tokens_available: int
    """Tokens of everything that could have been passed (the full copy)."""
    token_budget: int | None = None
    dropped: tuple[str, ...] = ()
    """Relevant items left out because the budget was spent."""
    kind: Literal["context_sliced"] = "context_sliced"


@value_class
class ComplexityMetrics:
    """What the runtime measured about a run, for spawn policies."""

    step: int = 0
    context_tokens: int = 0
    """Estimated tokens of the conversation so far."""
    context_window: int | None = None
    pending_todos: int = 0
    consecutive_failures: int = 0
    """Tool calls that failed in a row, most recent last."""
    resources_touched: int = 0
    """Distinct files and state keys named in tool call arguments."""
    steps_without_progress: int = 0
    """Steps since a todo item was last completed (or since the start)."""

    @property
    def context_fill(self) -> float | None:
        """Context tokens in use as a fraction of the window, when the window is known."""
        if not self.context_window:
            return None
        return self.context_tokens / self.context_window


@value_class
class SpawnDecided:
    """A spawn policy looked at the run's metrics and decided."""

    policy: str
    spawn: bool
    reason: str
    metrics: ComplexityMetrics
    kind: Literal["spawn_decided"] = "spawn_decided"


AnyJournalEvent: TypeAlias = (
    RunStarted
    | UserPrompt
    | ModelRequested
    | ModelResponded
    | ToolCallStarted
    | ToolCallFinished
    | StepFinished
    | RunFinished
    | RunFailed
    | StateLoaded
    | StateCommitted
    | StateRejected
    | SpawnStarted
    | SpawnFinished
    | ContextSliced
    | SpawnDecided
    | Compacted
    | ToolCallAdmitted
    | ToolCallRefused
    | ApprovalRequested
    | ApprovalDecided
    | CancelRequested
    | Parked
    | RunResumed
    | HookApplied
)
"""Any event that is recorded in a journal (the plain union)."""

JournalEvent: TypeAlias = Annotated[AnyJournalEvent, TAGGED_BY_KIND]
"""Any event that is recorded in a journal, tagged by `kind` for JSON."""

RunEvent: TypeAlias = (
    AnyJournalEvent | TextDelta | ThinkingDelta | ToolCallDelta | ToolProgress | ChildEvent
)
"""Anything `agent.stream()` yields."""


JOURNAL_EVENT_TYPES: tuple[type, ...] = get_args(AnyJournalEvent)
"""The classes of the events that are journaled (the others are stream-only: deltas,
tool progress, child events)."""


def is_journal_event(event: RunEvent) -> TypeIs[AnyJournalEvent]:
    """Whether a streamed event is one the journal records."""
    return isinstance(event, JOURNAL_EVENT_TYPES)


@cache
def _event_adapter() -> TypeAdapter[JournalEvent]:
    from pydantic import TypeAdapter

    return TypeAdapter(JournalEvent)


class Journal:
    """The append-only record of one run."""

    __slots__ = ("_events",)

    def __init__(self, events: Iterable[JournalEvent] = ()) -> None:
        self._events: list[JournalEvent] = list(events)

    def append(self, event: JournalEvent) -> None:
        """Record one more event."""
        self._events.append(event)

    @property
    def events(self) -> Sequence[JournalEvent]:
        """The events so far, oldest first (a read-only view)."""
        return tuple(self._events)

    @property
    def run_id(self) -> str | None:
        """The run's id, from its `RunStarted` event."""
        first = self._events[0] if self._events else None
        return first.run_id if isinstance(first, RunStarted) else None

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[JournalEvent]:
        return iter(self._events)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Journal) and self._events == other._events

    __hash__ = None  # type: ignore[assignment] # mutable container: not hashable

    def to_jsonl(self) -> str:
        """One JSON object per line, one line per event."""
        adapter = _event_adapter()
        return "".join(adapter.dump_json(e).decode() + "\n" for e in self._events)

    @classmethod
    def from_jsonl(cls, text: str) -> Journal:
        """Load a journal written by `to_jsonl`; a bad line raises `JournalError` naming it."""
        from pydantic import ValidationError

        adapter = _event_adapter()
        events: list[JournalEvent] = []
        # lines end at "\n" only: JSON leaves other line breaks (U+2028, U+0085, ...) unescaped
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                events.append(adapter.validate_json(line))
            except ValidationError as exc:
                msg = f"journal line {number} is not a valid event: {exc.errors()[0]['msg']}"
                raise JournalError(msg) from exc
        return cls(events)
