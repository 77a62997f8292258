"""The escape corpus: attacks an agent's tool calls could make, each of which must be stopped.

Part A attacks the file tools (path traversal, absolute paths, sibling prefixes, symlinks,
hard links (read and grep), `/proc/self/root`, host secrets, writes outside, smuggled grep/glob
paths, a `core.fsmonitor` for the host's git).
Part B attacks the shell and Python tools (host secrets, writes outside, hard links made
from inside, `/proc/self/root`, the network, a fork bomb, a memory bomb, endless output, a
process left running after the tool returns, set-id plants, memory across processes, the
private `/tmp`, a `setsid` grandchild, a git hook for the host's git, a host unix socket in
the workspace, writes past the workspace's quota).

Each attack returns True when it got through. The corpus runs once with the protections on
(every attack must be stopped; the count is printed) and once with them off — file attacks
against a naive path join, command attacks with `sandbox="none"` — where every attack must
get through, so the detection itself is shown to work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import (
    Scene,
    children_of_this_process,
    host_git,
    host_server,
    host_uses_git,
    memory_cgroup_available,
    processes_with,
    workspace_bytes,
)

import legato.sandbox._runner as runner_module
from legato.exceptions import ToolError
from legato.sandbox import Limits, SandboxKind, Workspace
from legato.tools import RunContext, Tool, Toolset
from legato.tools.builtin import workspace_tools

LIMITS = Limits(
    timeout=20,
    cpu_seconds=10,
    memory_bytes=256 << 20,
    max_processes=32,
    file_size_bytes=8 << 20,
    output_bytes=64 << 10,
    tmp_bytes=32 << 20,
)
FORKS = 200
"""Processes the fork bomb tries to hold at once (bounded, so the unprotected twin is safe)."""
BOMB_BYTES = 768 << 20
"""Memory the memory bomb touches (three times the limit)."""
FLOOD_BYTES = 4 << 20
"""Bytes the endless-output attack gets through without the output cap."""
HOLDERS = 4
HOLD_BYTES = 96 << 20
"""Memory each of the holder processes touches: each fits the limit, together they do not."""
QUOTA = 16 << 20
"""Every corpus workspace has this quota; the disk-filling attack writes twice as much."""
TMP_FILES = 24
TMP_FILE_BYTES = 4 << 20
"""Files written to the private /tmp: 96 MiB in all, three times its size."""


# -- calling tools the way the loop does -------------------------------------------------------


class Tools:
    """The workspace toolset, called like the agent loop calls it (validate, then invoke)."""

    def __init__(self, toolset: Toolset) -> None:
        self._toolset = toolset

    async def __call__(self, name: str, **arguments: Any) -> str:
        """The text the model would see; tool errors become that text."""
        tool = self._toolset.get(name)
        assert isinstance(tool, Tool)
        ctx: RunContext[None] = RunContext(deps=None, run_id="corpus", tool_name=name)
        try:
            return str(await tool.invoke(tool.validate(arguments), ctx))
        except ToolError as exc:
            return f"ERROR: {exc}"


class NaiveTools:
    """File tools without confinement: `root / path`, the check many frameworks skip."""

    def __init__(self, root: Path) -> None:
        self._root = root

    async def __call__(self, name: str, **arguments: Any) -> str:
        target = self._root / str(arguments.get("path", "."))
        try:
            if name == "read_file":
                return target.read_text()
            if name == "write_file":
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(arguments["content"])
                return "written"
            if name == "edit_file":
                target.write_text(
                    target.read_text().replace(arguments["old_text"], arguments["new_text"])
                )
                return "edited"
            if name == "grep":
                files = [p for p in target.rglob("*") if p.is_file()]
                return "\n".join(line for p in files for line in p.read_text().splitlines())
            if name == "glob":
                return "\n".join(str(p) for p in self._root.glob(arguments["pattern"]))
        except OSError as exc:
            return f"ERROR: {exc}"
        raise AssertionError(name)


Call = Callable[..., Awaitable[str]]


@dataclass(frozen=True)
class Attack:
    name: str
    run: Callable[[Call, Scene], Awaitable[tuple[bool, str]]]
    """Returns whether the attack got through, and what the tool said."""
    evidence: str
    """Text the protected run must show: the attack ran and this is what stopped it."""


# -- part A: file tools ------------------------------------------------------------------------


async def traversal_read(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("read_file", path="../host-secret.txt")
    return s.secret_text in out, out


async def absolute_read(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("read_file", path=str(s.secret))
    return s.secret_text in out, out


async def sibling_prefix_read(tools: Call, s: Scene) -> tuple[bool, str]:
    sibling = Path(str(s.root) + "-backup")
    sibling.mkdir(exist_ok=True)  # noqa: ASYNC240 - test setup
    (sibling / "keys.txt").write_text(s.secret_text)
    out = await tools("read_file", path=f"../{sibling.name}/keys.txt")
    return s.secret_text in out, out


async def symlink_file_read(tools: Call, s: Scene) -> tuple[bool, str]:
    (s.root / "notes.txt").symlink_to(s.secret)
    out = await tools("read_file", path="notes.txt")
    return s.secret_text in out, out


async def symlink_dir_write(tools: Call, s: Scene) -> tuple[bool, str]:
    (s.root / "cache").symlink_to(s.outside)
    out = await tools("write_file", path="cache/pwned.txt", content="pwned")
    return (s.outside / "pwned.txt").exists(), out


async def proc_self_root_read(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("read_file", path=f"/proc/self/root{s.secret}")
    (s.root / "p").symlink_to(f"/proc/self/root{s.secret}")
    out += await tools("read_file", path="p")
    return s.secret_text in out, out


async def hard_link_read(tools: Call, s: Scene) -> tuple[bool, str]:
    os.link(s.secret, s.root / "backup.txt")
    out = await tools("read_file", path="backup.txt")
    return s.secret_text in out, out


async def hard_link_grep(tools: Call, s: Scene) -> tuple[bool, str]:
    os.link(s.secret, s.root / "backup.txt")
    out = await tools("grep", pattern="SECRET")
    return s.secret_text in out, out


async def shadow_read(tools: Call, s: Scene) -> tuple[bool, str]:
    depth = "../" * len(s.root.parts)
    out = await tools("read_file", path="/etc/shadow")
    out += await tools("read_file", path=f"{depth}etc/shadow")
    return "root:" in out, out


async def write_outside(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("write_file", path="../outside/pwned.txt", content="pwned")
    return (s.outside / "pwned.txt").exists(), out


async def edit_through_symlink(tools: Call, s: Scene) -> tuple[bool, str]:
    (s.root / "config.py").symlink_to(s.secret)
    out = await tools("edit_file", path="config.py", old_text=s.secret_text, new_text="EDITED")
    return "EDITED" in s.secret.read_text(), out


async def grep_outside(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("grep", pattern="SECRET", path="..")
    return s.secret_text in out, out


async def glob_outside(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("glob", pattern="../*")
    return "host-secret.txt" in out, out


async def fsmonitor_plant(tools: Call, s: Scene) -> tuple[bool, str]:
    host_git(s.root, "init", "-q")
    marker = s.outside / "host-git-ran-it"
    config = f"[core]\n\tfsmonitor = touch {marker}\n"
    out = await tools("write_file", path=".git/config", content=config)
    host_uses_git(s.root)
    return marker.exists(), out


FILE_ATTACKS = [
    Attack("path traversal read", traversal_read, "refused:"),
    Attack("absolute path read", absolute_read, "refused:"),
    Attack("sibling directory with the same prefix", sibling_prefix_read, "refused:"),
    Attack("symlink to a host file", symlink_file_read, "refused:"),
    Attack("write through a symlinked directory", symlink_dir_write, "refused:"),
    Attack("/proc/self/root path and link", proc_self_root_read, "refused:"),
    Attack("hard link to a host file", hard_link_read, "hard links"),
    Attack("grep through a hard link to a host file", hard_link_grep, "no matches"),
    Attack("read /etc/shadow", shadow_read, "refused:"),
    Attack("write outside the workspace", write_outside, "refused:"),
    Attack("edit a host file through a symlink", edit_through_symlink, "refused:"),
    Attack("grep outside the workspace", grep_outside, "refused:"),
    Attack("glob outside the workspace", glob_outside, "refused:"),
    Attack("a core.fsmonitor the host's git runs", fsmonitor_plant, "may not be written"),
]


# -- part B: shell and python ------------------------------------------------------------------


async def shell_secret_read(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command=f"cat {s.secret}")
    return s.secret_text in out, out


async def shell_shadow_read(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command="cat /etc/shadow")
    return "root:" in out, out


async def shell_proc_root_read(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command=f"cat /proc/self/root{s.secret}")
    return s.secret_text in out, out


async def shell_write_outside(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command=f"echo pwned > {s.outside}/pwned.txt")
    return (s.outside / "pwned.txt").exists(), out


async def shell_hard_link_from_inside(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command=f"ln {s.secret} stolen.txt && cat stolen.txt")
    return s.secret_text in out, out


@contextmanager
def listener() -> Generator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server
    finally:
        server.close()


async def python_network(tools: Call, s: Scene) -> tuple[bool, str]:
    with listener() as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            f"c = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "c.sendall(b'exfiltrated')\n"
        )
        out = await tools("python", code=code)
        server.settimeout(0)
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return False, out
        conn.close()
        return True, out


async def python_fork_bomb(tools: Call, s: Scene) -> tuple[bool, str]:
    code = (
        "import os, time\n"
        "n = 0\n"
        f"for _ in range({FORKS}):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
        "print('forked', n)\n"
    )
    out = await tools("python", code=code)
    return f"forked {FORKS}" in out, out


async def python_memory_bomb(tools: Call, s: Scene) -> tuple[bool, str]:
    code = (
        f"block = bytearray({BOMB_BYTES})\n"
        "for i in range(0, len(block), 4096):\n"
        "    block[i] = 1\n"
        "print('allocated', len(block))\n"
    )
    out = await tools("python", code=code)
    return f"allocated {BOMB_BYTES}" in out, out


async def shell_endless_output(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command=f"yes | head -c {FLOOD_BYTES}")
    return len(out) >= FLOOD_BYTES, out


async def shell_process_left_running(tools: Call, s: Scene) -> tuple[bool, str]:
    tag = f"{random.randint(500, 900)}.{random.randint(10**8, 10**9)}"
    # the detached process announces itself once it has left the tool's process group,
    # and the command waits for that, so the tool cannot return before the escape happened
    command = (
        f"(setsid sh -c 'touch .detached; exec sleep {tag}' > /dev/null 2>&1 &); "
        "for i in $(seq 500); do [ -e .detached ] && break; sleep 0.01; done; echo started"
    )
    out = await tools("shell", command=command)
    # the detached child may still be between fork and exec when the tool returns: look
    # for it for a while (a survivor can appear late; loaded machines are slow)
    survivors = processes_with(tag)
    for _ in range(40):
        if survivors:
            break
        await asyncio.sleep(0.05)
        survivors = processes_with(tag)
    for pid in survivors:  # clean up what the unprotected twin left, by pid
        os.kill(pid, 9)
    return bool(survivors), out


async def shell_set_uid_plant(tools: Call, s: Scene) -> tuple[bool, str]:
    out = await tools("shell", command="cp /bin/sh rootsh && chmod 4755 rootsh; ls -l rootsh")
    plant = s.root / "rootsh"
    if not plant.exists():
        return False, out
    st = plant.lstat()
    plant.unlink()  # never leave one behind (the unprotected twin makes a real one)
    # as root the workspace's files belong to the host's root: a set-uid root shell
    return bool(st.st_mode & 0o6000) and st.st_uid == 0, out


async def shell_git_hook_plant(tools: Call, s: Scene) -> tuple[bool, str]:
    host_git(s.root, "init", "-q")
    marker = s.outside / "host-git-ran-it"
    hook = f"#!/bin/sh\\ntouch {marker}\\n"
    out = await tools(
        "shell",
        command=(
            f"printf '{hook}' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit && "
            f"git config core.fsmonitor 'touch {marker}'"
        ),
    )
    host_uses_git(s.root)
    return marker.exists(), out


async def python_host_unix_socket(tools: Call, s: Scene) -> tuple[bool, str]:
    with host_server(s.root / "service.sock") as server:
        server.start()
        code = (
            "import socket\n"
            "c = socket.socket(socket.AF_UNIX)\n"
            "c.connect('service.sock')\n"
            "c.sendall(b'hello from the sandbox')\n"
            "print(c.recv(100))\n"
        )
        out = await tools("python", code=code)
    return server.received != [], out


async def shell_fills_the_disk(tools: Call, s: Scene) -> tuple[bool, str]:
    files = 2 * QUOTA // (4 << 20)
    out = await tools(
        "shell",
        command=f"for i in $(seq {files}); do head -c {4 << 20} /dev/zero > f$i; done; echo done",
    )
    return workspace_bytes(s.root) > QUOTA, out


async def python_memory_across_processes(tools: Call, s: Scene) -> tuple[bool, str]:
    code = (
        "import os, time\n"
        "kids = []\n"
        f"for _ in range({HOLDERS}):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        f"        block = b'x' * {HOLD_BYTES}\n"
        "        time.sleep(2)\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "held = sum(os.waitpid(k, 0)[1] == 0 for k in kids)\n"
        "print('held together', held)\n"
    )
    out = await tools("python", code=code)
    return f"held together {HOLDERS}" in out, out


async def shell_fills_private_tmp(tools: Call, s: Scene) -> tuple[bool, str]:
    where = f"/tmp/corpus-{random.getrandbits(64):016x}"
    command = (
        f"mkdir -p {where}; n=0; while [ $n -lt {TMP_FILES} ]; do "
        f"head -c {TMP_FILE_BYTES} /dev/zero > {where}/f$n || break; n=$((n + 1)); done; "
        f"echo tmp files $n; rm -rf {where}"
    )
    out = await tools("shell", command=command)
    return f"tmp files {TMP_FILES}" in out, out


def _exists(path: Path) -> bool:
    return path.exists()


async def shell_grandchild_survives_cancel(tools: Call, s: Scene) -> tuple[bool, str]:
    tag = f"{random.randint(500, 900)}.{random.randint(10**8, 10**9)}"
    command = f"(setsid sh -c 'touch .detached; exec sleep {tag}' > /dev/null 2>&1 &); sleep {tag}"

    async def call() -> str:
        return await tools("shell", command=command)

    task = asyncio.create_task(call())
    for _ in range(3000):  # the grandchild announces itself once it left the group
        if _exists(s.root / ".detached") or task.done():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    survivors = processes_with(tag)
    for pid in survivors:  # clean up what the unprotected twin left, by pid
        os.kill(pid, 9)
    return bool(survivors), "cancelled once the grandchild had detached"


COMMAND_ATTACKS = [
    Attack("shell reads a planted host secret", shell_secret_read, "No such file or directory"),
    Attack("shell reads /etc/shadow", shell_shadow_read, "cat: /etc/shadow:"),
    Attack(
        "shell reads through /proc/self/root", shell_proc_root_read, "No such file or directory"
    ),
    Attack("shell writes outside the workspace", shell_write_outside, "No such file or directory"),
    Attack(
        "shell hard-links a host file into the workspace",
        shell_hard_link_from_inside,
        "No such file or directory",
    ),
    Attack("python connects to a 127.0.0.1 listener", python_network, "ConnectionRefusedError"),
    Attack("fork bomb", python_fork_bomb, "forked "),
    Attack("memory bomb", python_memory_bomb, "MemoryError"),
    Attack("endless output", shell_endless_output, "output limit reached"),
    Attack("process left running after the tool returns", shell_process_left_running, "started"),
    Attack("shell plants a set-uid copy of /bin/sh", shell_set_uid_plant, "not permitted"),
    Attack("processes together past the memory limit", python_memory_across_processes, "held"),
    Attack("files in the private /tmp past its size", shell_fills_private_tmp, "No space left"),
    Attack("a setsid grandchild outlives a cancel", shell_grandchild_survives_cancel, "cancelled"),
    Attack("shell plants a hook the host's git runs", shell_git_hook_plant, "protected paths"),
    Attack("python reaches a host unix socket", python_host_unix_socket, "not permitted"),
    Attack("shell writes past the workspace's quota", shell_fills_the_disk, "quota"),
]
NEEDS_MEMORY_CGROUP = {"processes together past the memory limit"}
"""Stopped only where the host delegates a memory cgroup (elsewhere, a logged downgrade)."""


def command_attacks() -> list[Attack]:
    """The command attacks this host can stop (the others are named in the output)."""
    if memory_cgroup_available():
        return COMMAND_ATTACKS
    return [a for a in COMMAND_ATTACKS if a.name not in NEEDS_MEMORY_CGROUP]


# -- running the corpus ------------------------------------------------------------------------


def fresh_scene(base: Path, index: int) -> Scene:
    top = base / f"case{index}"
    (top / "ws").mkdir(parents=True)
    (top / "outside").mkdir()
    token = f"SECRET-{random.getrandbits(64):016x}"
    secret = top / "host-secret.txt"
    secret.write_text(token + "\n")
    secret.chmod(0o600)
    return Scene(root=top / "ws", secret=secret, secret_text=token, outside=top / "outside")


def protected(scene: Scene, sandbox: SandboxKind = "bwrap", limits: Limits = LIMITS) -> Call:
    workspace = Workspace(scene.root, quota_bytes=QUOTA)
    return Tools(workspace_tools(workspace, sandbox=sandbox, limits=limits))


async def run_corpus(
    attacks: list[Attack], make_tools: Callable[[Scene], Call], base: Path
) -> dict[str, tuple[bool, str]]:
    outcomes: dict[str, tuple[bool, str]] = {}
    for index, attack in enumerate(attacks):
        scene = fresh_scene(base, index)
        outcomes[attack.name] = await attack.run(make_tools(scene), scene)
    return outcomes


def report(
    capsys: pytest.CaptureFixture[str], title: str, results: dict[str, tuple[bool, str]]
) -> None:
    with capsys.disabled():
        print()
        for name, (through, _) in results.items():
            print(f"  {'GOT THROUGH' if through else 'stopped':<12} {name}")
        print(title)


async def test_escape_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = await run_corpus(FILE_ATTACKS, protected, tmp_path / "files")
    commands = command_attacks()
    results |= await run_corpus(commands, protected, tmp_path / "commands")
    stopped = sum(not through for through, _ in results.values())
    skipped = len(COMMAND_ATTACKS) - len(commands)
    note = f" ({skipped} left out: no memory cgroup on this host)" if skipped else ""
    report(capsys, f"escape corpus: {stopped}/{len(results)} stopped{note}", results)
    assert [name for name, (through, _) in results.items() if through] == []
    # each attack really ran and was stopped for the expected reason
    for attack in FILE_ATTACKS + commands:
        assert attack.evidence in results[attack.name][1], (attack.name, results[attack.name][1])
    assert children_of_this_process() == []


async def test_escape_corpus_twin_without_protection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the protections off the same attacks get through: the corpus can fail."""
    if os.geteuid() != 0:
        pytest.skip("reading /etc/shadow unprotected needs root")
    # sandbox="none" reaps every descendant now; its twin runs without the subreaper
    monkeypatch.setattr(runner_module, "_REAP_TREE", False)

    def naive(scene: Scene) -> Call:
        return NaiveTools(scene.root)

    def unsandboxed(scene: Scene) -> Call:
        # the output cap is the reader's protection, so it is lifted here too
        return protected(scene, "none", LIMITS.replace(output_bytes=FLOOD_BYTES * 2))

    results = await run_corpus(FILE_ATTACKS, naive, tmp_path / "files")
    results |= await run_corpus(COMMAND_ATTACKS, unsandboxed, tmp_path / "commands")
    through = sum(ok for ok, _ in results.values())
    report(
        capsys, f"escape corpus without protection: {through}/{len(results)} got through", results
    )
    assert [name for name, (ok, _) in results.items() if not ok] == []
