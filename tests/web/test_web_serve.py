"""`legato serve` on the command line: where it listens, what it prints, what it refuses."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Generator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner
from web_support import frames, resume_body

from legato import Agent
from legato.cli._app import app
from legato.exceptions import ConfigurationError, PortInUse
from legato.web import serve
from legato.web._serve import bind, is_loopback

runner = CliRunner()
SRC = Path(__file__).resolve().parents[2] / "src"


def test_a_port_in_use_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(PortInUse, match=f"127.0.0.1:{port}: the port is in use"):
            bind("127.0.0.1", port)
        result = runner.invoke(
            app, ["serve", "--model", "test:echo", "--port", str(port), "--store", ":memory:"]
        )
        assert result.exit_code == 1
        assert "the port is in use" in result.output
        assert "--port" in result.output
    finally:
        taken.close()


def test_another_host_needs_an_explicit_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(ConfigurationError, match="--allow-remote"):
        serve(Agent("test:echo"), host="0.0.0.0", port=0)
    result = runner.invoke(
        app, ["serve", "--model", "test:echo", "--host", "0.0.0.0", "--store", ":memory:"]
    )
    assert result.exit_code == 1
    assert "--allow-remote" in result.output


_SERVING: list[subprocess.Popen[str]] = []
"""The `legato serve` processes started, the newest last."""


@contextmanager
def _legato_serve(cwd: Path, *args: str) -> Generator[tuple[str, str]]:
    """`legato serve ARGS --port 0` as a process: (base URL, token) from what it printed."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "NO_COLOR": "1", "COLUMNS": "300"}
    env.pop("LEGATO_MODEL", None)
    command = [sys.executable, "-c", "from legato.cli import main; main()", "serve", *args]
    with subprocess.Popen(
        [*command, "--port", "0"], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True
    ) as process:
        _SERVING.append(process)
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", line)
            assert found, line
            yield found.group(1), found.group(2)
        finally:
            process.terminate()
            process.wait(30)


def test_the_command_prints_a_tokened_url_and_serves_the_page(tmp_path: Path) -> None:
    with (
        _legato_serve(tmp_path, "--model", "test:echo") as (base, token),
        httpx.Client(base_url=base) as http,
    ):
        assert http.get("/").status_code == 401  # no token
        login = http.get(f"/?token={token}", follow_redirects=True)
        assert login.status_code == 200
        assert "<title>legato</title>" in login.text
        info = http.get("/api/info").json()
        assert info["model"] == "test:echo"
    assert (tmp_path / ".legato" / "legato.db").exists()  # the default store


def test_the_server_stops_while_a_tab_follows_its_notices(tmp_path: Path) -> None:
    """An open tab's `/api/updates` stream never ends by itself; stopping is not held up."""
    with (
        _legato_serve(tmp_path, "--model", "test:echo") as (base, token),
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http,
        http.stream("GET", "/api/updates", timeout=60) as notices,
    ):
        lines = notices.iter_lines()
        assert next(lines).startswith("retry:")  # the stream is open
        process = _SERVING[-1]
        process.terminate()
        process.wait(20)  # TimeoutExpired if the open stream held the server up


_SERVE_SCRIPT = """
import sys
from legato import Agent
from legato.web import _serve, serve

if sys.argv[1] == "twin":  # the old path: asyncio.run without the catch
    _serve._until_interrupted = lambda run: run()
serve(Agent("test:echo"), port=0)
print("serve returned", flush=True)
"""


@pytest.mark.parametrize("twin", [False, True], ids=["serve", "twin_without_the_catch"])
def test_ctrl_c_ends_serve_from_python_without_a_traceback(tmp_path: Path, twin: bool) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE_SCRIPT, "twin" if twin else "plain"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    assert "legato web UI: http://127.0.0.1:" in process.stderr.readline()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    if twin:
        assert process.returncode != 0 and "KeyboardInterrupt" in err
    else:
        assert (process.returncode, out, err) == (0, "serve returned\n", "")


def test_the_demo_needs_no_key_and_asks_before_its_side_effect(tmp_path: Path) -> None:
    with (
        _legato_serve(tmp_path, "--demo") as (base, token),
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http,
    ):
        body = {
            "threadId": "demo",
            "runId": "r1",
            "messages": [{"id": "m1", "role": "user", "content": "Lunch at noon?"}],
        }
        parked = [e for _, e in frames(http.post("/api/agui", json=body).text)]
        interrupts = parked[-1]["outcome"]["interrupts"]
        assert len(interrupts) == 1
        assert "send_email" in interrupts[0]["message"]
        decision = {"verdict": "approve"}
        done = frames(
            http.post("/api/agui", json=resume_body("demo", interrupts[0]["id"], decision)).text
        )
        answer = done[-1][1]["result"]
        assert "sent to ann@example.com (1 in the outbox)" in answer
        assert "legato serve --model" in answer  # how to switch to a real model


def test_the_page_loads_nothing_from_other_hosts() -> None:
    static = resources.files("legato.web").joinpath("static")
    names = sorted(p.name for p in static.iterdir())
    assert names == [
        "app.css",
        "app.js",
        "approvals.js",
        "core.js",
        "index.html",
        "markdown.js",
        "panels.js",
        "shell.js",
        "stream.js",
        "threads.js",
        "timeline.js",
        "transcript.js",
    ]
    scripts = re.findall(
        r'<script src="/static/([\w.]+)"', static.joinpath("index.html").read_text()
    )
    assert sorted(scripts) == [n for n in names if n.endswith(".js")]  # each one loaded
    assert scripts[0] == "core.js" and scripts[-1] == "app.js"  # the state first, start last
    for name in names:
        text = static.joinpath(name).read_text("utf-8")
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), name
        assert "@import" not in text
        assert "innerHTML" not in text  # model output is never parsed as HTML


def test_import_legato_does_not_import_the_web_stack() -> None:
    code = (
        "import sys, legato; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'legato.web') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
