"""bench/peers' harness: the quick mode end to end, and its verification catching wrong runs.

Runs in this interpreter (no venvs): legato and the hand-written floor against the counting
mock server on 127.0.0.1. Twins: a script whose runs make a third model request, and one whose
second request lacks the tool's output, are reported as failed; the honest floor is not. No
timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PEERS = Path(__file__).resolve().parents[1] / "bench" / "peers"


def _load(name: str, alias: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(alias, PEERS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def peers() -> Iterator[dict[str, ModuleType]]:
    # bench/peers' modules import each other by plain name (they run as scripts); `run` is
    # loaded under another name, since tests/run is a package of the same name.
    sys.path.insert(0, str(PEERS))
    try:
        run = _load("run", "bench_peers_run")
        yield {"harness": sys.modules["harness"], "mock": sys.modules["mockserver"], "run": run}
    finally:
        sys.path.remove(str(PEERS))
        for name in ("harness", "mockserver", "venvs", "bench_peers_run"):
            sys.modules.pop(name, None)


def _twin(tmp_path: Path, body: str) -> Path:
    """A framework script: the floor with one mode changed."""
    script = tmp_path / "fw_twin.py"
    head = f"import sys\nsys.path.insert(0, {str(PEERS / 'agents')!r})\n"
    script.write_text(head + textwrap.dedent(body))
    return script


def _framework(peers: dict[str, ModuleType], script: Path) -> Any:
    return peers["harness"].Framework("twin", "twin", sys.executable, script, isolated=False)


WARM = {"task": "warm", "runs": 3, "warmup": 0, "modes": ["sync"]}


@pytest.mark.slow
def test_quick_mode_measures_and_verifies_legato_and_the_floor(
    peers: dict[str, ModuleType], tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    code = peers["run"].main(["--quick", "--only", "legato", "--here", "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["failures"] == []
    assert set(result["summary"]) == {"floor", "legato"}
    for name in ("floor", "legato"):
        s = result["summary"][name]
        for mode in ("sync", "async", "stream_sync", "stream_async"):
            assert s[f"{mode}_ms"] > 0
        assert s["cold_ms"] > s["import_ms"] > 0
        assert s["rss_mb"] > 0
        assert "idle_agent_kib" in s
        assert "held_session_kib" in s
        for n in peers["run"].QUICK_CONFIG.load:
            assert s[f"load{n}"]["runs_per_s"] > 0
            assert s[f"load{n}"]["p99_ms"] >= s[f"load{n}"]["p50_ms"]
    assert result["summary"]["legato"]["async_x_floor"] > 0
    # every run of every task was counted by the server: cold 1, memory 3 + 20 held, load n + 10
    legato = result["reports"]["legato"]
    assert legato["cold"][0]["runs"] == 1
    assert legato["memory"][0]["runs"] == 3 + 20
    assert [r["runs"] for r in legato["load20"]] == [20 + 10]
    assert all(r["tool_calls"] == r["runs"] for rs in legato.values() for r in rs)
    # without the raw SDK only the floor target can be judged
    assert [t["target"] for t in result["targets"]] == ["50 concurrent: within 5× of the floor"]


def test_the_floor_passes_verification(peers: dict[str, ModuleType]) -> None:
    floor = peers["harness"].Framework(
        "floor", "floor", sys.executable, PEERS / "agents" / "fw_floor.py", isolated=False
    )
    with peers["mock"].MockServer() as server:
        report = peers["harness"].run_task(server, floor, WARM)
    assert report["runs"] == 3
    assert report["tool_calls"] == 3


def test_a_script_making_three_requests_per_run_is_reported_failed(
    peers: dict[str, ModuleType], tmp_path: Path
) -> None:
    script = _twin(
        tmp_path,
        """
        import time
        import _common
        from fw_floor import Floor, _post_sync

        class ThreeRequests(Floor):
            def run_sync(self, agent, text):
                result = super().run_sync(agent, text)
                _post_sync(agent, [{"role": "user", "content": text}], False)  # one too many
                return result

        _common.main(ThreeRequests(), time.perf_counter())
        """,
    )
    harness = peers["harness"]
    with peers["mock"].MockServer() as server:
        with pytest.raises(harness.VerificationError, match="3 model requests"):
            harness.run_task(server, _framework(peers, script), WARM)
        # the orchestrator records it as a failure (and `run.py` then exits 1)
        cfg = peers["run"].Config(warm_rounds=1, runs=2, warmup=0, cold_rounds=0, memory_count=0)
        cfg.load = {}
        got = peers["run"].measure([_framework(peers, script)], cfg, server)
    assert any("3 model requests" in f for f in got["failures"])


def test_a_run_whose_tool_never_ran_is_reported_failed(
    peers: dict[str, ModuleType], tmp_path: Path
) -> None:
    script = _twin(
        tmp_path,
        """
        import time
        import _common
        import fw_floor

        # The second request carries a made-up result instead of the tool's output.
        fw_floor._common.weather = lambda city: "no idea"
        _common.Counter.tool_calls = 0

        class NoTool(fw_floor.Floor):
            def run_sync(self, agent, text):
                result = super().run_sync(agent, text)
                _common.Counter.tool_calls += 1  # claims the tool ran
                return [{"content": _common.ANSWER}]

        _common.main(NoTool(), time.perf_counter())
        """,
    )
    harness = peers["harness"]
    with (
        peers["mock"].MockServer() as server,
        pytest.raises(harness.VerificationError, match="did not carry the tool's output"),
    ):
        harness.run_task(server, _framework(peers, script), WARM)


def test_a_crashing_script_is_a_bench_error(peers: dict[str, ModuleType], tmp_path: Path) -> None:
    script = _twin(tmp_path, "raise SystemExit('broken framework')\n")
    harness = peers["harness"]
    with (
        peers["mock"].MockServer() as server,
        pytest.raises(harness.BenchError, match="exit 1"),
    ):
        harness.run_task(server, _framework(peers, script), WARM)


def test_the_sdk_send_bound_makes_the_same_verified_runs(peers: dict[str, ModuleType]) -> None:
    # The bound (the SDK's send path, answers read as JSON) runs the same agent: every mode's
    # runs reach the server tagged, the tool runs once per run, every answer is the scripted one.
    send = peers["harness"].Framework(
        "sdk_send", "sdk_send", sys.executable, PEERS / "agents" / "fw_sdk_send.py", isolated=False
    )
    with peers["mock"].MockServer() as server:
        task = {"task": "warm", "runs": 2, "warmup": 0, "modes": list(peers["run"].MODES)}
        report = peers["harness"].run_task(server, send, task)
    assert report["runs"] == 2 * 4  # two runs in each of the four modes
    assert report["tool_calls"] == report["runs"]
    assert report["wrong_answers"] == 0


def test_legatos_venv_of_another_checkout_is_rebuilt(
    peers: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # legato is installed editable: a venv built from another checkout points at that tree.
    venvs = sys.modules["venvs"]
    here = venvs._digest("legato", sys.executable)
    elsewhere = tmp_path / "other-checkout"
    elsewhere.mkdir()
    (elsewhere / "pyproject.toml").write_bytes((venvs.REPO / "pyproject.toml").read_bytes())
    monkeypatch.setattr(venvs, "REPO", elsewhere)
    assert venvs._digest("legato", sys.executable) != here
    monkeypatch.setattr(venvs, "REPO", venvs.HERE.parent.parent)
    assert venvs._digest("legato", sys.executable) == here


def test_a_venv_is_reused_while_its_requirements_are_unchanged(
    peers: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venvs = sys.modules["venvs"]
    requirements = tmp_path / "requirements"
    requirements.mkdir()
    (requirements / "raw.txt").write_text("openai==3.57.0\n")
    monkeypatch.setattr(venvs, "REQUIREMENTS", requirements)

    def version_of(python: str) -> str:
        return "3.11.7 (test)"

    monkeypatch.setattr(venvs, "_version_of", version_of)
    monkeypatch.setenv("LEGATO_BENCH_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "peers" / "raw"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    (root / ".requirements-hash").write_text(venvs._digest("raw", sys.executable))

    class Rebuilt(Exception):
        pass

    def rebuild(*args: object, **kwargs: object) -> None:
        raise Rebuilt

    monkeypatch.setattr(venvs.subprocess, "run", rebuild)
    assert venvs.ensure("raw", log=False).python == str(root / "bin" / "python")  # reused
    (requirements / "raw.txt").write_text("openai==3.58.0\n")  # a new pin
    with pytest.raises(Rebuilt):
        venvs.ensure("raw", log=False)


def _load_report(peers: dict[str, ModuleType], fw: Any, n: int) -> dict[str, Any]:
    with peers["mock"].MockServer() as server:
        report: dict[str, Any] = peers["harness"].run_task(server, fw, {"task": "load", "n": n})
    return report


def test_concurrent_legato_runs_reuse_their_pooled_connections(
    peers: dict[str, ModuleType],
) -> None:
    # 30 runs at once (and 10 warm-up runs first) make 80 requests; the client's keep-alive
    # pool serves them on at most one connection per run in flight
    legato = peers["harness"].Framework(
        "legato", "legato", sys.executable, PEERS / "agents" / "fw_legato.py", isolated=False
    )
    report = _load_report(peers, legato, 30)
    assert report["runs"] == 40
    assert 1 <= report["connections"] <= 30
    assert report["most_open"] <= report["connections"]
    assert report["cpu_ms_per_run"] > 0
    assert report["gc_ms_per_run"] >= 0


def test_a_client_opening_a_connection_per_request_is_counted(
    peers: dict[str, ModuleType], tmp_path: Path
) -> None:
    # the twin: the floor dropping its connections after each run opens one per run, so the
    # count exceeds the 30 a pool of connections kept alive needs
    script = _twin(
        tmp_path,
        """
        import time
        import _common
        import fw_floor

        class NoPool(fw_floor.Floor):
            async def run_async(self, agent, text):
                result = await super().run_async(agent, text)
                for _, writer in agent.idle_async:
                    writer.close()
                agent.idle_async.clear()
                return result

        _common.main(NoPool(), time.perf_counter())
        """,
    )
    report = _load_report(peers, _framework(peers, script), 30)
    assert report["runs"] == 40
    assert report["connections"] == 40


@pytest.mark.parametrize("framework", ["legato", "sdk_send"])
def test_the_instruction_count_runs_verified_runs(
    peers: dict[str, ModuleType], framework: str
) -> None:
    # What `instructions.py` puts under valgrind (its `--inner` process) makes the same runs
    # the harness verifies: warm-up and counted runs, each with its tool call and answer.
    script = PEERS / "instructions.py"
    with peers["mock"].MockServer() as server:
        done = subprocess.run(
            [sys.executable, str(script), "--inner", framework, "async", "2", server.url],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        counts = server.take("i")
    assert len(counts) == 20 + 2  # the warm-up, then the counted runs
    assert [c.problem() for c in counts.values()] == [None] * len(counts)
