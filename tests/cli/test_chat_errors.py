"""A provider error in `legato chat`: one line, printed once."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from legato import Agent
from legato.cli._chat import ChatSession
from legato.cli._lines import LineReader
from legato.cli._turn import ConsoleApprover
from legato.models import ModelRequest
from legato.models._provider import error_from_status
from legato.store import SQLiteStore
from legato.testing import FunctionModel

# llama-cpp-python's server answering HTTP 500 to a message it cannot validate (shortened).
BODY = {
    "error": {
        "message": "7 validation errors for CreateChatCompletionRequest\n"
        + "\n".join(f"messages.1.variant{i}\n  Input should be a valid string" for i in range(7)),
        "type": "internal_server_error",
    }
}


def _failing(request: ModelRequest) -> str:
    raise error_from_status(500, provider="llamacpp-server", body=BODY)


async def test_a_provider_error_is_one_line_printed_once(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, no_color=True, highlight=False)
    agent = Agent(FunctionModel(_failing))
    agent.store = SQLiteStore(tmp_path / "chat.db")
    agent.store.load_session("s", create=True)
    chat = ChatSession(
        agent=agent,
        console=console,
        reader=LineReader(io.StringIO(""), show=lambda t: None),
        approver=ConsoleApprover(),
        session="s",
    )
    outcome = await chat.turn("Use get_weather for Paris")
    assert outcome.status == "failed"
    lines = [line for line in out.getvalue().splitlines() if "validation errors" in line]
    assert len(lines) == 1, out.getvalue()
    assert "Input should be" not in out.getvalue()  # the details stay in the error's body
