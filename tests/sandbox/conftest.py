"""Fixtures for sandbox tests: a workspace beside a planted secret, and the process table."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sandbox_helpers import Scene, children_of_this_process, processes_with


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    root = tmp_path / "ws"
    root.mkdir()
    token = f"SECRET-{uuid.uuid4().hex}"
    secret = tmp_path / "host-secret.txt"
    secret.write_text(token + "\n")
    secret.chmod(0o600)
    outside = tmp_path / "outside"
    outside.mkdir()
    return Scene(root=root, secret=secret, secret_text=token, outside=outside)


@pytest.fixture
def process_table() -> Callable[[str], list[int]]:
    """`check(marker)`: live processes carrying `marker`, after asserting no child is left."""

    def check(marker: str) -> list[int]:
        assert children_of_this_process() == [], "a child process (or zombie) was left behind"
        return processes_with(marker)

    return check
