"""The conformance suite's "everything" fixtures, served by legato's MCP server.

Run: `legato mcp serve tests.mcp.servers.everything_fixture:server --http --port N`.
Every tool is an ordinary legato tool; the ones that talk back to the client use
`legato.mcp.server.current_request()`.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from legato import tool
from legato.exceptions import ToolError
from legato.mcp import PromptArgumentInfo
from legato.mcp.server import Prompt, Resource, ResourceTemplate, build_server, current_request
from legato.messages import DocumentPart, ImagePart, Message, TextPart
from legato.tools import Tool

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")


def _request() -> Any:
    request = current_request()
    if request is None:
        raise ToolError("this tool must be called over MCP")
    return request


@tool
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> ImagePart:
    """Tests image content response."""
    return ImagePart(data=PNG, media_type="image/png")


@tool
def test_audio_content() -> DocumentPart:
    """Tests audio content response."""
    return DocumentPart(data=WAV, media_type="audio/wav")


@tool
def test_embedded_resource() -> DocumentPart:
    """Tests embedded resource content response."""
    return DocumentPart(
        data=b"This is an embedded resource content.",
        media_type="text/plain",
        title="test://embedded-resource",
    )


@tool
def test_multiple_content_types() -> list[Any]:
    """Tests response with multiple content types (text, image, resource)."""
    return [
        TextPart(text="Multiple content types test:"),
        ImagePart(data=PNG, media_type="image/png"),
        DocumentPart(
            data=json.dumps({"test": "data", "value": 123}).encode(),
            media_type="application/json",
            title="test://mixed-content-resource",
        ),
    ]


@tool
async def test_tool_with_logging() -> str:
    """Tests tool that emits log messages during execution."""
    request = _request()
    await request.log("Tool execution started")
    await asyncio.sleep(0.05)
    await request.log("Tool processing data")
    await asyncio.sleep(0.05)
    await request.log("Tool execution completed")
    return "Tool with logging executed successfully"


@tool
async def test_tool_with_progress() -> str:
    """Tests tool that reports progress notifications."""
    request = _request()
    for step in (0, 50, 100):
        await request.progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await asyncio.sleep(0.05)
    return str(request.progress_token)


@tool
def test_error_handling() -> str:
    """Tests error response handling."""
    raise ToolError("This tool intentionally returns an error for testing")


@tool
async def test_sampling(prompt: str) -> str:
    """Tests server-initiated sampling (LLM completion request).

    Args:
        prompt: The prompt to send to the LLM.
    """
    answer = await _request().sample(prompt, max_tokens=100)
    return f"LLM response: {answer}"


@tool
async def test_elicitation(message: str) -> str:
    """Tests server-initiated elicitation (user input request).

    Args:
        message: The message to show the user.
    """
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await _request().elicit(message, schema)
    content = json.dumps(dict(answer.content or {}))
    return f"User response: action={answer.action}, content={content}"


@tool
async def test_elicitation_sep1034_defaults() -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verified", "default": True},
        },
    }
    answer = await _request().elicit("Please provide user information", schema)
    content = json.dumps(dict(answer.content or {}))
    return f"Elicitation completed: action={answer.action}, content={content}"


@tool
async def test_elicitation_sep1330_enums() -> str:
    """Tests elicitation with enum schema variations (SEP-1330)."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    answer = await _request().elicit("Please select values", schema)
    content = json.dumps(dict(answer.content or {}))
    return f"Elicitation completed: action={answer.action}, content={content}"


@tool
async def test_reconnection() -> str:
    """Tests SSE polling by closing the stream mid-call (SEP-1699)."""
    request = _request()
    await request.log("Before disconnect")
    await request.close_sse_stream()
    await asyncio.sleep(0.2)
    await request.log("After reconnect")
    return "Reconnection test completed"


async def _schema_2020_12(**arguments: Any) -> str:
    return json.dumps(arguments)


json_schema_tool = Tool.from_schema(
    name="json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    parameters={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
    function=_schema_2020_12,
)

TOOLS: list[Tool] = [
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_tool_with_logging,
    test_tool_with_progress,
    test_error_handling,
    test_sampling,
    test_elicitation,
    test_elicitation_sep1034_defaults,
    test_elicitation_sep1330_enums,
    test_reconnection,
    json_schema_tool,
]

RESOURCES = [
    Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource for testing",
        mime_type="text/plain",
        read=lambda: "This is the content of the static text resource.",
    ),
    Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
        read=lambda: PNG,
    ),
    Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource that can be subscribed to",
        mime_type="text/plain",
        read=lambda: "Watched resource content",
    ),
]


def _template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


TEMPLATES = [
    ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
        read=_template_data,
    )
]


def _with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


def _with_resource(resourceUri: str) -> list[Message]:
    document = DocumentPart(
        data=b"Embedded resource content for testing.", media_type="text/plain", title=resourceUri
    )
    return [Message.user([document]), Message.user("Please process the embedded resource above.")]


PROMPTS = [
    Prompt(
        name="test_simple_prompt",
        description="A simple prompt without arguments",
        render=lambda: "This is a simple prompt for testing.",
    ),
    Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with required arguments",
        arguments=(
            PromptArgumentInfo(name="arg1", description="First test argument", required=True),
            PromptArgumentInfo(name="arg2", description="Second test argument", required=True),
        ),
        render=_with_arguments,
    ),
    Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that includes an embedded resource",
        arguments=(PromptArgumentInfo(name="resourceUri", description="URI", required=True),),
        render=_with_resource,
    ),
    Prompt(
        name="test_prompt_with_image",
        description="A prompt that includes image content",
        render=lambda: [
            Message.user([ImagePart(data=PNG, media_type="image/png")]),
            Message.user("Please analyze the image above."),
        ],
    ),
]

_subscriptions: set[str] = set()


async def _subscribe(ctx: Any, params: Any) -> Any:
    import mcp

    _subscriptions.add(str(params.uri))
    return mcp.types.EmptyResult()


async def _unsubscribe(ctx: Any, params: Any) -> Any:
    import mcp

    _subscriptions.discard(str(params.uri))
    return mcp.types.EmptyResult()


async def _set_level(ctx: Any, params: Any) -> Any:
    import mcp

    return mcp.types.EmptyResult()


async def _complete(ctx: Any, params: Any) -> Any:
    import mcp

    return mcp.types.CompleteResult(
        completion=mcp.types.Completion(values=[], total=0, has_more=False)
    )


server = build_server(
    TOOLS,
    name="legato-conformance-everything",
    resources=RESOURCES,
    resource_templates=TEMPLATES,
    prompts=PROMPTS,
    handlers={
        "on_subscribe_resource": _subscribe,
        "on_unsubscribe_resource": _unsubscribe,
        "on_set_logging_level": _set_level,
        "on_completion": _complete,
    },
)
