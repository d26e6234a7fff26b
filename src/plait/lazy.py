"""Lazy package exports (PEP 562): a package's names load with the module that defines them.

``import plait`` must not pay for what a program never touches (the runtime, pydantic, provider
adapters, the skills parser). A package ``__init__`` declares its exports as a table from
defining module to names and installs the module-level ``__getattr__``/``__dir__`` this module
builds; the same names are imported under ``TYPE_CHECKING`` so type checkers and IDEs see the
real types::

    from typing import TYPE_CHECKING

    from plait.lazy import lazy_exports

    if TYPE_CHECKING:
        from plait.runtime import Agent

    if not TYPE_CHECKING:  # a visible __getattr__ would make mypy accept any attribute
        __getattr__, __dir__ = lazy_exports(__name__, {"plait.runtime": ("Agent",)})

The first access to ``plait.Agent`` (attribute or ``from plait import Agent``) imports
``plait.runtime`` and stores ``Agent`` in the package namespace, so later accesses are plain
attribute lookups. An unknown name raises ``AttributeError`` as usual; an import error in the
defining module propagates unchanged. A test checks every table against its ``TYPE_CHECKING``
block and ``__all__``.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # not typing's: ``import plait`` must not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` for ``package`` serving ``exports`` lazily.

    ``exports`` maps a defining module's full name to the names taken from it. A name listed
    under two modules is a programming error (``ValueError`` when the package is imported).
    """
    where: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package} exports {name!r} from {where[name]} and {module}")
            where[name] = module
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
