"""Secret redaction: keep API keys, tokens and private keys out of model requests and logs.

`SecretRedactor` finds secrets by pattern (well-known key formats, bearer tokens, JWTs,
PEM private keys) and by value (the values of environment variables you name, or, by
default, of variables whose names look like credentials). As a hook it rewrites outbound
model requests; `logging_filter()` applies the same redaction to log records.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from legato.messages import Message, TextPart, ToolCallPart, ToolResultPart
from legato.models import ModelRequest
from legato.security._hooks import ALLOW, Hook, HookContext, Modify, RequestOutcome

__all__ = ["DEFAULT_SECRET_PATTERNS", "SecretRedactor"]

DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",  # OpenAI / Anthropic style keys
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",  # Slack
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API key
    r"\b[rs]k_live_[0-9A-Za-z]{20,}\b",  # Stripe
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b",  # JWT
    r"(?<=[Bb]earer )[A-Za-z0-9._~+/-]{16,}=*",
)
"""Regular expressions of common secret formats."""

_SECRET_NAME = re.compile(r"(?i)(api_?key|token|secret|password|passwd|credential|private_key)")


class SecretRedactor(Hook):
    """Replaces secrets in outbound model requests (and, as a filter, in log records).

    Args:
        env_vars: Names of environment variables whose values are secrets. None: every
            variable whose name looks like a credential (`*_API_KEY`, `*TOKEN*`, ...).
        values: More literal secret values.
        patterns: Regular expressions of secrets (default `DEFAULT_SECRET_PATTERNS`).
        environ: The environment to read (default `os.environ`, read once, here).
        replacement: What a secret becomes.
    """

    def __init__(
        self,
        *,
        env_vars: Sequence[str] | None = None,
        values: Iterable[str] = (),
        patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS,
        environ: Mapping[str, str] | None = None,
        replacement: str = "[REDACTED]",
        min_length: int = 8,
    ) -> None:
        env = os.environ if environ is None else environ
        names = env_vars if env_vars is not None else [n for n in env if _SECRET_NAME.search(n)]
        secrets = {env[n] for n in names if n in env} | set(values)
        literal = sorted((v for v in secrets if len(v) >= min_length), key=len, reverse=True)
        parts = [re.escape(v) for v in literal] + list(patterns)
        self._pattern = re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None
        self.replacement = replacement

    def redact(self, text: str) -> str:
        """`text` with every secret replaced."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(self.replacement, text)

    def _message(self, message: Message) -> Message:
        parts: list[Any] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                part = dataclasses.replace(part, text=self.redact(part.text))
            elif isinstance(part, ToolCallPart):
                raw = self.redact(part.raw_arguments)
                if raw != part.raw_arguments:
                    part = ToolCallPart.from_raw(id=part.id, name=part.name, raw_arguments=raw)
            elif isinstance(part, ToolResultPart):
                content = tuple(
                    dataclasses.replace(c, text=self.redact(c.text))
                    if isinstance(c, TextPart)
                    else c
                    for c in part.content
                )
                part = dataclasses.replace(part, content=content)
            parts.append(part)
        return dataclasses.replace(message, parts=tuple(parts))

    async def before_model_request(self, request: ModelRequest, ctx: HookContext) -> RequestOutcome:
        """Redact the instructions and every message of an outbound request."""
        messages = tuple(self._message(m) for m in request.messages)
        instructions = self.redact(request.instructions) if request.instructions else None
        if messages == request.messages and instructions == request.instructions:
            return ALLOW
        changed = dataclasses.replace(request, messages=messages, instructions=instructions)
        return Modify(changed, reason="secrets redacted from the outbound request")

    def logging_filter(self) -> logging.Filter:
        """A `logging.Filter` that redacts each record's message (and its arguments)."""
        redactor = self

        class _RedactingFilter(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                record.msg = redactor.redact(record.getMessage())
                record.args = None
                return True

        return _RedactingFilter()
