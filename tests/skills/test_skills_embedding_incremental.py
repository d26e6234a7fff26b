"""EmbeddingRanker.update is incremental: the same order as a ranker built fresh over the same
entries, after any sequence of additions, changes and removals; the cache file is written when
due or flushed; hostile zip members are an unreadable cache."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trigram_embedding import trigrams

from plait.errors import ConfigurationError
from plait.skills import EmbeddingRanker, SkillEntry, SkillMeta

WORDS = [
    "map",
    "trail",
    "spreadsheet",
    "pivot",
    "letter",
    "mail",
    "invoice",
    "chart",
    "audio",
    "video",
    "pdf",
    "table",
]
QUERIES = ["plot a trail map", "mail a letter", "pivot table chart", "pdf invoice", "x"]


def entry(number: int, version: int, words: tuple[str, ...]) -> SkillEntry:
    name = f"skill-{number}"
    description = (
        ". ".join(f"Handle {w} {WORDS[(i + number) % len(WORDS)]}" for i, w in enumerate(words))
        or "Nothing."
    )
    return SkillEntry(
        "src", name, f"v{version}", f"/s/{name}/SKILL.md", SkillMeta(name, description)
    )


def orders(ranker: EmbeddingRanker) -> list[list[str]]:
    return [[e.name for e in ranker.rank(q, 50)] for q in QUERIES]


def fresh(entries: list[SkillEntry], **options: object) -> EmbeddingRanker:
    ranker = EmbeddingRanker(trigrams, **options)  # type: ignore[arg-type]
    ranker.update(entries)
    return ranker


operation = st.tuples(
    st.sampled_from(["add", "change", "remove", "rename", "shuffle", "swap", "duplicate"]),
    st.integers(0, 40),
    st.lists(st.sampled_from(WORDS), max_size=4).map(tuple),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(operation, min_size=1, max_size=6), min_size=1, max_size=6))
def test_any_sequence_of_updates_ranks_as_a_ranker_built_fresh(
    rounds: list[list[tuple[str, int, tuple[str, ...]]]],
) -> None:
    ranker, alone = EmbeddingRanker(trigrams), EmbeddingRanker(trigrams, fuse=False)
    catalog: list[SkillEntry] = []
    version = 0
    for ops in rounds:
        for kind, number, words in ops:
            version += 1
            at = number % len(catalog) if catalog else 0
            if kind == "add" or not catalog:
                catalog.insert(at, entry(number, version, words))
            elif kind == "change":  # a new version of the same skill
                old = catalog[at]
                catalog[at] = entry(int(old.name.split("-")[1]), version, words)
            elif kind == "rename":  # the same version with another description
                old = catalog[at]
                catalog[at] = SkillEntry(
                    old.source_id,
                    old.id,
                    old.version,
                    old.location,
                    SkillMeta(old.name, f"Now {' '.join(words)}."),
                )
            elif kind == "swap":  # two entries change places (the same objects)
                other = (at + 1 + len(words)) % len(catalog)
                catalog[at], catalog[other] = catalog[other], catalog[at]
            elif kind == "duplicate":  # one skill listed twice
                catalog[at] = catalog[(at + 1) % len(catalog)]
            elif kind == "remove":
                del catalog[at]
            else:
                catalog = catalog[at:] + catalog[:at]
        ranker.update(catalog)
        alone.update(catalog)
        assert orders(alone) == orders(fresh(catalog, fuse=False))
        # the lexical ranker is itself incremental (its length norm moves in 10% steps): the
        # fresh one shares it, so the embedding part is what is compared
        assert orders(ranker) == orders(fresh(catalog, lexical=ranker.lexical))


def test_compaction_after_most_skills_are_removed_keeps_the_order() -> None:
    catalog = [entry(n, 1, (WORDS[n % 12], WORDS[(n * 5) % 12])) for n in range(400)]
    ranker = EmbeddingRanker(trigrams)
    ranker.update(catalog)
    index = ranker._index
    assert index.whole.shape[0] >= 400
    kept = catalog[::7] + [entry(n, 2, ("audio",)) for n in range(500, 520)]
    ranker.update(kept)
    assert index.whole.shape[0] == len(index.docs) == len(kept)  # compacted: no holes left
    assert orders(ranker) == orders(fresh(kept, lexical=ranker.lexical))
    ranker.update(catalog[:10])
    assert orders(ranker) == orders(fresh(catalog[:10], lexical=ranker.lexical))


def test_an_unchanged_catalog_embeds_nothing_and_one_change_embeds_only_its_texts() -> None:
    catalog = [entry(n, 1, ("map", "pdf")) for n in range(30)]
    ranker = fresh(catalog)
    before = ranker.embedded
    ranker.update(list(catalog))
    assert ranker.embedded == before
    catalog[4] = entry(4, 2, ("audio", "video", "chart"))
    ranker.update(catalog)
    assert ranker.embedded == before + 4  # its whole text and 3 sentences (its name is known)
    assert orders(ranker) == orders(fresh(catalog, lexical=ranker.lexical))


def test_one_new_skill_does_not_rewrite_the_file_until_flushed(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    catalog = [entry(n, 1, ("map", WORDS[n % 12])) for n in range(60)]
    ranker = EmbeddingRanker(trigrams, cache_path=path)
    ranker.update(catalog)
    written = path.read_bytes()
    catalog.append(entry(99, 1, ("invoice", "ledger")))
    ranker.update(catalog)  # 4 new vectors, under 5% of the cache
    assert path.read_bytes() == written
    restarted = EmbeddingRanker(trigrams, cache_path=path)
    restarted.update(catalog)
    assert restarted.embedded == 4  # only what had not been written
    ranker.flush()
    assert path.read_bytes() != written
    again = EmbeddingRanker(trigrams, cache_path=path)
    again.update(catalog)
    assert again.embedded == 0
    ranker.flush()  # nothing unsaved: nothing written
    always = EmbeddingRanker(trigrams, cache_path=tmp_path / "b.npz", save_fraction=0)
    always.update(catalog[:1])
    always.update(catalog[:2])
    read_back = EmbeddingRanker(trigrams, cache_path=tmp_path / "b.npz")
    read_back.update(catalog[:2])
    assert read_back.embedded == 0  # save_fraction=0: written by each update that embedded


@pytest.mark.parametrize(("fraction", "interval"), [(-0.1, 1.0), (0.1, -1.0), (0.1, math.nan)])
def test_bad_save_options_are_configuration_errors(fraction: float, interval: float) -> None:
    with pytest.raises(ConfigurationError, match="save_"):
        EmbeddingRanker(trigrams, save_fraction=fraction, save_interval=interval)


def _patched(path: Path, local_offset: int, central_offset: int, value: bytes) -> None:
    """Every member's local and central header field at those offsets set to ``value``."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        start = data.find(signature)
        while start >= 0:
            data[start + offset : start + offset + len(value)] = value
            start = data.find(signature, start + 4)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["encrypted", "unknown-compression"])
