"""Tools over a `ResourceStore`: read with a version, write against what was read, claim.

Each run's reads are remembered per resource, so a write is validated against the version
that run last read: a child that read a stale version gets a `CommitConflict` tool error
telling it to read again and retry, instead of overwriting a sibling's work.
"""

from __future__ import annotations

import json
from typing import Any

from legato.coherence._lease import LeaseTable
from legato.coherence._resources import ResourceStore
from legato.exceptions import CommitConflict, ToolError
from legato.messages import JsonValue
from legato.tools import RunContext, Tool, Toolset

__all__ = ["resource_tools"]


def resource_tools(store: ResourceStore, *, name: str = "resources") -> Toolset:
    """`read_resource`, `write_resource` and (when the store has leases) `claim_resource`."""
    reads: dict[tuple[str, str], int] = {}

    def read_resource(ctx: RunContext[Any], key: str) -> str:
        """Read a shared resource; returns its value and version.

        Args:
            ctx: The calling run.
            key: The resource, e.g. `state:plan` or `file:src/app.py`.
        """
        item = store.read(key)
        reads[(ctx.run_id, key)] = item.version
        return json.dumps({"key": key, "version": item.version, "value": item.value})

    def write_resource(
        ctx: RunContext[Any], key: str, value: JsonValue, token: int | None = None
    ) -> str:
        """Write a shared resource, based on the version you last read of it.

        Args:
            ctx: The calling run.
            key: The resource.
            value: The new value.
            token: The fencing token of your claim, when the resource is claimed.
        """
        seen = reads.get((ctx.run_id, key))
        txn = store.begin(author=ctx.run_id)
        if seen is None:
            current = store.read(key)
            if store.enforce and key in store:
                msg = f"you have not read {key!r} yet; read it first, then write"
                raise CommitConflict(key, msg)
            seen = current.version
        txn.reads[key] = seen
        txn.write(key, value, token=token)
        record = txn.commit()
        reads[(ctx.run_id, key)] = record.seq
        return f"wrote {key} (version {record.seq})"

    tools = [Tool.from_function(read_resource), Tool.from_function(write_resource, sequential=True)]
    leases = store.leases
    if leases is not None:
        tools.append(_claim_tool(leases))
    return Toolset(tools, name=name)


def _claim_tool(leases: LeaseTable) -> Tool:
    def claim_resource(ctx: RunContext[Any], key: str, seconds: float = 60.0) -> str:
        """Claim a resource for a long edit; writes to it then need the fencing token.

        Args:
            ctx: The calling run.
            key: The resource.
            seconds: How long the claim lasts.
        """
        if seconds <= 0:
            msg = "seconds must be positive"
            raise ToolError(msg)
        lease = leases.acquire(key, ctx.run_id, ttl=seconds)
        return f"claimed {key}: fencing token {lease.token}, for {seconds:g} seconds"

    return Tool.from_function(claim_resource)
