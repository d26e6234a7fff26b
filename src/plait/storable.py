"""Making any value storable: what a thread store cannot encode is replaced, and said so.

Text and data enter plait from places it does not control: a model's output, a tool's return
value (a file name from ``os.listdir`` on an undecodable name), the command line. A value the
stores cannot encode would make a whole dispatch unpersistable *after* its tools ran, so the
runtime passes what enters through :func:`storable_value` / :func:`storable_message` and reports
every replacement in an event. What is replaced, and with what:

=======================================  ==================================================
value                                    stored as
=======================================  ==================================================
a surrogate pair split into two          the character it encodes
code points (``"\\ud83d\\ude00"``)
a lone surrogate (``"a\\ud800b"``,       ``U+FFFD`` (``"a\\ufffdb"``)
``os.fsdecode`` of invalid UTF-8)
``nan``, ``inf``, ``-inf``               the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
an ``int`` over ``MAX_INT_BITS`` bits    its ``hex()`` string (JSON readers reject integers
                                         of more than 4,300 digits)
a dict key that is not a ``str``         ``str(key)`` with ``str_keys=True`` (the thread
                                         state); otherwise left for JSON, which writes
                                         ``int``/``float``/``bool``/``None`` keys as strings
nesting deeper than ``MAX_DEPTH``        the string ``"[nested too deep: dropped]"``
                                         (stores cannot read such JSON back)
a list or dict that contains itself      ``"[cycle: dropped]"`` where it repeats
any other object                         its JSON form (dataclasses, pydantic models, sets,
                                         tuples, bytes as UTF-8), else ``str(obj)``
=======================================  ==================================================

Tuples, sets and JSON-able objects become their JSON form silently (that is their JSON meaning,
nothing is lost); everything in the table above except the split surrogate pair is reported as a
:class:`Replacement`.

Message parts pass through as they are, but for their text (:func:`storable_parts`): an image's
or file's bytes are never copied or re-encoded, and a reasoning part's ``payload`` is never
rewritten (the provider checks its signature on replay). A payload holding a value JSON cannot
store is refused with :class:`~plait.errors.ContentError` instead: such a payload was not made
by the provider, and a rewritten one would be rejected by it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from plait.errors import ContentError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolMessage,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_BITS",
    "MAX_REPORTED",
    "Replacement",
    "storable_calls",
    "storable_message",
    "storable_parts",
    "storable_text",
    "storable_value",
]

MAX_DEPTH = 100
"""Deepest nesting of lists/dicts kept in a stored value (the JSON reader stops near 200)."""

MAX_INT_BITS = 12_900
"""Largest ``int`` kept as a number (3,883 decimal digits; JSON readers stop at 4,300)."""

_SURROGATE = re.compile("[\ud800-\udfff]")
# A run of more digits than an int of MAX_INT_BITS bits can have (3,883): the fast check then
# defers to the walk, which tells a huge int from a long digit string.
_LONG_DIGITS = re.compile(r"\d{3884,}")
_TOO_DEEP = "[nested too deep: dropped]"
_CYCLE = "[cycle: dropped]"
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


@dataclass(slots=True, frozen=True)
class Replacement:
    """One value that could not be stored as it was: ``where`` it sat (e.g.
    ``data['files'][3]``) and what was done (``"lone surrogate U+D800 -> U+FFFD"``)."""

    where: str
    problem: str

    def __post_init__(self) -> None:
        if len(self.where) > 160:  # e.g. data[0][0]... a hundred levels deep
            object.__setattr__(self, "where", f"{self.where[:100]}…{self.where[-50:]}")

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


MAX_REPORTED = 100
"""Replacements listed per value; past it, one last entry says how many more were made."""


def _note(found: list[Replacement], where: str, problem: str) -> None:
    if len(found) < MAX_REPORTED:
        found.append(Replacement(where, problem))
    elif found[-1].where != "…":
        found.append(Replacement("…", "1 more replacement not listed"))
    else:
        more = int(found[-1].problem.split(" ", 1)[0]) + 1
        found[-1] = Replacement("…", f"{more} more replacements not listed")


def _has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point; C-speed checks first (``isascii`` scans a
    megabyte in microseconds, ``encode`` in a fraction of a millisecond, a regex in ten)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def storable_text(text: str, where: str = "text", found: list[Replacement] | None = None) -> str:
    """``text`` with every surrogate code point made encodable (see the module table).

    Returns ``text`` itself (no copy) when it holds none, which is the common case; each lone
    surrogate replaced is appended to ``found``.
    """
    if not _has_surrogate(text):
        return text
    # One C pass: pairs split into two code points join back into the character they encode,
    # each lone surrogate becomes U+FFFD.
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    replaced = fixed.count("\ufffd") - text.count("\ufffd")
    if replaced and found is not None:
        first = _SURROGATE.search(text)
        code = f"U+{ord(first.group()):04X}" if first else "?"
        what = (
            f"lone surrogate {code}"
            if replaced == 1
            else f"{replaced} lone surrogates, first {code}"
        )
        _note(found, where, f"{what} -> U+FFFD")
    return fixed


def storable_value(
    value: Any,
    where: str = "value",
    found: list[Replacement] | None = None,
    *,
    str_keys: bool = False,
) -> Any:
    """``value`` as plain JSON data any store can write and read back (see the module table).

    Returns the same object when nothing had to change; replacements go to ``found``. Dict keys
    that are ``int``, ``float``, ``bool`` or ``None`` are left as they are (JSON writes them as
    strings) unless ``str_keys``, which converts them too (the thread state needs ``str`` keys).
    """
    sink: list[Replacement] = [] if found is None else found
    if not str_keys and _plainly_storable(value):
        return value
    return _value(value, where, sink, 0)


def _plainly_storable(value: Any) -> bool:
    """Whether ``value`` certainly needs no change, decided by the C JSON encoder (about 5x
    faster than walking it in Python): it rejects objects, ``nan``/``inf`` and over-long ints;
    the text is then searched for surrogates, and deep nesting is ruled out by counting."""
    if isinstance(value, str):
        return not _has_surrogate(value)
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value.bit_length() <= MAX_INT_BITS
    if isinstance(value, float):
        return math.isfinite(value)
    if type(value) is dict and all(type(k) is str and _plain_scalar(v) for k, v in value.items()):
        return not any(_has_surrogate(k) for k in value)  # flat: tool arguments, most often
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    if _has_surrogate(text) or _LONG_DIGITS.search(text) is not None:
        return False
    return text.count("[") + text.count("{") <= MAX_DEPTH or _depth(value, 0) <= MAX_DEPTH


def _plain_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is str:
        return not _has_surrogate(value)
    if kind is int:
        return bool(value.bit_length() <= MAX_INT_BITS)
    if kind is float:
        return math.isfinite(value)
    return value is None or kind is bool


def _depth(value: Any, level: int) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, list | tuple):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    return level


def _value(
    value: Any, where: str, found: list[Replacement], depth: int, active: set[int] | None = None
) -> Any:
    """``value`` made storable; ``active`` holds the ids of the lists and dicts being walked
    above it, so a value that contains itself is cut there instead of walked 2**depth times."""
    if active is None:
        active = set()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return storable_text(value, where, found)
    if isinstance(value, int):
        if value.bit_length() <= MAX_INT_BITS:
            return value
        _note(found, where, f"int of {value.bit_length()} bits -> hex string")
        return hex(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        _note(found, where, f"{value} -> {_NON_FINITE[str(value)]!r}")
        return _NON_FINITE[str(value)]
    if depth >= MAX_DEPTH and isinstance(value, list | dict | tuple | set | frozenset):
        _note(found, where, f"nested deeper than {MAX_DEPTH} levels -> dropped")
        return _TOO_DEEP
    if isinstance(value, list | dict):
        if id(value) in active:
            _note(found, where, "refers to a value that contains it -> dropped")
            return _CYCLE
        active.add(id(value))
        try:
            if isinstance(value, list):
                return _list(value, where, found, depth, active)
            return _dict(value, where, found, depth, active)
        finally:
            active.discard(id(value))
    return _value(_jsonable(value, where, found), where, found, depth, active)


def _list(
    value: list[Any], where: str, found: list[Replacement], depth: int, active: set[int]
) -> list[Any]:
    out: list[Any] | None = None
    for i, item in enumerate(value):
        fixed = _value(item, f"{where}[{i}]", found, depth + 1, active)
        if fixed is not item and out is None:
            out = value[:i]
        if out is not None:
            out.append(fixed)
    return value if out is None else out


def _dict(
    value: dict[Any, Any], where: str, found: list[Replacement], depth: int, active: set[int]
) -> dict[str, Any]:
    changed = False
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = key
        if not isinstance(key, str):
            name = str(_value(key, where, [], depth + 1))
            _note(found, f"{where}[{key!r}]", f"{type(key).__name__} key -> str")
        fixed_name = storable_text(name, f"{where} key", found)
        fixed = _value(item, f"{where}[{fixed_name!r}]", found, depth + 1, active)
        changed = changed or fixed_name is not key or fixed is not item
        out[fixed_name] = fixed
    return out if changed else value


def _jsonable(value: Any, where: str, found: list[Replacement]) -> Any:
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    from pydantic_core import to_jsonable_python

    try:
        return to_jsonable_python(value)
    except Exception:
        _note(found, where, f"{type(value).__name__} object -> its str()")
        try:
            return str(value)
        except Exception:
            return f"<unprintable {type(value).__name__}>"


def storable_message(message: Message) -> tuple[Message, list[Replacement]]:
    """``message`` with every field a store writes made storable, and what was replaced.

    Returns the same message object when nothing had to change; otherwise a copy with the same
    id (``where`` then names the field, e.g. ``tool_calls[0].args['x']``).
    """
    found: list[Replacement] = []
    fields: dict[str, Any] = {}
    if isinstance(message, ToolMessage):
        field_name, parts = "parts", storable_parts(message.parts, "parts", found)
    else:
        field_name, parts = "content", storable_parts(message.content, "content", found)
    if parts is not None:
        fields[field_name] = parts
    metadata = _value(message.metadata, "metadata", found, 0)
    if metadata is not message.metadata:
        fields["metadata"] = metadata
    if isinstance(message, ToolMessage):
        data = _value(message.data, "data", found, 0)
        if data is not message.data:
            fields["data"] = data
        name = storable_text(message.name, "name", found)
        call_id = storable_text(message.tool_call_id, "tool_call_id", found)
        if name is not message.name or call_id is not message.tool_call_id:
            fields.update(name=name, tool_call_id=call_id)
    elif isinstance(message, AssistantMessage):
        calls = storable_calls(message.tool_calls, found)
        if calls is not message.tool_calls:
            fields["tool_calls"] = calls
        if message.finish_reason is not None:
            reason = storable_text(message.finish_reason, "finish_reason", found)
            if reason is not message.finish_reason:
                fields["finish_reason"] = reason
    if not fields:
        return message, found
    return _copy(message, fields), found


def storable_parts(parts: list[Part], where: str, found: list[Replacement]) -> list[Part] | None:
    """``parts`` with their text, media types, file names and URLs made storable, or ``None``
    when none had to change. Bytes are never touched (a :class:`~plait.parts.Blob` is stored
    as it is), nor is a reasoning part's ``payload``: it is replayed to its provider verbatim,
    so one holding a value JSON cannot store (a NaN, an object, a lone surrogate) is refused
    with :class:`~plait.errors.ContentError`; the model adapter that built it must keep the
    provider's JSON as received."""
    out: list[Part] | None = None
    for i, part in enumerate(parts):
        fixed = _part(part, f"{where}[{i}]", found)
        if fixed is not part and out is None:
            out = parts[:i]
        if out is not None:
            out.append(fixed)
    return out


