"""The layers of DESIGN.md, kept: no upward import and no import circle in src/legato.

An `ast` scan of every module of the package. A module is one file; a package's
`__init__.py` is the package's module, its other files are modules of their own. Every
import counts, wherever it is written:

- at module level, inside a function, and under `if TYPE_CHECKING:` alike. A function-level
  import defers a runtime edge, it does not remove it. A `TYPE_CHECKING` import is not a
  runtime edge (Python never runs it), and it counts all the same: the layers say what a
  module may know, and naming a type from a layer above (or from a module that imports
  you) is knowing it. So neither kind of import can hide a circle or an upward reach.
- relative imports are resolved against the importing module's package;
  `from package import submodule` is an import of the submodule.

The rule: a module imports only from its own layer or the layers below, and the import
graph has no circle, inside a layer either. The top-level `legato/__init__.py` re-exports
names from every layer and is exempt as an importer; importing it from inside the package
counts as reaching above every layer. docs/development.md says how to place a new module
and how to break a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
TOP = "legato"

#: Bottom to top; the name after `legato.` (a module or a package) places a module.
LAYERS: dict[str, tuple[str, ...]] = {
    "foundation": (
        "messages",
        "events",
        "_events",
        "exceptions",
        "_requests",
        "_version",
        "_values",
    ),
    "models": ("models", "simulator", "testing"),
    "resources": ("tools", "sandbox", "context", "memory", "store", "coherence"),
    "policy": (
        "effects",
        "_effects_parts",
        "_gate_record",
        "_gate_state",
        "_gate_approvals",
        "_gate_outcomes",
        "approvals",
        "_approval_decisions",
        "_approval_stores",
        "_approval_handlers",
        "budgets",
        "_budget_amounts",
        "_budget_calls",
        "contracts",
        "security",
        "injection",
        "tracing",
    ),
    "runtime": ("agent", "_agent_spec", "agent_file", "run", "spawn", "temporal"),
    "interfaces": ("cli", "web", "mcp", "evals"),
}

#: Imports allowed until another helper's branch lands; the lead deletes this at merge.
#: (importer, imported) -> who removes it. An entry no longer needed fails the test.
PENDING: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    """One import: `importer` takes from `imported`, at `line`, of a `kind`."""

    importer: str
    imported: str
    line: int
    kind: str  # "module", "function" or "type" (under `if TYPE_CHECKING:`)

    def __str__(self) -> str:
        where = self.importer.replace(".", "/")
        return f"{self.importer} -> {self.imported}  ({where}, line {self.line}, {self.kind})"


def module_name(path: Path, src: Path) -> str:
    """`legato.tools._tool` for src/legato/tools/_tool.py, `legato.tools` for its __init__."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of a module with its kind."""

    def walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for inner in child.body:
                    yield from walk(ast.Module(body=[inner], type_ignores=[]), "type")
                for inner in child.orelse:
                    yield from walk(ast.Module(body=[inner], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, "type" if kind == "type" else "function")
            else:
                yield from walk(child, kind)

    yield from walk(tree, "module")


def scan(src: Path, top: str = TOP) -> list[Edge]:
    """The imports between the package's own modules."""
    files = sorted((src / top).rglob("*.py"))
    modules = {module_name(p, src): p for p in files}

    def existing(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: list[Edge] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, kind in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                rest = len(subs) < len(node.names)
                targets = [*subs, *([base] if rest else [])]
            for target in targets:
                if target != top and not target.startswith(f"{top}."):
                    continue
                found = existing(target)
                if found is not None and found != name:
                    edges.append(Edge(name, found, node.lineno, kind))
    return edges


def layer_of(module: str, layers: Mapping[str, tuple[str, ...]]) -> int | None:
    """The index of a module's layer (the top-level package is above all), None if unplaced."""
    parts = module.split(".")
    if len(parts) == 1:
        return len(layers)
    for index, names in enumerate(layers.values()):
        if parts[1] in names:
            return index
    return None


def _cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, []).append(e.imported)
        graph.setdefault(e.imported, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def problems(
    edges: list[Edge],
    layers: Mapping[str, tuple[str, ...]] = LAYERS,
    pending: Mapping[tuple[str, str], str] = PENDING,
    top: str = TOP,
) -> list[str]:
    """Upward imports, circles, unplaced modules and stale allowances, one line each."""
    names = list(layers)
    out: list[str] = []
    allowed = [e for e in edges if (e.importer, e.imported) in pending]
    kept = [e for e in edges if e not in allowed and e.importer != top]
    for e in kept:
        mine, theirs = layer_of(e.importer, layers), layer_of(e.imported, layers)
        if mine is None:
            out.append(f"unplaced module {e.importer}: add it to a layer (docs/development.md)")
        elif theirs is not None and theirs > mine:
            above = "the top-level package" if theirs == len(names) else names[theirs]
            out.append(f"upward import, {names[mine]} -> {above}: {e}")
    for component in _cycles(kept):
        inside = [str(e) for e in kept if e.importer in component and e.imported in component]
        out.append(
            "import circle: " + " <-> ".join(component) + "".join(f"\n    {i}" for i in inside)
        )
    used = {(e.importer, e.imported) for e in allowed}
    out += [
        f"stale PENDING entry {key} ({who}): delete it"
        for key, who in pending.items()
        if key not in used
    ]
    return sorted(set(out))


def test_src_legato_imports_only_downward_and_has_no_circle() -> None:
    found = problems(scan(SRC))
    assert not found, "layers broken (docs/development.md):\n" + "\n".join(found)


def test_every_module_has_a_layer() -> None:
    # a module that imports nothing of legato is still placed (the scan sees only importers)
    entries = (SRC / TOP).iterdir()
    tops = {
        p.name.removesuffix(".py")
        for p in entries
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    placed = {name for names in LAYERS.values() for name in names}
    assert sorted(tops - placed - {"__init__"}) == []


# The checker on small packages written for the purpose: it must see what it guards against.


def _package(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


TINY = {"low": ("base",), "high": ("app",)}


def _check(root: Path) -> list[str]:
    return problems(scan(root, "pkg"), TINY, {}, "pkg")


def test_twin_a_clean_package_passes(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.app import run\n",
            "base/__init__.py": "from pkg.base._a import A\n",
            "base/_a.py": "from . import _b\nA = _b.B\n",
            "base/_b.py": "B = 1\n",
            "app.py": "from pkg.base import A\ndef run():\n    return A\n",
        },
    )
    assert _check(root) == []


def test_twin_an_upward_import_fails_even_inside_a_function(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "base.py": "def f():\n    from pkg.app import run\n    return run\n",
            "app.py": "from pkg.base import f\ndef run():\n    return f\n",
        },
    )
    found = _check(root)
    assert any(p.startswith("upward import, low -> high: pkg.base -> pkg.app") for p in found)
    assert any("function" in p for p in found)


def test_twin_a_circle_fails_even_through_type_checking_and_relative_imports(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "base/__init__.py": "from ._a import A\n",
            "base/_a.py": "from pkg.base._b import B\nA = B\n",
            "base/_b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from ._a import A\nB = 1\n"
            ),
        },
    )
    found = _check(root)
    assert any(p.startswith("import circle: pkg.base._a <-> pkg.base._b") for p in found), found
    assert any("type" in p for p in found)


