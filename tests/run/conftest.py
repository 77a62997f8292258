"""`fork_server`: a kill matrix module stops the fork server its workers came from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def fork_server() -> Iterator[None]:
    """Stop the fork server (and the resource tracker it starts) after the module: other
    tests check that no child process of the test run is left behind."""
    yield
    from multiprocessing import forkserver, resource_tracker

    server: Any = getattr(forkserver, "_forkserver")  # noqa: B009  # the module's one server
    server._stop()
    tracker: Any = getattr(resource_tracker, "_resource_tracker")  # noqa: B009
    stop = getattr(tracker, "_stop", None)
    if stop is not None:
        stop()
