"""What an approver decides about one call: approve, reject or edit.

`Approve`, `Reject` and `Edit` are values, with their JSON form (`decision_from_json`,
what a web UI or another process sends). This module owns the shape of a decision only:
who may decide, when, and how often is the business of the stores
(`legato._approval_stores`) and the gate (`legato.effects`). Policy layer: imports only
the foundation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from legato._values import value_class
from legato.exceptions import DecisionTokenInvalid
from legato.messages import JsonValue

__all__ = ["Approve", "Decision", "Edit", "Reject", "decision_from_json"]


@value_class
class Approve:
    """Run the call once, as it was requested."""

    message: str = ""
    verdict: Literal["approve"] = "approve"


@value_class
class Reject:
    """Do not run the call; the model is told `message`."""

    message: str = "The user rejected this call."
    verdict: Literal["reject"] = "reject"


@value_class
class Edit:
    """Run the call once with these arguments instead (they are validated again)."""

    arguments: dict[str, JsonValue]
    message: str = ""
    verdict: Literal["edit"] = "edit"


Decision: TypeAlias = Approve | Reject | Edit
"""What an approver decides."""


def decision_from_json(data: Mapping[str, Any]) -> Decision:
    """A decision from its JSON form (`{"verdict": "edit", "arguments": {...}}`)."""
    verdict = data.get("verdict")
    message = str(data.get("message", ""))
    if verdict == "approve":
        return Approve(message=message)
    if verdict == "reject":
        return Reject(message=message or Reject().message)
    if verdict == "edit":
        arguments = data.get("arguments")
        if not isinstance(arguments, dict):
            msg = "an edit decision needs an 'arguments' object"
            raise DecisionTokenInvalid(msg)
        return Edit(arguments=dict(arguments), message=message)  # pyright: ignore[reportUnknownArgumentType]
    msg = f"unknown verdict {verdict!r}: expected approve, reject or edit"
    raise DecisionTokenInvalid(msg)
