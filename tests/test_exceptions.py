"""The one exception tree: drawn in `legato.exceptions`' docstring, exported from that module.

The classes live in private modules by family; users, tracebacks and pickles see them as
`legato.exceptions.<Name>`, and an error crossing a process arrives as it was raised.
"""

from __future__ import annotations

import pickle
import re

import pytest

import legato.exceptions as errors
from legato.exceptions import LegatoError

BRANCH = re.compile(r"^([│ ]*)(?:├──|└──)\s+(\w+)")


def test_the_drawn_tree_is_the_class_tree() -> None:
    parents: list[str] = ["LegatoError"]  # by depth
    drawn = {"LegatoError"}
    for line in (errors.__doc__ or "").splitlines():
        found = BRANCH.match(line)
        if found is None:
            continue
        depth, name = len(found.group(1)) // 4, found.group(2)
        del parents[depth + 1 :]
        cls, parent = getattr(errors, name), getattr(errors, parents[depth])
        assert cls.__bases__ == (parent,), f"{name} is drawn under {parents[depth]}"
        parents.append(name)
        drawn.add(name)
    assert drawn == set(errors.__all__)


def test_every_error_is_named_by_the_public_module() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, LegatoError)
        assert cls.__module__ == "legato.exceptions", name


@pytest.mark.parametrize(
    "error",
    [
        errors.MaxStepsExceeded(3),
        errors.RunNotResumable("run-1", "it has already finished"),
        errors.JournalConflict("run-1", 7),
        errors.ToolError("the file is locked"),
        errors.RateLimited("slow down", provider="openai", retry_after=2.5),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_pickles_as_it_was_raised(error: LegatoError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.args == error.args
    assert vars(again) == vars(error)
