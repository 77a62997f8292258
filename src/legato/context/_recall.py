"""`recall_result`: the tool that brings an elided tool result back."""

from __future__ import annotations

from functools import cache
from typing import Any

from legato.exceptions import ToolError
from legato.tools import RunContext, Tool

__all__ = ["recall_result_tool"]


@cache
def recall_result_tool() -> Tool:
    """The `recall_result` tool (built on first use, so importing costs nothing)."""
    return Tool.from_function(recall_result)


def recall_result(ctx: RunContext[Any], handle: str, offset: int = 0, length: int = 20_000) -> str:
    """Read a tool result that was shortened to save context.

    Args:
        ctx: The calling run (not shown to the model).
        handle: The handle given in the shortened result (the original call's id).
        offset: Character to start reading at.
        length: How many characters to return at most.
    """
    for message in reversed(ctx.messages):
        for result in message.tool_results:
            if result.call_id == handle and not result.text.startswith("[legato: result elided"):
                text = result.text
                chunk = text[offset : offset + length]
                if offset + length < len(text):
                    chunk += f"\n[{len(text) - offset - length} more characters; read on with offset={offset + length}]"
                return chunk
    msg = f"no tool result has the handle {handle!r}"
    raise ToolError(msg)
