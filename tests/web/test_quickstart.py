"""docs/quickstart.md, walked as written: the terminal in tmux, the page in headless Chromium.

The reader's steps run in a fresh folder with the real local model (SmolLM2-135M through
llama.cpp, in the server's process): the shell commands of the page are typed into a tmux
pane, `app.py` is the page's block saved to a file, and the browser steps (the prompt, the
approval edited with the page's arguments, the timeline) are done in the page the printed
address opens. The install lines are the one thing not run: the test uses this venv.

With LEGATO_SCREENSHOTS=1 (`make screenshots`) the pictures of docs/web.md and the
quickstart are taken here, from this real run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from web_support import Guarded, shot

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "quickstart.md"
SRC = ROOT / "src"
DEADLINE = 300.0  # a real model on two shared cores, next to other tests
INSTALL = ("python -m venv", "pip install")


def blocks(language: str) -> list[str]:
    """The page's fenced blocks of `language`, in order."""
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def commands(block: str) -> list[str]:
    """A sh block's command lines (the install lines are checked, then left out)."""
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    return [line for line in lines if not line.startswith(INSTALL)]


class Terminal:
    """A shell in a detached tmux session, with this venv's `python` and `legato` first."""

    def __init__(self, workdir: Path) -> None:
        self.socket = f"legato-quick-{uuid.uuid4().hex[:10]}"
        env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(SRC),  # this checkout's sources, as an editable install gives
            "XDG_DATA_HOME": str(workdir / "data"),
            "PS1": "$ ",
        }
        for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "LEGATO_MODEL"):
            env[variable] = ""  # the reader has no key: the local model is the default
        self._tmux(
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "50",
            "-c",
            str(workdir),
            shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), "bash", "--norc"]),
        )
        self.done = 0

    def _tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def screen(self) -> str:
        """Scrollback and screen."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "0", "-S", "-")

    def wait(self, predicate: Callable[[str], bool], what: str) -> str:
        """The screen once `predicate` holds (fails with the screen after the deadline)."""
        end = time.monotonic() + DEADLINE
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > end:
                pytest.fail(f"waited for {what}; the terminal:\n{text}")
            time.sleep(0.1)

    def type(self, line: str) -> None:
        """Type a line and press Enter."""
        self._tmux("send-keys", "-t", "0", "-l", line)
        self._tmux("send-keys", "-t", "0", "Enter")

    def key(self, key: str) -> None:
        """Press one key (`C-c`, ...)."""
        self._tmux("send-keys", "-t", "0", key)

    def run(self, command: str) -> str:
        """Run a command to its end; its output (what the pane shows after the command line)."""
        self.done += 1
        mark = f"__done_{self.done}__"
        before = self.screen()
        self.type(f"{command}; echo {mark}=$?")
        screen = self.wait(lambda s: f"\n{mark}=" in s, command)
        output = screen[len(before.rstrip("\n")) :].split(f"\n{mark}=", 1)[0]
        status = screen.split(f"\n{mark}=", 1)[1].split("\n", 1)[0]
        assert status == "0", f"{command} failed ({status}):\n{output}"
        return output.split("\n", 1)[1] if "\n" in output else ""

    def close(self) -> None:
        """Kill this terminal's tmux server."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.key("C-c")  # the server, if a failure left it running
        term.close()


