"""Holes an adversarial user found in the sandbox (issue 13), each closed, each with its twin.

- a set-uid plant: as root, `chmod 4755` on a copy of `/bin/sh` in the workspace;
- memory across processes: several processes that each stay under the limit, together not;
- memory in the private `/tmp`: big files in a tmpfs held no process accountable;
- `sandbox="none"`: a `setsid` grandchild left the process group and survived cancellation.

Each twin switches one protection off and shows the hole, so the tests can fail.
"""

from __future__ import annotations

import asyncio
import os
import random
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from sandbox_helpers import Scene, processes_with

import legato.sandbox._runner as runner_module
from legato.sandbox import BubblewrapRunner, Limits, UnsandboxedRunner, Workspace, python_paths
from legato.sandbox._cgroup import CallCgroup
from legato.sandbox._seccomp import setid_filter_supported

SH = "/bin/sh"
MiB = 1 << 20


def marker() -> str:
    """A unique `sleep` duration that tags a process in the process table."""
    return f"{random.randint(500, 900)}.{random.randint(10**8, 10**9)}"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the set-uid plant matters as root")

PLANTS = {
    "chmod 4755": "cp /bin/sh plant && chmod 4755 plant",
    "chmod u+s": "cp /bin/sh plant && chmod u+s plant",
    "chmod g+s": "cp /bin/sh plant && chmod g+s plant",
    "python os.chmod": ("cp /bin/sh plant && {py} -I -c \"import os; os.chmod('plant', 0o6755)\""),
    "python os.open with a set-id mode": (
        "{py} -I -c \"import os; os.close(os.open('plant', os.O_CREAT | os.O_WRONLY, 0o4755))\""
    ),
    "install -m 4755": "install -m 4755 /bin/sh plant",
    "mkdir -m 2775 (set-gid directory)": "mkdir -m 2775 plant",
}
"""Ways to leave a set-id file in the workspace (set-uid or set-gid bits on a host-root file)."""


def _set_id(path: Path) -> bool:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    return bool(st.st_mode & (stat.S_ISUID | stat.S_ISGID))


async def _plant(scene: Scene, command: str) -> tuple[bool, str]:
    interpreter, prefixes = python_paths()
    runner = BubblewrapRunner(Workspace(scene.root), read_only_paths=prefixes)
    result = await runner.run([SH, "-c", command.format(py=interpreter)])
    plant = scene.root / "plant"
    through = _set_id(plant) and plant.lstat().st_uid == 0
    if plant.is_dir():
        plant.rmdir()
    else:
        plant.unlink(missing_ok=True)
    return through, result.render()


