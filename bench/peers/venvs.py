"""One virtualenv per framework, from the pinned requirements in `bench/peers/requirements/`.

Each venv lives under `~/.cache/legato-bench/peers/<name>` (or `$LEGATO_BENCH_CACHE/peers/<name>`)
and is reused while the hash of what it was built from (its requirements file, the interpreter's
version and, for legato, this checkout's `pyproject.toml` and path) is unchanged; otherwise it is rebuilt.
legato is installed editable from this checkout, so a venv follows the source without a rebuild.
Standard library only: this module runs in whatever Python starts the bench.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REQUIREMENTS = HERE / "requirements"

MIN_PYTHON: dict[str, tuple[int, int]] = {"orchestral": (3, 12)}
"""Frameworks published for newer interpreters only."""


@dataclass(frozen=True)
class Venv:
    """A framework's environment: its interpreter, or why there is none."""

    name: str
    python: str | None
    reason: str = ""


def cache_root() -> Path:
    """Where the venvs live."""
    base = os.environ.get("LEGATO_BENCH_CACHE") or str(Path.home() / ".cache" / "legato-bench")
    return Path(base) / "peers"


def _interpreter(name: str) -> str | None:
    """The interpreter to build `name`'s venv with: this one, or a newer one found on PATH."""
    need = MIN_PYTHON.get(name)
    if need is None or sys.version_info[:2] >= need:
        return sys.executable
    for minor in range(14, need[1] - 1, -1):
        for found in (shutil.which(f"python3.{minor}"), *_pyenv(minor)):
            if found and _runs(found):
                return found
    return None


def _pyenv(minor: int) -> list[str]:
    """`python3.<minor>` of the versions pyenv installed (its shims may not be on PATH)."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(root.glob(f"3.{minor}.*/bin/python3.{minor}"), reverse=True)
    return [str(p) for p in found]


def _runs(python: str) -> bool:
    """Whether `python` starts (a pyenv shim of a version not installed does not)."""
    done = subprocess.run([python, "-c", "pass"], capture_output=True)
    return done.returncode == 0


def _version_of(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _digest(name: str, python: str) -> str:
    h = hashlib.sha256()
    h.update((REQUIREMENTS / f"{name}.txt").read_bytes())
    h.update(_version_of(python).encode())
    if name == "legato":
        h.update((REPO / "pyproject.toml").read_bytes())
        h.update(str(REPO).encode())  # installed editable: a venv of another checkout is stale
    return h.hexdigest()


def ensure(name: str, *, log: bool = True) -> Venv:
    """Build (or reuse) `name`'s venv and return its interpreter."""
    base = _interpreter(name)
    if base is None:
        need = ".".join(map(str, MIN_PYTHON[name]))
        return Venv(name, None, f"needs Python >= {need}; none found on PATH")
    root = cache_root() / name
    python = root / "bin" / "python"
    stamp = root / ".requirements-hash"
    digest = _digest(name, base)
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return Venv(name, str(python))
    if log:
        print(f"setup: building the {name} venv in {root}", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [base, "-m", "venv", str(root)],
        [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS / f"{name}.txt")],
    ]
    if name == "legato":
        steps.append([str(python), "-m", "pip", "install", "-q", "-e", str(REPO)])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return Venv(name, None, f"setup failed: {' | '.join(tail)}")
    stamp.write_text(digest)
    return Venv(name, str(python))


def freeze(python: str) -> dict[str, str]:
    """The installed distributions of a venv, name -> version (recorded with the results)."""
    code = (
        "import json, importlib.metadata as m;"
        "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    import json

    return dict(json.loads(out.stdout))


def main() -> None:
    """`python bench/peers/venvs.py [name ...]`: build the venvs (all by default)."""
    names = sys.argv[1:] or sorted(p.stem for p in REQUIREMENTS.glob("*.txt"))
    for name in names:
        v = ensure(name)
        print(f"{name}: {v.python or v.reason}", flush=True)


if __name__ == "__main__":
    main()
