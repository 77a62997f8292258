"""Security hooks: lifecycle points, secret redaction, injection screening, the audit chain."""

from legato.security._hooks import (
    Allow,
    Ask,
    Block,
    Hook,
    HookContext,
    HookRunner,
    Modify,
    RunEnd,
    SpawnRequest,
    ToolAdmission,
)
from legato.security.audit import AuditLog, AuditReport, audit_lines, verify_audit
from legato.security.injection import INJECTION_FLAG, InjectionScreen
from legato.security.redaction import SecretRedactor

__all__ = [
    "INJECTION_FLAG",
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
    "RunEnd",
    "SecretRedactor",
    "SpawnRequest",
    "ToolAdmission",
    "audit_lines",
    "verify_audit",
]