def _part(part: Part, where: str, found: list[Replacement]) -> Part:
    if isinstance(part, TextPart):
        text = storable_text(part.text, where, found)
        # By identity, not by `found`: a split surrogate pair is joined unreported.
        return part if text is part.text else TextPart(text)
    if isinstance(part, ReasoningPart):
        at = ""
        if type(part.payload) is not dict or not _plainly_storable(part.payload):
            at, what = _not_json(part.payload, f"{where}.payload", 0)
        if at:
            raise ContentError(
                f"a {part.provider!r} reasoning part holds {what} at {at}, which cannot be "
                "stored. Reasoning is replayed to the provider verbatim, so plait does not "
                "rewrite it: keep the provider's payload exactly as received (plain JSON), or "
                "drop the part."
            )
        text = storable_text(part.text, f"{where}.text", found)
        provider = storable_text(part.provider, f"{where}.provider", found)
        if text is part.text and provider is part.provider:
            return part
        return replace(part, text=text, provider=provider)
    if isinstance(part, ImagePart | FilePart):
        changes: dict[str, Any] = {}
        if isinstance(part.source, str):
            url = storable_text(part.source, f"{where}.source", found)
            if url is not part.source:
                changes["source"] = url
        if part.media_type is not None:
            media = storable_text(part.media_type, f"{where}.media_type", found)
            if media is not part.media_type:
                changes["media_type"] = media
        if isinstance(part, FilePart) and part.filename is not None:
            name = storable_text(part.filename, f"{where}.filename", found)
            if name is not part.filename:
                changes["filename"] = name
        return replace(part, **changes) if changes else part
    return part


