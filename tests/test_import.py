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
