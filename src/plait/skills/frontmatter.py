"""Reading the YAML frontmatter, two ways.

:func:`read_lenient` composes the YAML with PyYAML's C loader when available (``CSafeLoader``,
else ``SafeLoader``) into nodes, keeps each top-level key's value node and line, and - when the
YAML does not parse - retries once with every unquoted ``key: value: more`` line quoted (the
fallback the agentskills.io client guide suggests). Values are read from the nodes: the spec's
string fields take a scalar's source text (``version: 1.10`` stays ``"1.10"``), extra fields are
constructed as ordinary YAML values (``true`` is a bool).

:func:`read_strict` reproduces what ``skills-ref`` gets from ``strictyaml.load``: every scalar is
its source string, flow collections, tags, anchors and duplicate keys are errors, and the error
text is formatted like strictyaml's (ruamel's marks with ``(line: N)`` carets). It uses PyYAML's
pure-Python loader, whose scanner and parser share ruamel's ancestry and messages.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.tokens import (
    AnchorToken,
    FlowMappingStartToken,
    FlowSequenceStartToken,
    KeyToken,
    TagToken,
    ValueToken,
)

from plait.skills.yaml_bounds import yaml_bound_problem

__all__ = [
    "Frontmatter",
    "FrontmatterProblem",
    "PlainData",
    "node_data",
    "node_python",
    "node_text",
    "read_lenient",
    "read_strict",
]

PlainData = str | list["PlainData"] | dict[str, "PlainData"]

_FastLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NULL_TAG = "tag:yaml.org,2002:null"
_KEY_HEAD = r"^(?P<head>\s*(?:-\s+)?[\w.-]+:[ \t]+)"
_UNQUOTED_VALUE = re.compile(_KEY_HEAD + r"(?P<value>[^\s'\"|>\[{&*!#%@`].*)$")
_BAD_START_VALUE = re.compile(_KEY_HEAD + r"(?P<value>[@`].*)$")
_YAML_ERRORS = (yaml.YAMLError, RecursionError)


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """The top-level keys of a frontmatter mapping, in order, with their 0-based YAML lines.

    ``fields`` keeps the last value of a repeated key; ``duplicates`` lists ``(key, line)`` for
    every repetition; ``quoted_lines`` lists the YAML lines the unquoted-colon retry rewrote.
    """

    fields: dict[str, Node]
    lines: dict[str, int]
    duplicates: list[tuple[str, int]] = field(default_factory=list)
    quoted_lines: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FrontmatterProblem:
    """Why a frontmatter block is unusable: ``kind`` is ``invalid-yaml``, ``not-mapping`` or
    ``too-large`` (past a :class:`~plait.skills.yaml_bounds.YamlLimits` bound)."""

    kind: str
    message: str
    line: int | None = None


def read_lenient(text: str) -> Frontmatter | FrontmatterProblem:
    """Compose ``text`` as one YAML mapping, retrying once with unquoted colons quoted.

    An empty or comment-only block is an empty mapping. Never raises.
    """
    result = _compose_fast(text)
    if isinstance(result, FrontmatterProblem) and result.kind == "invalid-yaml":
        fixed, lines = _quote_suspect_values(text)
        if lines:
            retried = _compose_fast(fixed)
            if isinstance(retried, (MappingNode, type(None))):
                return _collect(retried, lines)
    if isinstance(result, FrontmatterProblem):
        return result
    return _collect(result, [])


def _compose_fast(text: str) -> MappingNode | FrontmatterProblem | None:
    bound = yaml_bound_problem(text)
    if bound is not None:
        return FrontmatterProblem("too-large", bound.message, bound.line)
    try:
        loader = _FastLoader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except _YAML_ERRORS as err:
        return FrontmatterProblem("invalid-yaml", _one_line(err), _error_line(err))
    if node is None or isinstance(node, MappingNode):
        return node
    if isinstance(node, ScalarNode) and node.tag == _NULL_TAG:
        return None
    kind = "a list" if isinstance(node, SequenceNode) else "a single value"
    return FrontmatterProblem(
        "not-mapping", f"the frontmatter is {kind}, not 'key: value' lines", node.start_mark.line
    )


def _collect(node: MappingNode | None, quoted_lines: list[int]) -> Frontmatter:
    fields: dict[str, Node] = {}
    lines: dict[str, int] = {}
    duplicates: list[tuple[str, int]] = []
    for key_node, value_node in [] if node is None else node.value:
        if not isinstance(key_node, ScalarNode):
            continue
        key = str(key_node.value)
        if key in fields:
            duplicates.append((key, key_node.start_mark.line))
        fields[key] = value_node
        lines[key] = key_node.start_mark.line
    return Frontmatter(fields, lines, duplicates, quoted_lines)


def _quote_suspect_values(text: str) -> tuple[str, list[int]]:
    """Quote plain values that contain ``': '`` or start with ``@``/backtick."""
    out: list[str] = []
    changed: list[int] = []
    for number, line in enumerate(text.split("\n")):
        match = _UNQUOTED_VALUE.match(line)
        if match and (": " in match["value"] or match["value"].rstrip().endswith(":")):
            value = match["value"].rstrip()
        else:
            match = _BAD_START_VALUE.match(line)
            value = match["value"].rstrip() if match else ""
        if match and value:
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'{match["head"]}"{escaped}"')
            changed.append(number)
        else:
            out.append(line)
    return "\n".join(out), changed


def node_text(node: Node | None) -> str | None:
    """A scalar's source text; ``None`` for a missing node, an explicit null or a collection."""
    if not isinstance(node, ScalarNode) or node.tag == _NULL_TAG:
        return None
    return str(node.value)


