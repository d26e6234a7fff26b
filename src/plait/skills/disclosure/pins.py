"""Pinned skills: guarantee the model gets a skill's instructions (the user named the skill).

``state={"pinned_skills": ["write-tests", "house-style"]}`` in the run input (or set from any
hook): before the next model call each named skill's SKILL.md body, without its frontmatter, is
appended to the conversation as its own :class:`~plait.messages.UserMessage`::

    <skill name="write-tests" path="/skills/write-tests/SKILL.md">
    ...body...
    </skill>

with ``metadata={"source": "pinned_skill", "skill": {"name", "path", "description"}}``. The
message is persisted with the dispatch (a snapshot of the file: pinning again appends a new copy)
and ``pinned_skills`` is removed from the state once the model call carrying the pins succeeded;
if that call fails, the pinned messages are lost with the dispatch, so ``pinned_skills`` stays in
the state and the next run pins them (:func:`call_keeping_pins`). Names resolve against the
thread's loaded skills, after any reload of the same input. Names are pinned in first-seen
order, duplicates once. An unknown name fails the model call with :class:`PinnedSkillNotFound`
before anything is pinned (all or nothing).
"""

from __future__ import annotations

import html
import reprlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from plait.errors import ConfigurationError, clipped
from plait.messages import UserMessage
from plait.skills.catalog import SkillCatalog
from plait.skills.disclosure.events import SkillPinned
from plait.skills.disclosure.scan import PINNED_SOURCE
from plait.skills.disclosure.snapshot import SkillSnapshot
from plait.skills.errors import SkillNotFound
from plait.skills.model import SkillEntry

if TYPE_CHECKING:
    from plait.middleware.base import ModelHandler
    from plait.middleware.context import DispatchContext
    from plait.models.base import ModelRequest, ModelResponse

__all__ = [
    "PINNED_KEY",
    "PinnedSkillNotFound",
    "call_keeping_pins",
    "pin_messages",
    "pin_request",
    "pinned_names",
    "remember_pins",
]

PINNED_KEY = "pinned_skills"
"""The thread-state key holding the names to pin before the next model call."""


class PinnedSkillNotFound(SkillNotFound):
    """A name in ``pinned_skills`` is not a skill of the thread; the message lists the known
    ones and says how to fix or drop the pin."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(name, known, where="the thread's skills (pinned_skills)")
        self.args = (
            f"{self.args[0]} Nothing was pinned and the pin was dropped; to pin a skill added "
            "since the thread loaded its skills, run again with "
            "state={'skills_metadata': None, 'pinned_skills': [...]}.",
        )


def pinned_names(value: object) -> list[str]:
    """The names in a ``pinned_skills`` state value, deduplicated in first-seen order."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(n, str) for n in value):
        raise ConfigurationError(
            "state['pinned_skills'] must be a list of skill names; got "
            f"{clipped(reprlib.repr(value))}."
        )
    return list(dict.fromkeys(value))


def resolve_pins(snapshot: SkillSnapshot, names: Sequence[str]) -> list[SkillEntry]:
    """The entries for ``names``; raises :class:`PinnedSkillNotFound` on the first unknown."""
    for name in names:
        if name not in snapshot.by_name:
            raise PinnedSkillNotFound(name, list(snapshot.by_name))
    return [snapshot.by_name[name] for name in names]


async def pin_messages(
    catalog: SkillCatalog, snapshot: SkillSnapshot, names: Sequence[str]
) -> list[UserMessage]:
    """One pinned-skill message per name (all resolved and read before any is returned)."""
    messages = []
    for entry in resolve_pins(snapshot, names):
        body = (await catalog.read(entry)).decode("utf-8", errors="replace").strip()
        name, path = html.escape(entry.name), html.escape(entry.location)
        content = f'<skill name="{name}" path="{path}">\n{body}\n</skill>'
        skill = {"name": entry.name, "path": entry.location, "description": entry.description}
        messages.append(UserMessage(content, metadata={"source": PINNED_SOURCE, "skill": skill}))
    return messages


async def pin_request(
    request: ModelRequest,
    ctx: DispatchContext,
    catalog: SkillCatalog,
    snapshot: SkillSnapshot,
    owner: object,
) -> ModelRequest:
    """Pin the skills named under ``pinned_skills`` in ``ctx.state``: add one message each to
    the dispatch (persisted with it) and to ``request``, before the turn's ephemeral messages,
    and emit :class:`SkillPinned` for each. The state value is consumed even when it fails (an
    unknown name, a bad value): the runtime saves the state of a failed turn, so a bad pin does
    not stick to the thread and fail every later run."""
    try:
        names = pinned_names(ctx.state[PINNED_KEY])
        messages = await pin_messages(catalog, snapshot, names)
    finally:
        ctx.state.pop(PINNED_KEY, None)
    if not messages:
        return request
    remember_pins(ctx, owner, names)
    for message in messages:
        ctx.add_message(message)
        skill = message.metadata["skill"]
        ctx.turn.emit(
            SkillPinned(thread_id=ctx.turn.thread_id, name=skill["name"], path=skill["path"])
        )
    current = request.messages
    ephemeral = ctx.turn.ephemeral
    at = len(current)
    if ephemeral and len(current) >= len(ephemeral):
        tail = current[len(current) - len(ephemeral) :]
        if all(a is b for a, b in zip(tail, ephemeral, strict=True)):
            at -= len(ephemeral)
    return request.replace(messages=[*current[:at], *messages, *current[at:]])


def remember_pins(ctx: DispatchContext, owner: object, names: list[str]) -> None:
    """Note that this dispatch of ``ctx`` pinned ``names`` (for :func:`call_keeping_pins`)."""
    ctx.turn.scratch[(owner, PINNED_KEY)] = (ctx.index, names)


async def call_keeping_pins(
    request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler, owner: object
) -> ModelResponse:
    """``call_next(request)``; if this dispatch pinned skills (:func:`remember_pins`) and the
    call fails, put the names back under ``pinned_skills`` (the pinned messages are lost with
    the failed dispatch, and the state of a failed turn is saved), and take them out again
    once a call succeeds (an outer middleware retrying the call)."""
    pending = ctx.turn.scratch.get((owner, PINNED_KEY))
    if pending is None or pending[0] != ctx.index:
        return await call_next(request)
    try:
        response = await call_next(request)
    except BaseException:
        ctx.state[PINNED_KEY] = list(pending[1])
        raise
    ctx.state.pop(PINNED_KEY, None)
    return response
