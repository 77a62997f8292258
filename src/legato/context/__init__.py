"""Context management: token accounting, compaction strategies, pairing validation.

Compaction is a set of pure functions over neutral messages (`keep_recent`,
`elide_tool_results`, `stitch`), strategies that use them (`KeepRecent`,
`ElideToolResults`, `Summarize`, `Chain`), and a per-agent `ContextPolicy` saying when to
compact. Every output keeps tool calls with their results and passes `validate` for
every provider's rules; `repair` fixes foreign histories and reports what it changed.
"""

from legato.context._compact import (
    ELIDED_PREFIX,
    CompactionResult,
    compose,
    elide_tool_results,
    keep_recent,
    select_recent,
    stitch,
    units,
)
from legato.context._pairing import (
    ANTHROPIC_RULES,
    GEMINI_RULES,
    OPENAI_RULES,
    RULES,
    PairingProblem,
    PairingRules,
    Repaired,
    is_note,
    is_summary,
    note,
    repair,
    validate,
)
from legato.context._policy import (
    Chain,
    CompactionRequest,
    Compactor,
    ContextPolicy,
    ElideToolResults,
    KeepRecent,
    Summarize,
    summarize,
)
from legato.context._recall import recall_result_tool
from legato.context._tokens import (
    CharCounter,
    TiktokenCounter,
    TokenCounter,
    count_message,
    count_request,
    counter_for,
    message_text,
)

__all__ = [
    "ANTHROPIC_RULES",
    "ELIDED_PREFIX",
    "GEMINI_RULES",
    "OPENAI_RULES",
    "RULES",
    "Chain",
    "CharCounter",
    "CompactionRequest",
    "CompactionResult",
    "Compactor",
    "ContextPolicy",
    "ElideToolResults",
    "KeepRecent",
    "PairingProblem",
    "PairingRules",
    "Repaired",
    "Summarize",
    "TiktokenCounter",
    "TokenCounter",
    "compose",
    "count_message",
    "count_request",
    "counter_for",
    "elide_tool_results",
    "is_note",
    "is_summary",
    "keep_recent",
    "message_text",
    "note",
    "recall_result_tool",
    "repair",
    "select_recent",
    "stitch",
    "summarize",
    "units",
    "validate",
]
