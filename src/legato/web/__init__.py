"""`legato serve`: a local web UI for an agent (extra `web`: Starlette and uvicorn).

```python
from legato import Agent
from legato.web import serve

serve(Agent("anthropic:claude-sonnet-4-5", tools=[send_email]))  # prints the URL to open
```

The page (HTML, script and style shipped in the wheel, nothing fetched from elsewhere)
talks AG-UI over POST + SSE. Runs are tasks of the server, so a closed tab stops nothing:
side-effecting calls wait in the approval store until someone approves, rejects or edits
them, and a reopened page picks the run up again from its events (`Last-Event-ID`) or its
journal. The server listens on 127.0.0.1, checks `Host` and `Origin` on every request and
wants the random token it printed.

Importing this package needs the `web` extra; `import legato` never imports it.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("starlette") is None:  # pragma: no cover - depends on the install
    from legato.exceptions import MissingDependency

    package = "starlette"
    raise MissingDependency(package, "web")

from legato.web._agui import AguiMapper, journal_to_agui
from legato.web._app import WebApp, create_app
from legato.web._serve import serve

__all__ = ["AguiMapper", "WebApp", "create_app", "journal_to_agui", "serve"]