@needs_root
@pytest.mark.skipif(not setid_filter_supported(), reason="no set-id filter for this machine")
async def test_set_id_plants_never_leave_a_root_owned_set_id_file(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    results = {name: await _plant(scene, command) for name, command in PLANTS.items()}
    with capsys.disabled():
        stopped = sum(not through for through, _ in results.values())
        print(f"\nset-id plants: {stopped}/{len(results)} stopped")
    assert [name for name, (through, _) in results.items() if through] == []
    chmod_4755 = results["chmod 4755"][1]
    assert "Operation not permitted" in chmod_4755, chmod_4755


@needs_root
async def test_set_id_plant_twin_without_the_filter(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "_SETID_FILTER", False)
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", False)  # it drops set-id bits too
    through, out = await _plant(scene, PLANTS["chmod 4755"])
    assert through, out


@needs_root
async def test_without_a_filter_set_id_bits_are_stripped_after_the_call(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On an architecture without the filter (simulated here), the documented downgrade."""

    def no_filter(**_: bool) -> None:
        return None

    monkeypatch.setattr(runner_module, "seccomp_filter", no_filter)
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", False)  # it drops set-id bits too
    with caplog.at_level("WARNING", logger="legato.sandbox"):
        through, out = await _plant(scene, PLANTS["chmod 4755"])
    assert not through, out
    assert "exit code 0" in out  # the command itself succeeded in making it...
    assert "cleared set-id bits" in caplog.text  # ...and the runner cleared it afterwards
    assert "stripped from the workspace after each command" in caplog.text


async def test_set_id_filter_leaves_ordinary_modes_alone(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run(
        [SH, "-c", "echo x > f && chmod 755 f && mkdir -m 700 d && touch d/g && stat -c %a f d"]
    )
    assert result.ok, result.render()
    assert result.stdout.split() == ["755", "700"]


def _memory_cgroup_or_skip() -> None:
    group = CallCgroup.create(memory_bytes=64 * MiB)
    if group is None or not group.memory:
        if group is not None:
            group.close()
        pytest.skip("this host delegates no memory cgroup (the downgrade is tested below)")
    group.close()


HOLDERS = 4
HOLD_MIB = 48
"""Each holder process touches this much; the call's limit is below their sum."""


def _holders_command(interpreter: str, tag: str) -> str:
    code = (
        f"import sys, time; block = b'x' * ({HOLD_MIB} * {MiB}); "
        "print('held', flush=True); time.sleep(float(sys.argv[1])); print('done', flush=True)"
    )
    # every holder holds its block for a while, so that all hold at once; the OOM killer
    # may pick any of them (one that already said "held"), so survivors are counted at the end
    one = f'{interpreter} -I -c "{code}" {tag}'
    return " & ".join([one] * HOLDERS) + " & wait"


async def test_memory_limit_covers_every_process_of_a_call(scene: Scene) -> None:
    _memory_cgroup_or_skip()
    interpreter, prefixes = python_paths()
    runner = BubblewrapRunner(Workspace(scene.root), read_only_paths=prefixes)
    limit = Limits(timeout=60, memory_bytes=128 * MiB, max_processes=32)
    result = await runner.run([SH, "-c", _holders_command(interpreter, "3")], limits=limit)
    # each holder alone fits (48 MiB + an interpreter); four together do not
    assert result.stdout.count("done") < HOLDERS, result.render()


async def test_memory_limit_twin_per_process_only(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(runner_module, "_CALL_CGROUP", False)
    interpreter, prefixes = python_paths()
    runner = BubblewrapRunner(Workspace(scene.root), read_only_paths=prefixes)
    limit = Limits(timeout=60, memory_bytes=128 * MiB, max_processes=32)
    result = await runner.run([SH, "-c", _holders_command(interpreter, "0.5")], limits=limit)
    assert result.stdout.count("done") == HOLDERS, result.render()


async def test_no_memory_cgroup_is_a_logged_downgrade(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import legato.sandbox._cgroup as cgroup_module

    def no_parents(controller: str) -> list[object]:
        return []

    monkeypatch.setattr(cgroup_module, "cgroup_parents", no_parents)
    runner = BubblewrapRunner(Workspace(scene.root))
    with caplog.at_level("WARNING", logger="legato.sandbox"):
        for _ in range(2):
            result = await runner.run([SH, "-c", "true"], limits=Limits(memory_bytes=64 * MiB))
            assert result.ok
    warning = "memory_bytes=67108864 is enforced per process (RLIMIT_AS)"
    assert caplog.text.count(warning) == 1  # logged, once per runner


async def test_private_tmp_is_bounded(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    command = (
        "n=0; while [ $n -lt 25 ]; do head -c 8388608 /dev/zero > /tmp/f$n || break; "
        "n=$((n + 1)); done; echo files=$n; du -sk /tmp | cut -f1"
    )
    result = await runner.run([SH, "-c", command], limits=Limits(tmp_bytes=32 * MiB))
    lines = result.stdout.split()
    assert lines[0] in {"files=3", "files=4"}, result.render()  # 32 MiB / 8 MiB files
    assert int(lines[1]) <= 33 * 1024  # 32 MiB of data, and the tmpfs's own blocks
    assert "No space left on device" in result.stderr


async def test_a_bubblewrap_without_size_is_a_logged_downgrade(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    assert (await runner.run([SH, "-c", "true"])).ok  # probed: this one can size a tmpfs
    runner._sized = False  # as an older bubblewrap would be
    with caplog.at_level("WARNING", logger="legato.sandbox"):
        result = await runner.run([SH, "-c", "df -k /tmp | tail -1"])
    assert result.ok, result.render()
    assert "cannot size a tmpfs" in caplog.text


async def test_private_tmp_twin_unbounded(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    command = (
        "n=0; while [ $n -lt 8 ]; do head -c 8388608 /dev/zero > /tmp/f$n || break; "
        "n=$((n + 1)); done; echo files=$n"
    )
    result = await runner.run([SH, "-c", command], limits=Limits(tmp_bytes=None))
    assert result.stdout.split() == ["files=8"], result.render()


GRANDCHILD_TRIALS = 10


async def _cancel_with_a_setsid_grandchild(scene: Scene) -> list[int]:
    """Cancel a `sandbox="none"` command whose grandchild left its group; the survivors."""
    tag = marker()
    runner = UnsandboxedRunner(Workspace(scene.root))
    detached = scene.root / ".detached"
    detached.unlink(missing_ok=True)
    # the grandchild announces itself once it has left the command's session and group
    command = f"(setsid sh -c 'touch .detached; exec sleep {tag}' &); sleep {tag}"
    task = asyncio.create_task(runner.run([SH, "-c", command], limits=Limits(timeout=60)))
    while not detached.exists():  # noqa: ASYNC110 - polling the file system
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    survivors = processes_with(tag)
    for pid in survivors:  # the twin's leftovers, by pid
        os.kill(pid, 9)
    return survivors


async def test_unsandboxed_cancel_kills_setsid_grandchildren(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    survived = [bool(await _cancel_with_a_setsid_grandchild(scene)) for _ in range(10)]
    with capsys.disabled():
        print(f"\nsetsid grandchild killed on cancel: {survived.count(False)}/{len(survived)}")
    assert not any(survived)


async def test_unsandboxed_timeout_and_exit_kill_setsid_grandchildren(
    scene: Scene, process_table: Callable[[str], list[int]]
) -> None:
    tag = marker()
    runner = UnsandboxedRunner(Workspace(scene.root))
    timed = await runner.run(
        [SH, "-c", f"(setsid sleep {tag} &); sleep {tag}"], limits=Limits(timeout=0.5)
    )
    assert timed.timed_out
    assert process_table(tag) == []
    done = await runner.run([SH, "-c", f"(setsid sleep {tag} > /dev/null 2>&1 &); exit 3"])
    assert done.exit_code == 3
    assert process_table(tag) == []
    killed = await runner.run([SH, "-c", "kill -9 $$"])
    assert killed.exit_code == -9


async def test_unsandboxed_grandchild_twin_without_the_subreaper(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "_REAP_TREE", False)
    assert await _cancel_with_a_setsid_grandchild(scene) != []
