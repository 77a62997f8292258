"""Prices come from the bundled `genai-prices` data; a later process reads them from a small
cache file instead of importing the package (about 100 ms of CPU and 4 MB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from legato.models import _prices

PRICE = textwrap.dedent(
    """
    import json, sys
    from legato.messages import Usage
    from legato.models._provider import cost_in_dollars

    usage = Usage(input_tokens=250_000, output_tokens=1_000, cache_read_tokens=10_000, web_searches=1)
    costs = [
        cost_in_dollars(usage, model=m, provider_id=p)
        for m, p in [("claude-sonnet-4-5", "anthropic"), ("gpt-4o", "openai"), ("no-such-model", "openai")]
    ]
    print(json.dumps({"costs": costs, "imported": "genai_prices" in sys.modules}))
    """
)


def priced(cache: Path, **env: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PRICE],
        env={**os.environ, "XDG_CACHE_HOME": str(cache), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_later_process_prices_from_the_cache_without_the_package(tmp_path: Path) -> None:
    first = priced(tmp_path)
    assert first["imported"] is True
    assert (tmp_path / "legato" / "prices.json").exists()
    second = priced(tmp_path)
    assert second["imported"] is False  # priced from the file
    assert second["costs"] == first["costs"]
    costs = first["costs"]
    assert isinstance(costs, list) and costs[2] is None  # an unknown model stays unknown


def test_twin_without_the_cache_every_process_loads_the_package(tmp_path: Path) -> None:
    priced(tmp_path, LEGATO_PRICE_CACHE="0")
    assert priced(tmp_path, LEGATO_PRICE_CACHE="0")["imported"] is True
    assert not (tmp_path / "legato").exists()


def test_a_cache_from_other_data_or_another_day_is_not_used(tmp_path: Path) -> None:
    priced(tmp_path)
    path = tmp_path / "legato" / "prices.json"
    saved = json.loads(path.read_text())
    saved["stamp"] = "0-0@2000-01-01"
    saved["rates"]["anthropic/claude-sonnet-4-5"]["output_mtok"]["base"] = 999.0
    path.write_text(json.dumps(saved))
    again = priced(tmp_path)
    assert again["imported"] is True
    assert again["costs"] == priced(tmp_path, LEGATO_PRICE_CACHE="0")["costs"]


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_prices, "_memory", {})
    monkeypatch.setattr(_prices, "_state", {})
    return tmp_path


def test_rates_that_do_not_reproduce_the_package_are_never_cached(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def wrong(model_price: object) -> dict[str, float]:
        return {"input_mtok": 999.0}

    monkeypatch.setattr(_prices, "_rates_of", wrong)
    counts = (1_000, 100, 0, 0, 0)
    found = _prices.price("gpt-4o", "openai", counts)
    assert found == _prices._package_price("gpt-4o", "openai", counts)  # the package's own
    assert "openai/gpt-4o" not in _prices._memory


def test_cached_rates_agree_with_the_package_across_tiers(fresh_cache: Path) -> None:
    for model, provider in [("claude-sonnet-4-5", "anthropic"), ("gpt-4o", "openai")]:
        _prices.price(model, provider, (1_000, 100, 0, 0, 0))
        assert f"{provider}/{model}" in _prices._memory
        for counts in [
            (150_000, 900, 0, 0, 0),
            (200_001, 10, 50_000, 20_000, 2),
            (800_000, 5, 0, 0, 0),
        ]:
            cached = _prices.price(model, provider, counts)
            assert cached == pytest.approx(_prices._package_price(model, provider, counts))
