"""Anthropic's Messages API, the request side: neutral messages as Messages API blocks.

`anthropic_messages` turns a conversation into the top-level `system` blocks and the
`messages` list; `mark` and `mark_history` put the prompt-cache breakpoints
(`cache_control`) on blocks. The model itself (`legato.models.anthropic`) builds the rest of
the body and reads the answer.
"""

from __future__ import annotations

from typing import Any, cast

from legato.messages import (
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "BREAKPOINTS",
    "CITATIONS",
    "SERVER_BLOCKS",
    "anthropic_messages",
    "kept",
    "mark",
    "mark_history",
]

Obj = dict[str, Any]

SERVER_BLOCKS = "anthropic_server_blocks"
"""`provider_details` key: the server-tool blocks of a turn, each with its place."""
CITATIONS = "citations"
"""`provider_details` key: the citations of the answer text, each with its text part's index."""
_CACHE = {"type": "ephemeral"}
BREAKPOINTS = 4
"""Anthropic accepts at most four `cache_control` breakpoints per request."""


def mark(block: Obj) -> Obj:
    """`block` with a prompt-cache breakpoint."""
    return {**block, "cache_control": _CACHE}


def mark_history(messages: list[Obj], budget: int) -> None:
    """Put a breakpoint on the last block of the newest user turns (at most `budget`)."""
    marked = 0
    for message in reversed(messages):
        if marked >= budget:
            return
        blocks = message["content"]
        if message["role"] == "user" and blocks:
            blocks[-1] = mark(blocks[-1])
            marked += 1


# -- request translation ----------------------------------------------------------------------


def _source(part: ImagePart | DocumentPart) -> Obj:
    if part.url is not None:
        return {"type": "url", "url": part.url}
    if part.media_type.startswith("text/"):
        return {"type": "text", "media_type": "text/plain", "data": (part.data or b"").decode()}
    return {"type": "base64", "media_type": part.media_type, "data": part.base64}


def _content(parts: tuple[Any, ...]) -> list[Obj]:
    out: list[Obj] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({"type": "image", "source": _source(part)})
        elif isinstance(part, DocumentPart):
            doc: Obj = {"type": "document", "source": _source(part)}
            if part.title:
                doc["title"] = part.title
            out.append(doc)
    return out


def kept(block_type: str) -> bool:
    """Whether a block legato cannot represent is kept to be sent back (server-tool blocks)."""
    kept = ("server_tool_use", "mcp_tool_use", "container_upload", "compaction")
    return block_type in kept or block_type.endswith("_tool_result")


def _server_blocks(message: Message) -> dict[int, list[Obj]]:
    """The kept server-tool blocks of an assistant turn, by the part index they precede."""
    details = message.provider_details or {}
    found: dict[int, list[Obj]] = {}
    entries = details.get(SERVER_BLOCKS)
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("block"), dict):
            at = entry.get("at")
            found.setdefault(at if isinstance(at, int) else 0, []).append(cast(Obj, entry["block"]))
    return found


def _assistant(message: Message) -> list[Obj]:
    out: list[Obj] = []
    server = _server_blocks(message)
    for index, part in enumerate(message.parts):
        out.extend(server.pop(index, []))
        if isinstance(part, TextPart) and part.text:
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart) and part.provider == "anthropic" and part.signature:
            if part.redacted:
                out.append({"type": "redacted_thinking", "data": part.signature})
            else:
                out.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
        elif isinstance(part, ToolCallPart):
            args = part.arguments if isinstance(part.arguments, dict) else {}
            out.append({"type": "tool_use", "id": part.id, "name": part.name, "input": args})
    for rest in sorted(server):  # blocks after the last part (or past a shortened message)
        out.extend(server[rest])
    return out


def _result(result: ToolResultPart) -> Obj:
    block: Obj = {"type": "tool_result", "tool_use_id": result.call_id}
    content = _content(result.content)
    if content:
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block


def anthropic_messages(messages: tuple[Message, ...]) -> tuple[list[Obj], list[Obj]]:
    """(system blocks, messages) for the Messages API; consecutive same-role turns merge.

    System messages before the conversation starts go to the top-level `system`; one that
    comes later is sent in its place (`{"role": "system", ...}`), where it applies from
    that point on and leaves the cached prefix before it intact.
    """
    system: list[Obj] = []
    out: list[Obj] = []
    for message in messages:
        if message.role == "system" and not out:
            system.append({"type": "text", "text": message.text})
            continue
        if message.role == "system":
            role, blocks = "system", [{"type": "text", "text": message.text}]
        elif message.role == "assistant":
            role, blocks = "assistant", _assistant(message)
        elif message.tool_results:
            role = "user"
            blocks = [_result(r) for r in message.tool_results]
        else:
            role, blocks = "user", _content(message.parts)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out
