"""Layers point down: every import in ``src/plait``, parsed with ``ast``, checked against the layer
table in the package docstring (``plait/__init__.py``). No upward import, no import between two
batteries, no import cycle. Imports inside functions count; ``TYPE_CHECKING`` imports are checked
for direction but are not cycle edges."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import plait

SRC = Path(plait.__file__).parent
BATTERIES = "batteries"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    typing_only: bool


def layer_table() -> dict[str, tuple[int, str]]:
    """``{top-level name: (rank, layer)}`` from the docstring's table; rank 0 is the lowest."""
    doc = plait.__doc__ or ""
    block = doc.split("::", 1)[1].strip("\n").splitlines()
    rows = [line.split() for line in block if line.startswith("    ") and line.strip()]
    table: dict[str, tuple[int, str]] = {}
    for rank, (layer, *names) in enumerate(reversed(rows)):
        for name in names:
            table[name] = (rank, layer)
    return table


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, typing_only: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node under ``node``, with whether it sits under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for stmt in child.body:
                yield stmt, True
                yield from _walk(stmt, True)
            for stmt in child.orelse:
                yield stmt, typing_only
                yield from _walk(stmt, typing_only)
            continue
        yield child, typing_only
        yield from _walk(child, typing_only)


def edges(name: str, is_package: bool, source: str, known: set[str]) -> Iterator[Edge]:
    """Every ``plait`` import in ``source`` (module ``name``); ``from pkg import sub`` names
    ``pkg.sub`` when that is a module."""
    package = name if is_package else name.rsplit(".", 1)[0]
    for node, typing_only in _walk(ast.parse(source), False):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            if target == "plait" or target.startswith("plait."):
                yield Edge(name, target, getattr(node, "lineno", 0), typing_only)


def top(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def all_edges() -> list[Edge]:
    found = modules()
    known = set(found)
    return [
        edge
        for name, path in found.items()
        for edge in edges(name, path.name == "__init__.py", path.read_text("utf-8"), known)
    ]


def test_the_docstring_table_names_every_top_level_module() -> None:
    table = layer_table()
    assert table["messages"][0] == 0 and table["cli"][1] == "cli"
    exempt = {"plait", "__main__"}  # the package root and ``python -m plait`` sit above all
    unplaced = sorted({top(m) for m in modules()} - set(table) - exempt)
    assert not unplaced, f"add {unplaced} to the layer table in plait/__init__.py's docstring"


def test_no_module_imports_a_higher_layer_or_another_battery() -> None:
    table = layer_table()
    wrong = []
    for edge in all_edges():
        source, target = top(edge.source), top(edge.target)
        if source in ("plait", "__main__") or source == target:
            continue
        if target == "plait":
            wrong.append(f"{edge.source}:{edge.line} imports the package root; import the module")
            continue
        (src_rank, src_layer), (dst_rank, dst_layer) = table[source], table[target]
        if dst_rank > src_rank:
            wrong.append(
                f"{edge.source}:{edge.line} ({src_layer}) imports {edge.target} "
                f"({dst_layer}, higher)"
            )
        elif src_layer == dst_layer == BATTERIES:
            wrong.append(f"{edge.source}:{edge.line} imports another battery: {edge.target}")
    assert not wrong, "\n".join(wrong)


def test_the_import_graph_has_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for edge in all_edges():
        if not edge.typing_only and edge.target != edge.source:
            graph.setdefault(edge.source, set()).add(edge.target)
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_checker_sees_relative_lazy_and_typing_only_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .pairs import x\n"
        "if TYPE_CHECKING:\n    from plait.cli import app\n"
        "def f():\n    from plait.skills import catalog\n"
    )
    known = {"plait.context.pairs", "plait.skills.catalog"}
    found = [(e.target, e.typing_only) for e in edges("plait.context.x", False, source, known)]
    assert found == [
        ("plait.context.pairs", False),
        ("plait.cli", True),
        ("plait.skills.catalog", False),
    ]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None
