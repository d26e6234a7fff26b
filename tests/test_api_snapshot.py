"""The public API, pinned: every name in every public ``__all__``, with its signature.

The surface is compared with the checked-in ``tests/api_snapshot.txt``, so any change to it (a new
name, a renamed parameter, a removed method) is deliberate and shows up in review as a diff of
that file. After changing the API on purpose, regenerate the snapshot and commit it::

    python tests/test_api_snapshot.py --update

(or ``PLAIT_UPDATE_API_SNAPSHOT=1 python -m pytest tests/test_api_snapshot.py``).

Public modules are ``plait`` itself, every package under it and every top-level module
(``plait.errors``, ``plait.messages``, …), excluding private (``_``) and ``__main__`` modules.
A class is listed with its constructor and the public members it defines itself; inherited
members appear under the class that defines them.
"""

from __future__ import annotations

import difflib
import enum
import importlib
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import plait

SNAPSHOT = Path(__file__).with_name("api_snapshot.txt")
UPDATE_COMMAND = "python tests/test_api_snapshot.py --update"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_MAX_DIFF_LINES = 200


def public_modules() -> list[ModuleType]:
    """``plait``, its packages and its top-level modules, by name."""
    names = ["plait"]
    for info in pkgutil.walk_packages(plait.__path__, "plait."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]):
            continue
        if info.ispkg or len(parts) == 2:
            names.append(info.name)
    return [importlib.import_module(n) for n in sorted(names)]


class _Shown:
    """A default value shown by a fixed text (sets sorted, memory addresses dropped)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _stable_repr(value: Any) -> str:
    if isinstance(value, set | frozenset):
        items = ", ".join(sorted(_stable_repr(v) for v in value))
        return f"{type(value).__name__}({{{items}}})" if value else f"{type(value).__name__}()"
    return _ADDRESS.sub("", repr(value))


def _signature(obj: Any, *, drop_self: bool = False) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    if drop_self and params and params[0].name == "self":
        params = params[1:]
    shown = []
    for p in params:
        if p.default is not inspect.Parameter.empty:
            p = p.replace(default=_Shown(_stable_repr(p.default)))
        if isinstance(p.annotation, str):
            p = p.replace(annotation=_Shown(p.annotation))
        shown.append(p)
    returns = sig.return_annotation
    if isinstance(returns, str):
        returns = _Shown(returns)
    return str(sig.replace(parameters=shown, return_annotation=returns))


def _own_init(cls: type) -> Any:
    """The ``__init__`` a user calls, if Python code (not ``object``'s or a builtin's)."""
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None:
            return init if inspect.isfunction(init) else None
    return None


def _member(name: str, value: Any) -> str:
    if isinstance(value, staticmethod | classmethod):
        return f"{type(value).__name__} {name}{_signature(value.__func__)}"
    if isinstance(value, property):
        return f"property {name}"
    if inspect.iscoroutinefunction(value):
        return f"async def {name}{_signature(value, drop_self=True)}"
    if inspect.isfunction(value):
        return f"def {name}{_signature(value, drop_self=True)}"
    if inspect.isclass(value):
        return f"class {name}"
    if type(value).__name__ in {"member_descriptor", "getset_descriptor"}:
        return f"attribute {name}"
    return f"{name} = {_stable_repr(value)}"


def _inherited(cls: type, attr: str) -> bool:
    """Whether ``attr`` overrides a base's member (its contract is listed with the base)."""
    return any(attr in vars(base) for base in cls.__mro__[1:] if base is not object)


def describe_class(name: str, cls: type) -> list[str]:
    bases = ", ".join(b.__qualname__ for b in cls.__bases__ if b is not object)
    lines = [f"class {name}({bases})" if bases else f"class {name}"]
    if issubclass(cls, enum.Enum):
        return lines + [f"    {m.name} = {m.value!r}" for m in cls]
    init = _own_init(cls)
    if init is not None:
        lines.append(f"    __init__{_signature(init, drop_self=True)}")
    fields = set(getattr(cls, "__dataclass_fields__", ()))
    for attr, value in sorted(vars(cls).items()):
        if attr.startswith("_") or attr in fields or _inherited(cls, attr):
            continue
        lines.append(f"    {_member(attr, value)}")
    return lines


def describe(name: str, obj: Any) -> list[str]:
    if inspect.isclass(obj):
        return describe_class(name, obj)
    if inspect.iscoroutinefunction(obj):
        return [f"async def {name}{_signature(obj)}"]
    if inspect.isfunction(obj):
        return [f"def {name}{_signature(obj)}"]
    if isinstance(obj, ModuleType):
        return [f"module {name}"]
    return [f"{name} = {_stable_repr(obj)}"]


def render() -> str:
    """The snapshot text of the whole public surface."""
    out: list[str] = []
    for module in public_modules():
        exported = getattr(module, "__all__", None)
        out.append(f"## {module.__name__}")
        if exported is None:
            out.append("(no __all__)")
        else:
            for name in sorted(exported):
                out.extend(describe(name, getattr(module, name)))
        out.append("")
    return "\n".join(out)


def test_public_api_matches_the_snapshot() -> None:
    current = render()
    if os.environ.get("PLAIT_UPDATE_API_SNAPSHOT"):
        SNAPSHOT.write_text(current, encoding="utf-8")
    expected = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
    if current != expected:
        diff = list(
            difflib.unified_diff(
                expected.splitlines(), current.splitlines(), "snapshot", "current", lineterm=""
            )
        )
        shown = "\n".join(diff[:_MAX_DIFF_LINES])
        hidden = len(diff) - _MAX_DIFF_LINES
        more = f"\n… and {hidden} more lines" if hidden > 0 else ""
        raise AssertionError(
            f"The public API differs from {SNAPSHOT.name}. If the change is intended, run\n"
            f"    {UPDATE_COMMAND}\nand commit the file.\n{shown}{more}"
        )


def test_every_public_module_declares_all_and_every_name_resolves() -> None:
    for module in public_modules():
        exported = getattr(module, "__all__", None)
        assert exported is not None, f"{module.__name__} has no __all__"
        assert len(set(exported)) == len(exported), f"{module.__name__}.__all__ repeats a name"
        for name in exported:
            assert hasattr(module, name), f"{module.__name__}.__all__ lists missing {name!r}"


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {UPDATE_COMMAND}")
    SNAPSHOT.write_text(render(), encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
