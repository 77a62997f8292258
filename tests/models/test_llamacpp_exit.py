"""A process that used the in-process llama.cpp model exits without a warning.

llama_cpp opens two `os.devnull` files when imported and never closes them; the provider
closes them at exit, after freeing its models. Each case is a real Python process run with
`-W error`, where an unclosed file is reported on stderr as the interpreter exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import asyncio
import atexit
import sys

from legato.messages import Message
from legato.models import ModelRequest, ModelSettings, complete
from legato.models import llamacpp

model = llamacpp.LlamaCppModel(n_ctx=512, settings=ModelSettings(temperature=0.0, max_tokens=2))
asyncio.run(complete(model, ModelRequest(messages=(Message.user("Hi"),))))
if sys.argv[1] == "unprotected":  # the old code path: nothing closes llama_cpp's files
    atexit.unregister(llamacpp._close_null_files)
print("answered")
"""


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    source = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", SCRIPT, mode],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_the_process_exits_without_an_unclosed_file() -> None:
    done = _run("protected")
    assert done.returncode == 0, done.stderr
    assert "answered" in done.stdout
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_twin_without_the_closer_the_exit_reports_unclosed_files() -> None:
    done = _run("unprotected")
    assert "answered" in done.stdout
    assert done.stderr.count("ResourceWarning: unclosed file") == 2, done.stderr
