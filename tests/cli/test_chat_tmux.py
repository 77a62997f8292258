"""`legato chat` driven in a real terminal: tmux on a private socket, keys sent, pane read.

The model is scripted (`chat_app.py`); every effect of its `send` tool is counted in a file
outside legato, and the run journals are read back from the chat's SQLite store.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from legato.cli._turn import EOF_REJECTION
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Journal,
    RunFinished,
    ToolCallFinished,
)
from legato.store import SQLiteStore

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"
DEADLINE = 30.0


class Chat:
    """A `legato chat` in a detached tmux session of its own."""

    def __init__(
        self,
        workdir: Path,
        args: list[str],
        *,
        command: str = "chat",
        environ: dict[str, str] | None = None,
        plain: bool = False,
    ) -> None:
        self.workdir = workdir
        self.socket = f"legato-test-{uuid.uuid4().hex[:10]}"
        self.effects = workdir / "effects"
        self.effects.touch()
        env = {
            "LEGATO_TEST_EFFECTS": str(self.effects),
            "XDG_DATA_HOME": str(workdir / "data"),  # the chat history, kept out of $HOME
            "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
            **(environ or {}),
        }
        command = " ".join(
            [sys.executable, str(HERE / "chat_app.py"), command, "--model", "chatdemo:x", *args]
        )
        if plain:  # output piped: no line editor, lines read from the terminal driver
            command += " | (trap '' INT; cat)"  # cat outlives the Ctrl-C sent to the group
        self._tmux(
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            *[item for key, value in env.items() for item in ("-e", f"{key}={value}")],
            f"cd {workdir} && {command}; echo EXIT=$?; sleep 600",
        )

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        """Type keys (`Enter`, `C-c`, `C-d` are keys; anything else is text)."""
        for key in keys:
            if key in ("Enter", "C-c", "C-d", "C-j", "Up", "Down", "Tab", "Escape"):
                self._tmux("send-keys", "-t", "0", key)
            else:
                self._tmux("send-keys", "-t", "0", "-l", key)

    def paste(self, text: str) -> None:
        """Paste `text` as a terminal does: one bracketed paste (no Enter after it)."""
        buffer = f"paste-{uuid.uuid4().hex[:8]}"
        source = self.workdir / f"{buffer}.txt"
        source.write_text(text, encoding="utf-8")
        self._tmux("load-buffer", "-b", buffer, str(source))
        self._tmux("paste-buffer", "-p", "-d", "-b", buffer, "-t", "0")

    def say(self, text: str) -> None:
        """Type a line and press Enter."""
        self.keys(text, "Enter")

    def screen(self) -> str:
        """Scrollback and screen, trailing blank lines dropped."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "0", "-S", "-").rstrip("\n")

    def wait(self, predicate: Callable[[str], bool], what: str) -> str:
        """The screen once `predicate` holds (fails with the screen after the deadline)."""
        end = time.monotonic() + DEADLINE
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > end:
                pytest.fail(f"waited for {what}; the screen:\n{text}")
            time.sleep(0.05)

    def wait_prompt(self, count: int = 1) -> str:
        """The screen once the chat's prompt `›` has been shown `count` times."""
        return self.wait(
            lambda text: sum(line.startswith("›") for line in text.splitlines()) >= count,
            f"prompt number {count}",
        )

    def wait_for(self, needle: str, count: int = 1) -> str:
        """The screen once `needle` shows `count` times."""
        return self.wait(lambda text: text.count(needle) >= count, repr(needle))

    def journals(self, session: str) -> list[Journal]:
        """The session's run journals, oldest first."""
        store = SQLiteStore(self.workdir / ".legato" / "legato.db")
        try:
            runs = sorted(store.list_runs(session=session), key=lambda r: r.created_at)
            return [store.load_run(r.run_id) for r in runs]
        finally:
            store.close()

    def slow_started(self, _: str = "") -> bool:
        """Whether the `slow` tool is running (it writes a file as it starts)."""
        return Path(f"{self.effects}.slow").exists()

    def sent(self) -> list[str]:
        """Recipients of every `send` that ran, counted outside legato."""
        return self.effects.read_text(encoding="utf-8").split()

    def close(self) -> None:
        """Kill the tmux server of this chat."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def open_chat(tmp_path: Path) -> Iterator[Callable[..., Chat]]:
    chats: list[Chat] = []

    def start(*args: str) -> Chat:
        chat = Chat(tmp_path, list(args))
        chats.append(chat)
        chat.wait_prompt()
        return chat

    yield start
    for chat in chats:
        chat.close()


ASKING = ["--tools", "chat_app:send", "--tools", "chat_app:slow", "--ask", "send"]


def _question_line(screen: str) -> int:
    lines = screen.splitlines()
    return next(i for i, line in enumerate(lines) if line.startswith("? approve send"))


def test_streamed_text_is_all_on_screen_before_the_question_and_approve_runs_once(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat(*ASKING, "--session", "s1")
    chat.say("send bob")
    screen = chat.wait_for("[a] always for this tool:")
    lines = screen.splitlines()
    at = _question_line(screen)
    # the whole streamed sentence (in 4-character chunks) is on the line before the question
    assert lines[at - 1] == "Sending your message right now."
    assert lines[at + 1].startswith("  [y] approve")
    assert len(lines) == at + 2  # nothing printed after the question while it waits
    assert chat.sent() == []
    chat.say("y")
    chat.wait_for("Done: sent to bob.")
    screen = chat.wait_for("turn: 2 model calls")
    assert '⚙ send({"to": "bob"}) → [ok] sent to bob' in screen
    assert "total: 2 model calls" in screen
    assert chat.sent() == ["bob"]
    (journal,) = chat.journals("s1")
    decided = [e for e in journal if isinstance(e, ApprovalDecided)]
    assert [d.verdict for d in decided] == ["approve"]


def test_ctrl_d_at_the_question_is_a_recorded_rejection_and_the_run_goes_on(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat(*ASKING, "--session", "s2")
    chat.say("send eve")
    chat.wait_for("[a] always for this tool:")
    chat.keys("C-d")
    screen = chat.wait_for("turn: 2 model calls")
    assert "✗ rejected" in screen
    assert chat.sent() == []
    (journal,) = chat.journals("s2")
    decided = [e for e in journal if isinstance(e, ApprovalDecided)]
    assert [(d.verdict, d.message) for d in decided] == [("reject", EOF_REJECTION)]
    assert isinstance(journal.events[-1], RunFinished)  # the model was told and answered
    chat.say("hello")  # the chat is still there
    chat.wait_for("echo: hello")


def test_ctrl_c_at_the_question_cancels_the_turn_and_returns_to_the_prompt(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat(*ASKING, "--session", "s3")
    chat.say("send mallory")
    chat.wait_for("[a] always for this tool:")
    chat.keys("C-c")
    chat.wait_for("turn cancelled")
    chat.wait_prompt(2)
    assert chat.sent() == []
    (journal,) = chat.journals("s3")
    assert any(isinstance(e, ApprovalRequested) for e in journal)
    assert not any(isinstance(e, ApprovalDecided) for e in journal)
    assert [e.reason for e in journal if isinstance(e, CancelRequested)] == [
        "cancelled with Ctrl-C"
    ]
    chat.say("hello")
    chat.wait_for("echo: hello")
    chat.keys("C-d")
    chat.wait_for("EXIT=0")


def test_ctrl_c_during_a_tool_call_cancels_through_the_fence(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat(*ASKING, "--session", "s4")
    chat.say("slow")

    chat.wait(chat.slow_started, "the slow tool to start")
    chat.keys("C-c")
    screen = chat.wait_for("turn cancelled")
    assert "⚙ slow({}) → [cancelled]" in screen
    (stored,) = chat.journals("s4")
    assert any(isinstance(e, CancelRequested) for e in stored)
    chat.say("/save cancelled.jsonl")  # the run's whole journal, as the run recorded it
    chat.wait_for("saved the last run's journal")
    journal = Journal.from_jsonl((chat.workdir / "cancelled.jsonl").read_text(encoding="utf-8"))
    kinds = [e.kind for e in journal]
    assert kinds.index("cancel_requested") < kinds.index("tool_call_finished")
    finished = [e for e in journal if isinstance(e, ToolCallFinished)]
    assert [f.outcome for f in finished] == ["cancelled"]
    chat.say("hello")  # back at the prompt, the session kept
    chat.wait_for("echo: hello")
    chat.say("/cost")
    screen = chat.wait_for("turn 2 [finished]")  # "total: " is on the usage lines already
    assert "turn 1 [cancelled]" in screen and "turn 2 [finished]" in screen


def test_a_long_answer_is_in_the_scrollback_once_in_order(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat()
    chat.say("lines 200")
    screen = chat.wait_for("turn: 1 model call,")
    numbered = [line for line in screen.splitlines() if line.startswith("line ")]
    assert numbered == [f"line {n:03d}" for n in range(1, 201)]


def test_slash_commands_with_bad_arguments_keep_the_chat_and_sessions_resume(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat("--session", "kept")
    chat.say("/fork")
    chat.wait_for("usage: /fork NAME")
    chat.say("/model nosuch:model")
    chat.wait_for("unknown model 'nosuch:model'")
    chat.say("/nonsense")
    chat.wait_for("unknown command /nonsense")
    chat.say("first")
    chat.wait_for("echo: first")
    chat.say("second")
    chat.wait_for("echo: second")
    chat.say("/undo")
    chat.wait_for("removed the last turn (2 messages)")
    chat.say("/save run.jsonl")
    chat.wait_for("saved the last run's journal to run.jsonl")
    assert Journal.from_jsonl((chat.workdir / "run.jsonl").read_text(encoding="utf-8"))
    chat.say("/exit")
    chat.wait_for("EXIT=0")
    chat.close()
    again = open_chat("--session", "kept")
    again.wait_for("session kept, 2 messages so far")


def test_a_sub_agent_shows_as_a_branch_of_the_tree(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--tools", "chat_app:helper", "--auto", "send", "--session", "tree")
    chat.say("spawn")
    screen = chat.wait_for("turn: ")
    lines = screen.splitlines()
    child = [line for line in lines if "[helper]" in line]
    assert any('⚙ send({"to": "carol"}) → [ok] sent to carol' in line for line in child)
    assert all(line.startswith("  ") for line in child)  # indented under the parent
    assert '⚙ helper({"task": "send carol"}) → [ok]' in screen
    assert chat.sent() == ["carol"]


AGENT_FILE = """\
version: 1
name: mailer
model: chatdemo:x
tools:
  - import: chat_app:send
