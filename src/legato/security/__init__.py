"""Security hooks: lifecycle points, secret redaction, injection screening, the audit chain.

The shipped hooks (`SecretRedactor`, `InjectionScreen`, `AuditLog`) are imported on first
use, so `import legato` does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from legato.security._hooks import (
    AdmissionOutcome,
    Allow,
    Ask,
    Block,
    Hook,
    HookContext,
    HookRunner,
    Modify,
    RequestOutcome,
    ResponseOutcome,
    ResultOutcome,
    RunEnd,
    SpawnOutcome,
    SpawnRequest,
    ToolAdmission,
)

if TYPE_CHECKING:
    from legato.security.audit import AuditLog, AuditReport, audit_lines, verify_audit
    from legato.security.injection import INJECTION_FLAG, InjectionScreen
    from legato.security.redaction import SecretRedactor

__all__ = [
    "INJECTION_FLAG",
    "AdmissionOutcome",
    "Allow",
    "Ask",
    "AuditLog",
    "AuditReport",
    "Block",
    "Hook",
    "HookContext",
    "HookRunner",
    "InjectionScreen",
    "Modify",
    "RequestOutcome",
    "ResponseOutcome",
    "ResultOutcome",
    "RunEnd",
    "SecretRedactor",
    "SpawnOutcome",
    "SpawnRequest",
    "ToolAdmission",
    "audit_lines",
    "verify_audit",
]

_LAZY = {
    "AuditLog": "audit",
    "AuditReport": "audit",
    "audit_lines": "audit",
    "verify_audit": "audit",
    "INJECTION_FLAG": "injection",
    "InjectionScreen": "injection",
    "SecretRedactor": "redaction",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'legato.security' has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(importlib.import_module(f"legato.security.{module}"), name)