def test_a_zip_member_zipfile_cannot_read_is_an_ignored_cache(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "vectors.npz"
    catalog = [entry(n, 1, ("map",)) for n in range(3)]
    EmbeddingRanker(trigrams, cache_path=path).update(catalog)
    if damage == "encrypted":  # general purpose flag bit 0
        _patched(path, 6, 8, b"\x01\x00")
    else:  # compression method 99 (AES), which zipfile does not implement
        _patched(path, 8, 10, b"\x63\x00")
    with zipfile.ZipFile(path) as archive, pytest.raises(RuntimeError):
        archive.open("keys.npy").close()
    ranker = EmbeddingRanker(trigrams, cache_path=path)
    ranker.update(catalog)
    assert ranker.embedded == 9  # the file was ignored...
    again = EmbeddingRanker(trigrams, cache_path=path)
    again.update(catalog)
    assert again.embedded == 0  # ...and rewritten


def test_save_interval_writes_a_small_change_once_the_interval_passed(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    catalog = [entry(n, 1, ("map", WORDS[n % 12])) for n in range(60)]
    ranker = EmbeddingRanker(trigrams, cache_path=path, save_fraction=1.0, save_interval=0)
    ranker.update(catalog)  # under 100% of the cache, but the interval (0 s) has passed
    catalog.append(entry(99, 1, ("invoice",)))
    ranker.update(catalog)
    restarted = EmbeddingRanker(trigrams, cache_path=path)
    restarted.update(catalog)
    assert restarted.embedded == 0
    never = EmbeddingRanker(trigrams, cache_path=tmp_path / "n.npz", save_fraction=2.0)
    never.update(catalog)  # neither due: written only by flush
    assert not (tmp_path / "n.npz").exists()
    never.flush()
    assert (tmp_path / "n.npz").is_file()
