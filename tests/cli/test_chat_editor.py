"""`legato chat` on its line editor, in a real terminal (tmux): history, multi-line input,
bracketed paste as one message of any length, completion, control characters, Ctrl-C."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from legato.cli._editor import clean_text, history_path
from legato.events import ModelRequested, UserPrompt

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

from test_chat_tmux import Chat  # noqa: E402  (the harness: tmux on a private socket)


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


def _prompts(chat: Chat, session: str) -> list[str]:
    return [
        e.message.text
        for journal in chat.journals(session)
        for e in journal
        if isinstance(e, UserPrompt)
    ]


def _model_calls(chat: Chat, session: str) -> int:
    return sum(
        1 for journal in chat.journals(session) for e in journal if isinstance(e, ModelRequested)
    )


def test_a_five_line_paste_is_one_turn_and_one_model_call(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--session", "paste")
    lines = [f"pasted line {n}" for n in range(1, 6)]
    chat.paste("\n".join(lines) + "\n")
    chat.keys("Enter")
    chat.wait_for("turn: 1 model call,")
    assert _prompts(chat, "paste") == ["\n".join(lines)]
    assert _model_calls(chat, "paste") == 1


def test_twin_five_typed_lines_with_enter_are_five_turns(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--session", "typed")
    for n in range(1, 6):
        chat.say(f"typed line {n}")
        chat.wait_for("turn: 1 model call,", count=n)
    assert len(_prompts(chat, "typed")) == 5


def test_a_50000_character_paste_arrives_whole(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--session", "long")
    text = ("abcdefghij" * 5000)[:50_000]
    chat.paste(text)
    chat.keys("Enter")
    chat.wait_for("turn: 1 model call,")
    (prompt,) = _prompts(chat, "long")
    assert len(prompt) == 50_000 and prompt == text


def test_alt_enter_and_ctrl_j_add_lines_enter_sends(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--session", "multi")
    chat.keys("first", "Escape", "Enter", "second", "C-j", "third", "Enter")
    chat.wait_for("turn: 1 model call,")
    assert _prompts(chat, "multi") == ["first\nsecond\nthird"]


def test_history_is_kept_across_sessions(open_chat: Callable[..., Chat], tmp_path: Path) -> None:
    chat = open_chat("--session", "h1")
    chat.say("remember this line")
    chat.wait_for("turn: 1 model call,")
    chat.keys("C-d")
    chat.wait_for("EXIT=0")
    assert (
        "remember this line" in history_path({"XDG_DATA_HOME": str(tmp_path / "data")}).read_text()
    )
    again = open_chat("--session", "h2")
    again.keys("Up", "Enter")
    again.wait_for("echo: remember this line")
    assert _prompts(again, "h2") == ["remember this line"]


def test_tab_completes_slash_commands_and_tool_names(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--tools", "chat_app:send", "--session", "tab")
    chat.keys("/too", "Tab")
    chat.wait_for("› /tools")  # completed on screen (completion runs in the background)
    chat.keys("Enter")
    chat.wait_for("send (irreversible)")
    chat.keys("please se", "Tab")
    chat.wait_for("› please send")
    chat.keys("Enter")
    chat.wait_for("echo: please send")


def test_a_paste_with_control_characters_is_cleaned(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--session", "ctl")
    chat.paste("red \x1b[31mtext\x1b[0m and a bell\x07 and \x1b]0;title\x07done")
    chat.keys("Enter")
    chat.wait_for("turn: 1 model call,")
    assert _prompts(chat, "ctl") == ["red text and a bell and done"]
    chat.say("still here")
    chat.wait_for("echo: still here")


def test_clean_text_keeps_newlines_and_tabs_and_drops_the_rest() -> None:
    assert clean_text("a\r\nb\rc\td\x00e\x1b[1mf\x9bg") == "a\nb\nc\tdefg"


def test_ctrl_c_mid_answer_prints_no_fragment_after_the_notice_and_counts_the_call(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat("--session", "cut")
    chat.say("stream 400")
    chat.wait_for("word 0010")
    chat.keys("C-c")
    screen = chat.wait_for("turn cancelled")
    after = screen.split("cancelling the turn", 1)[1]
    assert "word " not in after
    assert "turn: 1 model call," in after
    chat.say("hello")
    chat.wait_for("echo: hello")


def test_ctrl_c_at_the_prompt_clears_the_line_and_the_chat_stays(
    open_chat: Callable[..., Chat],
) -> None:
    chat = open_chat("--session", "stay")
    chat.keys("half typed", "C-c")
    chat.wait_prompt(2)
    chat.keys("C-c")  # on an empty line: a hint, and still no exit
    chat.wait_for("Ctrl-D on an empty line, or /exit, leaves")
    chat.say("hello")
    screen = chat.wait_for("echo: hello")
    assert "EXIT=" not in screen
    assert _prompts(chat, "stay") == ["hello"]  # the cleared line was never sent
    chat.keys("C-d")
    chat.wait_for("EXIT=0")
    assert "resume with: legato chat --session stay" in chat.screen()


@pytest.mark.parametrize("twin", [False, True], ids=["plain", "twin_old_ctrl_c"])
def test_without_the_editor_ctrl_c_at_the_prompt_clears_the_line_too(
    tmp_path: Path, twin: bool
) -> None:
    environ = {"LEGATO_TEST_CTRL_C_LEAVES": "1"} if twin else {}
    chat = Chat(tmp_path, ["--session", "plain"], environ=environ, plain=True)
    try:
        chat.wait_prompt()
        chat.keys("half typed", "C-c")
        if twin:
            chat.wait_for("EXIT=0")
            return
        chat.wait_for("Ctrl-D on an empty line, or /exit, leaves")
        chat.say("hello")
        assert "EXIT=" not in chat.wait_for("echo: hello")
        assert _prompts(chat, "plain") == ["hello"]
        chat.keys("C-d")
        chat.wait_for("EXIT=0")
    finally:
        chat.close()


def test_twin_with_the_old_ctrl_c_the_chat_leaves_at_the_prompt(tmp_path: Path) -> None:
    chat = Chat(tmp_path, ["--session", "leave"], environ={"LEGATO_TEST_CTRL_C_LEAVES": "1"})
    try:
        chat.wait_prompt()
        chat.keys("half typed", "C-c")
        chat.wait_for("EXIT=0")
    finally:
        chat.close()


def test_slash_exit_leaves(open_chat: Callable[..., Chat]) -> None:
    chat = open_chat("--session", "bye")
    chat.say("/exit")
    chat.wait_for("EXIT=0")
