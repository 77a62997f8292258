"""A held `RunResult` is lean: its messages are the journal's own objects, and it has no dict.

The journal is the run's record, so a result holds it whole; what it must not hold is a
second copy of what the journal already has. Everything stays reachable and round-trips.
"""

from __future__ import annotations

import pickle

from legato import Agent, RunResult, tool
from legato.events import ModelResponded, ToolCallFinished, UserPrompt
from legato.testing import ScriptedModel, call, reply


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: What to look up.
    """
    return f"value of {key}"


def _result() -> RunResult[str]:
    model = ScriptedModel([reply(call("lookup", {"key": "k"})), "the answer"])
    return Agent(model, tools=[lookup]).run_sync("question")


def test_the_results_messages_are_the_journals_objects() -> None:
    result = _result()
    events = result.journal.events
    (prompt,) = [e for e in events if isinstance(e, UserPrompt)]
    answers = [e.response.message for e in events if isinstance(e, ModelResponded)]
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    user, call_message, tool_message, answer = result.messages
    assert user is prompt.message
    assert [call_message, answer] == answers
    assert call_message is answers[0] and answer is answers[1]
    assert tool_message.parts[0] is finished.result


def test_a_result_has_no_instance_dict_and_round_trips() -> None:
    result = _result()
    assert not hasattr(result, "__dict__")
    again = pickle.loads(pickle.dumps(result))
    assert again == result
    assert again.output == "the answer"
    assert again.new_messages() == result.messages
