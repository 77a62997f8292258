"""The effect gate's events (legato.effects): admission, approvals, cancellation, hooks.

Public through `legato.events`.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from legato._values import value_class
from legato.messages import (
    JsonValue,
    Message,
    ToolCallPart,
)

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "CancelRequested",
    "Compacted",
    "HookApplied",
    "Parked",
    "RefusalReason",
    "RunResumed",
    "ToolCallAdmitted",
    "ToolCallRefused",
]


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
    model: str | None = None
    """The model serving the run from here on (`provider:model`), which a resume may change
    (`ResumeOptions.model`); None in journals written before it was recorded."""
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
