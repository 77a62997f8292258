"""CPU per `run_sync` call against the length of the conversation it continues.

Each call runs the scripted model once with the same `message_history` of N user messages
(200 characters each). What a call costs should not grow with N beyond copying the history
into the run; it grew with it while every main-thread `run_sync` formatted its whole result
(see docs/benchmarks.md). Run it on two trees to compare:

    PYTHONPATH=OLD/src python bench/run_sync_history.py 0 200
    PYTHONPATH=NEW/src python bench/run_sync_history.py 0 200
"""

from __future__ import annotations

import sys
import time

from legato import Agent
from legato.messages import Message
from legato.testing import ScriptedModel

WARMUP = 20
CALLS = 300


def per_call(length: int) -> float:
    """Client CPU µs per `run_sync` with a history of `length` messages."""
    history = [Message.user(f"question {i} " + "x" * 200) for i in range(length)]
    agent = Agent(ScriptedModel(["an answer"] * (WARMUP + CALLS)))
    for _ in range(WARMUP):
        agent.run_sync("go", message_history=history)
    started = time.process_time()
    for _ in range(CALLS):
        agent.run_sync("go", message_history=history)
    return (time.process_time() - started) / CALLS * 1e6


def main() -> None:
    """Print one line per history length given on the command line (default: 0 and 200)."""
    for length in [int(a) for a in sys.argv[1:]] or [0, 200]:
        print(f"history {length:4d} messages: {per_call(length):8.0f} µs of CPU per run_sync")


if __name__ == "__main__":
    main()
