"""Every error legato raises, in one tree.

```
LegatoError
├── ConfigurationError            the program was set up wrongly; fix the code or the config
│   ├── UnknownModel              a "provider:model" string nothing can resolve
│   ├── MissingDependency         an optional extra is not installed (names the extra)
│   ├── MissingCredentials        a provider key is missing (names the environment variable)
│   ├── ToolDefinitionError       a function that cannot become a tool, or duplicate tool names
│   └── PolicyError               an approval policy naming an unknown tool or argument
├── ModelError                    a model call failed; `retryable` says whether trying again may help
│   ├── RateLimited               429; carries `retry_after` seconds when the provider sent it
│   ├── ModelOverloaded           529 / 503 "overloaded"
│   ├── ProviderServerError       5xx
│   ├── ModelTimeout              no answer in time
│   ├── StreamInterrupted         the stream broke off, or HTTP 200 with no events
│   ├── ContextLengthExceeded     the request is larger than the model's window
│   ├── AuthenticationFailed      401 / 403
│   ├── InvalidRequest            400 / 404 / 422 the provider refused the request as such
│   ├── ContentFiltered           the provider withheld the answer
│   └── ResponseParseError        the provider sent something legato cannot parse (raw payload kept)
├── RunError                      a run cannot go on
│   ├── MaxStepsExceeded          the run used its step allowance
│   ├── ToolRetriesExceeded       a tool kept failing past its retry limit
│   ├── OutputRetriesExceeded     the model kept returning invalid structured output
│   ├── UnexpectedModelBehavior   the model answered in a way the run cannot use
│   ├── RunCancelled              the run was cancelled
│   │   └── RunTimedOut           the run used its time allowance (the same fence as a cancel)
│   ├── RunParked                 the run waits for approval decisions; resume it with them
│   ├── BudgetExceeded            a budget limit would be crossed (carries the figures)
│   └── HookBlocked               a security hook blocked the run
├── ToolError                     raise in a tool to send the model an error message it can act on
│   └── ToolArgumentsInvalid      the model's arguments do not match the tool's schema
├── ApprovalError                 a decision that cannot be accepted
│   ├── DecisionTokenInvalid      the token belongs to no request, or to another call
│   └── DecisionAlreadyUsed       the token (or the decision) was already used once
├── JournalError                  a journal that cannot be read or replayed
│   └── AuditChainBroken          an audit chain whose hashes do not verify
└── NetworkBlocked                a test tried to reach the network (see legato.testing)
```

Errors that the model should see and may recover from (bad arguments, a failing tool)
are not exceptions at run level: they become tool results with `is_error=True`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type-only: the parked state lives in the policy layer
    from legato.approvals import ParkedRun

__all__ = [
    "ApprovalError",
    "AuditChainBroken",
    "AuthenticationFailed",
    "BudgetExceeded",
    "DecisionAlreadyUsed",
    "DecisionTokenInvalid",
    "HookBlocked",
    "PolicyError",
    "RunParked",
    "RunTimedOut",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "InvalidRequest",
    "JournalError",
    "LegatoError",
    "MaxStepsExceeded",
    "MissingCredentials",
    "MissingDependency",
    "ModelError",
    "ModelOverloaded",
    "ModelTimeout",
    "NetworkBlocked",
    "OutputRetriesExceeded",
    "ProviderServerError",
    "RateLimited",
    "ResponseParseError",
    "RunCancelled",
    "RunError",
    "StreamInterrupted",
    "ToolArgumentsInvalid",
    "ToolDefinitionError",
    "ToolError",
    "ToolRetriesExceeded",
    "UnexpectedModelBehavior",
    "UnknownModel",
]


class LegatoError(Exception):
    """The root of every error legato raises."""


# -- configuration -------------------------------------------------------------------------


class ConfigurationError(LegatoError):
    """The program or its configuration is wrong; retrying will not help."""


class UnknownModel(ConfigurationError):
    """A model string that no registered provider can resolve."""

    def __init__(self, model: str, known: list[str]) -> None:
        self.model = model
        self.known = known
        hint = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"unknown model {model!r}: expected 'provider:model' with a provider among: {hint}"
        )


class MissingDependency(ConfigurationError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{package!r} is not installed; install it with: pip install 'legato[{extra}]'"
        )


class MissingCredentials(ConfigurationError):
    """A provider needs a key that was neither passed nor found in the environment."""

    def __init__(self, provider: str, env_var: str) -> None:
        self.provider = provider
        self.env_var = env_var
        super().__init__(
            f"no API key for {provider}: set the {env_var} environment variable or pass api_key="
        )


class ToolDefinitionError(ConfigurationError):
    """A callable that cannot be turned into a tool, or a clash between tools."""


# -- model calls -----------------------------------------------------------------------------


class ModelError(LegatoError):
    """A model call failed."""

    retryable: bool = False
    """Whether the same request may succeed if sent again."""

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status_code: int | None = None,
        body: object = None,
    ) -> None:
        self.provider = provider
        self.status_code = status_code
        self.body = body
        super().__init__(message)


class RateLimited(ModelError):
    """The provider is rate limiting this client."""

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        provider: str | None = None,
        status_code: int | None = 429,
        body: object = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, provider=provider, status_code=status_code, body=body)


class ModelOverloaded(ModelError):
    """The provider is temporarily overloaded."""

    retryable = True


class ProviderServerError(ModelError):
    """The provider failed with a server error."""

    retryable = True


class ModelTimeout(ModelError):
    """The provider did not answer in time."""

    retryable = True


class StreamInterrupted(ModelError):
    """The response stream ended before the response was complete."""

    retryable = True


class ContextLengthExceeded(ModelError):
    """The request does not fit the model's context window."""