def node_data(node: Node) -> PlainData:
    """strictyaml's view of a node: scalars as source strings, lists, string-keyed dicts."""
    if isinstance(node, ScalarNode):
        return str(node.value)
    if isinstance(node, SequenceNode):
        return [node_data(item) for item in node.value]
    return {str(node_data(k)): node_data(v) for k, v in node.value}


def node_python(node: Node) -> object:
    """A node constructed as ordinary safe YAML (bools, ints, dates); falls back to
    :func:`node_data` when construction fails (e.g. an impossible date)."""
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        return node_data(node)


def _one_line(err: BaseException) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        parts = [p for p in (err.context, err.problem) if p]
        if parts:
            return "; ".join(parts)
    if isinstance(err, RecursionError):
        return "the YAML is nested too deeply"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _error_line(err: BaseException) -> int | None:
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        if mark is not None:
            return int(mark.line)
    return None


# --- strict: strictyaml's behaviour on PyYAML's pure-Python loader ------------------------------


class _StrictYamlError(Exception):
    """strictyaml's disallowed-construct errors, carrying ruamel-style context and marks."""

    def __init__(self, context: str, context_mark: Any, problem: str, problem_mark: Any) -> None:
        super().__init__(problem)
        self.context = context
        self.context_mark = context_mark
        self.problem = problem
        self.problem_mark = problem_mark


_FLOW = (
    "Found ugly disallowed JSONesque flow mapping "
    "(surround with ' and ' to make text appear literally)"
)
_ANCHOR = (
    "Found confusing disallowed anchor token (surround with ' and ' to make text appear literally)"
)
_TAG = "Found disallowed tag tokens (do not specify types in markup)"


class _StrictLoader(yaml.SafeLoader):
    """strictyaml's scanner checks (tags, flow collections, anchors) and YAML 1.2's implicit
    document after a document end, on PyYAML's Python loader."""

    def _look_ahead(self) -> None:
        """ruamel's scanner gathers comments after every token: it always queues one token
        more than PyYAML's, so an error on the next line surfaces at the same moment."""
        while self.need_more_tokens():
            self.fetch_more_tokens()
        if self.tokens and not self.done and len(self.tokens) < 2:
            self.fetch_more_tokens()

    def peek_token(self) -> Any:
        self._look_ahead()
        return self.tokens[0] if self.tokens else None

    def get_token(self) -> Any:
        self._look_ahead()
        if not self.tokens:
            return None
        self.tokens_taken += 1
        return self.tokens.pop(0)

    def check_token(self, *choices: Any) -> bool:
        self._look_ahead()
        if not self.tokens:
            return False
        if not choices:
            return True
        token = self.tokens[0]
        if not any(isinstance(token, choice) for choice in choices):
            return False
        if isinstance(token, TagToken):
            raise _StrictYamlError("While scanning", token.end_mark, _TAG, token.start_mark)
        if isinstance(token, (FlowMappingStartToken, FlowSequenceStartToken)):
            raise _StrictYamlError("While scanning", token.start_mark, _FLOW, token.end_mark)
        if isinstance(token, AnchorToken):
            raise _StrictYamlError("While scanning", token.start_mark, _ANCHOR, token.end_mark)
        return True

    def scan_to_next_token(self) -> None:
        """PyYAML's version plus two quirks of ruamel's round-trip scanner: blank lines after a
        comment are consumed with it, and after an empty line every following line break,
        space *and tab* is skipped (so a tab-indented key after a blank line is accepted)."""
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        while True:
            while self.peek() == " ":
                self.forward()
            if self.peek() == "#":
                while self.peek() not in "\0\r\n\x85\u2028\u2029":
                    self.forward()
                while self.scan_line_break():  # type: ignore[no-untyped-call]
                    pass
                if not self.flow_level:
                    self.allow_simple_key = True
                # ruamel queues the comment as a token, then checks stale simple keys here,
                # at the start of the next line
                self.stale_possible_simple_keys()
                continue
            if not self.scan_line_break():  # type: ignore[no-untyped-call]
                return
            if not self.flow_level:
                self.allow_simple_key = True
            if self.peek() == "\n":
                while self.peek() in "\n\x85\u2028\u2029\t ":
                    self.forward()

    def parse_block_mapping_key(self) -> Any:
        """YAML 1.2 (ruamel) allows a block mapping entry with an empty key: ``: value``."""
        if not self.check_token(KeyToken) and self.check_token(ValueToken):
            self.state = self.parse_block_mapping_value
            return self.process_empty_scalar(self.peek_token().start_mark)
        return super().parse_block_mapping_key()  # type: ignore[no-untyped-call]

    def parse_document_end(self) -> Any:
        event = super().parse_document_end()
        self.state = self.parse_implicit_document_start
        return event


