"""EmbeddingRanker at its edges: the lexical ranker it is given, vectors of any magnitude, the
cache file's size, mode and write failures, an embed failing mid-update, zero limits."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from trigram_embedding import SKILLS, entry, names, trigrams

from plait.errors import ConfigurationError
from plait.skills import EmbeddingRanker, SkillEntry
from plait.skills.embedding import skill_clauses
from plait.skills.ranking import LexicalRanker


def test_the_lexical_ranker_given_is_the_one_used_even_before_it_holds_any_skill() -> None:
    lexical = LexicalRanker(name_weight=9.0)  # empty: len() == 0
    ranker = EmbeddingRanker(trigrams, lexical=lexical)
    assert ranker.lexical is lexical
    ranker.update(SKILLS)
    assert len(lexical) == 3


def test_vectors_of_any_finite_magnitude_rank_as_their_unit_vectors() -> None:
    def huge(texts: list[str]) -> list[list[float]]:  # squares overflow float32
        return [[value * 1e20 for value in vector] for vector in trigrams(texts)]

    def tiny(texts: list[str]) -> list[list[float]]:  # squares underflow float32
        return [[value * 1e-25 for value in vector] for vector in trigrams(texts)]

    query = "plot hiking tracks on a map"
    plain = EmbeddingRanker(trigrams, fuse=False)
    plain.update(SKILLS)
    expected = names(plain.rank(query, 3))
    assert len(expected) == 3
    for embed in (huge, tiny):
        ranker = EmbeddingRanker(embed, fuse=False)
        ranker.update(SKILLS)
        assert names(ranker.rank(query, 3)) == expected, embed.__name__


def test_a_catalog_with_more_texts_than_max_cache_vectors_still_reads_its_file_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "vectors.npz"
    first = EmbeddingRanker(trigrams, cache_path=path, max_cache_vectors=5)
    first.update(SKILLS)  # 9 texts: 3 whole + 6 clauses
    assert first.embedded == 9
    second = EmbeddingRanker(trigrams, cache_path=path, max_cache_vectors=5)
    second.update(SKILLS)
    assert second.embedded == 4  # the file holds 5 of them
    assert names(second.rank("spredsheet", 1)) == ["spreadsheet-tools"]


def test_the_cache_file_gets_the_mode_of_a_new_file_under_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    previous = os.umask(0o022)
    try:
        EmbeddingRanker(trigrams, cache_path=path).update(SKILLS)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # readable by another user, as np.savez
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.npz"]  # no temporary file left


def test_an_unwritable_cache_path_is_a_configuration_error_after_a_complete_update(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    lexical = LexicalRanker()
    ranker = EmbeddingRanker(trigrams, lexical=lexical, cache_path=blocker / "vectors.npz")
    with pytest.raises(ConfigurationError, match="cache_path"):
        ranker.update(SKILLS)
    assert len(ranker) == 3 and len(lexical) == 3
    assert names(ranker.rank("mail merge letters", 1)) == ["mail-merge"]
    ranker.update(SKILLS)  # nothing new to embed: nothing to write, no error


def test_an_embed_failing_mid_update_leaves_the_previous_index_and_keeps_what_it_embedded() -> None:
    calls = 0

    def flaky(texts: list[str]) -> list[list[float]]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("model server down")
        return trigrams(texts)

    ranker = EmbeddingRanker(flaky, batch_size=4)
    ranker.update(SKILLS[:1])  # one call: its whole text, its name, its one sentence
    grown = [*SKILLS, entry("csv-clean", "Clean CSV files.")]
    with pytest.raises(RuntimeError, match="model server down"):
        ranker.update(grown)  # second call embeds 4 texts, the third fails
    assert names(ranker.rank("plot hiking tracks on a map", 3)) == ["spreadsheet-tools"]
    assert ranker.embedded == 3 + 4  # the batch embedded before the failure counts
    ranker.update(grown)  # the kept batch is not embedded again
    assert ranker.embedded == 4 * 3  # each skill's whole text, name and sentence, once
    assert names(ranker.rank("plot hiking tracks on a map", 1)) == ["gpx-trails"]


def test_skill_clauses_with_a_limit_below_one_are_none() -> None:
    assert skill_clauses("gpx-trails", "Plot tracks. On a map.", 0) == []


@pytest.mark.parametrize("member", ["keys", "model", "format", "vectors"])
def test_a_cache_file_whose_arrays_are_of_another_type_or_size_is_ignored_unread(
    tmp_path: Path, member: str
) -> None:
    import numpy as np

    path = tmp_path / "vectors.npz"
    EmbeddingRanker(trigrams, cache_path=path, clauses=0).update(SKILLS)
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays[member] = {
        "keys": arrays["keys"].astype("<U100000"),  # 400 kB a key: read, 200,000 would be 80 GB
        "model": np.array("default" + " " * 5_000),
        "format": np.array([2, 2]),
        "vectors": arrays["vectors"].astype(np.complex64),
    }[member]
    np.savez(path, **arrays)
    ranker = EmbeddingRanker(trigrams, cache_path=path, clauses=0)
    ranker.update(SKILLS)
    assert ranker.embedded == 3
    assert names(ranker.rank("spredsheet", 1)) == ["spreadsheet-tools"]


def test_scores_without_spread_combine_to_the_other_order_or_to_catalog_order() -> None:
    for options in ({}, {"fusion": "rank"}):
        ranker = EmbeddingRanker(trigrams, **options)  # type: ignore[arg-type]
        ranker.update(SKILLS[2:])  # one skill: every score list has no spread
        assert names(ranker.rank("spreadsheet", 3)) == ["gpx-trails"], options
        ranker.update(SKILLS)
        only = EmbeddingRanker(trigrams, fuse=False)
        only.update(SKILLS)
        query = "spredsheat formulaz"  # no word of any skill: the lexical scores are all 0
        assert names(ranker.rank(query, 3)) == names(only.rank(query, 3)), options
    twins = [
        SkillEntry(source, "gpx-trails", "v1", f"/{source}/SKILL.md", SKILLS[2].meta)
        for source in ("b", "a", "c")
    ]
    ranker = EmbeddingRanker(trigrams)
    ranker.update([*twins, *SKILLS[:2]])  # identical texts: identical scores
    assert [e.source_id for e in ranker.rank("hiking map", 3)] == ["b", "a", "c"]


def test_a_cache_file_written_with_other_clause_and_window_settings_serves_its_texts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "vectors.npz"
    EmbeddingRanker(trigrams, cache_path=path, clauses=8, query_window=2).update(SKILLS)
    fewer = EmbeddingRanker(trigrams, cache_path=path, clauses=1, query_window=4)
    fewer.update(SKILLS)  # its texts (whole + name) are a subset of the file's
    assert fewer.embedded == 0
    assert names(fewer.rank("plot my hiking tracks on a map", 1)) == ["gpx-trails"]


def test_a_query_and_its_pieces_go_to_embed_in_batches_of_batch_size() -> None:
    sizes: list[int] = []

    def limited(texts: list[str]) -> list[list[float]]:  # an API taking at most 2 texts a call
        sizes.append(len(texts))
        if len(texts) > 2:
            raise ValueError("at most 2 inputs per request")
        return trigrams(texts)

    ranker = EmbeddingRanker(limited, batch_size=2)
    ranker.update(SKILLS)
    sizes.clear()
    found = ranker.rank("please plot my hiking tracks on a map for me", 1)
    assert names(found) == ["gpx-trails"]
    assert sizes == [2, 2, 2, 2, 1]  # the query and its 8 windows


def test_a_type_or_value_error_raised_by_embed_itself_propagates_unchanged() -> None:
    def quota(texts: list[str]) -> list[list[float]]:
        raise ValueError("quota exceeded")

    with pytest.raises(ValueError, match="quota exceeded"):
        EmbeddingRanker(quota).update(SKILLS)
