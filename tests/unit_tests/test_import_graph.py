"""No import cycle inside the package: every import counts, at module level or in a function.

The graph is read from the source with ``ast``, so a lazy import inside a function (which hides
a cycle from a plain ``import``) and an import for type checking only count as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import langchain_gated_parent

PACKAGE = langchain_gated_parent.__name__
ROOT = Path(langchain_gated_parent.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package to the package modules it imports (anywhere in its body)."""
    sources = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in sources}
    for name, path in sources.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package upwards
                    anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from pkg import mod` imports the module pkg.mod; `from pkg import name`, pkg.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources else base
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in sources and t != name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as ``[a, b, ..., a]``, or ``None`` when it has none."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.retriever" in graph[f"{PACKAGE}.index"]  # imported inside as_retriever
    assert f"{PACKAGE}.records" in graph[f"{PACKAGE}.retriever"]
    assert f"{PACKAGE}.index" not in graph[f"{PACKAGE}.retriever"]


def test_a_cycle_is_found_and_named(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def late():\n    from pkg.c import x\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    (package / "d.py").write_text("import pkg.a\n")
    graph = import_graph(package)
    assert graph["pkg.d"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    assert find_cycle({"x": {"y"}, "y": set()}) is None
