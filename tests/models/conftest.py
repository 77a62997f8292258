"""Fixtures for provider tests: a fresh wire simulator per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from legato.simulator import WireSimulator


@pytest.fixture
def sim() -> Iterator[WireSimulator]:
    """A wire simulator on an ephemeral 127.0.0.1 port, stopped after the test."""
    with WireSimulator() as simulator:
        yield simulator
