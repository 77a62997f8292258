"""`Workspace`: confinement of every path to the root, on descriptors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from legato.exceptions import ConfigurationError, SandboxViolation, WorkspaceNotFound
from legato.sandbox import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n")
    return Workspace(root)


def test_root_must_exist(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceNotFound, match="does not exist"):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkspaceNotFound, match="is not a directory"):
        Workspace(tmp_path / "file")
    with pytest.raises(ConfigurationError):
        Workspace("")


def test_root_is_resolved_through_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    ws = Workspace(tmp_path / "alias")
    assert ws.root == (tmp_path / "real").resolve()
    # an absolute path spelled through the alias is still inside
    ws.write_bytes(str(tmp_path / "alias" / "a.txt"), b"x")
    assert (tmp_path / "real" / "a.txt").read_bytes() == b"x"


def test_read_write_inside(ws: Workspace) -> None:
    assert ws.read_bytes("src/app.py") == b"print('hi')\n"
    assert ws.read_bytes("./src/../src/app.py", limit=5) == b"print"
    assert ws.write_bytes("new/dir/file.txt", b"data") == "new/dir/file.txt"
    assert (ws.root / "new" / "dir" / "file.txt").read_bytes() == b"data"
    assert ws.read_bytes(str(ws.root / "new/dir/file.txt")) == b"data"
    assert ws.relative(".") == "."
    assert ws.resolve("src") == ws.root / "src"
    assert ws.exists("src/app.py") and not ws.exists("src/nope.py")


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "/proc/self/root/etc/passwd", ".."],
)
def test_paths_outside_are_refused(ws: Workspace, path: str) -> None:
    with pytest.raises(SandboxViolation):
        ws.read_bytes(path)
    with pytest.raises(SandboxViolation):
        ws.write_bytes(path + "/new", b"x")


def test_sibling_with_common_prefix_is_outside(ws: Workspace) -> None:
    sibling = Path(str(ws.root) + "2")
    sibling.mkdir()
    (sibling / "s.txt").write_text("sibling")
    with pytest.raises(SandboxViolation):
        ws.read_bytes(str(sibling / "s.txt"))
    with pytest.raises(SandboxViolation):
        ws.read_bytes("../ws2/s.txt")


def test_symlinks_inside_are_followed_outside_refused(ws: Workspace, tmp_path: Path) -> None:
    (ws.root / "inside").symlink_to("src/app.py")
    (ws.root / "abs_inside").symlink_to(ws.root / "src")
    (ws.root / "out").symlink_to(tmp_path / "secret.txt")
    (ws.root / "outdir").symlink_to(tmp_path)
    (ws.root / "proc").symlink_to("/proc/self/root" + str(tmp_path / "secret.txt"))
    (ws.root / "loop").symlink_to("loop")
    assert ws.read_bytes("inside") == b"print('hi')\n"
    assert ws.read_bytes("abs_inside/app.py") == b"print('hi')\n"
    assert ws.relative("inside") == "src/app.py"
    for path in ["out", "outdir/secret.txt", "proc"]:
        with pytest.raises(SandboxViolation):
            ws.read_bytes(path)
    with pytest.raises(SandboxViolation):
        ws.write_bytes("outdir/pwned.txt", b"x")
    assert not (tmp_path / "pwned.txt").exists()
    with pytest.raises(SandboxViolation, match="symbolic links"):
        ws.read_bytes("loop")
    # writing through a link inside the workspace replaces the target, keeps the link
    ws.write_bytes("inside", b"new\n")
    assert (ws.root / "inside").is_symlink()
    assert (ws.root / "src" / "app.py").read_bytes() == b"new\n"


def test_hard_links_are_refused(ws: Workspace, tmp_path: Path) -> None:
    os.link(tmp_path / "secret.txt", ws.root / "hl.txt")
    with pytest.raises(SandboxViolation, match="hard links"):
        ws.read_bytes("hl.txt")
    with pytest.raises(SandboxViolation, match="hard links"):
        ws.write_bytes("hl.txt", b"overwritten")
    assert (tmp_path / "secret.txt").read_text() == "TOP-SECRET\n"


def test_special_files_are_refused(ws: Workspace) -> None:
    os.mkfifo(ws.root / "fifo")
    with pytest.raises(SandboxViolation, match="not a regular file"):
        ws.read_bytes("fifo")  # does not block on the pipe


def test_nul_bytes_and_directories(ws: Workspace) -> None:
    with pytest.raises(SandboxViolation):
        ws.read_bytes("src\0/app.py")
    with pytest.raises(IsADirectoryError):
        ws.read_bytes("src")
    with pytest.raises(IsADirectoryError):
        ws.write_bytes("src", b"x")
    with pytest.raises(FileNotFoundError):
        ws.read_bytes("nope/file")
    with pytest.raises(NotADirectoryError):
        ws.read_bytes("src/app.py/x")


def test_write_is_atomic_and_keeps_mode(ws: Workspace) -> None:
    target = ws.root / "src" / "app.py"
    target.chmod(0o750)
    ws.write_bytes("src/app.py", b"v2")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.read_bytes() == b"v2"
    assert sorted(p.name for p in (ws.root / "src").iterdir()) == ["app.py"]  # no temp left


def test_mkdir_list_and_walk(ws: Workspace) -> None:
    assert ws.mkdir("a/b/c") == "a/b/c"
    assert ws.mkdir("a/b/c") == "a/b/c"
    (ws.root / "link").symlink_to("src")
    names = [(e.path, e.kind) for e in ws.list_dir(".")]
    assert names == [("a", "dir"), ("link", "symlink"), ("src", "dir")]
    walked = [e.path for e in ws.walk(".")]
    assert "a/b/c" in walked and "src/app.py" in walked
    assert not any(p.startswith("link/") for p in walked)  # symlinked dirs are not entered
    assert len(list(ws.walk(".", max_entries=2))) == 2
    with pytest.raises(FileExistsError):
        ws.mkdir("src/app.py")


def test_race_swapping_a_file_for_a_link_is_caught(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the check (lstat) and the use (open), the file becomes a link to a secret."""
    (ws.root / "swap.txt").write_text("harmless")
    real_stat = os.stat

    def stat_then_swap(path: object, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]  # passthrough
        if path == "swap.txt":
            (ws.root / "swap.txt").unlink()
            (ws.root / "swap.txt").symlink_to(tmp_path / "secret.txt")
        return result

    monkeypatch.setattr(os, "stat", stat_then_swap)
    with pytest.raises(SandboxViolation, match="changed"):
        ws.read_bytes("swap.txt")


