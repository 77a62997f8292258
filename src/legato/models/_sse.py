r"""Server-sent events read from the raw bytes of a streamed HTTP answer.

The provider SDKs decode SSE, then build their own typed objects from each event; legato
reads the wire JSON itself (`json.loads` of each event's data) and needs only the first
step. This is that step, as the SDKs do it: lines end in `\n`, `\r\n` or `\r`; a blank
line ends an event; `data:` lines are joined with `\n`; `event:` names the event;
comments (`:` lines, the keep-alives some servers send) and other fields are skipped; an
event the stream ends in the middle of (no blank line after it) is dropped.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

__all__ = ["server_sent_events"]

_LINE_END = re.compile(rb"\r\n|\r|\n")


async def server_sent_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, str]]:
    """`(event name or "", data)` of each event in a stream of byte chunks, in order."""
    pending = b""
    event = ""
    data: list[str] = []
    async for chunk in chunks:
        buffer = pending + chunk if pending else chunk
        # a trailing `\r` may be the first half of `\r\n`: wait for the next chunk
        held = 1 if buffer.endswith(b"\r") else 0
        lines = _LINE_END.split(buffer[: len(buffer) - held] if held else buffer)
        pending = lines.pop() + (b"\r" if held else b"")
        for line in lines:
            if not line:
                if data or event:
                    yield event, "\n".join(data)
                    event, data = "", []
                continue
            if line.startswith(b"data: "):  # nearly every line
                data.append(line[6:].decode())
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                data.append(value.decode())
            elif field == b"event":
                event = value.decode()
            # comments (an empty field name), `id`, `retry` and unknown fields: skipped