class AuthenticationFailed(ModelError):
    """The provider refused the credentials."""


class InvalidRequest(ModelError):
    """The provider refused the request as malformed or unsupported."""


class ContentFiltered(ModelError):
    """The provider withheld the response for policy reasons."""


class ResponseParseError(ModelError):
    """The provider sent a payload legato cannot parse; `body` holds it, keys redacted."""


# -- runs ------------------------------------------------------------------------------------


class RunError(LegatoError):
    """A run cannot continue."""


class MaxStepsExceeded(RunError):
    """The run reached its `max_steps` without a final answer."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        super().__init__(f"the run reached max_steps={max_steps} without a final answer")


class ToolRetriesExceeded(RunError):
    """A tool failed more times in one run than its `max_retries` allows."""

    def __init__(self, tool: str, retries: int, last_error: str) -> None:
        self.tool = tool
        self.retries = retries
        self.last_error = last_error
        super().__init__(
            f"tool {tool!r} failed {retries + 1} times (max_retries={retries}); last error: "
            f"{last_error}"
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


# -- tools -------------------------------------------------------------------------------------


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


# -- journals and tests ------------------------------------------------------------------------


class JournalError(LegatoError):
    """A journal that cannot be parsed, or that does not replay."""


class NetworkBlocked(LegatoError):
    """A connection to a non-loopback address was attempted while the network guard is on."""


# -- safe execution: policies, approvals, budgets, hooks (legato.effects and friends) -----------


class PolicyError(ConfigurationError):
    """An approval policy that names a tool (or an argument) the run does not have."""


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


class ApprovalError(LegatoError):
    """An approval decision that cannot be accepted; nothing was run."""


class DecisionTokenInvalid(ApprovalError):
    """The decision token belongs to no pending request, or to a different call."""


class DecisionAlreadyUsed(ApprovalError):
    """A decision token was used a second time, or a decision was claimed twice."""


class AuditChainBroken(JournalError):
    """An audit chain whose hashes do not verify: an event was edited, inserted or deleted.

    `line` is the first line (1-based) where the chain breaks.
    """

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"audit chain broken at line {line}: {reason}")
