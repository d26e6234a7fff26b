"""Anthropic prompt caching: where :class:`~plait.models.anthropic.AnthropicModel` puts its
``cache_control`` breakpoints (on by default; ``AnthropicModel(cache=None)`` turns it off).

Anthropic caches a request's prefix (tools, then ``system``, then ``messages``) up to each
block marked with ``cache_control``, and reads a cached prefix back at a tenth of the input
price when a later request's prefix is byte-identical up to a breakpoint (it looks back about
20 blocks from each breakpoint for an earlier one). A request may carry at most 4 breakpoints,
and a 1-hour one may not follow a 5-minute one. :func:`place_breakpoints` marks, in order:

=====  =====================================  ================================================
#      block                                  why
=====  =====================================  ================================================
1      the last tool definition               tools change least (a skill's tools disclosed)
2      the last ``system`` block              the system prompt and the skills catalog
3      the end of the previous request: the   read back whatever the last call wrote, however
       last block before the newest           many blocks its tool calls and results added
       assistant message                      (more than the API's 20-block look-back)
4      the newest *stable* block: the last    written now, read by the next call; projected
       block of the last message that is not  user-side messages come after it and are billed
       projected (:mod:`.prompt_cache`)       fresh on every call
=====  =====================================  ================================================

A projected :class:`~plait.messages.SystemMessage` (a managed skill's body) is folded into
``system`` by the mapping, so it is cached under breakpoint 2; loading or unloading one
rewrites everything after ``system`` once (``CacheWatch`` reports it).

A breakpoint is never put on a thinking block (the API refuses one) or on an empty text block;
it moves back to the nearest block that can take one. Duplicates collapse (a request with no
tool calls has no separate #3). Every breakpoint gets the same ``ttl``; ``"1h"`` costs twice
the input price to write instead of 1.25 times and suits sessions with pauses over 5 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from plait.errors import ConfigurationError
from plait.models.base import ModelRequest
from plait.models.prompt_cache import stable_length

__all__ = ["MAX_BREAKPOINTS", "AnthropicCache", "place_breakpoints", "projected_block_count"]

MAX_BREAKPOINTS = 4
"""The most ``cache_control`` blocks the Messages API takes in one request."""

_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})


@dataclass(frozen=True, slots=True)
class AnthropicCache:
    """Which breakpoints to place and their ``ttl`` (``"5m"``, the API's default, or ``"1h"``).

    ``tools``, ``system`` and ``messages`` turn breakpoints 1, 2 and 3-4 of the module table on
    or off. Raises :class:`~plait.errors.ConfigurationError` for another ``ttl``."""

    ttl: Literal["5m", "1h"] = "5m"
    tools: bool = True
    system: bool = True
    messages: bool = True

    def __post_init__(self) -> None:
        if self.ttl not in ("5m", "1h"):
            raise ConfigurationError(
                f"AnthropicCache.ttl must be '5m' or '1h' (the TTLs Anthropic offers), "
                f"got {self.ttl!r}."
            )

    def control(self) -> dict[str, str]:
        """The ``cache_control`` value a marked block carries."""
        if self.ttl == "1h":
            return {"type": "ephemeral", "ttl": "1h"}
        return {"type": "ephemeral"}


def _cacheable(block: Any) -> bool:
    kind = block.get("type")
    if kind in _UNCACHEABLE:
        return False
    return not (kind == "text" and not block.get("text"))


def _mark(blocks: list[Any], index: int, control: dict[str, str]) -> bool:
    """Mark ``blocks[index]`` or the nearest cacheable block before it; a copy, never the
    block itself (a reasoning payload or a cached image block may be shared)."""
    for i in range(index, -1, -1):
        block = blocks[i]
        if _cacheable(block):
            if "cache_control" not in block:
                blocks[i] = {**block, "cache_control": control}
            return True
    return False


def _wire_blocks(messages: list[Any]) -> list[tuple[list[Any], int]]:
    """``(content list, index)`` of every block of ``messages``, in order (string content is
    turned into one text block so it can be marked)."""
    out: list[tuple[list[Any], int]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = message["content"] = [{"type": "text", "text": content}] if content else []
        out.extend((content, i) for i in range(len(content)))
    return out


def place_breakpoints(
    params: dict[str, Any], request: ModelRequest, cache: AnthropicCache, projected_blocks: int
) -> int:
    """Put ``cache``'s breakpoints (the module table) into the request body ``params`` in
    place; ``projected_blocks`` is how many of its last message blocks come from projected
    messages. Returns how many were placed (at most :data:`MAX_BREAKPOINTS`)."""
    control = cache.control()
    placed = 0
    tools = params.get("tools")
    if cache.tools and tools:
        tools[-1] = {**tools[-1], "cache_control": control}
        placed += 1
    system = params.get("system")
    if cache.system and system and _mark(system, len(system) - 1, control):
        placed += 1
    if not cache.messages:
        return placed
    messages = params["messages"]
    blocks = _wire_blocks(messages)
    stable_end = len(blocks) - projected_blocks - 1
    if stable_end < 0:
        return placed
    marks: list[int] = []
    previous_end = _previous_request_end(messages, stable_end)
    if previous_end is not None:
        marks.append(previous_end)
    marks.append(stable_end)
    for position in marks:
        if placed >= MAX_BREAKPOINTS:
            break
        # Walk back over blocks that cannot be marked, across message boundaries.
        for at in range(position, -1, -1):
            content, index = blocks[at]
            if _cacheable(content[index]):
                if "cache_control" not in content[index]:
                    content[index] = {**content[index], "cache_control": control}
                    placed += 1
                break
    return placed


def _previous_request_end(messages: list[Any], stable_end: int) -> int | None:
    """The block index of the last block before the newest assistant message, if that is
    before ``stable_end`` (where the previous call of this turn's tool loop ended)."""
    position = 0
    last_assistant_start: int | None = None
    for message in messages:
        if message["role"] == "assistant" and position <= stable_end:
            last_assistant_start = position
        position += len(message["content"])
    if last_assistant_start is None or last_assistant_start == 0:
        return None
    end = last_assistant_start - 1
    return end if end < stable_end else None


def projected_block_count(request: ModelRequest) -> int:
    """How many message blocks the projected tail of ``request`` maps to (0 without one)."""
    stable = stable_length(request)
    if stable >= len(request.messages):
        return 0
    from plait.models.anthropic_mapping import to_anthropic_messages

    tail = request.replace(messages=list(request.messages[stable:]), system_prompt="")
    _, wire = to_anthropic_messages(tail)
    count = 0
    for message in wire:
        content = message["content"]
        count += 1 if isinstance(content, str) else len(list(content))
    return count
