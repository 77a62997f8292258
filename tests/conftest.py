"""Test-wide fixtures: no test may reach the network."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from legato.testing import block_network


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("allow_network"):
        yield
        return
    with block_network():
        yield
