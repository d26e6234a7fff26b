"""Anthropic's prompt-caching rule, for :class:`anthropic_server.AnthropicServer`.

A request's prefix runs tools, then ``system``, then the message blocks. Each block marked with
``cache_control`` is a breakpoint: the prefix up to it is written to the cache (when it is at
least :attr:`PromptCacheRule.min_tokens` long and not cached already) and a later request reads
it back when its own prefix up to a breakpoint, or up to one of the 20 blocks before it, is the
same. Usage reports ``cache_read_input_tokens`` (the longest prefix read),
``cache_creation_input_tokens`` (written now, split by TTL in ``cache_creation``) and
``input_tokens`` (the rest). Tokens are counted as a quarter of each block's JSON, without its
``cache_control``. Entries live for their TTL (5 minutes or 1 hour), renewed on every read.

A top-level ``cache_control`` (Anthropic's automatic caching, what LangChain's
``AnthropicPromptCachingMiddleware`` sends) is one more breakpoint, on the last block that can
take one; it takes one of the 4 slots.

Refused as the API refuses them (HTTP 400): more than 4 breakpoints, a ``ttl`` other than
``5m``/``1h``, a 1-hour breakpoint after a 5-minute one, ``cache_control`` on a thinking block.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

LOOKBACK = 20
MAX_BREAKPOINTS = 4
_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class CacheRuleViolation(Exception):
    """A request the API refuses for its ``cache_control``."""


def _tokens(block: Any) -> int:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return max(len(json.dumps(block, sort_keys=True)) // 4, 1)


def prefix_blocks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(where, block)`` of every block of the prefix, in the API's order."""
    out: list[tuple[str, Any]] = []
    for i, tool in enumerate(body.get("tools") or ()):
        out.append((f"tools.{i}", tool))
    system = body.get("system")
    if isinstance(system, str):
        out.append(("system", {"type": "text", "text": system}))
    else:
        out.extend((f"system.{i}", block) for i, block in enumerate(system or ()))
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, str):
            out.append((f"messages.{i}.content", {"type": "text", "text": content}))
            continue
        for j, block in enumerate(content):
            out.append((f"messages.{i}.content.{j}", {"role": message["role"], **block}))
    return out


def _last_cacheable(blocks: list[tuple[str, Any]]) -> int | None:
    """Where a top-level ``cache_control`` (automatic caching) puts its breakpoint: the last
    block that can take one (not a thinking block, not an empty text)."""
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index][1]
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("thinking", "redacted_thinking") or (kind == "text" and not block.get("text")):
            continue
        return index
    return None


class PromptCacheRule:
    """The cache of one server: prefix hashes to expiry times."""

    def __init__(self, min_tokens: int = 1024, clock: Callable[[], float] = time.monotonic):
        self.min_tokens = min_tokens
        self.clock = clock
        self.entries: dict[str, float] = {}
        self.log: list[dict[str, Any]] = []
        """The usage of every request counted, in order (for benches that read it back)."""

    def usage(self, body: dict[str, Any]) -> dict[str, Any]:
        """The input side of the usage of ``body``; raises :class:`CacheRuleViolation`."""
        blocks = prefix_blocks(body)
        breakpoints = self._breakpoints(blocks, body.get("cache_control"))
        digest = hashlib.sha256(str(body.get("model")).encode())
        hashes: list[str] = []
        totals: list[int] = []
        total = 0
        for _, block in blocks:
            clean = block
            if isinstance(block, dict):
                clean = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps(clean, sort_keys=True).encode())
            hashes.append(digest.copy().hexdigest())
            total += _tokens(block)
            totals.append(total)
        now = self.clock()
        read_end = -1
        for position, _ in breakpoints:
            for at in range(position, max(position - LOOKBACK, -1), -1):
                expiry = self.entries.get(hashes[at])
                if expiry is not None and expiry > now:
                    read_end = max(read_end, at)
                    break
        if read_end >= 0:
            for position, ttl in breakpoints:
                if position <= read_end:
                    self.entries[hashes[position]] = now + _TTL_SECONDS[ttl]
            self.entries[hashes[read_end]] = max(
                self.entries[hashes[read_end]], now + _TTL_SECONDS[breakpoints[-1][1]]
            )
        read = totals[read_end] if read_end >= 0 else 0
        written = {"5m": 0, "1h": 0}
        start = read
        for position, ttl in breakpoints:
            if position <= read_end or totals[position] < self.min_tokens:
                continue
            written[ttl] += totals[position] - start
            start = totals[position]
            self.entries[hashes[position]] = now + _TTL_SECONDS[ttl]
        creation = written["5m"] + written["1h"]
        counted = {
            "input_tokens": total - read - creation,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": creation,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }
        self.log.append(counted)
        return counted

    @staticmethod
    def _breakpoints(blocks: list[tuple[str, Any]], automatic: Any = None) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
        last = _last_cacheable(blocks) if automatic is not None else None
        for index, (where, block) in enumerate(blocks):
            control = block.get("cache_control") if isinstance(block, dict) else None
            if control is None and index == last:
                control = automatic
                where = "cache_control"
            if control is None:
                continue
            if block.get("type") in ("thinking", "redacted_thinking"):
                raise CacheRuleViolation(
                    f"{where}.{block['type']}.cache_control: Extra inputs are not permitted"
                )
            ttl = control.get("ttl", "5m")
            if control.get("type") != "ephemeral" or ttl not in _TTL_SECONDS:
                raise CacheRuleViolation(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
            if found and found[-1][1] == "5m" and ttl == "1h":
                raise CacheRuleViolation(
                    "a ttl='1h' cache_control block must not come after a ttl='5m' "
                    "cache_control block. Note that blocks are processed in the following "
                    "order: `tools`, `system`, `messages`."
                )
            found.append((index, ttl))
        if len(found) > MAX_BREAKPOINTS:
            raise CacheRuleViolation(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(found)}."
            )
        return found
