"""Call prices from the bundled `genai-prices` data, without loading it in every process.

Importing `genai-prices` and its data costs about 100 ms of CPU and 4 MB of memory, which a
short script or the first run of a CLI would pay for its first priced call. So the rates of
each model a process prices are written to a small cache file
(`$XDG_CACHE_HOME/legato/prices.json`, else `~/.cache/legato/prices.json`), and a later
process prices the same model from there without importing the package.

A model's rates are cached only after they were checked: the prices they give for a set of
usages spanning every unit and every tier boundary must equal what `genai-prices` gives.
Models whose prices the check cannot reproduce are priced by the package every time. The
cache is keyed by the installed package's data file (a new `genai-prices` starts a new
cache) and by the UTC day (prices that change on a date are read again the next day).
Setting `LEGATO_PRICE_CACHE=0` turns the file off.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import time
from functools import cache
from pathlib import Path
from typing import Any, cast

__all__ = ["price", "prices_installed"]

Counts = tuple[int, int, int, int, int]
"""Input, output, cache read and cache write tokens, and searches."""

_UNITS: dict[str, tuple[int, float]] = {
    # genai-prices field → (index into the uncached counts, per how many)
    "input_mtok": (0, 1e6),
    "output_mtok": (1, 1e6),
    "cache_read_mtok": (2, 1e6),
    "cache_write_mtok": (3, 1e6),
    "web_searches_kcount": (4, 1e3),
}
_PROBES: tuple[Counts, ...] = (
    (1_000, 100, 0, 0, 0),
    (1_000_000, 200_000, 300_000, 100_000, 3),
    (50_000, 1_000, 20_000, 5_000, 1),
)

_memory: dict[str, Any] = {}
"""The cache file's rates, once read, and what this process added."""
_state: dict[str, str] = {}


@cache
def prices_installed() -> bool:
    """Whether `genai-prices` is installed (found without importing it)."""
    return importlib.util.find_spec("genai_prices") is not None


def price(model: str, provider_id: str, counts: Counts) -> float | None:
    """The price of a call with these counts, or None when the data does not know the model."""
    key = f"{provider_id}/{model}"
    rates = _cached().get(key, _MISSING)
    if rates is not _MISSING:
        return None if rates is None else _apply(rates, counts)
    found, rates = _from_package(model, provider_id, counts)
    if rates is not _UNCACHEABLE:
        _store(key, rates)
    return found


# -- the package ----------------------------------------------------------------------------------

_MISSING: Any = object()
_UNCACHEABLE: Any = object()


def _package_price(model: str, provider_id: str, counts: Counts) -> float | None:
    import genai_prices

    names = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    fields: dict[str, int] = dict(zip(names, counts[:4], strict=True))
    if counts[4]:
        fields["web_searches"] = counts[4]
    try:
        calc = genai_prices.calc_price(genai_prices.Usage(**fields), model, provider_id=provider_id)
    except LookupError:
        return None
    return float(calc.total_price)


def _from_package(model: str, provider_id: str, counts: Counts) -> tuple[float | None, Any]:
    """The package's price, and the model's rates (None: unknown model) if they check out."""
    import genai_prices

    found = _package_price(model, provider_id, counts)
    if found is None:
        return None, None
    try:
        probe = genai_prices.Usage(input_tokens=1, output_tokens=1)
        calc = genai_prices.calc_price(probe, model, provider_id=provider_id)
    except LookupError:  # pragma: no cover - priced just above
        return found, _UNCACHEABLE
    rates = _rates_of(calc.model_price)
    if rates is None:
        return found, _UNCACHEABLE
    probes = (*_PROBES, *_tier_probes(rates), counts)
    for c in probes:
        expected = _package_price(model, provider_id, c)
        if expected is None or abs(_apply(rates, c) - expected) > 1e-9 * max(1.0, expected):
            return found, _UNCACHEABLE
    return found, rates


