"""Security hooks: lifecycle points, secret redaction, injection screening, the audit chain."""

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
