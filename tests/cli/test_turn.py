"""The terminal's one owner: approval questions come after the step's streamed text, in-process."""

from __future__ import annotations

import io

from rich.console import Console

from legato import Agent, tool
from legato.approvals import ApprovalHandler, ApprovalPolicy, Rule, TerminalApprover
from legato.cli._lines import LineReader
from legato.cli._turn import ConsoleApprover, TurnView, drive_turn
from legato.testing import ScriptedModel, call, reply

SENTENCE = "Sending your message to bob right now, as you asked."


@tool(side_effects="irreversible")
def send(to: str) -> str:
    """Send a message.

    Args:
        to: The recipient.
    """
    return f"sent to {to}"


def _model() -> ScriptedModel:
    return ScriptedModel([reply(SENTENCE, call("send", {"to": "bob"})), "Sent."], chunk_size=3)


async def _turn(handler: ApprovalHandler, approver: ConsoleApprover, out: io.StringIO) -> list[str]:
    console = Console(file=out, width=300, no_color=True, highlight=False)
    policy = ApprovalPolicy(rules=[Rule("send", "ask")], handler=handler)
    agent = Agent(_model(), tools=[send], approvals=policy)
    reader = LineReader(io.StringIO("y\n"), show=lambda t: console.print(t, end="", markup=False))
    outcome = await drive_turn(
        agent.start("send it"), view=TurnView(console), reader=reader, approver=approver
    )
    assert outcome.status == "finished"
    return out.getvalue().splitlines()


async def test_the_question_waits_for_the_streamed_text_before_it() -> None:
    approver = ConsoleApprover()
    lines = await _turn(approver, approver, io.StringIO())
    asked = next(i for i, line in enumerate(lines) if line.startswith("? approve send"))
    assert lines[asked - 1] == SENTENCE
    assert lines[asked + 1].startswith("  [y] approve")
    assert lines[-2].startswith("⚙ send") and "sent to bob" in lines[-2]


async def test_twin_a_handler_that_prints_itself_asks_before_the_text_is_shown() -> None:
    # The old way: the run's handler prints its question while the consumer still holds
    # the step's text deltas, so the question lands before (or inside) the sentence.
    out = io.StringIO()
    console = Console(file=out, width=300, no_color=True, highlight=False)
    printing = TerminalApprover(ask=lambda prompt: "y", show=lambda text: console.print(text))
    lines = await _turn(printing, ConsoleApprover(), out)
    asked = next(i for i, line in enumerate(lines) if line.startswith("approval needed"))
    finished_text = next(i for i, line in enumerate(lines) if line.endswith("as you asked."))
    assert asked < finished_text


async def test_edit_runs_the_call_with_the_edited_arguments_after_a_bad_attempt() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, no_color=True, highlight=False)
    approver = ConsoleApprover()
    policy = ApprovalPolicy(rules=[Rule("send", "ask")], handler=approver)
    agent = Agent(_model(), tools=[send], approvals=policy)
    answers = io.StringIO('maybe\ne\nnot json\ne\n["a list"]\ne\n{"to": "carol"}\n')
    reader = LineReader(answers, show=lambda t: console.print(t, end="", markup=False))
    handle = agent.start("send it")
    outcome = await drive_turn(handle, view=TurnView(console), reader=reader, approver=approver)
    assert outcome.status == "finished"
    text = out.getvalue()
    assert "answer y, n, e or a" in text
    assert "not JSON" in text and "must be a JSON object" in text
    assert '⚙ send({"to": "carol"}) (edited) → [ok] sent to carol' in text
    decided = [e for e in handle.journal if e.kind == "approval_decided"]
    assert [getattr(e, "verdict", None) for e in decided] == ["edit"]


async def test_end_of_input_is_a_decision_and_the_twin_without_it_fails_the_run() -> None:
    from legato.approvals import CallbackApprover
    from legato.cli._turn import EOF_REJECTION
    from legato.events import ApprovalDecided, RunFailed

    approver = ConsoleApprover()
    out = io.StringIO()
    console = Console(file=out, width=300, no_color=True, highlight=False)
    policy = ApprovalPolicy(rules=[Rule("send", "ask")], handler=approver)
    agent = Agent(_model(), tools=[send], approvals=policy)
    reader = LineReader(io.StringIO(""), show=lambda t: console.print(t, end="", markup=False))
    handle = agent.start("send it")
    outcome = await drive_turn(handle, view=TurnView(console), reader=reader, approver=approver)
    assert outcome.status == "finished"
    decided = [e for e in handle.journal if isinstance(e, ApprovalDecided)]
    assert [(d.verdict, d.message) for d in decided] == [("reject", EOF_REJECTION)]

    # the twin: a handler that lets end of input escape (the old prompt) fails the run,
    # and no decision is journaled
    def closed(request: object) -> None:
        raise EOFError

    twin = Agent(
        _model(),
        tools=[send],
        approvals=ApprovalPolicy(rules=[Rule("send", "ask")], handler=CallbackApprover(closed)),
    )
    twin_handle = twin.start("send it")
    twin_outcome = await drive_turn(
        twin_handle, view=TurnView(console), reader=reader, approver=ConsoleApprover()
    )
    assert twin_outcome.status == "failed"
    assert not any(isinstance(e, ApprovalDecided) for e in twin_handle.journal)
    assert any(isinstance(e, RunFailed) and e.error_type == "EOFError" for e in twin_handle.journal)


async def test_after_ctrl_c_nothing_of_the_cancelled_answer_is_printed() -> None:
    import asyncio
    from collections.abc import AsyncIterator

    from legato.events import TextDelta
    from legato.models import ModelRequest, ModelStreamEvent

    class FastThenStuck(ScriptedModel):
        """Streams its text faster than a terminal shows it, then waits before ending."""

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
            async for event in super().stream(request):
                if not isinstance(event, TextDelta):
                    await asyncio.sleep(60)  # the answer's end never comes: Ctrl-C does
                yield event

    words = " ".join(f"word{n:04d}" for n in range(400))
    out = io.StringIO()
    console = Console(file=out, width=100_000, no_color=True, highlight=False)
    agent = Agent(FastThenStuck([words], chunk_size=3))
    reader = LineReader(io.StringIO(""), show=lambda t: console.print(t, end="", markup=False))
    shown = 0

    def on_event(event: object) -> None:
        nonlocal shown
        if isinstance(event, TextDelta):
            shown += 1
            if shown == 5:  # Ctrl-C, with the rest of the answer read but not yet shown
                reader.interrupt()

    outcome = await drive_turn(
        agent.start("talk"),
        view=TurnView(console),
        reader=reader,
        approver=ConsoleApprover(),
        on_event=on_event,
    )
    assert outcome.status == "cancelled"
    before, after = out.getvalue().split("cancelling the turn", 1)
    assert "word" in before
    assert "word" not in after
    assert outcome.usage.requests == 1  # the call was made, though its answer was cut