def _rates_of(model_price: Any) -> dict[str, Any] | None:
    """The model's rates as JSON (numbers, or `{"base", "tiers"}`), or None if unknown units."""
    rates: dict[str, Any] = {}
    fields = cast(dict[str, Any], vars(model_price))
    for name, value in fields.items():
        if value is None:
            continue
        if name not in _UNITS:
            continue  # a unit legato never reports (audio, 1-hour cache writes, ...): 0
        if hasattr(value, "tiers"):
            found = cast(list[Any], value.tiers)
            tiers = sorted([int(t.start), float(t.price)] for t in found)
            rates[name] = {"base": float(value.base), "tiers": tiers}
        elif isinstance(value, int | float) or type(value).__name__ == "Decimal":
            rates[name] = float(value)
        else:
            return None  # a price shape this module does not know
    return rates


def _tier_probes(rates: dict[str, Any]) -> list[Counts]:
    """Usages on both sides of every tier boundary."""
    starts: set[int] = set()
    for rate in rates.values():
        if isinstance(rate, dict):
            starts.update(int(t[0]) for t in cast(list[list[float]], cast(Any, rate)["tiers"]))
    out: list[Counts] = []
    for start in sorted(starts):
        for total in (start - 1, start, start + 1, start * 2):
            out.append((total, 1_000, total // 4, total // 8, 1))
    return out


def _apply(rates: dict[str, Any], counts: Counts) -> float:
    inputs, output, read, write, searches = counts
    # cache reads and writes without a price of their own are billed as plain input
    read = read if "cache_read_mtok" in rates else 0
    write = write if "cache_write_mtok" in rates else 0
    amounts = (max(inputs - read - write, 0), output, read, write, searches)
    total = 0.0
    for name, rate in rates.items():
        index, per = _UNITS[name]
        value = _rate_at(rate, inputs)
        total += amounts[index] * value / per
    return total


def _rate_at(rate: Any, inputs: int) -> float:
    """A unit's rate for a request of `inputs` prompt tokens (a tier applies above its start)."""
    if not isinstance(rate, dict):
        return float(rate)
    tiered = cast(dict[str, Any], rate)
    value = float(tiered["base"])
    for start, tier in cast(list[list[float]], tiered["tiers"]):
        if inputs > start:
            value = float(tier)
    return value


# -- the file -------------------------------------------------------------------------------------


def _path() -> Path | None:
    if os.environ.get("LEGATO_PRICE_CACHE") == "0":
        return None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "legato" / "prices.json"


def _stamp() -> str:
    """Which data the rates come from, and the day they were read."""
    spec = importlib.util.find_spec("genai_prices")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    data = origin.with_name("data.py") if origin is not None else None
    try:
        info = data.stat() if data is not None else None
    except OSError:
        info = None
    marker = f"{info.st_size}-{info.st_mtime_ns}" if info is not None else "unknown"
    return f"{marker}@{time.strftime('%Y-%m-%d', time.gmtime())}"


def _cached() -> dict[str, Any]:
    if "stamp" in _state:
        return _memory
    _state["stamp"] = _stamp()
    path = _path()
    if path is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            saved: Any = json.loads(path.read_text())
            if (
                isinstance(saved, dict)
                and cast(dict[str, Any], saved).get("stamp") == _state["stamp"]
            ):
                rates: Any = cast(dict[str, Any], saved).get("rates")
                if isinstance(rates, dict):
                    _memory.update(cast(dict[str, Any], rates))
    return _memory


def _store(key: str, rates: dict[str, Any] | None) -> None:
    """Remember a model's rates here and in the file (written whole, atomically)."""
    _cached()[key] = rates
    path = _path()
    if path is None:
        return
    import tempfile  # loaded only when a cache file is written

    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=".prices-", suffix=".json", delete=False
        ) as out:
            json.dump({"stamp": _state["stamp"], "rates": _memory}, out)
        Path(out.name).replace(path)
