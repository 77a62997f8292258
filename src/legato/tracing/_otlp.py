"""A recorded run's spans in OTLP, the protocol collectors speak: over HTTP, or as JSON.

Both are built by OpenTelemetry's own code: the spans are made by an SDK tracer
provider (`export_journal`), encoded by the OTLP exporter's encoder into an
`ExportTraceServiceRequest`, and sent by the official OTLP/HTTP exporter
(`opentelemetry-exporter-otlp-proto-http`, extra `otel`).

The JSON form is OTLP/JSON: the protobuf JSON mapping of that request, with the OTLP
specification's one difference (trace and span ids as hex strings, not base64), written
on one line, so a file of such lines is what a collector's OTLP JSON file receiver reads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from legato.events import Journal
from legato.exceptions import ConfigurationError, MissingDependency

__all__ = [
    "export_otlp_http",
    "journal_otlp_json",
    "journal_otlp_request",
    "otlp_json",
    "otlp_provider_from_env",
]

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""The standard variables naming where OTLP traces go (the first is the full traces URL)."""

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _finished_spans(journal: Journal, redact: Callable[[str], str] | None) -> list[Any]:
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
    except ModuleNotFoundError:
        package = "opentelemetry-sdk"
        raise MissingDependency(package, "otel") from None
    from legato.tracing._otel import export_journal

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_journal(journal, tracer_provider=provider, redact=redact)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _encoder() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ModuleNotFoundError:
        package = "opentelemetry-exporter-otlp-proto-http"
        raise MissingDependency(package, "otel") from None
    return encode_spans


def journal_otlp_request(journal: Journal, *, redact: Callable[[str], str] | None = None) -> Any:
    """The run's spans as an OTLP `ExportTraceServiceRequest` (a protobuf message)."""
    return _encoder()(_finished_spans(journal, redact))


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v)
            for k, v in value.items()  # pyright: ignore[reportUnknownVariableType]
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def otlp_json(request: Any) -> str:
    """An `ExportTraceServiceRequest` as one line of OTLP/JSON."""
    from google.protobuf.json_format import MessageToDict

    mapped = MessageToDict(request, use_integers_for_enums=True)
    return json.dumps(_hex_ids(mapped), separators=(",", ":"), ensure_ascii=False)


def journal_otlp_json(journal: Journal, *, redact: Callable[[str], str] | None = None) -> str:
    """The run's spans as one line of OTLP/JSON (an `ExportTraceServiceRequest`)."""
    return otlp_json(journal_otlp_request(journal, redact=redact))


def export_otlp_http(
    journal: Journal,
    endpoint: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    redact: Callable[[str], str] | None = None,
) -> int:
    """Send the run's spans to a collector's OTLP/HTTP endpoint; returns how many were sent.

    `endpoint` is the full traces URL (e.g. `http://127.0.0.1:4318/v1/traces`). Raises
    `ConfigurationError` when the collector does not accept them.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ModuleNotFoundError:
        package = "opentelemetry-exporter-otlp-proto-http"
        raise MissingDependency(package, "otel") from None
    spans = _finished_spans(journal, redact)
    exporter = OTLPSpanExporter(  # headers=None: the exporter reads OTEL_EXPORTER_OTLP_HEADERS
        endpoint=endpoint, headers=dict(headers) if headers is not None else None, timeout=timeout
    )
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        msg = f"the collector at {endpoint} did not accept the spans (is it an OTLP/HTTP traces endpoint?)"
        raise ConfigurationError(msg)
    return len(spans)


def otlp_provider_from_env(environ: Mapping[str, str]) -> Any | None:
    """A tracer provider exporting over OTLP/HTTP, when the environment asks for one.

    Made when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
    and no SDK provider is installed globally (under `opentelemetry-instrument` the global
    one is used instead: None). Spans are batched; call its `shutdown()` to send the last
    ones. The service is `legato` unless `OTEL_SERVICE_NAME` says otherwise.
    """
    if not any(environ.get(v, "").strip() for v in ENDPOINT_VARIABLES):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ModuleNotFoundError:
        package = "opentelemetry-exporter-otlp-proto-http"
        raise MissingDependency(package, "otel") from None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # someone configured OpenTelemetry already: its exporters apply
    named = environ.get("OTEL_SERVICE_NAME", "").strip()
    resource = Resource.create({} if named else {"service.name": "legato"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
