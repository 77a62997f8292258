"""The banking and booking examples, run with their scripted models (and a real one on demand)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from legato.contracts import State
from legato.events import StateCommitted, StateLoaded, StateRejected
from legato.exceptions import ContractRetriesExceeded

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def events(result: Any, kind: type) -> list[Any]:
    return [e for e in result.journal if isinstance(e, kind)]


def test_banking_pays_once_and_refuses_the_overdraft() -> None:
    banking = load("banking")
    result = banking.run_demo()
    assert result.state.as_model() == banking.Bank(user="ann", balances={"ann": 70, "bob": 50})
    (rejected,) = events(result, StateRejected)
    assert (rejected.stage, rejected.predicate) == ("pre", "balances.<source> >= <amount>")
    assert [c.tool for c in result.state.history("balances")] == ["transfer"]


def test_banking_contract_catches_a_backend_that_takes_a_hidden_fee() -> None:
    banking = load("banking")
    backend = banking.Backend(fee=1)
    with pytest.raises(Exception, match="failed in 2 consecutive turns"):
        banking.run_demo(backend=backend)
    assert backend.calls == 1  # the buggy transfer ran once; its result was not committed


def test_banking_main_prints_the_history(capsys: pytest.CaptureFixture[str]) -> None:
    load("banking").main([])
    out = capsys.readouterr().out
    assert "state v2" in out
    assert "v2 by transfer: {'ann': 100, 'bob': 20} -> {'ann': 70, 'bob': 50}" in out


def test_booking_never_overbooks_even_in_parallel() -> None:
    booking = load("booking")
    result = booking.run_demo()
    final = result.state.as_model()
    assert final.free == {"alpine": 3, "seaside": 0}
    assert list(final.bookings) == ["B2"]
    stages = [(r.stage, r.tool) for r in events(result, StateRejected)]
    assert stages == [("pre", "book"), ("recheck", "book")]
    assert [c.tool for c in events(result, StateCommitted)] == ["book", "book", "cancel"]


def test_booking_contract_catches_an_inventory_bug() -> None:
    booking = load("booking")
    agent = booking.make_agent(booking.scripted_model())
    journal: list[Any] = []
    # book fails in three turns (its two parallel calls of turn 3 are one failing turn,
    # within max_retries=3); the fifth rejection, cancel's, crosses max_rejections=4
    with pytest.raises(ContractRetriesExceeded):
        for event in agent.stream_sync("book", deps=booking.Desk(overbook=True)):
            journal.append(event)
    loaded = next(e for e in journal if isinstance(e, StateLoaded))
    commits = [e for e in journal if isinstance(e, StateCommitted)]
    final = State.from_journal(loaded, commits, booking.Inventory).as_model()
    assert final.free == {"alpine": 3, "seaside": 1}  # nothing the buggy tool did was kept
    assert final.bookings == {}
    stages = [e.stage for e in journal if isinstance(e, StateRejected)]
    assert stages == ["post", "pre", "post", "post", "pre"]


@pytest.mark.allow_network
@pytest.mark.skipif(
    not os.environ.get("LEGATO_EXAMPLE_MODEL"),
    reason="set LEGATO_EXAMPLE_MODEL=provider:model (and its key) to run with a real model",
)
@pytest.mark.parametrize("name", ["banking", "booking"])
def test_examples_with_a_real_model(name: str) -> None:
    module = load(name)
    result = module.run_demo(os.environ["LEGATO_EXAMPLE_MODEL"])
    assert result.state is not None
    assert result.output
