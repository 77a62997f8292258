r"""Pure helpers of the llama.cpp provider: chat messages, the tool prompt, grammars, stop watching.

Nothing here imports llama-cpp-python, so it is cheap to import and test. The conventions:

- Tools are described in the system message (models without a tool template, such as
  SmolLM2, still follow it), and a call is written as
  `<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`, the format most
  open chat models were tuned on.
- When a call must happen (`tool_choice` required or a tool name), legato writes the fixed
  parts of that text itself and lets the model generate only the tool name (a grammar that
  allows exactly the tool names) and the arguments (a grammar made from the tool's JSON
  schema), so the call is always well-formed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from legato.exceptions import InvalidRequest
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
    "ARGS_PREFIX",
    "CALL_CLOSE",
    "CALL_MARKER",
    "CALL_OPEN",
    "CHATML_TEMPLATE",
    "NAME_PREFIX",
    "ChatTurn",
    "TextWatcher",
    "chat_turns",
    "name_grammar",
    "output_or_call_grammar",
    "tool_system_prompt",
]

CALL_MARKER = "<tool_call>"
"""Text that starts a tool call in the model's answer."""
CALL_OPEN = CALL_MARKER + "\n"
NAME_PREFIX = '{"name": "'
ARGS_PREFIX = '", "arguments": '
CALL_CLOSE = "}\n</tool_call>"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML, used when a GGUF file carries no chat template of its own."""

ChatTurn = dict[str, str]
"""One message as chat templates expect it: `{"role": ..., "content": ...}`."""


def tool_system_prompt(tools: Sequence[ToolDefinition]) -> str:
    """The part of the system message that describes the tools and the call format."""
    lines = [json.dumps(_tool_entry(t), ensure_ascii=False) for t in tools]
    return (
        "You can call these tools:\n<tools>\n"
        + "\n".join(lines)
        + "\n</tools>\n"
        + "To call a tool, reply with only:\n"
        + CALL_OPEN
        + '{"name": "<tool name>", "arguments": {<the arguments as JSON>}}'
        + CALL_CLOSE[1:]
        + "\nOtherwise answer the user directly."
    )


def _tool_entry(tool: ToolDefinition) -> dict[str, object]:
    entry: dict[str, object] = {"name": tool.name}
    if tool.description:
        entry["description"] = tool.description
    entry["parameters"] = tool.parameters
    return entry


def render_call(call: ToolCallPart) -> str:
    """An earlier tool call, written the way the model is asked to write calls."""
    arguments = call.arguments if isinstance(call.arguments, dict) else call.raw_arguments
    body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}{body}\n</tool_call>"


def _render_result(result: ToolResultPart) -> str:
    status = "error" if result.is_error else "result"
    return f"<tool_response>\n{result.name} {status}: {result.text}\n</tool_response>"


def _content_text(message: Message) -> str:
    chunks: list[str] = []
    for part in message.parts:
        match part:
            case TextPart():
                chunks.append(part.text)
            case ToolCallPart():
                chunks.append(render_call(part))
            case ToolResultPart():
                chunks.append(_render_result(part))
            case ThinkingPart():
                pass  # reasoning from another model is not shown to this one
            case ImagePart() | DocumentPart():
                msg = (
                    f"llamacpp: the local model reads text only; a {part.kind} part cannot be sent"
                )
                raise InvalidRequest(msg, provider="llamacpp")
    return "\n".join(c for c in chunks if c)


def chat_turns(
    messages: Sequence[Message], *, instructions: str | None, tools_prompt: str | None
) -> list[ChatTurn]:
    """Neutral messages as `{"role", "content"}` turns for a chat template.

    Instructions, system messages and the tool prompt become one leading system turn. Tool
    results travel as `tool` turns (ChatML allows any role name).
    """
    system = [instructions] if instructions else []
    turns: list[ChatTurn] = []
    for message in messages:
        if message.role == "system":
            system.append(message.text)
            continue
        turns.append({"role": message.role, "content": _content_text(message)})
    if tools_prompt:
        system.append(tools_prompt)
    if system:
        turns.insert(0, {"role": "system", "content": "\n\n".join(s for s in system if s)})
    return turns


def _gbnf_literal(text: str) -> str:
    # JSON string escapes (\" \\ \n \uXXXX) are valid GBNF string escapes.
    return json.dumps(text, ensure_ascii=True)


def name_grammar(names: Sequence[str]) -> str:
    """A GBNF grammar that allows exactly one of `names` followed by the closing quote."""
    alternatives = " | ".join(_gbnf_literal(name + '"') for name in names)
    return f"root ::= {alternatives}\n"


_ROOT_RULE = re.compile(r"^root\s*::=", flags=re.MULTILINE)


def output_or_call_grammar(output_gbnf: str) -> str:
    """Turn a JSON-output grammar into one that also allows starting a tool call instead."""
    renamed = _ROOT_RULE.sub("legato-output ::=", output_gbnf, count=1)
    return f"root ::= legato-output | {_gbnf_literal(CALL_MARKER)}\n{renamed}"


class TextWatcher:
    """Passes streamed text through, holding back whatever may be the start of a watched string.

    `feed` returns the text that is safe to show and the watched string found, if any (text
    after it is dropped). The watched strings are the tool-call marker and stop sequences.
    """

    def __init__(self, watched: Sequence[str]) -> None:
        self._watched = [w for w in watched if w]
        self._pending = ""

    def feed(self, text: str) -> tuple[str, str | None]:
        """Add streamed text; return (text safe to emit, watched string found or None)."""
        buffer = self._pending + text
        # The watched string completed first wins (ties: the one that started first), so the
        # result does not depend on how the text was split into chunks.
        found: tuple[int, int, str] | None = None
        for watched in self._watched:
            at = buffer.find(watched)
            if at >= 0 and (found is None or (at + len(watched), at) < found[:2]):
                found = (at + len(watched), at, watched)
        if found is not None:
            self._pending = ""
            return buffer[: found[1]], found[2]
        keep = max((_overlap(buffer, w) for w in self._watched), default=0)
        self._pending = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep], None

    def flush(self) -> str:
        """The held-back text, at the end of the stream (it did not become a watched string)."""
        rest, self._pending = self._pending, ""
        return rest


def _overlap(buffer: str, watched: str) -> int:
    """Length of the longest end of `buffer` that is a proper start of `watched`."""
    for size in range(min(len(watched) - 1, len(buffer)), 0, -1):
        if buffer.endswith(watched[:size]):
            return size
    return 0
