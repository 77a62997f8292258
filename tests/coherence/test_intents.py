"""Two children edit one file: disjoint declared regions both land; undeclared edits,
overlapping declarations and expired leases are refused."""

from __future__ import annotations

import pytest

from legato.coherence import EditIntents, LeaseTable, ResourceStore
from legato.exceptions import CommitConflict, LeaseRefused

FILE = "file:app.py"
SOURCE = (
    "def login(user):\n"  # 0
    "    return check(user)\n"  # 1
    "\n"  # 2
    "def logout(user):\n"  # 3
    "    return end(user)\n"  # 4
    "\n"  # 5
    "def audit(event):\n"  # 6
    "    log(event)\n"  # 7
)


def test_disjoint_regions_of_one_file_both_land() -> None:
    store = ResourceStore({FILE: SOURCE})
    intents = EditIntents(store)
    a = intents.declare(FILE, "child-a", [(0, 2)])
    b = intents.declare(FILE, "child-b", [(6, 8)])
    # child-a's edit grows the file by two lines; child-b's region moves down, and still lands
    intents.commit(
        a,
        {
            (
                0,
                2,
            ): "def login(user):\n    audit(user)\n    if not check(user):\n        raise Denied\n"
        },
    )
    intents.commit(b, {(6, 8): "def audit(event):\n    log(event, level='info')\n"})
    text = store.read(FILE).value
    assert "raise Denied" in text
    assert "log(event, level='info')" in text
    assert "def logout(user):\n    return end(user)\n" in text
    assert text.count("def ") == 3


def test_whole_file_writes_without_intents_lose_the_first_edit() -> None:
    """The failure the intents prevent: both children write back the file they read."""
    store = ResourceStore({FILE: SOURCE}, enforce=False)
    a, b = store.begin(author="a"), store.begin(author="b")
    text_a, text_b = a.read(FILE), b.read(FILE)
    a.write(FILE, text_a.replace("check(user)", "check(user, strict=True)"))
    b.write(FILE, text_b.replace("log(event)", "log(event, level='info')"))
    a.commit()
    b.commit()
    assert "strict=True" not in store.read(FILE).value  # child-a's edit is gone


def test_an_undeclared_region_is_refused_and_nothing_is_written() -> None:
    store = ResourceStore({FILE: SOURCE})
    intents = EditIntents(store)
    a = intents.declare(FILE, "child-a", [(0, 2)])
    with pytest.raises(CommitConflict, match="outside the regions you declared"):
        intents.commit(a, {(3, 5): "def logout(user):\n    pass\n"})
    assert store.read(FILE).value == SOURCE


def test_overlapping_declarations_are_serialised() -> None:
    store = ResourceStore({FILE: SOURCE})
    intents = EditIntents(store)
    a = intents.declare(FILE, "child-a", [(0, 4)])
    with pytest.raises(CommitConflict, match="declared by child-a"):
        intents.declare(FILE, "child-b", [(3, 5)])
    intents.commit(a, {(0, 2): "def login(user):\n    return True\n"})
    b = intents.declare(FILE, "child-b", [(3, 5)])  # admitted once child-a is done
    intents.commit(b, {(3, 5): "def logout(user):\n    return None\n"})
    assert "return True" in store.read(FILE).value and "return None" in store.read(FILE).value


def test_a_region_changed_since_the_base_is_a_conflict() -> None:
    store = ResourceStore({FILE: SOURCE})
    intents = EditIntents(store)
    a = intents.declare(FILE, "child-a", [(6, 8)])
    other = store.begin(author="someone")
    other.write(FILE, other.read(FILE).replace("log(event)", "print(event)"))
    other.commit()
    with pytest.raises(CommitConflict, match="changed since you read version 0"):
        intents.commit(a, {(6, 8): "def audit(event):\n    log(event, 1)\n"})
    assert store.read(FILE).value.count("print(event)") == 1
    intents.release(a)
    with pytest.raises(CommitConflict, match="is not open"):
        intents.commit(a, {})


def test_a_writer_whose_lease_expired_cannot_commit() -> None:
    now = [0.0]
    leases = LeaseTable(clock=lambda: now[0])
    store = ResourceStore({FILE: SOURCE}, leases=leases)
    intents = EditIntents(store)
    lease = leases.acquire(FILE, "child-a", ttl=5)
    a = intents.declare(FILE, "child-a", [(0, 2)])
    now[0] = 6
    with pytest.raises(LeaseRefused, match="expired"):
        intents.commit(a, {(0, 2): "def login(user):\n    return 1\n"}, token=lease.token)
    assert store.read(FILE).value == SOURCE
