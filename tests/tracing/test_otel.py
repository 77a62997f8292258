"""GenAI spans from run events, checked with OpenTelemetry's in-memory exporter."""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from rich.console import Console
from typer.testing import CliRunner

from legato import Agent, tool
from legato.cli._app import app
from legato.events import ModelResponded
from legato.exceptions import ToolError
from legato.messages import Usage
from legato.security import SecretRedactor
from legato.testing import ScriptedModel, call, reply
from legato.tracing import GenAITracing
from legato.tracing import _conventions as sc

SENTINEL = "SENTINEL-7f3a9c-SECRET"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"found {query}"


@tool
def explode(query: str) -> str:
    """Fail with the query in the message.

    Args:
        query: What to fail with.
    """
    raise ToolError(f"cannot handle {query}")


def _by_name(finished: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name.startswith(prefix)]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_run_is_one_invoke_agent_span_with_chat_and_tool_spans_under_it(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    model = ScriptedModel(
        [
            reply(call("lookup", {"query": "x"}), usage=Usage(input_tokens=11, output_tokens=3)),
            reply("done", usage=Usage(input_tokens=20, output_tokens=2, cache_read_tokens=5)),
        ],
        name="anthropic:claude-test",
    )
    tracing = GenAITracing(tracer_provider=provider, conversation_id="session-1")
    agent = Agent(model, name="helper", tools=[lookup], hooks=[tracing])
    result = agent.run_sync("find x")
    finished = exporter.get_finished_spans()
    (agent_span,) = _by_name(finished, "invoke_agent")
    chats = _by_name(finished, "chat ")
    (tool_span,) = _by_name(finished, "execute_tool")
    assert agent_span.name == "invoke_agent helper" and agent_span.kind == SpanKind.INTERNAL
    assert _attrs(agent_span)[sc.CONVERSATION_ID] == "session-1"
    assert _attrs(agent_span)[sc.PROVIDER_NAME] == "anthropic"
    assert [c.kind for c in chats] == [SpanKind.CLIENT, SpanKind.CLIENT]
    assert all(c.name == "chat claude-test" for c in chats)
    journaled = [e.response.usage for e in result.journal if isinstance(e, ModelResponded)]
    assert [
        (_attrs(c)[sc.USAGE_INPUT_TOKENS], _attrs(c)[sc.USAGE_OUTPUT_TOKENS]) for c in chats
    ] == [(u.input_tokens, u.output_tokens) for u in journaled]
    assert _attrs(chats[1])[sc.USAGE_CACHE_READ_INPUT_TOKENS] == 5
    assert _attrs(chats[0])[sc.RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert _attrs(tool_span)[sc.TOOL_NAME] == "lookup"
    assert _attrs(tool_span)[sc.TOOL_CALL_ID] == "call_1"
    assert _attrs(tool_span)[sc.OPERATION_NAME] == "execute_tool"
    agent_id = agent_span.context.span_id  # pyright: ignore[reportOptionalMemberAccess]
    for child in [*chats, tool_span]:
        assert child.parent is not None and child.parent.span_id == agent_id
    assert _attrs(agent_span)[sc.USAGE_INPUT_TOKENS] == result.usage.input_tokens


def test_a_failing_tool_marks_its_span_with_error_type(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    model = ScriptedModel([reply(call("explode", {"query": "q"})), "sorry"])
    agent = Agent(model, tools=[explode], hooks=[GenAITracing(tracer_provider=provider)])
    agent.run_sync("go")
    (tool_span,) = _by_name(exporter.get_finished_spans(), "execute_tool")
    assert _attrs(tool_span)[sc.ERROR_TYPE] == "error"
    assert tool_span.status.status_code == StatusCode.ERROR


def test_a_child_run_nests_under_the_parent_tool_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    tracing = GenAITracing(tracer_provider=provider)  # one tracer for the whole tree
    child = Agent(
        ScriptedModel([reply(call("lookup", {"query": "c"})), "child done"]),
        name="kid",
        tools=[lookup],
        hooks=[tracing],
    )
    parent = Agent(
        ScriptedModel([reply(call("kid", {"task": "look"})), "parent done"]),
        name="boss",
        tools=[child.as_tool(name="kid", description="A child.")],
        hooks=[tracing],
    )
    assert parent.run_sync("go").output == "parent done"
    finished = exporter.get_finished_spans()
    (boss,) = [s for s in finished if s.name == "invoke_agent boss"]
    (kid,) = [s for s in finished if s.name == "invoke_agent kid"]
    (kid_call,) = [s for s in finished if s.name == "execute_tool kid"]
    (look,) = [s for s in finished if s.name == "execute_tool lookup"]
    assert kid_call.parent is not None and kid_call.parent.span_id == boss.context.span_id  # pyright: ignore[reportOptionalMemberAccess]
    assert kid.parent is not None and kid.parent.span_id == kid_call.context.span_id  # pyright: ignore[reportOptionalMemberAccess]
    assert look.parent is not None and look.parent.span_id == kid.context.span_id  # pyright: ignore[reportOptionalMemberAccess]
    assert len({s.context.trace_id for s in finished}) == 1  # pyright: ignore[reportOptionalMemberAccess]


def _everything_exported(finished: tuple[ReadableSpan, ...]) -> str:
    texts: list[str] = []
    for span in finished:
        texts.append(span.name)
        texts.append(json.dumps(_attrs(span), default=str))
        texts.append(str(span.status.description))
        for event in span.events:
            texts.append(event.name + json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(texts)


def _secret_run(provider: TracerProvider, tracing: GenAITracing) -> None:
    model = ScriptedModel(
        [reply(call("explode", {"query": SENTINEL})), f"I could not handle {SENTINEL}"]
    )
    agent = Agent(model, tools=[explode], instructions=f"key {SENTINEL}", hooks=[tracing])
    agent.run_sync(f"use {SENTINEL}")


def test_content_is_not_exported_by_default_and_is_redacted_when_captured(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    _secret_run(provider, GenAITracing(tracer_provider=provider))
    exported = _everything_exported(exporter.get_finished_spans())
    assert SENTINEL not in exported
    assert sc.TOOL_CALL_ARGUMENTS not in exported
    exporter.clear()
    redactor = SecretRedactor(values=[SENTINEL], environ={})
    _secret_run(
        provider,
        GenAITracing(tracer_provider=provider, capture_content=True, redact=redactor.redact),
    )
    exported = _everything_exported(exporter.get_finished_spans())
    assert sc.TOOL_CALL_ARGUMENTS in exported and sc.OUTPUT_MESSAGES in exported
    assert "[REDACTED]" in exported
    assert SENTINEL not in exported
    # the twin: capture without redaction exports the secret (what the redactor prevents)
    exporter.clear()
    _secret_run(
        provider,
        GenAITracing(tracer_provider=provider, capture_content=True, redact=lambda text: text),
    )
    assert SENTINEL in _everything_exported(exporter.get_finished_spans())


def test_tracing_off_imports_no_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from legato import Agent\n"
        "from legato.testing import ScriptedModel\n"
        "Agent(ScriptedModel(['hi'])).run_sync('x')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    src = Path(__file__).parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "[]"


def test_attribute_names_are_the_conventions_spelling() -> None:
    # the spec's own spelling (the semantic-conventions package; src/ never imports it)
    ga: Any = importlib.import_module(
        "opentelemetry.semconv._incubating.attributes.gen_ai_attributes"
    )
    error_attributes: Any = importlib.import_module(
        "opentelemetry.semconv.attributes.error_attributes"
    )

    expected = {
        sc.OPERATION_NAME: ga.GEN_AI_OPERATION_NAME,
        sc.PROVIDER_NAME: ga.GEN_AI_PROVIDER_NAME,
        sc.AGENT_NAME: ga.GEN_AI_AGENT_NAME,
        sc.CONVERSATION_ID: ga.GEN_AI_CONVERSATION_ID,
        sc.REQUEST_MODEL: ga.GEN_AI_REQUEST_MODEL,
        sc.RESPONSE_MODEL: ga.GEN_AI_RESPONSE_MODEL,
        sc.RESPONSE_FINISH_REASONS: ga.GEN_AI_RESPONSE_FINISH_REASONS,
        sc.USAGE_INPUT_TOKENS: ga.GEN_AI_USAGE_INPUT_TOKENS,
        sc.USAGE_OUTPUT_TOKENS: ga.GEN_AI_USAGE_OUTPUT_TOKENS,
        sc.USAGE_CACHE_READ_INPUT_TOKENS: ga.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        sc.USAGE_REASONING_OUTPUT_TOKENS: ga.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        sc.TOOL_NAME: ga.GEN_AI_TOOL_NAME,
        sc.TOOL_CALL_ID: ga.GEN_AI_TOOL_CALL_ID,
        sc.TOOL_TYPE: ga.GEN_AI_TOOL_TYPE,
        sc.SYSTEM_INSTRUCTIONS: ga.GEN_AI_SYSTEM_INSTRUCTIONS,
        sc.INPUT_MESSAGES: ga.GEN_AI_INPUT_MESSAGES,
        sc.OUTPUT_MESSAGES: ga.GEN_AI_OUTPUT_MESSAGES,
        sc.TOOL_CALL_ARGUMENTS: ga.GEN_AI_TOOL_CALL_ARGUMENTS,
        sc.TOOL_CALL_RESULT: ga.GEN_AI_TOOL_CALL_RESULT,
        sc.ERROR_TYPE: error_attributes.ERROR_TYPE,
    }
    for ours, spec in expected.items():
        assert ours == spec


def test_legato_trace_exports_a_recorded_journal_as_spans(tmp_path: Path) -> None:
    runner = CliRunner()
    journal = tmp_path / "run.jsonl"
    made = runner.invoke(app, ["run", "hello", "--model", "test:echo", "--journal", str(journal)])
    assert made.exit_code == 0, made.output
    result = runner.invoke(app, ["trace", str(journal), "--otel-json"])
    assert result.exit_code == 0, result.output
    exported = json.loads(result.stdout)  # OTLP/JSON: see test_otlp.py for the full check
    spans = exported["resourceSpans"][0]["scopeSpans"][0]["spans"]
    by_name = {s["name"]: s for s in spans}
    assert sorted(by_name) == ["chat echo", "invoke_agent agent"]
    root = by_name["invoke_agent agent"]
    assert by_name["chat echo"]["parentSpanId"] == root["spanId"]
    attributes = {a["key"]: a["value"] for a in by_name["chat echo"]["attributes"]}
    assert attributes[sc.OPERATION_NAME] == {"stringValue": "chat"}


def test_a_stream_traces_the_whole_tree_without_hooks(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    child = Agent(ScriptedModel(["child done"]), name="kid")
    parent = Agent(
        ScriptedModel([reply(call("kid", {"task": "look"})), "parent done"]),
        name="boss",
        tools=[child.as_tool(name="kid", description="A child.")],
    )
    tracing = GenAITracing(tracer_provider=provider)
    for event in parent.stream_sync("go"):
        tracing.observe(event)
    finished = exporter.get_finished_spans()
    (kid,) = [s for s in finished if s.name == "invoke_agent kid"]
    (kid_call,) = [s for s in finished if s.name == "execute_tool kid"]
    assert kid.parent is not None and kid.parent.span_id == kid_call.context.span_id  # pyright: ignore[reportOptionalMemberAccess]


def test_legato_run_and_chat_trace_with_otel_on_the_global_provider(
    spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    from legato.cli._run import AgentRequest, build_agent
    from legato.cli._turn import ConsoleApprover

    provider, exporter = spans
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    result = CliRunner().invoke(app, ["run", "hi", "--model", "test:echo", "--otel"])
    assert result.exit_code == 0, result.output
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["chat echo", "invoke_agent agent"]
    # the chat's spans carry its session as the conversation id
    exporter.clear()
    request = AgentRequest(model="test:echo", otel=True, session="chat-1")
    agent = build_agent(request, approver=ConsoleApprover(), console=Console(file=io.StringIO()))
    agent.run_sync("hello")
    (root,) = _by_name(exporter.get_finished_spans(), "invoke_agent")
    assert _attrs(root)[sc.CONVERSATION_ID] == "chat-1"
    # the twin: without --otel nothing is traced
    exporter.clear()
    assert CliRunner().invoke(app, ["run", "hi", "--model", "test:echo"]).exit_code == 0
    assert exporter.get_finished_spans() == ()
