"""The run package's modules import each other downward only: no circle, none through `legato.run`.

A module of `legato.run` that imports from the package itself (`from legato.run import x`)
closes a circle with `legato/run/__init__.py`, which imports every part. Read with `ast`
(runtime imports, at any depth; what is imported only for type checking is left out).
"""

from __future__ import annotations

import ast
from pathlib import Path

import legato.run

RUN = Path(legato.run.__file__).parent


def _imports(source: str) -> set[str]:
    """The `legato.run` modules a module's source imports at run time."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            module = node.module or ""
            if module == "legato.run" or module.startswith("legato.run."):
                found.add(module)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(a.name for a in node.names if a.name.startswith("legato.run"))

    Visitor().visit(ast.parse(source))
    return found


def _graph(sources: dict[str, str]) -> dict[str, set[str]]:
    return {name: _imports(text) - {name} for name, text in sources.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    circles: list[list[str]] = []

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt in path:
                circles.append([*path[path.index(nxt) :], nxt])
            elif len(path) < len(graph):
                walk([*path, nxt])

    for name in graph:
        walk([name])
    return circles


def _sources() -> dict[str, str]:
    sources: dict[str, str] = {}
    for path in sorted(RUN.glob("*.py")):
        name = "legato.run" if path.stem == "__init__" else f"legato.run.{path.stem}"
        sources[name] = path.read_text(encoding="utf-8")
    return sources


def test_no_module_of_the_run_package_imports_it_back_or_closes_a_circle() -> None:
    graph = _graph(_sources())
    assert [name for name, edges in graph.items() if "legato.run" in edges] == []
    assert _circles(graph) == []


def test_twin_the_old_handle_import_is_caught() -> None:
    """`_handle` reaching the cancel registry through the package (as it did) is a circle."""
    sources = _sources()
    sources["legato.run._handle"] += "\nfrom legato.run import _cancel\n"
    graph = _graph(sources)
    assert [name for name, edges in graph.items() if "legato.run" in edges] == [
        "legato.run._handle"
    ]
    assert ["legato.run", "legato.run._handle", "legato.run"] in _circles(graph)
