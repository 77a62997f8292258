"""Errors of runs, tools and the verified state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from legato.exceptions._base import LegatoError

if TYPE_CHECKING:  # type-only: plain data of the same layer
    from legato._requests import ParkedRun

__all__ = [
    "BudgetExceeded",
    "ChildFailed",
    "CommitConflict",
    "ContractHalt",
    "ContractRetriesExceeded",
    "ContractViolation",
    "DurableRunFailed",
    "HookBlocked",
    "LeaseRefused",
    "MaxStepsExceeded",
    "OutputRetriesExceeded",
    "PhantomTool",
    "RunCancelled",
    "RunError",
    "RunParked",
    "RunTimedOut",
    "SpawnRefused",
    "StateError",
    "StateValidationError",
    "ToolArgumentsInvalid",
    "ToolError",
    "ToolIsolationError",
    "ToolRetriesExceeded",
    "UndeclaredStateKey",
    "UnexpectedModelBehavior",
    "WriteSkew",
]


def _who(tool: str | None) -> str:
    return f"tool {tool!r}: " if tool else ""


def _short_repr(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RunError(LegatoError):
    """A run cannot continue."""


class MaxStepsExceeded(RunError):
    """The run reached its `max_steps` without a final answer."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        super().__init__(f"the run reached max_steps={max_steps} without a final answer")


class ToolRetriesExceeded(RunError):
    """A tool failed in more consecutive model turns than its `max_retries` allows.

    Several failing calls of the tool in one response count as one failing turn;
    `last_error` is the text of its latest failed call.
    """

    def __init__(self, tool: str, retries: int, last_error: str) -> None:
        self.tool = tool
        self.retries = retries
        self.last_error = last_error
        super().__init__(
            f"tool {tool!r} failed in {retries + 1} consecutive turns (max_retries={retries}); "
            f"last error: {last_error}"
        )


class OutputRetriesExceeded(RunError):
    """The model's structured output failed validation more often than allowed."""

    def __init__(self, retries: int, last_error: str) -> None:
        self.retries = retries
        self.last_error = last_error
        super().__init__(
            f"the final output failed validation {retries + 1} times; last error: {last_error}"
        )


class UnexpectedModelBehavior(RunError):
    """The model answered in a way the run cannot use (e.g. an empty response)."""


class RunCancelled(RunError):
    """The run was cancelled before it finished."""


class ToolError(LegatoError):
    """Raise inside a tool to fail the call with a message the model sees (and may act on)."""


class ToolArgumentsInvalid(ToolError):
    """The arguments a model sent do not fit the tool's schema.

    `problems` lists one line per problem, each naming the field, e.g.
    `"city: missing required argument"`.
    """

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        listing = "\n".join(f"- {p}" for p in problems)
        super().__init__(f"invalid arguments for tool {tool!r}:\n{listing}")


class ToolIsolationError(ToolError):
    """A call of a tool with `isolation="process"` could not cross into its worker process.

    Its arguments or its result cannot be pickled (an open file, a lambda, a lock), or the
    worker died before answering (killed by the OOM killer, `os._exit`, a crash).
    """


class StateError(LegatoError):
    """The verified state refused a read, a write, a commit or a call; nothing was committed.

    `tool` names the tool whose call or contract caused it, when there is one.
    """

    tool: str | None = None


class StateValidationError(StateError):
    """A value that does not fit its key's declared type, or a state that fails validation."""

    def __init__(self, key: str, value: object, problem: str, *, tool: str | None = None) -> None:
        self.key = key
        self.value = value
        self.problem = problem
        self.tool = tool
        super().__init__(
            f"{_who(tool)}invalid value {_short_repr(value)} for state key {key!r}: {problem}"
        )


class UndeclaredStateKey(StateError):
    """A read or write of a key that the state's schema does not declare."""

    def __init__(
        self, key: str, known: list[str], *, tool: str | None = None, value: object = None
    ) -> None:
        self.key = key
        self.known = known
        self.tool = tool
        self.value = value
        super().__init__(
            f"{_who(tool)}state key {key!r} is not declared; the declared keys are: "
            f"{', '.join(known) or 'none'}"
        )


