"""Errors of protections, MCP servers, approvals, journals, stores and `legato serve`."""

from __future__ import annotations

from legato.exceptions._base import LegatoError

__all__ = [
    "ApprovalError",
    "AuditChainBroken",
    "CapabilityError",
    "ConversationBusy",
    "DecisionAlreadyUsed",
    "DecisionTokenInvalid",
    "JournalConflict",
    "JournalError",
    "MCPAuthorizationError",
    "MCPConnectionError",
    "MCPError",
    "MCPProtocolError",
    "MCPRequestFailed",
    "MCPTimeout",
    "MemoryItemNotFound",
    "PortInUse",
    "ProtectedPathRefused",
    "QuarantineError",
    "RequestInvalid",
    "RunNotResumable",
    "SandboxViolation",
    "SchemaTooNew",
    "SecurityError",
    "SessionExists",
    "SessionNotFound",
    "StoreCorrupted",
    "StoreError",
    "StoreLocked",
    "WebError",
    "WorkspaceQuotaExceeded",
]


class SecurityError(LegatoError):
    """A protection refused an action."""


class SandboxViolation(SecurityError):
    """A path or action that would reach outside the workspace or the sandbox.

    Nothing was read, written or executed. `path` is the offending path as given.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class ProtectedPathRefused(SandboxViolation):
    """A write to a path that host programs trust and run (a git hook, `.git/config`...).

    The workspace's `ProtectedPaths` policy names them; nothing was written. `pattern` is
    the policy entry that matched.
    """

    def __init__(self, message: str, *, path: str, pattern: str) -> None:
        self.pattern = pattern
        super().__init__(message, path=path)


class WorkspaceQuotaExceeded(SandboxViolation):
    """The workspace would grow past its quota (`Workspace(quota_bytes=...)`).

    `used` and `quota` are bytes. Raised before anything is written or run when the
    workspace is already full, and after a command that filled its allowance (whose
    changes are then discarded): nothing past the quota reaches the host.
    """

    def __init__(self, message: str, *, used: int, quota: int, path: str | None = None) -> None:
        self.used = used
        self.quota = quota
        super().__init__(message, path=path)


class CapabilityError(SecurityError):
    """A run's capabilities may only narrow once untrusted content has arrived.

    Widening them then needs an approval of the one call it is for (the defence asks).
    """


class QuarantineError(SecurityError):
    """A quarantine handle that names nothing, or is used after the run that made it."""


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


class StoreLocked(StoreError):
    """Another program kept the database file locked past the store's timeout; nothing was written."""

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


class StoreNameInvalid(StoreError):
    """A name given to the store holds a NUL character, which PostgreSQL text cannot hold.

    A session's name, a run id, an approval's id, an agent's or a model's name: refused by
    every backend alike, before anything is written.
    """

    def __init__(self, what: str, value: str) -> None:
        self.what = what
        self.value = value
        super().__init__(
            f"{what} {value!r} contains a NUL character (\\x00), which the store does not "
            "keep in names; nothing was written"
        )


class MemoryItemNotFound(StoreError):
    """No memory item has that id."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        super().__init__(f"no memory item with id {item_id!r}")


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