def _not_json(value: Any, where: str, depth: int) -> tuple[str, str]:
    """Where the first value plain JSON cannot hold sits in ``value``, and what it is."""
    if depth > MAX_DEPTH:
        return where, f"nesting deeper than {MAX_DEPTH} levels"
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str or _has_surrogate(key):
                return f"{where}[{key!r}]", "a key that is not plain text"
            found = _not_json(item, f"{where}[{key!r}]", depth + 1)
            if found[0]:
                return found
        return "", ""
    if type(value) is list:
        for i, item in enumerate(value):
            found = _not_json(item, f"{where}[{i}]", depth + 1)
            if found[0]:
                return found
        return "", ""
    if depth == 0 or not _plain_scalar(value):
        return where, f"a {type(value).__name__} value"
    return "", ""  # nothing found: a value the fast check doubted (a long digit run) is fine


def storable_calls(calls: list[ToolCall], found: list[Replacement]) -> list[ToolCall]:
    """``calls`` with ids, names, args and raw args made storable (the same list if unchanged)."""
    out: list[ToolCall] | None = None
    for i, call in enumerate(calls):
        if _plain_call(call):
            if out is not None:
                out.append(call)
            continue
        where = f"tool_calls[{i}]"
        fixed = ToolCall(
            storable_text(call.id, f"{where}.id", found),
            storable_text(call.name, f"{where}.name", found),
            _value(call.args, f"{where}.args", found, 0),
            None if call.raw_args is None else storable_text(call.raw_args, f"{where}.raw", found),
        )
        same = (
            fixed.id is call.id
            and fixed.name is call.name
            and fixed.args is call.args
            and fixed.raw_args is call.raw_args
        )
        if not same and out is None:
            out = calls[:i]
        if out is not None:
            out.append(call if same else fixed)
    return calls if out is None else out


def _plain_call(call: ToolCall) -> bool:
    return (
        not _has_surrogate(call.id)
        and not _has_surrogate(call.name)
        and (call.raw_args is None or not _has_surrogate(call.raw_args))
        and _plainly_storable(call.args)
    )


def _copy(message: Message, fields: dict[str, Any]) -> Message:
    return replace(message, **fields)