def test_twin_a_package_init_importing_back_is_a_circle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "base/__init__.py": "from pkg.base._a import A\n",
            "base/_a.py": "from pkg.base import helper\nA = 1\n",
            "base/helper.py": "",
        },
    )
    assert _check(root) == []  # `from package import submodule` names the submodule
    (root / "pkg" / "base" / "_a.py").write_text("from pkg.base import A as _\nA = 1\n")
    assert any(p.startswith("import circle: pkg.base <-> pkg.base._a") for p in _check(root))


def test_twin_an_unplaced_module_and_a_stale_allowance_fail(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"__init__.py": "", "base.py": "", "odd.py": "from pkg.base import x\n"},
    )
    found = problems(scan(root, "pkg"), TINY, {("pkg.app", "pkg.base"): "someone"}, "pkg")
    assert any(p.startswith("unplaced module pkg.odd") for p in found)
    assert any(p.startswith("stale PENDING entry ('pkg.app', 'pkg.base')") for p in found)


def test_twin_the_top_level_package_is_exempt_but_not_importable_from_inside(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {"__init__.py": "from pkg.app import run\n", "app.py": "import pkg\nrun = 1\n"},
    )
    found = _check(root)
    assert any("high -> the top-level package: pkg.app -> pkg" in p for p in found), found
