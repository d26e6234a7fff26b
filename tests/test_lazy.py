"""Lazy package exports: every table agrees with its TYPE_CHECKING imports and ``__all__``,
every name resolves to the defining module's object, and importing a package loads only what it
must (checked in fresh interpreters through ``sys.modules``, never by timing)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from plait.lazy import lazy_exports

LAZY_PACKAGES = [
    "plait",
    "plait.models",
    "plait.stores",
    "plait.backends",
    "plait.skills",
    "plait.skills.managed",
]
HEAVY = ["pydantic", "pydantic_core", "typer", "rich", "click", "yaml", "openai", "anthropic"]


def declared(package: ModuleType) -> tuple[dict[str, str], dict[str, str]]:
    """(names imported under TYPE_CHECKING, names in the lazy table), each name -> module."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text())
    typed: dict[str, str] = {}
    table: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                typed.update((alias.name, imp.module) for alias in imp.names)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "not TYPE_CHECKING":
            (assign,) = node.body
            assert isinstance(assign, ast.Assign) and isinstance(assign.value, ast.Call)
            assert ast.unparse(assign.value.func) == "lazy_exports"
            exports = ast.literal_eval(assign.value.args[1])
            table.update((n, module) for module, names in exports.items() for n in names)
    return typed, table


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_lazy_table_matches_the_type_checking_imports_and_all(name: str) -> None:
    package = importlib.import_module(name)
    typed, table = declared(package)
    assert table, f"{name} declares no lazy exports"
    assert typed == table
    eager = {n for n in package.__all__ if n not in table}
    assert all(n in vars(package) for n in eager), f"{name}.__all__ names an unknown name"


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_export_is_the_defining_modules_object(name: str) -> None:
    package = importlib.import_module(name)
    _, table = declared(package)
    for export, module in table.items():
        assert getattr(package, export) is getattr(importlib.import_module(module), export)
    assert set(table) <= set(dir(package))


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_no_export_shares_its_name_with_a_submodule(name: str) -> None:
    # Once imported, a submodule is an attribute of its package and would shadow the export.
    package = importlib.import_module(name)
    _, table = declared(package)
    assert package.__file__ is not None
    folder = Path(package.__file__).parent
    submodules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir()}
    assert sorted(set(table) & submodules) == []


def test_unknown_names_raise_attribute_error() -> None:
    import plait

    with pytest.raises(AttributeError, match="module 'plait' has no attribute 'Agnet'"):
        _ = plait.Agnet  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        from plait import Agnet  # type: ignore[attr-defined]  # noqa: F401


def test_a_name_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="exports 'Agent' from a and b"):
        lazy_exports("plait", {"a": ("Agent",), "b": ("Agent",)})


def loaded_after(code: str) -> set[str]:
    """Module names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


def test_import_plait_loads_no_dependency_and_no_layer() -> None:
    modules = loaded_after("import plait")
    assert heavy(modules) == set()
    assert {m for m in modules if m.startswith("plait")} == {
        "plait",
        "plait.__about__",
        "plait.errors",
        "plait.lazy",
    }
    assert "asyncio" not in modules


def test_the_agent_loads_without_pydantic_providers_stores_on_disk_or_skills() -> None:
    modules = loaded_after("from plait import Agent, ScriptedModel, tool")
    assert heavy(modules) == set()
    unwanted = ("plait.models.openai", "plait.models.anthropic", "plait.skills", "plait.cli")
    assert [m for m in modules if m.startswith(unwanted)] == []
    assert "sqlite3" not in modules


def test_running_an_agent_turn_needs_no_pydantic_until_a_tool_is_defined() -> None:
    code = (
        "import asyncio\nfrom plait import Agent, ScriptedModel\n"
        "asyncio.run(Agent(ScriptedModel(['hi'])).run('hello'))"
    )
    assert heavy(loaded_after(code)) == set()


def test_import_plait_skills_loads_no_dependency() -> None:
    assert heavy(loaded_after("import plait.skills")) == set()


def test_skills_middleware_loads_yaml_but_not_pydantic_or_the_cli() -> None:
    modules = loaded_after("from plait.skills import SkillsMiddleware")
    assert heavy(modules) <= {"yaml"} | {m for m in modules if m.startswith("yaml.")}
    assert not [m for m in modules if m.startswith("plait.cli")]
