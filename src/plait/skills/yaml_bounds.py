"""Bounds on what a frontmatter's YAML may expand to, checked before anything is built.

YAML anchors and aliases share one node many times, so a few hundred bytes can stand for
billions of values ("billion laughs"); an alias inside its own anchor is a cycle; and deep
nesting overflows the recursive composers (PyYAML's C composer crashes the process, its Python
one raises ``RecursionError``). :func:`yaml_bound_problem` walks the YAML *event* stream, which
libyaml's parser produces with an explicit stack (no recursion), and counts what composing and
constructing would produce, with every alias expanded, stopping as soon as a bound is passed.
Only a document within :class:`YamlLimits` is composed into nodes.

=====================  =========  =========================================================
bound                  default    what it counts
=====================  =========  =========================================================
``max_depth``          64         nested sequences/mappings (real frontmatter uses 2-4)
``max_nodes``          10 000     scalars and collections, every alias expanded
``max_chars``          1 000 000  scalar characters, every alias expanded
=====================  =========  =========================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    ScalarEvent,
)

__all__ = ["DEFAULT_YAML_LIMITS", "YamlBoundProblem", "YamlLimits", "yaml_bound_problem"]

_Parser: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INDENTS = re.compile(r"\n[ \t]+")


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """How large a frontmatter's YAML may be once aliases are expanded (see the module table)."""

    max_depth: int = 64
    max_nodes: int = 10_000
    max_chars: int = 1_000_000


DEFAULT_YAML_LIMITS = YamlLimits()


@dataclass(frozen=True, slots=True)
class YamlBoundProblem:
    """Why the YAML was refused: a sentence for people and the 0-based YAML line."""

    message: str
    line: int


@dataclass(slots=True)
class _Open:
    anchor: str | None
    nodes: int = 1
    chars: int = 0


def yaml_bound_problem(
    text: str, limits: YamlLimits = DEFAULT_YAML_LIMITS
) -> YamlBoundProblem | None:
    """The first bound ``text`` passes (or a recursive alias), else ``None``.

    YAML that does not parse is not judged here (``None``): the composer reports its error.
    Never raises; time and memory are linear in ``len(text)``.
    """
    if _plainly_within(text, limits):
        return None
    loader = _Parser(text)
    try:
        return _walk(loader, limits)
    except yaml.MarkedYAMLError as err:
        if err.problem and "nesting depth" in err.problem:  # libyaml's own bound (1000)
            line = int(err.problem_mark.line) if err.problem_mark is not None else 0
            return YamlBoundProblem(
                f"the YAML is nested more than {limits.max_depth} levels deep", line
            )
        return None
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()


def _plainly_within(text: str, limits: YamlLimits) -> bool:
    """A cheap sufficient test (most frontmatter passes it, skipping the event walk): no
    anchors (no ``&``; without an anchor an alias cannot expand to anything, it is a compose
    error, so a ``*`` as in ``Bash(git:*)`` does not matter), so values and characters are
    bounded by the text's length; and a
    nesting bound from the text. Each nesting level needs a flow bracket, an indicator
    (``-``, ``?``, ``:``) on its line, or more indentation; a block sequence may share its
    parent mapping's indentation, hence twice the indentation levels."""
    if "&" in text or len(text) >= min(limits.max_nodes, limits.max_chars):
        return False
    brackets = text.count("[") + text.count("{")
    # The deepest indentation and the indicators of the whole text bound every line's sum
    # from above: when that fits, the line-by-line count below cannot fail.
    indent = max(map(len, _INDENTS.findall("\n" + text)), default=1) - 1
    inline = text.count("-") + text.count("?") + text.count(":")
    if brackets + 2 * (indent + 1) + inline + 1 <= limits.max_depth:
        return True
    deepest_line = 0
    for line in text.split("\n"):
        body = line.lstrip(" \t")
        indent = len(line) - len(body)
        inline = body.count("-") + body.count("?") + body.count(":")
        deepest_line = max(deepest_line, 2 * (indent + 1) + inline)
    return brackets + deepest_line + 1 <= limits.max_depth


def _walk(loader: yaml.SafeLoader, limits: YamlLimits) -> YamlBoundProblem | None:
    anchors: dict[str, tuple[int, int]] = {}
    stack: list[_Open] = []
    total_nodes = total_chars = 0
    while loader.check_event():
        event = loader.get_event()  # type: ignore[no-untyped-call]
        line = int(event.start_mark.line) if event.start_mark is not None else 0
        nodes = chars = 0
        if isinstance(event, CollectionStartEvent):
            stack.append(_Open(event.anchor))
            total_nodes += 1
            if len(stack) > limits.max_depth:
                return YamlBoundProblem(
                    f"the YAML is nested more than {limits.max_depth} levels deep", line
                )
            continue
        if isinstance(event, CollectionEndEvent):
            closed = stack.pop()
            nodes, chars = closed.nodes, closed.chars
            if closed.anchor is not None:
                anchors[closed.anchor] = (nodes, chars)
        elif isinstance(event, ScalarEvent):
            nodes, chars = 1, len(event.value)
            if event.anchor is not None:
                anchors[event.anchor] = (nodes, chars)
            total_nodes, total_chars = total_nodes + 1, total_chars + chars
        elif isinstance(event, AliasEvent):
            if any(frame.anchor == event.anchor for frame in stack):
                return YamlBoundProblem(
                    f"the alias *{event.anchor} refers to a value that contains it "
                    "(a recursive alias)",
                    line,
                )
            nodes, chars = anchors.get(str(event.anchor), (1, 0))
            total_nodes, total_chars = total_nodes + nodes, total_chars + chars
        else:
            continue
        if stack:
            stack[-1].nodes += nodes
            stack[-1].chars += chars
        if total_nodes > limits.max_nodes:
            return YamlBoundProblem(
                f"it holds more than {limits.max_nodes} values once aliases are expanded", line
            )
        if total_chars > limits.max_chars:
            return YamlBoundProblem(
                f"its values (aliases expanded) exceed {limits.max_chars} characters", line
            )
    return None
