"""The fault-injection benchmark's accounting, on a small run (no timings asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "contracts.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_contracts", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_contracts_off_corrupt_and_on_do_not_without_false_rejections() -> None:
    bench = load()
    calls = bench.proposals(1500, fault_rate=0.2, invalid_rate=0.2, seed=3)
    off, on = bench.run_off(calls), bench.run_on(calls)
    assert off.corrupting > 100
    assert off.invalid_final
    assert on.corrupting == 0
    assert on.false_rejections == 0
    assert on.sound_calls > 500
    assert not on.invalid_final
    assert (
        on.committed >= on.sound_calls
    )  # plus faulty calls whose fault did no harm (stale = fresh)


def test_every_fault_kind_is_injected() -> None:
    bench = load()
    calls = bench.proposals(500, fault_rate=0.5, invalid_rate=0.5, seed=1)
    assert {c.fault for c, _ in calls} == {None, *bench.FAULTS}
    assert any(logout for _, logout in calls)