class ContractViolation(StateError):
    """A tool broke its contract's rules, or a contract itself failed.

    Rules: a tool writes only the keys its contract declares in `writes=` and reads only
    those in `reads=`. A contract fails when a predicate raises or returns something that
    is not a bool or an outcome.
    """

    def __init__(
        self, message: str, *, tool: str | None = None, key: str | None = None, value: object = None
    ) -> None:
        self.tool = tool
        self.key = key
        self.value = value
        super().__init__(f"{_who(tool)}{message}")


class ContractHalt(StateError):
    """A contract returned `Halt`: the run stops; `predicate` and `evidence` say why."""

    def __init__(
        self,
        reason: str,
        *,
        tool: str | None,
        predicate: str | None = None,
        evidence: dict[str, object] | None = None,
    ) -> None:
        self.reason = reason
        self.tool = tool
        self.predicate = predicate
        self.evidence = dict(evidence or {})
        where = f" ({predicate})" if predicate else ""
        super().__init__(f"{_who(tool)}contract halted the run{where}: {reason}")


class ContractRetriesExceeded(StateError):
    """The contracts rejected more calls in one run than the run allows."""

    def __init__(self, limit: int, last: str) -> None:
        self.limit = limit
        self.last = last
        super().__init__(
            f"the contracts rejected more than {limit} tool calls in this run; last: {last}"
        )


class SpawnRefused(ToolError):
    """A spawn request beyond what the parent may grant.

    An ungranted tool or skill, a budget share larger than what remains, a depth or fan-out
    beyond the configured limit.
    """


class ChildFailed(ToolError):
    """A child run did not deliver a result; the message says why (error, timeout, budget)."""

    def __init__(self, child_run_id: str, reason: str) -> None:
        self.child_run_id = child_run_id
        self.reason = reason
        super().__init__(f"child run {child_run_id} failed: {reason}")


class CommitConflict(ToolError):
    """A write whose read is stale: the resource changed since it was read.

    The message tells the model to read the resource again and retry; nothing was written.
    """

    def __init__(self, resource: str, message: str) -> None:
        self.resource = resource
        super().__init__(message)


class WriteSkew(CommitConflict):
    """A commit that, together with commits made since its snapshot, breaks an invariant."""


class LeaseRefused(ToolError):
    """A write carrying a fencing token that has expired or been superseded."""

    def __init__(self, resource: str, message: str) -> None:
        self.resource = resource
        super().__init__(message)


class PhantomTool(ToolError):
    """A call to a tool that was removed or replaced after the model was shown it."""

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        super().__init__(message)


class RunTimedOut(RunCancelled):
    """The run used its `timeout`; it was fenced and stopped like a cancelled run."""


class RunParked(RunError):
    """The run waits for approval decisions and has stopped; nothing pending has run.

    `parked` is a `legato.approvals.ParkedRun` (the journal and the pending requests).
    Decide the requests (`ApprovalStore.decide`) and pass `parked.journal` to
    `agent.resume` to continue, from this process or another one.
    """

    def __init__(self, parked: ParkedRun, message: str) -> None:
        self.parked = parked
        super().__init__(message)


class BudgetExceeded(RunError):
    """Spending `requested` more of `resource` would cross its `limit`.

    `used` is what was spent, `reserved` what in-flight calls hold, both in the unit of
    `resource` (tokens, dollars, calls, steps or seconds).
    """

    def __init__(
        self, resource: str, *, limit: float, used: float, reserved: float, requested: float
    ) -> None:
        self.resource = resource
        self.limit = limit
        self.used = used
        self.reserved = reserved
        self.requested = requested
        super().__init__(
            f"budget for {resource} exceeded: limit {limit:g}, used {used:g}, "
            f"reserved by calls in flight {reserved:g}, this call needs {requested:g}"
        )


class HookBlocked(RunError):
    """A security hook blocked a model request or response; `hook` names it."""

    def __init__(self, hook: str, point: str, reason: str) -> None:
        self.hook = hook
        self.point = point
        self.reason = reason
        super().__init__(f"hook {hook!r} blocked the run at {point}: {reason}")


class DurableRunFailed(RunError):
    """A run driven by a durable engine failed; its journal in the store says how.

    `error_type` names the legato error that ended it (e.g. `MaxStepsExceeded`).
    """

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"run {run_id} failed: {error_type}: {message}")
        self.run_id = run_id
        self.error_type = error_type
