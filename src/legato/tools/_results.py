"""Turn whatever a tool returns into content parts the model can read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from legato.messages import ContentPart, DocumentPart, ImagePart, TextPart

__all__ = ["to_content"]

_IMAGE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _sniff_image(data: bytes) -> str | None:
    for signature, media_type in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _bytes_part(data: bytes) -> ContentPart:
    media_type = _sniff_image(data)
    if media_type is not None:
        return ImagePart(data=data, media_type=media_type)
    if data.startswith(b"%PDF-"):
        return DocumentPart(data=data, media_type="application/pdf")
    return DocumentPart(data=data, media_type="application/octet-stream")


def _is_part(value: object) -> bool:
    return isinstance(value, TextPart | ImagePart | DocumentPart)


def to_content(value: Any) -> tuple[ContentPart, ...]:
    """The content parts for a tool's return value.

    `str` is sent as is; parts (or a sequence of parts) pass through; `bytes` become an
    image or document part; pydantic models, dataclasses, dicts, lists and other values
    become JSON text.
    """
    if isinstance(value, str):
        return (TextPart(text=value),)
    if isinstance(value, TextPart | ImagePart | DocumentPart):
        return (value,)
    if isinstance(value, bytes | bytearray):
        return (_bytes_part(bytes(value)),)
    if isinstance(value, Sequence) and value:
        items = cast(Sequence[object], value)
        if all(_is_part(v) for v in items):
            return tuple(cast(Sequence[ContentPart], items))
    return (TextPart(text=_to_json_text(cast(object, value))),)


def _to_json_text(value: object) -> str:
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    from pydantic import TypeAdapter

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(type(value))
        return adapter.dump_json(value).decode()
    except Exception:  # any value pydantic cannot serialize falls back to str()
        return str(value)
