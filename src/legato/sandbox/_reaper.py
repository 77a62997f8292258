"""A subreaper for `sandbox="none"`: every descendant of a command dies with it.

Killing a command's process group misses whatever left the group: `setsid cmd &`, a
daemon that double-forks. On the host there is no PID namespace to end, so the command
runs under a small Python process that declares itself a *child subreaper*
(`prctl(PR_SET_CHILD_SUBREAPER)`): every orphan among the command's descendants is
re-parented to it instead of to init, whatever session or group it moved to. When the
command's main process exits, or when legato sends `SIGTERM` (timeout, output cap,
cancellation, or legato's own death through `PR_SET_PDEATHSIG`), the subreaper kills its
children until it has none left — orphans keep arriving as their parents die, so it loops
until `waitpid` reports no child — and exits with the command's status.

Limits: a descendant that the subreaper cannot signal (a set-uid program run by a non-root
user) survives; a process that asks another service to start something (a systemd unit,
`at`) is not a descendant.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["reaped"]

_SCRIPT = r"""
import ctypes, os, signal, sys

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)                  # PR_SET_CHILD_SUBREAPER
libc.prctl(1, signal.SIGTERM, 0, 0, 0)      # PR_SET_PDEATHSIG
signal.signal(signal.SIGTERM, stop)
me = os.getpid()

def children():
    found = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                found.update(int(p) for p in f.read().split())
        return found
    except OSError:
        pass
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == me:
                        found.add(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found

status = None
main = None
try:
    main = os.fork()
    if main == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        except OSError as exc:
            os.write(2, f"{sys.argv[1]}: {exc.strerror}\n".encode())
        os._exit(127)
    if os.getppid() == 1:
        raise Stop
    while status is None:
        pid, code = os.waitpid(-1, 0)
        if pid == main:
            status = code
except Stop:
    pass
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    for pid in children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        pid, code = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if pid == main and status is None:
        status = code
if status is None:
    os._exit(137)
if os.WIFSIGNALED(status):
    try:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # SIGKILL and SIGSTOP cannot be caught anyway
    os.kill(me, os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def reaped(argv: Sequence[str]) -> list[str]:
    """`argv` run under the subreaper (this interpreter, isolated, without site imports)."""
    return [sys.executable, "-I", "-S", "-c", _SCRIPT, *argv]
