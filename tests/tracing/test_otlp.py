"""OTLP that a collector accepts: OTLP/HTTP from the official exporter, and OTLP/JSON files.

The receiver is a real HTTP server on 127.0.0.1 that decodes what it gets with
`opentelemetry-proto`'s `ExportTraceServiceRequest` (protobuf bodies with `FromString`,
JSON bodies with `google.protobuf.json_format`), as a collector's OTLP/HTTP receiver does.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from typer.testing import CliRunner

from legato import Agent, tool
from legato.cli._app import app
from legato.events import Journal
from legato.testing import ScriptedModel, call, reply
from legato.tracing import journal_otlp_json

runner = CliRunner()
HEX_IDS = {"traceId": 32, "spanId": 16, "parentSpanId": 16}


class Receiver:
    """An OTLP/HTTP traces endpoint that keeps every request it decoded."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.received: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                kind = self.headers.get("Content-Type", "")
                owner.content_types.append(kind)
                if self.path != "/v1/traces" or owner.status != 200:
                    self.send_response(owner.status if owner.status != 200 else 404)
                    self.end_headers()
                    return
                if kind == "application/json":
                    request = parse_otlp_json(body.decode("utf-8"))
                else:
                    request = ExportTraceServiceRequest.FromString(body)
                owner.received.append(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _base64_ids(value: Any) -> Any:
    """OTLP/JSON's hex ids back to the protobuf JSON mapping's base64 (the one difference)."""
    if isinstance(value, dict):
        mapping = cast("dict[str, Any]", value)
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode() if k in HEX_IDS else _base64_ids(v)
            for k, v in mapping.items()
        }
    if isinstance(value, list):
        return [_base64_ids(v) for v in cast("list[Any]", value)]
    return value


def parse_otlp_json(text: str) -> ExportTraceServiceRequest:
    """An OTLP/JSON line parsed into the proto message (unknown fields refused)."""
    return json_format.ParseDict(_base64_ids(json.loads(text)), ExportTraceServiceRequest())


@tool(side_effects="none")
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"found {query}"


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    agent = Agent(
        ScriptedModel([reply(call("lookup", {"query": "otlp"})), "It is a protocol."]),
        tools=[lookup],
        name="researcher",
    )
    done = agent.run_sync("what is otlp?")
    path = tmp_path / "run.jsonl"
    path.write_text(done.journal.to_jsonl(), encoding="utf-8")
    return path


def _spans(request: ExportTraceServiceRequest) -> list[Span]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _check_tree(request: ExportTraceServiceRequest) -> None:
    names = sorted(s.name for s in _spans(request))
    assert names == [
        "chat scripted",
        "chat scripted",
        "execute_tool lookup",
        "invoke_agent researcher",
    ]
    spans = {s.name: s for s in _spans(request)}
    assert sorted(spans) == [
        "chat scripted",
        "execute_tool lookup",
        "invoke_agent researcher",
    ], sorted(spans)
    root = spans["invoke_agent researcher"]
    assert len(root.trace_id) == 16 and len(root.span_id) == 8
    for name in ("chat scripted", "execute_tool lookup"):
        assert spans[name].parent_span_id == root.span_id
        assert spans[name].trace_id == root.trace_id
    assert spans["chat scripted"].kind == Span.SPAN_KIND_CLIENT
    assert spans["execute_tool lookup"].kind == Span.SPAN_KIND_INTERNAL
    attributes = {a.key: a.value for a in spans["execute_tool lookup"].attributes}
    assert attributes["gen_ai.tool.name"].string_value == "lookup"
    assert attributes["gen_ai.operation.name"].string_value == "execute_tool"
    scopes = [ss.scope.name for rs in request.resource_spans for ss in rs.scope_spans]
    assert scopes == ["legato"]


def test_trace_sends_the_spans_over_otlp_http_to_a_receiver(journal_file: Path) -> None:
    with Receiver() as receiver:
        result = runner.invoke(app, ["trace", str(journal_file), "--otlp-endpoint", receiver.url])
        assert result.exit_code == 0, result.output
        assert f"sent 4 spans to {receiver.url}" in result.output
    assert receiver.content_types == ["application/x-protobuf"]
    (request,) = receiver.received
    _check_tree(request)


def test_twin_a_receiver_that_refuses_is_a_clear_error(journal_file: Path) -> None:
    with Receiver(status=400) as receiver:
        result = runner.invoke(app, ["trace", str(journal_file), "--otlp-endpoint", receiver.url])
    assert result.exit_code == 1
    assert f"the collector at {receiver.url} did not accept the spans" in result.output
    assert receiver.received == []


def test_otel_json_is_otlp_json_that_json_format_parses(journal_file: Path) -> None:
    result = runner.invoke(app, ["trace", str(journal_file), "--otel-json"])
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.splitlines()  # one request per line: an OTLP JSON file's format
    raw = json.loads(line)
    span = raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key, width in HEX_IDS.items():
        if key in span:
            assert re.fullmatch(rf"[0-9a-f]{{{width}}}", span[key]), (key, span[key])
    assert isinstance(span["kind"], int)  # an enum's number, not "SpanKind.CLIENT"
    assert "0x" not in line and "SpanKind." not in line
    _check_tree(parse_otlp_json(line))
    # and a receiver takes the file's line as an OTLP/HTTP JSON body
    import httpx

    with Receiver() as receiver:
        answer = httpx.post(
            receiver.url, content=line, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 200
    (request,) = receiver.received
    _check_tree(request)


def test_twin_the_console_exporters_format_is_not_otlp_json(journal_file: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from legato.tracing import export_journal

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_journal(Journal.from_jsonl(journal_file.read_text()), tracer_provider=provider)
    console_form = json.loads(exporter.get_finished_spans()[0].to_json())
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict(console_form, ExportTraceServiceRequest())
    assert journal_otlp_json(Journal.from_jsonl(journal_file.read_text())).startswith(
        '{"resourceSpans":'
    )


def _legato(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    src = Path(__file__).resolve().parents[2] / "src"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment.update({"PYTHONPATH": str(src), **env})
    command = [sys.executable, "-c", "from legato.cli import main; main()", *args]
    return subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, check=False
    )


def test_run_otel_exports_to_the_endpoint_the_environment_names(tmp_path: Path) -> None:
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "demo"}
        done = _legato(tmp_path, env, "run", "hi", "--model", "test:echo", "--otel")
        assert done.returncode == 0, done.stderr
        # twin: the same environment without --otel sends nothing
        quiet = _legato(tmp_path, env, "run", "hi", "--model", "test:echo")
        assert quiet.returncode == 0, quiet.stderr
    spans = [s for request in receiver.received for s in _spans(request)]
    assert sorted(s.name for s in spans) == ["chat echo", "invoke_agent agent"]
    (request,) = receiver.received
    resource = {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "demo"