@pytest.mark.timeout(900)
def test_the_quickstart_as_written(browser: Any, terminal: Terminal, tmp_path: Path) -> None:
    install, check, start, after = blocks("sh")
    (app_source,) = blocks("python")
    (prompt,) = [b.strip() for b in blocks("text")]
    (edited,) = [json.loads(b) for b in blocks("json")]
    assert [line.split()[0:2] for line in install.splitlines()] == [
        ["python", "-m"],
        ["pip", "install"],
    ]
    assert "'/path/to/legato[cli,web,local]'" in install  # the extras the page needs

    # -- 1. the check, in a folder of the reader's own ------------------------------------------
    out = ""
    for command in commands(check):
        out = terminal.run(command)
    workdir = tmp_path / "first-agent"
    assert workdir.is_dir()
    for extra in ("cli", "web", "local"):
        assert re.search(rf"✓ extra\s+{extra}\s+installed", out), out
    assert "llamacpp:smollm2" in out

    # -- 2. app.py, saved as the page says ------------------------------------------------------
    (workdir / "app.py").write_text(app_source, encoding="utf-8")

    # -- 3. start it: one line with the address ------------------------------------------------
    (command,) = commands(start)
    terminal.type(command)
    screen = terminal.wait(lambda s: "legato web UI: http" in s, "the address")
    url = re.search(r"legato web UI: (http://127\.0\.0\.1:\d+/\?token=\S+)", screen)
    assert url is not None, screen

    # -- 4. in the browser ----------------------------------------------------------------------
    guard = Guarded()
    context = browser.new_context(viewport={"width": 1280, "height": 760})
    guard.attach(context)
    page = context.new_page()
    page.set_default_timeout(DEADLINE * 1000)
    page.goto(url.group(1))
    page.wait_for_selector("#model:has-text('llamacpp:smollm2')")
    page.fill("#prompt", prompt)
    page.press("#prompt", "Enter")
    card = page.locator(".tool-card").first
    card.locator(".approval button.approve").wait_for()
    assert card.locator(".name").text_content() == "send_email"
    assert page.locator("#status").text_content() == "waiting for approval"
    assert not (workdir / "outbox.txt").exists()  # nothing sent before the approval
    page.screenshot(path=shot("web-approval.png", docs=True))

    approval = card.locator(".approval")
    approval.locator("button.edit").click()
    approval.locator("textarea.edited").fill(json.dumps(edited))
    approval.locator("button.edit").click()  # "Run with these arguments"
    page.wait_for_function("() => document.querySelector('#status').textContent === 'done'")
    assert card.locator(".outcome").text_content() == "ok"
    assert card.locator(".result").text_content() == f"sent to {edited['to']}"
    assert card.locator(".name").get_attribute("data-edited") == "edited"  # "(arguments edited)"
    assert "the model asked for" in (card.text_content() or "")
    sent = (workdir / "outbox.txt").read_text(encoding="utf-8")
    assert sent.count("To: ") == 1 and f"To: {edited['to']}" in sent

    page.select_option("#journal-run", index=0)
    page.click("#journal-load")
    page.wait_for_selector("#journal li:has-text('run_finished')")
    rows = page.locator("#journal li").all_text_contents()
    assert any("model call 1" in row for row in rows), rows
    assert any("send_email" in row for row in rows), rows
    tool_row = page.locator("#journal .tl-label").filter(has_text=re.compile(r"^send_email$"))
    tool_row.click()  # opens the journal events of the tool call
    page.locator("#journal .tl-events:visible", has_text="tool_call_finished").wait_for()
    page.screenshot(path=shot("web-done.png", docs=True))

    for _ in range(3):  # auto, light, dark
        if page.evaluate("document.documentElement.dataset.theme") == "dark":
            break
        page.click("#theme")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.screenshot(path=shot("web-dark.png", docs=True))
    context.close()

    narrow = browser.new_context(viewport={"width": 360, "height": 740})
    guard.attach(narrow)
    small = narrow.new_page()
    small.set_default_timeout(DEADLINE * 1000)
    small.goto(url.group(1))
    small.locator(".tool-card .outcome", has_text="ok").wait_for()
    small.screenshot(path=shot("web-narrow.png", docs=True))
    narrow.close()
    assert guard.blocked == [], f"requests left loopback: {guard.blocked}"

    # -- 5. back in the terminal ----------------------------------------------------------------
    terminal.key("C-c")
    terminal.wait(lambda s: s.rstrip().endswith("$"), "the shell after Ctrl-C")
    cat, listing, show = commands(after)
    assert cat == "cat outbox.txt" and show.endswith(" RUN")
    assert f"To: {edited['to']}" in terminal.run(cat)
    listed = terminal.run(listing)
    ids = re.findall(r"\b([0-9a-f]{8,})\b", listed)
    assert ids, listed
    shown = terminal.run(show.replace("RUN", ids[0][:8]))
    assert "approval requested for send_email" in shown, shown
    assert f"run with {json.dumps(edited, sort_keys=True)}" in shown, shown  # as sent
    assert "← send_email [ok] sent to bob@example.com" in shown, shown
