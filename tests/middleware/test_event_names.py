"""Every event class follows the one naming rule stated on ``plait.middleware.context.Event``."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import pkgutil
import re

import plait
from plait.middleware.context import Event

EVENT_MODULES = (
    "plait.runtime.events",
    "plait.guards.events",
    "plait.context.events",
    "plait.skills.disclosure.events",
    "plait.skills.managed.events",
    "plait.mcp.events",
    "plait.workspace.events",
)
IRREGULAR_PARTICIPLES = {"Broken", "Found", "Sent", "Withdrawn"}


def _all_event_classes() -> list[type[Event]]:
    for info in pkgutil.walk_packages(plait.__path__, "plait."):
        if not info.name.endswith("__main__"):  # importing it runs the CLI
            importlib.import_module(info.name)
    # dataclass(slots=True) replaces each class; the replaced one stays a subclass until the
    # collector frees it, so collect first (else the count depends on when gc last ran).
    gc.collect()
    found: list[type[Event]] = []
    pending = list(Event.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return [c for c in found if c.__module__.startswith("plait.")]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_event_is_subject_then_past_participle_and_its_type_is_the_snake_name() -> None:
    classes = _all_event_classes()
    assert len(classes) >= 30
    for cls in classes:
        name = cls.__name__
        last = re.findall(r"[A-Z][a-z]*", name)[-1]
        assert not name.endswith("Event"), name
        assert last.endswith("ed") or last in IRREGULAR_PARTICIPLES, name
        default = {f.name: f.default for f in dataclasses.fields(cls)}["type"]
        assert default == _snake(name), (name, default)
        assert cls.__module__ in EVENT_MODULES, (name, cls.__module__)


def test_event_names_are_unique_across_modules() -> None:
    names = [cls.__name__ for cls in _all_event_classes()]
    assert sorted(names) == sorted(set(names))
