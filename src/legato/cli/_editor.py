"""The chat's prompt on a real line editor (prompt_toolkit), when both ends are a terminal.

What it gives over reading lines from the terminal driver: arrow keys and Emacs keys, a
history kept across sessions (a file under the user's data directory), multi-line input
(Alt-Enter or Ctrl-J adds a line; Enter sends), a bracketed paste kept as one message
whatever its lines and length (the driver's line buffer stops at 4,095 characters), and Tab
completion of slash commands and tool names. Control characters and escape sequences in a
paste or a typed line are dropped before the text is shown or sent.

Ctrl-C at this prompt raises `Interrupted` carrying what was typed (the chat drops the line and
prompts again, as IPython and psql do); Ctrl-D on an empty line is end of input. During a turn
the prompt is not active, so Ctrl-C there is still the signal the chat's turn handling catches.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from legato.cli._lines import Interrupted

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document

__all__ = ["LineEditor", "clean_text", "history_path"]

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, bracketed-paste marks
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks, clipboard writes
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def clean_text(text: str) -> str:
    """`text` without escape sequences and control characters (newlines and tabs are kept)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def history_path(environ: dict[str, str] | None = None) -> Path:
    """The chat history file: `$XDG_DATA_HOME/legato/chat_history` (else the platform's place)."""
    env = dict(os.environ) if environ is None else environ
    base = env.get("XDG_DATA_HOME", "").strip()
    if base:
        root = Path(base)
    elif sys.platform == "win32":
        root = Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Application Support"
    else:
        root = Path.home() / ".local" / "share"
    return root / "legato" / "chat_history"


def _completer(commands: Iterable[str], tools: Callable[[], Iterable[str]]) -> Completer:
    from prompt_toolkit.completion import Completer, Completion

    names = sorted({c.split()[0] for c in commands})

    class _Complete(Completer):
        """Slash commands at the start of the line; tool names for any other word."""

        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterator[Completion]:
            before = document.text_before_cursor
            word = document.get_word_before_cursor(WORD=True)
            if before.startswith("/") and " " not in before:
                for name in names:
                    if name.startswith(before):
                        yield Completion(name, start_position=-len(before))
                return
            if not word:
                return
            for name in sorted(tools()):
                if name.startswith(word) and name != word:
                    yield Completion(name, start_position=-len(word))

    return _Complete()


class LineEditor:
    """Prompts read with prompt_toolkit: `read(prompt)` is the chat's `LineReader.read`."""

    def __init__(
        self,
        *,
        commands: Iterable[str],
        tools: Callable[[], Iterable[str]],
        history: Path | None,
    ) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
        from prompt_toolkit.keys import Keys

        keys = KeyBindings()
        self._typed = ""

        @keys.add("escape", "enter")
        @keys.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            self._typed = event.current_buffer.text
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

        @keys.add(Keys.BracketedPaste)
        def _paste(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text(clean_text(event.data))

        store: History = InMemoryHistory()
        if history is not None:
            try:
                history.parent.mkdir(parents=True, exist_ok=True)
                if not history.exists():  # what was typed may be private: the owner's only
                    history.touch(mode=0o600)
                store = FileHistory(str(history))
            except OSError:
                store = InMemoryHistory()  # no writable data directory: this session only
        completer = _completer(commands, tools)
        self.session: PromptSession[str] = PromptSession(
            history=store,
            key_bindings=keys,
            completer=completer,
            complete_while_typing=False,
            multiline=False,
            prompt_continuation=lambda width, line, wrapped: "… ".rjust(width),
        )

    async def read(self, prompt: str) -> str | None:
        """The next message (None at end of input); `Interrupted` (with the line) on Ctrl-C."""
        self._typed = ""
        try:
            text = await self.session.prompt_async(prompt, handle_sigint=False)
        except KeyboardInterrupt:
            raise Interrupted(clean_text(self._typed)) from None
        except EOFError:
            return None
        return clean_text(text)


def editor_wanted(stdin: object, stdout: object) -> bool:
    """Whether to use the line editor: both ends are a terminal and prompt_toolkit is there."""
    import importlib.util

    def tty(stream: object) -> bool:
        isatty = getattr(stream, "isatty", None)
        try:
            return bool(isatty()) if callable(isatty) else False
        except (ValueError, OSError):
            return False

    if not (tty(stdin) and tty(stdout)):
        return False
    return importlib.util.find_spec("prompt_toolkit") is not None
