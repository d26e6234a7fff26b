"""OpenAI's automatic prompt caching, for the local Responses server.

A prompt of at least 1,024 tokens is cached by prefix; a later prompt with the same
``prompt_cache_key`` (or none, alike) reads the longest cached prefix back in 128-token steps
above the first 1,024, reported as ``input_tokens_details.cached_tokens``. Tokens are a quarter
of the characters of the canonical JSON of ``instructions``, ``tools`` and ``input`` in that
order (what the API caches: messages, tools, images, in the prompt's order).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MIN_TOKENS = 1024
STEP = 128
CHARS_PER_TOKEN = 4


class OpenAIPrefixCache:
    """Prefix hashes at every 128-token step, per ``prompt_cache_key``."""

    def __init__(self) -> None:
        self.entries: set[tuple[str, str]] = set()
        self.log: list[tuple[int, int]] = []
        """``(prompt tokens, cached tokens)`` of every request counted, in order."""

    def tokens_and_cached(self, body: dict[str, Any]) -> tuple[int, int]:
        """``(prompt tokens, cached tokens)`` of ``body``; caches its prefixes."""
        prompt = [body.get("instructions") or "", body.get("tools") or [], body.get("input")]
        text = json.dumps(prompt, sort_keys=True)
        tokens = len(text) // CHARS_PER_TOKEN
        key = str(body.get("prompt_cache_key") or "")
        cached = 0
        digest = hashlib.sha256()
        done = 0
        for end in range(MIN_TOKENS, tokens + 1, STEP):
            digest.update(text[done * CHARS_PER_TOKEN : end * CHARS_PER_TOKEN].encode())
            done = end
            entry = (key, digest.copy().hexdigest())
            if entry in self.entries:  # the digest covers the whole prefix up to `end`
                cached = end
            self.entries.add(entry)
        self.log.append((tokens, cached))
        return tokens, cached