def read_strict(text: str) -> dict[str, PlainData] | FrontmatterProblem:
    """What ``strictyaml.load(text).data`` gives ``skills-ref`` for a frontmatter block.

    Returns the mapping, or a problem: ``not-mapping`` when the document is anything else
    (``skills-ref``: "must be a YAML mapping"), ``invalid-yaml`` with strictyaml's error text
    (``skills-ref`` prefixes "Invalid YAML in frontmatter: "). Never raises.
    """
    bound = yaml_bound_problem(text)
    if bound is not None:
        return FrontmatterProblem("too-large", bound.message, bound.line)
    try:
        loader = _StrictLoader(text)
    except yaml.YAMLError as err:  # the reader refuses control characters up front
        return FrontmatterProblem("invalid-yaml", str(err), None)
    try:
        node = loader.get_single_node()
        if not isinstance(node, MappingNode):
            if node is not None:
                _strict_data(node)  # strictyaml still constructs it: duplicate keys are errors
            line = None if node is None else int(node.start_mark.line)
            return FrontmatterProblem("not-mapping", "the frontmatter is not a mapping", line)
        return _strict_mapping(node)
    except _StrictYamlError as err:
        message = _format_error(err.context, err.context_mark, err.problem, err.problem_mark, None)
        return FrontmatterProblem("invalid-yaml", message, int(err.problem_mark.line))
    except yaml.MarkedYAMLError as err:
        message = _format_error(
            err.context, err.context_mark, err.problem, err.problem_mark, err.note
        )
        return FrontmatterProblem("invalid-yaml", message, _error_line(err))
    except yaml.YAMLError as err:
        return FrontmatterProblem("invalid-yaml", str(err), None)
    except RecursionError as err:
        return FrontmatterProblem("invalid-yaml", _one_line(err), None)
    finally:
        loader.dispose()


def _strict_data(node: Node) -> PlainData:
    if isinstance(node, ScalarNode):
        return str(node.value)
    if isinstance(node, SequenceNode):
        return [_strict_data(item) for item in node.value]
    assert isinstance(node, MappingNode)
    return _strict_mapping(node)


def _strict_mapping(node: MappingNode) -> dict[str, PlainData]:
    out: dict[str, PlainData] = {}
    for key_node, value_node in node.value:
        key = _strict_data(key_node)
        key_text = str(key) if not isinstance(key, list) else str(tuple(key))
        value = _strict_data(value_node)  # strictyaml builds the value before the key check
        if key_text in out:
            raise _StrictYamlError(
                "While parsing",
                key_node.start_mark,
                f"Duplicate key '{key_text}' found",
                key_node.end_mark,
            )
        out[key_text] = value
    column: int | None = None
    for _, value_node in node.value:
        if isinstance(value_node, MappingNode):
            column = value_node.start_mark.column if column is None else column
            if value_node.start_mark.column != column:
                raise _StrictYamlError(
                    "While parsing",
                    value_node.start_mark,
                    "Found mapping with indentation inconsistent with previous mapping",
                    value_node.end_mark,
                )
    return out


def _format_error(
    context: str | None,
    context_mark: Any,
    problem: str | None,
    problem_mark: Any,
    note: str | None,
) -> str:
    """ruamel's ``MarkedYAMLError.__str__`` as vendored by strictyaml."""
    lines: list[str] = []
    if context is not None:
        lines.append(context)
    if context_mark is not None and (
        problem is None
        or problem_mark is None
        or context_mark.line != problem_mark.line
        or context_mark.column != problem_mark.column
    ):
        lines.append(_mark_text(context_mark))
    if problem is not None:
        lines.append(problem)
    if problem_mark is not None:
        lines.append(_mark_text(problem_mark))
    if note:
        lines.append(textwrap.dedent(note))
    return "\n".join(lines)


def _mark_text(mark: Any) -> str:
    where = f'  in "<unicode string>", line {mark.line + 1}, column {mark.column + 1}'
    snippet = _snippet(mark)
    return where if snippet is None else f"{where}:\n{snippet}"


def _snippet(mark: Any, indent: int = 4, max_length: int = 75) -> str | None:
    buffer: str | None = mark.buffer
    if buffer is None:
        return None
    stops = "\0\r\n\x85\u2028\u2029"
    pointer: int = mark.pointer
    head, start = "", pointer
    while start > 0 and buffer[start - 1] not in stops:
        start -= 1
        if pointer - start > max_length / 2 - 1:
            head, start = " ... ", start + 5
            break
    tail, end = "", pointer
    while end < len(buffer) and buffer[end] not in stops:
        end += 1
        if end - pointer > max_length / 2 - 1:
            tail, end = " ... ", end - 5
            break
    caret = f"^ (line: {mark.line + 1})"
    return (
        " " * indent
        + head
        + buffer[start:end]
        + tail
        + "\n"
        + " " * (indent + pointer - start + len(head))
        + caret
    )