approvals:
  rules:
    - {tool: send, action: auto}
"""


def test_chat_with_an_agent_file_where_code_stays_the_floor(
    open_chat: Callable[..., Chat], tmp_path: Path
) -> None:
    (tmp_path / "mailer.yaml").write_text(AGENT_FILE, encoding="utf-8")
    # the file says auto for send; the command line says ask: ask wins, and it is said
    chat = open_chat("mailer.yaml", "--ask", "send", "--session", "file")
    screen = chat.wait_for("kept ask")
    assert "model chatdemo:x" in screen
    chat.say("send zed")
    chat.wait_for("[a] always for this tool:")
    assert chat.sent() == []
    chat.say("y")
    chat.wait_for("sent to zed")
    assert chat.sent() == ["zed"]


@pytest.mark.parametrize(
    ("key", "verdicts", "cancelled", "code"),
    [("C-d", ["reject"], False, "EXIT=0"), ("C-c", [], True, "EXIT=130")],
)
def test_legato_run_end_of_input_rejects_and_ctrl_c_cancels_at_its_question(
    tmp_path: Path, key: str, verdicts: list[str], cancelled: bool, code: str
) -> None:
    journal_file = tmp_path / "run.jsonl"
    run = Chat(
        tmp_path,
        ["--tools", "chat_app:send", "--ask", "send", "--journal", str(journal_file), "'send bob'"],
        command="run",
    )
    try:
        run.wait_for("[a] always for this tool:")
        run.keys(key)
        run.wait_for(code)
    finally:
        run.close()
    assert run.sent() == []
    journal = Journal.from_jsonl(journal_file.read_text(encoding="utf-8"))
    assert [e.verdict for e in journal if isinstance(e, ApprovalDecided)] == verdicts
    assert any(isinstance(e, CancelRequested) for e in journal) is cancelled


def test_ctrl_c_twice_during_a_turn_leaves_the_chat(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat(*ASKING, "--tools", "chat_app:stubborn", "--session", "twice")
    chat.say("stubborn")

    chat.wait(chat.slow_started, "the stubborn tool to start")
    chat.keys("C-c")
    chat.wait_for("cancelling the turn")
    chat.keys("C-c")  # the turn is still stopping (the tool holds on until released)
    chat.wait_for("leaving once the turn has stopped")
    Path(f"{chat.effects}.release").touch()
    chat.wait_for("EXIT=0")
    assert "resume with: legato chat --session twice" in chat.screen()
