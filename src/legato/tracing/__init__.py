"""OpenTelemetry tracing per the GenAI semantic conventions, derived from run events.

```python
from legato.tracing import GenAITracing

agent = Agent(model, tools=[...], hooks=[GenAITracing()])   # spans on the global provider
```

Needs the `otel` extra (`opentelemetry-api`, plus an SDK and exporter of your choice).
`import legato` never imports OpenTelemetry; this package does so only when a tracer is
made. `export_journal` emits the spans of a recorded journal; `journal_otlp_json` and
`export_otlp_http` give them to a collector as OTLP (`legato trace --otel-json`,
`legato trace --otlp-endpoint URL`).
"""

from __future__ import annotations

from legato.tracing._otel import CAPTURE_ENV, GenAITracing, export_journal
from legato.tracing._otlp import (
    export_otlp_http,
    journal_otlp_json,
    journal_otlp_request,
    otlp_json,
    otlp_provider_from_env,
)
from legato.tracing._spans import SpanBuilder, SpanSink

__all__ = [
    "CAPTURE_ENV",
    "GenAITracing",
    "SpanBuilder",
    "SpanSink",
    "export_journal",
    "export_otlp_http",
    "journal_otlp_json",
    "journal_otlp_request",
    "otlp_json",
    "otlp_provider_from_env",
]
