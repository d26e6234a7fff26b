"""A real, small, deterministic embedding for EmbeddingRanker tests: hashed character trigrams."""

from __future__ import annotations

import hashlib

DIMS = 64


def trigrams(texts: list[str]) -> list[list[float]]:
    """A bag of character trigrams hashed into 64 dimensions: similar spellings get similar
    vectors, which a word-level lexical index cannot see (``spredsheet`` ~ ``spreadsheet``)."""
    out = []
    for text in texts:
        vector = [0.0] * DIMS
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=2).digest()
            vector[int.from_bytes(digest) % DIMS] += 1.0
        out.append(vector)
    return out
