"""Declared, checked middleware order.

A middleware may declare a :class:`Placement` (class attribute ``placement``):

* ``position="outermost"`` / ``"innermost"`` pins it at an end of the list, the way Starlette
  pins its own middleware around the user's: outermost ones move to the front, innermost ones to
  the back, each group keeping the order it was given in. Everything else keeps the user's order.
* ``before`` / ``after`` name kinds (class names, matched against every class in the MRO) this
  middleware must come before / after *when both are present*;
* ``requires`` names kinds that must be present.

:func:`resolve_order` pins, then checks. It never reorders to satisfy ``before``/``after``: a list
that breaks one raises :class:`~plait.errors.ConfigurationError` naming both middleware and the
fix, so the order an agent runs is always the order its author can read (``Agent.describe()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from plait.errors import ConfigurationError

if TYPE_CHECKING:
    from plait.middleware.base import Middleware

__all__ = ["Placement", "describe_order", "is_kind", "resolve_order"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a middleware must sit. The default (no pin, no constraints) accepts any place."""

    position: Literal["outermost", "innermost"] | None = None
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


def is_kind(m: Middleware, kind: str) -> bool:
    """Whether ``m`` is of ``kind``: its class or a base class has that name."""
    return any(cls.__name__ == kind for cls in type(m).__mro__)


def resolve_order(middleware: Iterable[Middleware]) -> list[Middleware]:
    """The list with pinned middleware moved to their ends, after checking every constraint.

    Raises :class:`ConfigurationError` for a missing ``requires`` or a broken ``before``/
    ``after``; the message names the middleware, the constraint, and what to move or add.
    """
    given = list(middleware)
    outer = [m for m in given if m.placement.position == "outermost"]
    inner = [m for m in given if m.placement.position == "innermost"]
    free = [m for m in given if m.placement.position is None]
    ordered = [*outer, *free, *inner]
    for index, m in enumerate(ordered):
        _check(m, index, ordered)
    return ordered


def _check(m: Middleware, index: int, ordered: Sequence[Middleware]) -> None:
    placement = m.placement
    for kind in placement.requires:
        if not any(is_kind(other, kind) for other in ordered if other is not m):
            raise ConfigurationError(
                f"{m.name} requires a {kind} in the same agent; add one to middleware=[...]."
            )
    for kind in placement.before:
        for other in ordered[:index]:
            if is_kind(other, kind):
                raise ConfigurationError(
                    f"{m.name} must run before {other.name} ({type(m).__name__}.placement: "
                    f"before={kind!r}), but comes after it{_pinned(m, other)}. Move {m.name} "
                    f"ahead of {other.name} in middleware=[...]."
                )
    for kind in placement.after:
        for other in ordered[index + 1 :]:
            if is_kind(other, kind):
                raise ConfigurationError(
                    f"{m.name} must run after {other.name} ({type(m).__name__}.placement: "
                    f"after={kind!r}), but comes before it{_pinned(m, other)}. Move {m.name} "
                    f"behind {other.name} in middleware=[...]."
                )


def _pinned(m: Middleware, other: Middleware) -> str:
    notes = [
        f"{x.name} is pinned {x.placement.position}" for x in (m, other) if x.placement.position
    ]
    return f" ({'; '.join(notes)})" if notes else ""


def describe_order(middleware: Sequence[Middleware], seams: Sequence[str]) -> str:
    """One line per middleware, in resolved order: index, name, pin, and the hooks it overrides."""
    lines = []
    for index, m in enumerate(middleware, 1):
        hooks = ", ".join(h for h in seams if m.overrides(h)) or "tools only"
        pin = f" [{m.placement.position}]" if m.placement.position else ""
        lines.append(f"{index:>2}. {m.name}{pin}: {hooks}")
    return "\n".join(lines) if lines else "(no middleware)"