def test_race_twin_check_then_open_leaks(tmp_path: Path) -> None:
    """The same swap against a realpath-check-then-open implementation leaks the secret."""
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    (root / "swap.txt").write_text("harmless")

    def naive_read(path: str) -> str:
        real = os.path.realpath(root / path)
        if not real.startswith(str(root) + os.sep):
            raise PermissionError(path)
        (root / "swap.txt").unlink()  # the race window, made deterministic
        (root / "swap.txt").symlink_to(tmp_path / "secret.txt")
        return (root / path).read_text()

    assert naive_read("swap.txt") == "TOP-SECRET"


def test_replaced_root_is_detected(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root)
    root.rename(tmp_path / "old")
    root.mkdir()
    with pytest.raises(SandboxViolation, match="replaced"):
        ws.read_bytes("x")


def test_race_swapping_a_directory_for_a_link_is_caught(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory on the way is replaced by a link to the outside after it was checked."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app.py").write_text("OUTSIDE")
    real_stat = os.stat

    def stat_then_swap(path: object, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]  # passthrough
        if path == "src" and not (ws.root / "src").is_symlink():
            (ws.root / "src").rename(ws.root / "src-moved")
            (ws.root / "src").symlink_to(outside)
        return result

    monkeypatch.setattr(os, "stat", stat_then_swap)
    with pytest.raises(SandboxViolation, match="changed"):
        ws.read_bytes("src/app.py")
    with pytest.raises(SandboxViolation):
        ws.write_bytes("src/app.py", b"pwned")
    assert (outside / "app.py").read_text() == "OUTSIDE"
