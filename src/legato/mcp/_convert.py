"""Translations between MCP values and legato's neutral ones (content, names, messages)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from legato.messages import ContentPart, DocumentPart, ImagePart, Message, TextPart

if TYPE_CHECKING:
    import mcp_types

__all__ = [
    "NameMap",
    "content_from_mcp",
    "content_to_mcp",
    "prompt_messages_from_mcp",
    "resource_contents_from_mcp",
]

_VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class NameMap:
    """A reversible mapping between MCP tool names and names every provider accepts.

    MCP allows names legato's tools cannot carry (dots, slashes, more than 64 characters).
    Such a name becomes a valid one (invalid characters replaced, a short hash added when
    needed to stay unique); `original` turns it back.
    """

    __slots__ = ("_from_mcp", "_prefix", "_to_mcp")

    def __init__(self, prefix: str | None = None) -> None:
        self._prefix = f"{prefix}_" if prefix else ""
        self._to_mcp: dict[str, str] = {}
        self._from_mcp: dict[str, str] = {}

    def legato_name(self, mcp_name: str) -> str:
        """The legato name for an MCP tool name (stable for the life of the map)."""
        known = self._from_mcp.get(mcp_name)
        if known is not None:
            return known
        candidate = self._prefix + mcp_name
        if not _VALID.match(candidate) or candidate in self._to_mcp:
            digest = hashlib.sha256(mcp_name.encode()).hexdigest()[:8]
            cleaned = _INVALID_CHARS.sub("_", candidate)[: 64 - 9] or "tool"
            candidate = f"{cleaned}_{digest}"
        self._to_mcp[candidate] = mcp_name
        self._from_mcp[mcp_name] = candidate
        return candidate

    def original(self, legato_name: str) -> str | None:
        """The MCP name behind a legato name, if the map made it."""
        return self._to_mcp.get(legato_name)


def _data(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return text.encode()


def resource_contents_from_mcp(
    contents: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
) -> ContentPart:
    """One resource's contents as a content part (text, image or document)."""
    import mcp_types

    mime = contents.mime_type or ""
    if isinstance(contents, mcp_types.TextResourceContents):
        return TextPart(text=contents.text)
    data = _data(contents.blob)
    if mime.startswith("image/"):
        return ImagePart(data=data, media_type=mime)
    return DocumentPart(
        data=data, media_type=mime or "application/octet-stream", title=str(contents.uri)
    )


def content_from_mcp(blocks: Iterable[Any], structured: Any = None) -> tuple[ContentPart, ...]:
    """MCP content blocks (tool results, prompt messages) as legato content parts.

    Text stays text; images become image parts; audio and binary resources become
    document parts; embedded text resources become text; resource links are described
    in text. A result with only `structuredContent` is sent as its JSON text.
    """
    import mcp_types

    parts: list[ContentPart] = []
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, mcp_types.ImageContent):
            parts.append(ImagePart(data=_data(block.data), media_type=block.mime_type))
        elif isinstance(block, mcp_types.AudioContent):
            parts.append(DocumentPart(data=_data(block.data), media_type=block.mime_type))
        elif isinstance(block, mcp_types.EmbeddedResource):
            parts.append(resource_contents_from_mcp(block.resource))
        elif isinstance(block, mcp_types.ResourceLink):
            described = f" ({block.description})" if block.description else ""
            parts.append(TextPart(text=f"[resource {block.name}: {block.uri}]{described}"))
        else:
            parts.append(TextPart(text=json.dumps(_dump(block))))
    if not parts and structured is not None:
        parts.append(TextPart(text=json.dumps(structured)))
    return tuple(parts)


def _dump(block: Any) -> Any:
    dump = getattr(block, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else str(block)


def content_to_mcp(parts: Sequence[ContentPart]) -> list[mcp_types.ContentBlock]:
    """Legato content parts as MCP content blocks (for legato's MCP server)."""
    import mcp_types

    blocks: list[mcp_types.ContentBlock] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append(mcp_types.TextContent(type="text", text=part.text))
        elif part.data is None:
            blocks.append(mcp_types.TextContent(type="text", text=part.url or ""))
        elif isinstance(part, ImagePart):
            encoded = base64.b64encode(part.data).decode()
            blocks.append(
                mcp_types.ImageContent(type="image", data=encoded, mime_type=part.media_type)
            )
        elif part.media_type.startswith("audio/"):
            encoded = base64.b64encode(part.data).decode()
            blocks.append(
                mcp_types.AudioContent(type="audio", data=encoded, mime_type=part.media_type)
            )
        else:
            uri = part.title or f"legato://document/{hashlib.sha256(part.data).hexdigest()[:16]}"
            blocks.append(
                mcp_types.EmbeddedResource(type="resource", resource=_resource(uri, part))
            )
    return blocks


def _is_text(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in ("application/json", "application/xml")


def _resource(
    uri: str, part: DocumentPart
) -> mcp_types.TextResourceContents | mcp_types.BlobResourceContents:
    import mcp_types

    data = part.data or b""
    if _is_text(part.media_type):
        try:
            text = data.decode()
        except UnicodeDecodeError:
            pass
        else:
            return mcp_types.TextResourceContents(uri=uri, text=text, mime_type=part.media_type)
    encoded = base64.b64encode(data).decode()
    return mcp_types.BlobResourceContents(uri=uri, blob=encoded, mime_type=part.media_type)


def prompt_messages_from_mcp(messages: Iterable[mcp_types.PromptMessage]) -> list[Message]:
    """MCP prompt messages as legato messages (consecutive same-role messages stay separate)."""
    out: list[Message] = []
    for message in messages:
        parts = list(content_from_mcp([message.content]))
        role = "user" if message.role == "user" else "assistant"
        out.append(Message(role=role, parts=tuple(parts)))
    return out
