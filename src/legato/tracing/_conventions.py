"""The OpenTelemetry GenAI semantic-convention names legato emits (spec values, as strings).

legato writes these ~20 names itself instead of importing the semantic-conventions
package's incubating module (every `gen_ai` constant there is marked deprecated, moved to
the GenAI conventions repository); a test checks each one against the spec's spelling.
"""

from __future__ import annotations

__all__ = [
    "AGENT_NAME",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "INPUT_MESSAGES",
    "OPERATION_NAME",
    "OUTPUT_MESSAGES",
    "PROVIDER_NAME",
    "PROVIDERS",
    "REQUEST_MODEL",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_MODEL",
    "SYSTEM_INSTRUCTIONS",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_NAME",
    "TOOL_TYPE",
    "USAGE_CACHE_READ_INPUT_TOKENS",
    "USAGE_INPUT_TOKENS",
    "USAGE_OUTPUT_TOKENS",
    "USAGE_REASONING_OUTPUT_TOKENS",
    "provider_name",
]

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"
# content: only with capture on, after redaction
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"

PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
}
"""legato provider prefixes whose `gen_ai.provider.name` the conventions list."""


def provider_name(model: str) -> str:
    """The `gen_ai.provider.name` of a `provider:model` string (the prefix if not listed)."""
    prefix = model.partition(":")[0]
    return PROVIDERS.get(prefix, prefix or "unknown")
