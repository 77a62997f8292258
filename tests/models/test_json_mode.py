"""JSON mode: `OutputSpec.any_object()` asks for any JSON object, in each wire's own words
(OpenAI Chat and Responses: the `json_object` format; Gemini: the JSON MIME type without a
schema; Ollama: `format: "json"`)."""

from __future__ import annotations

from legato.messages import Message
from legato.models._base import ModelRequest, OutputSpec
from legato.models.gemini import GeminiModel
from legato.models.openai_chat import OPENAI, chat_body
from legato.models.openai_compatible import PROFILES
from legato.models.openai_responses import responses_body

ANY = ModelRequest(messages=(Message.user("Answer in JSON."),), output=OutputSpec.any_object())
SCHEMA = ModelRequest(
    messages=(Message.user("Answer in JSON."),),
    output=OutputSpec(
        name="city", schema={"type": "object", "properties": {"name": {"type": "string"}}}
    ),
)


def test_chat_servers_get_the_json_object_format() -> None:
    for server in (OPENAI, PROFILES["llamacpp-server"], PROFILES["deepseek"]):
        body = chat_body(ANY, model="m", server=server, stream=False)
        assert body["response_format"] == {"type": "json_object"}


def test_twin_a_schema_still_goes_as_a_schema() -> None:
    body = chat_body(SCHEMA, model="m", server=OPENAI, stream=False)
    assert body["response_format"]["type"] == "json_schema"
    assert (
        responses_body(SCHEMA, model="m", stream=False)["text"]["format"]["type"] == "json_schema"
    )


def test_responses_gets_the_json_object_format() -> None:
    assert responses_body(ANY, model="m", stream=False)["text"] == {
        "format": {"type": "json_object"}
    }


def test_gemini_gets_the_mime_type_alone() -> None:
    config = GeminiModel("gemini-2.5-flash", api_key="k").config(ANY)
    assert config["response_mime_type"] == "application/json"
    assert "response_json_schema" not in config and "response_schema" not in config


def test_ollama_gets_format_json() -> None:
    from legato.models.ollama import OllamaModel

    model = OllamaModel("llama3.2")
    assert model.body(ANY, stream=False)["format"] == "json"
    assert isinstance(model.body(SCHEMA, stream=False)["format"], dict)  # twin
