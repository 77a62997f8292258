"""Neutral scenario data for the wire simulator: what the "model" answers, and what goes wrong.

A `SimTurn` says what one response contains (text, reasoning, tool calls, usage) in no
provider's format; the simulator renders it in the wire format of whichever endpoint the
request hit. A `Fault` describes how the answer is damaged on the way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "ErrorKind",
    "Fault",
    "ServerToolKind",
    "SimCall",
    "SimCitation",
    "SimServerTool",
    "SimTurn",
    "SimUsage",
    "split_every",
]

ErrorKind: TypeAlias = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "context_length",
    "auth",
    "invalid",
    "not_found",
    "content_filter",
]
"""A provider error, rendered with the status code and body each wire API uses for it."""

Finish: TypeAlias = Literal["stop", "length", "content_filter"]

ServerToolKind: TypeAlias = Literal[
    "web_search", "web_fetch", "code_execution", "file_search", "image_generation", "mcp"
]
"""A tool the provider runs on its own side. Anthropic has web search, web fetch and code
execution; OpenAI Responses has web search, file search, code execution (its code
interpreter), image generation and remote MCP servers. A kind the wire has no form for is a
`ValueError` in the simulator."""


def split_every(text: str, size: int) -> tuple[str, ...]:
    """Cut text into pieces of `size` characters (the last may be shorter)."""
    return tuple(text[i : i + size] for i in range(0, len(text), max(1, size))) or ("",)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimCall:
    """One tool call the simulated model makes."""

    name: str
    arguments: dict[str, Any] = field(default_factory=lambda: {})
    """The arguments; rendered as JSON text unless `raw` is given."""
    id: str | None = None
    """The call id; the simulator makes one up when None."""
    chunks: tuple[str, ...] | None = None
    """The argument text cut into the fragments a streaming wire sends (default: 7 characters)."""
    raw: str | None = None
    """Argument text sent verbatim, even when it is not valid JSON."""

    @property
    def text(self) -> str:
        """The argument text as sent."""
        if self.raw is not None:
            return self.raw
        if self.chunks is not None:
            return "".join(self.chunks)
        return json.dumps(self.arguments, ensure_ascii=False)

    @property
    def value(self) -> Any:
        """The arguments as a JSON value, for wires that send each call whole."""
        if self.raw is None and self.chunks is None:
            return self.arguments
        try:
            return json.loads(self.text)
        except ValueError:
            return self.text

    @property
    def fragments(self) -> tuple[str, ...]:
        """The argument text in streamed fragments."""
        return self.chunks if self.chunks is not None else split_every(self.text, 7)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimCitation:
    """A source the answer text cites (Anthropic `citations`, OpenAI `annotations`)."""

    url: str = "https://example.org/source"
    title: str = "A source"
    cited_text: str = ""
    """The passage of the source the answer relies on (Anthropic sends it; OpenAI sends the
    span of the answer instead, taken here as where this text occurs in the answer)."""
    document: int | None = None
    """Cite the request's document (or uploaded file) of this index instead of a web page:
    Anthropic's `char_location`, OpenAI's `file_citation`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimServerTool:
    """One call of a tool the provider runs itself, with its result, before the answer text."""

    kind: ServerToolKind = "web_search"
    query: str = "legato framework"
    """The search query, the URL fetched, the code run, the image prompt or the MCP tool's
    argument."""
    failed: bool = False
    """Send the wire's documented error form of the result instead of a result."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimUsage:
    """Token counts the simulated provider reports."""

    input_tokens: int = 12
    """Prompt tokens, cached ones included."""
    output_tokens: int = 5
    """Generated tokens, reasoning included."""
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """What goes wrong with a response. Every field is off by default."""

    error: ErrorKind | None = None
    """Answer with this provider error instead of a response."""
    status: int | None = None
    """Override the error's HTTP status code."""
    message: str = "simulated failure"
    retry_after: float | None = None
    """Say when to retry (seconds): a Retry-After header, or for Gemini a `RetryInfo`
    `retryDelay` in the error body, as Google sends it."""
    disconnect_after: int | None = None
    """Send this many stream events (or this many body bytes, non-streaming), then drop the line."""
    malformed_after: int | None = None
    """After this many stream events send a line of broken JSON (non-streaming: broken body)."""
    error_event_after: int | None = None
    """After this many stream events send the provider's in-stream error event."""
    event_error: ErrorKind = "server"
    """The kind of that in-stream error event (its embedded code says what went wrong)."""
    raw_event: bytes | None = None
    """Bytes sent as one extra stream event (after `raw_after` events), exactly as given."""
    raw_after: int = 0
    empty: bool = False
    """HTTP 200 with no events at all (the llama.cpp auto+stream case)."""
    byte_split: int | None = None
    """Write the stream in pieces of this many bytes, ignoring event and UTF-8 boundaries."""
    delay: float = 0.0
    """Seconds to wait before each write (slow chunks); also before the first byte."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimTurn:
    """One scripted response, independent of wire format."""

    text: str = ""
    """Answer text, sent after any tool calls' preamble (see `text_first`)."""
    text_chunks: tuple[str, ...] | None = None
    """The text in streamed fragments (default: 5 characters)."""
    thinking: str = ""
    """Reasoning text, sent before everything else."""
    thinking_signature: str | None = None
    text_signature: str | None = None
    """A thought signature on the answer text (Gemini: on the text part when whole, on an
    empty text part that ends the stream when streamed)."""
    calls: tuple[SimCall, ...] = ()
    server_tools: tuple[SimServerTool, ...] = ()
    """Tools the provider runs itself, sent after the reasoning and before the text and calls."""
    citations: tuple[SimCitation, ...] = ()
    """Sources the answer text cites."""
    refusal: str = ""
    """The model declines to answer, in its own words (OpenAI Responses: a `refusal` content
    part instead of the output text, streamed as `response.refusal.delta`)."""
    text_first: bool = True
    """Text before the tool calls (True) or after them (False)."""
    usage: SimUsage = field(default_factory=SimUsage)
    finish: Finish | None = None
    """Why generation stopped; defaults to `stop` (tool calls when there are calls)."""
    raw_finish: str | None = None
    """The wire's own finish/stop reason, sent verbatim instead of the one `finish` gives
    (`"pause_turn"`, `"MALFORMED_FUNCTION_CALL"`, `"load"`, ...; any string, known or not)."""
    send_finish_reason: bool = True
    """False: a Chat Completions stream ends with `[DONE]` alone, every `finish_reason` null
    (as Snowflake's and some other compatible servers send it)."""
    model: str | None = None
    """The model name reported; defaults to the one requested."""
    interleave_calls: bool = False
    """Interleave the argument fragments of parallel calls (Chat Completions wire only)."""
    repeat_name: bool = False
    """Repeat the call's name and id in every streamed chunk (llama.cpp server's quirk)."""
    fault: Fault | None = None

    @property
    def fragments(self) -> tuple[str, ...]:
        """The answer text in streamed fragments."""
        if self.text_chunks is not None:
            return self.text_chunks
        return split_every(self.text, 5) if self.text else ()
