"""``python bench/embedding_refresh.py [--rounds N] [--sizes 1000,10000]``: the cost of
:meth:`EmbeddingRanker.update` on a catalog refresh, with a fake deterministic embedding (no
torch: each text's 384-dimensional vector is drawn from a generator seeded by its CRC-32, so
the embedding itself costs next to nothing and what is timed is plait's own work).

Skills have a name and four sentences (whole text + 5 clauses each). Per catalog size, three
rankers: in memory, with a ``cache_path`` (defaults: the file is written when due, see
:meth:`EmbeddingRanker.flush`), and with ``cache_path`` and ``save_fraction=0`` (written after
every update that embedded something, as before the cache was written lazily). Each is warmed
by one full update, then per round, configurations interleaved: ``update`` with the same
entries (none changed) and with one skill replaced by a new version (one changed). Medians of
the per-call times (``time.perf_counter`` around ``update``), in milliseconds. The lexical
ranker's own refresh is included (as it runs in ``update``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from plait.skills import EmbeddingRanker, SkillEntry, SkillMeta

DIMS = 384
WORDS = [
    *("parse", "render", "export", "import", "schedule", "deploy", "monitor", "archive"),
    *("convert", "resize", "merge", "split", "translate", "summarise", "validate", "encrypt"),
    *("sign", "audit", "index", "search", "plot", "chart", "invoice", "ledger"),
]


def embed(texts: list[str]) -> Any:
    """A fixed random vector per text (seeded by its CRC-32)."""
    return np.stack(
        [
            np.random.default_rng(zlib.crc32(t.encode())).standard_normal(DIMS, dtype=np.float32)
            for t in texts
        ]
    )


def skill(number: int, version: int) -> SkillEntry:
    words = [WORDS[(number * k + version) % len(WORDS)] for k in (3, 5, 7, 11)]
    description = " ".join(
        f"{w.capitalize()} files of kind {number % 97} with option {version}." for w in words
    )
    name = f"skill-{number}"
    meta = SkillMeta(name, description)
    return SkillEntry("bench", name, f"v{version}", f"/skills/{name}/SKILL.md", meta)


def measure(size: int, rounds: int, folder: Path) -> dict[str, list[float]]:
    catalog = [skill(n, 0) for n in range(size)]
    rankers = {
        "in memory": EmbeddingRanker(embed),
        "cache_path": EmbeddingRanker(embed, cache_path=folder / f"a{size}.npz"),
    }
    if hasattr(EmbeddingRanker, "flush"):  # absent before the lazy write: run on older code too
        rankers["cache_path, save_fraction=0"] = EmbeddingRanker(
            embed, cache_path=folder / f"b{size}.npz", save_fraction=0
        )
    for ranker in rankers.values():
        ranker.update(catalog)
    times: dict[str, list[float]] = {}
    for round_ in range(1, rounds + 1):
        changed = list(catalog)
        changed[(round_ * 7919) % size] = skill((round_ * 7919) % size, round_)
        for label, ranker in rankers.items():
            for case, entries in (("none changed", catalog), ("one changed", changed)):
                start = time.perf_counter()
                ranker.update(entries)
                elapsed = (time.perf_counter() - start) * 1000
                times.setdefault(f"{label}: {case}", []).append(elapsed)
        catalog = changed
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {DIMS} dimensions, {args.rounds} rounds")
    print("| skills | configuration: refresh | median ms | min ms |\n|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(s) for s in args.sizes.split(",")):
            for label, values in measure(size, args.rounds, Path(folder)).items():
                print(
                    f"| {size:,} | {label} | {statistics.median(values):.2f} | {min(values):.2f} |"
                )


if __name__ == "__main__":
    main()
