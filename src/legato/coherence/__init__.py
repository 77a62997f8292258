"""Coherence for concurrent runs and children sharing resources.

- `ResourceStore`: versioned resources, transactions with read sets, one validated commit
  step (serializable or snapshot isolation with invariants), causal retraction;
- `LeaseTable`: leases with monotonic fencing tokens;
- `EditIntents`: declared line regions for parallel edits of one file (fail closed);
- `CommitSequencer`: effects applied in declared order, whatever order they finish in;
- `ToolRegistry`: versioned tools, so a removed or replaced tool is a `PhantomTool` error;
- `resource_tools`: read/write/claim tools over a store, for agents and their children.

Each can be switched off (`enforce=False`) to show the anomaly it prevents.
"""

from legato.coherence._intents import EditIntents, Intent, Region
from legato.coherence._lease import Lease, LeaseTable
from legato.coherence._registry import ToolRegistry
from legato.coherence._resources import (
    CommitRecord,
    Invariant,
    Isolation,
    ResourceStore,
    Transaction,
    Versioned,
    VersionedResources,
)
from legato.coherence._sequencer import CommitSequencer
from legato.coherence._tools import resource_tools

__all__ = [
    "CommitRecord",
    "CommitSequencer",
    "EditIntents",
    "Intent",
    "Invariant",
    "Isolation",
    "Lease",
    "LeaseTable",
    "Region",
    "ResourceStore",
    "ToolRegistry",
    "Transaction",
    "Versioned",
    "VersionedResources",
    "resource_tools",
]
