"""Test-wide fixtures: no test may reach the network."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from legato.testing import block_network

# Shared machines are noisy: hypothesis must judge correctness, never speed.
settings.register_profile("legato", deadline=None)
settings.load_profile("legato")


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("allow_network"):
        yield
        return
    with block_network():
        yield
