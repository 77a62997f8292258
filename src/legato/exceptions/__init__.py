"""Every error legato raises, in one tree.

```
LegatoError
├── ConfigurationError            the program was set up wrongly; fix the code or the config
│   ├── UnknownModel              a "provider:model" string nothing can resolve
│   ├── UnsupportedFeature        a provider asked for a tool or option it does not offer (names both)
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
│   │   ├── ProtectedPathRefused  a write to a path host programs run (git hooks, .git/config...)
│   │   └── WorkspaceQuotaExceeded  the workspace would grow past its quota
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
│   ├── StoreLocked               another program kept the database file locked too long
│   ├── SchemaTooNew              the database was written by a newer legato
│   ├── SessionNotFound           no session has that name
│   ├── SessionExists             a session of that name already exists
│   ├── StoreNameInvalid          a name (session, run id, approval id) holds a NUL character
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

from legato.exceptions._base import (
    AgentFileError,
    AuthenticationFailed,
    CompactionFailed,
    ConfigurationError,
    ContentFiltered,
    ContextLengthExceeded,
    EngineInputInvalid,
    InvalidRequest,
    LegatoError,
    MissingCredentials,
    MissingDependency,
    ModelError,
    ModelOverloaded,
    ModelTimeout,
    NetworkBlocked,
    PolicyError,
    PriceUnknown,
    ProviderServerError,
    RateLimited,
    ResponseParseError,
    SandboxUnavailable,
    SkillError,
    StreamInterrupted,
    ToolDefinitionError,
    UnknownModel,
    UnsupportedFeature,
    WorkspaceNotFound,
)
from legato.exceptions._io import (
    ApprovalError,
    AuditChainBroken,
    CapabilityError,
    ConversationBusy,
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    JournalConflict,
    JournalError,
    MCPAuthorizationError,
    MCPConnectionError,
    MCPError,
    MCPProtocolError,
    MCPRequestFailed,
    MCPTimeout,
    MemoryItemNotFound,
    PortInUse,
    ProtectedPathRefused,
    QuarantineError,
    RequestInvalid,
    RunNotResumable,
    SandboxViolation,
    SchemaTooNew,
    SecurityError,
    SessionExists,
    SessionNotFound,
    StoreCorrupted,
    StoreError,
    StoreLocked,
    StoreNameInvalid,
    WebError,
    WorkspaceQuotaExceeded,
)
from legato.exceptions._run import (
    BudgetExceeded,
    ChildFailed,
    CommitConflict,
    ContractHalt,
    ContractRetriesExceeded,
    ContractViolation,
    DurableRunFailed,
    HookBlocked,
    LeaseRefused,
    MaxStepsExceeded,
    OutputRetriesExceeded,
    PhantomTool,
    RunCancelled,
    RunError,
    RunParked,
    RunTimedOut,
    SpawnRefused,
    StateError,
    StateValidationError,
    ToolArgumentsInvalid,
    ToolError,
    ToolIsolationError,
    ToolRetriesExceeded,
    UndeclaredStateKey,
    UnexpectedModelBehavior,
    WriteSkew,
)

__all__ = [
    "AgentFileError",
    "ApprovalError",
    "AuditChainBroken",
    "AuthenticationFailed",
    "BudgetExceeded",
    "CapabilityError",
    "ChildFailed",
    "CommitConflict",
    "CompactionFailed",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "ContractHalt",
    "ContractRetriesExceeded",
    "ContractViolation",
    "ConversationBusy",
    "DecisionAlreadyUsed",
    "DecisionTokenInvalid",
    "DurableRunFailed",
    "EngineInputInvalid",
    "HookBlocked",
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
    "PolicyError",
    "PortInUse",
    "ProtectedPathRefused",
    "PriceUnknown",
    "ProviderServerError",
    "QuarantineError",
    "RateLimited",
    "RequestInvalid",
    "ResponseParseError",
    "RunCancelled",
    "RunError",
    "RunNotResumable",
    "RunParked",
    "RunTimedOut",
    "SandboxUnavailable",
    "SandboxViolation",
    "SchemaTooNew",
    "SecurityError",
    "SessionExists",
    "SessionNotFound",
    "SkillError",
    "SpawnRefused",
    "StateError",
    "StateValidationError",
    "StoreCorrupted",
    "StoreError",
    "StoreLocked",
    "StoreNameInvalid",
    "StreamInterrupted",
    "ToolArgumentsInvalid",
    "ToolDefinitionError",
    "ToolError",
    "ToolIsolationError",
    "ToolRetriesExceeded",
    "UndeclaredStateKey",
    "UnexpectedModelBehavior",
    "UnknownModel",
    "UnsupportedFeature",
    "WebError",
    "WorkspaceNotFound",
    "WorkspaceQuotaExceeded",
    "WriteSkew",
]


def _public_module() -> None:
    """Tracebacks and reprs name the public module (`legato.exceptions`), not a private one."""
    for name in __all__:
        globals()[name].__module__ = __name__


_public_module()
