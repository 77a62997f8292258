"""`import legato` has no side effects: no files, no network, no logging setup, no heavy SDKs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import json, logging, sys, socket
opened = []
real_socket = socket.socket
class Spy(real_socket):
    def __init__(self, *a, **k):
        opened.append("socket")
        super().__init__(*a, **k)
socket.socket = Spy
before = set(sys.modules)
import legato
after = set(sys.modules)
print(json.dumps({
    "sockets": opened,
    "root_handlers": len(logging.getLogger().handlers),
    "legato_handlers": len(logging.getLogger("legato").handlers),
    "heavy": sorted(m for m in after - before if m.split(".")[0] in {"openai", "anthropic", "google", "mcp", "httpx", "typer", "rich", "llama_cpp", "yaml", "opentelemetry"}),
}))
"""


def test_import_has_no_side_effects(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)  # read-only HOME: importing must not try to write there
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    report = json.loads(out.stdout)
    assert report == {"sockets": [], "root_handlers": 0, "legato_handlers": 0, "heavy": []}
    assert out.stderr == ""
    assert list(work.iterdir()) == []
    assert list(home.iterdir()) == []


_LIGHT_PROBE = r"""
import json, sys
import legato
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"pydantic", "asyncio", "legato"})
print(json.dumps(loaded))
"""


def test_import_legato_loads_no_pydantic_no_asyncio_and_no_submodule() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LIGHT_PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == ["legato", "legato._version"]


def test_every_public_name_imports_and_dir_lists_them() -> None:
    import importlib

    import legato

    for name in legato.__all__:
        assert getattr(legato, name) is not None, name
    assert set(legato.__all__) <= set(dir(legato))
    expected = {
        "Agent": "legato.agent",
        "tool": "legato.tools._tool",
        "RunResult": "legato.run._result",
        "Budget": "legato.budgets",
        "State": "legato.contracts._state",
        "Usage": "legato.messages",
    }
    for name, module in expected.items():
        assert getattr(legato, name).__module__ == module, name
    namespace: dict[str, object] = {}
    exec(f"from legato import {', '.join(legato.__all__)}", namespace)
    assert all(namespace[name] is getattr(legato, name) for name in legato.__all__)
    assert legato.events is importlib.import_module("legato.events")  # submodules by attribute


def test_an_unknown_name_is_an_attribute_error() -> None:
    import pytest

    import legato

    with pytest.raises(AttributeError, match="no attribute 'Agnet'"):
        _ = legato.Agnet  # the typo is the point
    with pytest.raises(ImportError):
        exec("from legato import Agnet")


_FIRST_LINE_PROBE = r"""
import json, sys
{before}
from legato import Agent, tool
Agent("test:echo")
print(json.dumps(sorted(m for m in sys.modules if m.startswith("legato."))))
"""
_FIRST_RUN_ONLY = ("legato.run", "legato.events", "legato.models", "legato.contracts")


def _first_line_loads(before: str = "") -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_LINE_PROBE.format(before=before)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    loaded: list[str] = json.loads(out.stdout)
    return [m for m in loaded if m.startswith(_FIRST_RUN_ONLY)]


def test_defining_an_agent_leaves_the_run_loop_events_models_and_contracts_to_the_first_run() -> (
    None
):
    assert _first_line_loads() == []


def test_first_line_twin_the_probe_sees_them_once_something_imports_them() -> None:
    # what the first run imports shows up, so an eager import in agent.py would fail above
    found = _first_line_loads("import legato.run")
    assert {"legato.run", "legato.events", "legato.models"} <= set(found)
