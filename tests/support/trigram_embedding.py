"""A real, small, deterministic embedding for EmbeddingRanker tests: hashed character trigrams."""

from __future__ import annotations

import hashlib

from plait.skills import SkillEntry, SkillMeta

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


def entry(name: str, description: str, version: str = "v1") -> SkillEntry:
    """A skill entry of source ``src`` at a virtual location, for ranker tests."""
    return SkillEntry(
        "src", name, version, f"/skills/{name}/SKILL.md", SkillMeta(name, description)
    )


def names(found: list[SkillEntry]) -> list[str]:
    return [e.name for e in found]


SKILLS = [
    entry("spreadsheet-tools", "Work with spreadsheets: formulas and pivot tables."),
    entry("mail-merge", "Send personalised letters to a list of people."),
    entry("gpx-trails", "Plot hiking tracks on a map."),
]
"""Three skills in unrelated domains, shared by the EmbeddingRanker test modules."""
