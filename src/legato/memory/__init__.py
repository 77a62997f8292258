"""Long-term memory with provenance: items, FTS5 search, tools, automatic recall.

Every item records where it came from (run, tool call, user message) and what it was
derived from; `forget` follows those links so nothing derived from a forgotten item
survives, and redacts the sessions and journals that quoted it. Items may expire
(`remember(..., ttl=seconds)`).
"""

from legato.memory._base import (
    Embedder,
    Forgotten,
    MemoryItem,
    MemoryKind,
    MemoryStore,
    Provenance,
    Recalled,
    Source,
)
from legato.memory._sqlite import SQLiteMemory
from legato.memory._tools import Memory, memory_tools, recall_block

__all__ = [
    "Embedder",
    "Forgotten",
    "Memory",
    "MemoryItem",
    "MemoryKind",
    "MemoryStore",
    "Provenance",
    "Recalled",
    "SQLiteMemory",
    "Source",
    "memory_tools",
    "recall_block",
]
