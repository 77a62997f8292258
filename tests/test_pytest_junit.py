"""tools/pytest_junit.py: a crash at interpreter exit passes only with a passing report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).parents[1] / "tools" / "pytest_junit.py"

CRASH_AT_EXIT = "import atexit, os\natexit.register(os.abort)\n"


def run(tmp_path: Path, body: str, *, crash: bool) -> int:
    (tmp_path / "test_sample.py").write_text(
        (CRASH_AT_EXIT if crash else "") + body, encoding="utf-8"
    )
    args = [sys.executable, str(TOOL), "-q", "-p", "no:cacheprovider", "test_sample.py"]
    return subprocess.run(args, cwd=tmp_path, capture_output=True, check=False).returncode


def test_a_crash_at_exit_after_every_test_passed_counts_as_passed(tmp_path: Path) -> None:
    assert run(tmp_path, "def test_ok():\n    assert True\n", crash=True) == 0


def test_a_crash_at_exit_after_a_failure_fails(tmp_path: Path) -> None:
    body = "def test_ok():\n    assert True\n\ndef test_bad():\n    assert False\n"
    assert run(tmp_path, body, crash=True) == 1


def test_a_crash_before_the_report_is_written_fails(tmp_path: Path) -> None:
    body = "import os\n\ndef test_dies():\n    os.abort()\n"  # no junit report at all
    assert run(tmp_path, body, crash=False) == 1


def test_a_failure_without_a_crash_keeps_pytests_code(tmp_path: Path) -> None:
    assert run(tmp_path, "def test_bad():\n    assert False\n", crash=False) == 1
