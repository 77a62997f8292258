"""A local wire simulator for provider tests: real HTTP, real SSE/NDJSON, scripted answers.

The official SDKs talk to it through their base-URL settings, so their own parsing runs.
Speaks OpenAI Chat Completions (and so every OpenAI-compatible server), OpenAI Responses,
Anthropic Messages, Gemini `generateContent`/`streamGenerateContent` and Ollama `/api/chat`,
including citations and the tools a provider runs itself (`SimCitation`, `SimServerTool`),
and injects faults: error statuses with Retry-After, mid-stream disconnects, broken JSON,
byte-level splits, slow chunks, and HTTP 200 with no events.
"""

from legato.simulator._scenario import (
    ErrorKind,
    Fault,
    ServerToolKind,
    SimCall,
    SimCitation,
    SimServerTool,
    SimTurn,
    SimUsage,
    split_every,
)
from legato.simulator._server import RecordedRequest, WireSimulator

__all__ = [
    "ErrorKind",
    "Fault",
    "RecordedRequest",
    "ServerToolKind",
    "SimCall",
    "SimCitation",
    "SimServerTool",
    "SimTurn",
    "SimUsage",
    "WireSimulator",
    "split_every",
]
