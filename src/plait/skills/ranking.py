"""Ranking skills by relevance to a text: the :class:`SkillRanker` protocol and the default
:class:`LexicalRanker` (BM25F over name and description).

A ranker holds an index of the catalog's skills (name, description and, optionally, headings:
:func:`skill_headings`). :meth:`SkillRanker.update` makes the index hold
exactly the given entries and re-indexes only those whose ``(ref, version)`` changed;
:meth:`SkillRanker.rank` returns the best entries for a query, best first. Both disclosure mode
(which skills the prompt lists, ``search_skills``) and managed mode (``list_skills(query=...)``)
use one. Plug in another (embeddings from your own model, a remote index) by implementing the two
methods; ``examples/skills_ranker.py`` shows a toy one.

:class:`LexicalRanker` is a small in-house inverted index. ``bm25s`` was measured on the same
tokens (``bench/skills_relevance.py --bm25s``, figures in bench/README.md): it ranks the same and
builds faster, but it cannot update one document, so a refresh with one changed skill rebuilds
the whole index (~170 ms at 10,000 skills against a 5 ms budget), and it brings numpy (~130 ms
to import).

Tokens (:func:`terms`): words split at ``-``, ``_``, ``.``, ``/``, digits-letters and camelCase
boundaries (``pdfForms`` → ``pdf forms``; ``PDFs`` stays one word; a word of letters and
digits is also kept whole: ``k8s``, ``s3``, ``utf8``; so is a camelCase word, so
``PowerShell`` matches ``powershell`` as well as ``shell``), case-folded, accents
removed, English stop words dropped and the Snowball stemmer of the ranker's language applied
(``snowballstemmer``: ``merging``/``merges``/``merge`` → ``merg``); runs of Chinese,
Japanese or Korean characters become overlapping character bigrams, so text without spaces
still matches. Every bound is documented on the constructor.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from plait.errors import ConfigurationError
from plait.skills.catalog import SkillCatalog
from plait.skills.model import SkillEntry

__all__ = [
    "DEFAULT_MAX_QUERY_CHARS",
    "CatalogRanking",
    "LexicalRanker",
    "SkillRanker",
    "skill_headings",
    "stemmer",
    "terms",
]

DEFAULT_MAX_QUERY_CHARS = 4_000
"""Characters of a query that are read; the rest is ignored (a pasted file is not a query)."""

_MAX_TEXT_CHARS = 4_000
_IN_PLACE_CHANGES = 64
_COMMON = 8  # a query word in more than 1/8 of the skills is "common" (see LexicalRanker.rank)
_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W_0-9A-Za-z]+")
_CJK_RUN = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)")
_COMBINING = re.compile(r"[\u0300-\u036f]")
_STOP_WORDS = (
    "a about above after again all also an and any are as at be because been before being "
    "both but by can could did do does doing down during each etc few for from further had has "
    "have having he her here hers him his how i if in into is it its itself just let me more "
    "most my myself no nor not now of off on once only or other our ours out over own please "
    "same she should so some such than that the their theirs them then there these they this "
    "those through to too under until up very via was we were what when where which while who "
    "whom why will with would you your yours"
)
_STOP = frozenset(_STOP_WORDS.split())
_STEM_CACHE = 100_000


@functools.cache
def stemmer(language: str = "english") -> Callable[[str], str]:
    """The Snowball stemmer of ``language`` (any of ``snowballstemmer.algorithms()``), with a
    cache of up to 100,000 words (cleared when full). Raises :class:`ConfigurationError` for an
    unknown language."""
    import snowballstemmer  # with the ranker only: never when every skill fits the budget

    try:
        algorithm = snowballstemmer.stemmer(language)
    except KeyError:
        raise ConfigurationError(
            f"No Snowball stemmer for {language[:50]!r}; use one of "
            f"{', '.join(snowballstemmer.algorithms())}."
        ) from None
    stem_word = algorithm.stemWord
    cache: dict[str, str] = {}

    def stem(word: str) -> str:
        found = cache.get(word)
        if found is None:
            found = stem_word(word) if len(word) > 3 and word.isalpha() else word
            if len(cache) >= _STEM_CACHE:
                cache.clear()
            cache[word] = found
        return found

    return stem


def _pieces(word: str) -> Iterator[str]:
    """One word's tokens: camelCase and digit boundaries split, CJK runs as bigrams."""
    for piece in _CAMEL.findall(word):
        if piece.isascii():
            plural_acronym = len(piece) > 2 and piece[-1] == "s" and piece[:-1].isupper()
            yield piece[:-1].lower() if plural_acronym else piece.lower()
            continue
        for index, part in enumerate(_CJK_RUN.split(piece)):
            if not part:
                continue
            if index % 2 == 0:
                yield part.casefold()
            elif len(part) == 1:
                yield part
            else:
                yield from (part[i : i + 2] for i in range(len(part) - 1))


def terms(text: str, *, language: str = "english", max_chars: int = _MAX_TEXT_CHARS) -> list[str]:
    """The index terms of ``text`` (its first ``max_chars`` characters), in order, repeats kept,
    stemmed for ``language`` (see :func:`stemmer`).

    ``"Fill PDF-forms via fillPdfForm"`` →
    ``["fill", "pdf", "form", "fillpdfform", "fill", "pdf", "form"]``.
    """
    words = _word_terms(language)
    text = text[:max_chars]
    if not text.isascii():
        text = unicodedata.normalize("NFC", _COMBINING.sub("", unicodedata.normalize("NFKD", text)))
    return list(itertools.chain.from_iterable(map(words.__getitem__, _WORD.findall(text))))


class _WordTerms(dict[str, tuple[str, ...]]):
    """word → its terms, computed on first use; at most ``_STEM_CACHE`` words (then cleared)."""

    def __init__(self, language: str) -> None:
        super().__init__()
        self.stem = stemmer(language)

    def __missing__(self, word: str) -> tuple[str, ...]:
        plain = word.isascii() and word.isalpha() and word.islower()
        found = tuple(
            self.stem(piece)
            for piece in ((word,) if plain else _pieces(word))
            if piece not in _STOP and (len(piece) > 1 or not piece.isascii())
        )
        if not plain and not word.isalpha() and not word.isdigit():  # k8s, s3, utf8, a11y
            found = (word.casefold(), *found)
        elif len(found) > 1 and word.isascii() and word.isalpha():  # PowerShell = powershell
            found = (self.stem(word.lower()), *found)
        if len(self) >= _STEM_CACHE:
            self.clear()
        self[word] = found
        return found


@functools.cache
def _word_terms(language: str) -> _WordTerms:
    return _WordTerms(language)


def skill_headings(entry: SkillEntry, *, max_bytes: int = 65_536) -> str:
    """The Markdown headings of ``entry``'s SKILL.md, one per line, when its location is a
    readable local file (``""`` otherwise: a virtual or remote location, an unreadable file).
    Reads at most ``max_bytes``; the YAML frontmatter is skipped. For
    ``LexicalRanker(extra_text=skill_headings)``."""
    try:
        with open(entry.location, "rb") as file:
            text = file.read(max_bytes).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        closing = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = lines[closing + 1 :]
    return "\n".join(line.lstrip("#").strip() for line in lines if line.startswith("#"))


@runtime_checkable
class SkillRanker(Protocol):
    """Ranks a catalog's skills by relevance to a query. Implementations must be deterministic:
    the same entries and query give the same list."""

    def update(self, entries: Sequence[SkillEntry]) -> None:
        """Make the index hold exactly ``entries`` (catalog order); re-index only the ones whose
        ``(ref, version)`` is new. Called whenever the catalog changed."""
        ...

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """At most ``limit`` indexed entries relevant to ``query``, best first; ties in catalog
        order; ``[]`` when nothing is relevant (an empty or stop-word-only query)."""
        ...


@dataclass(slots=True)
class _Doc:
    key: int
    entry: SkillEntry
    terms: dict[str, float]
    length: float
    position: int = 0


class LexicalRanker:
    """BM25F over each skill's name (weighted ``name_weight``) and description.

    ``k1`` and ``b`` are the BM25 parameters (defaults 1.2 and 0.75). A query reads its first
    ``max_query_chars`` characters and at most ``max_query_terms`` distinct terms (the first
    ones); a skill's name and description are read to 4,000 characters each. ``language`` picks
    the Snowball stemmer (``"english"``; ``"german"``, ``"russian"``, ... for catalogs written in
    another language). ``extra_text(entry)``, if given, adds a third field of weight
    ``extra_weight`` (0.5), read to 4,000 characters: :func:`skill_headings` indexes the headings
    of local SKILL.md files (one bounded read per new or changed skill). Not thread-safe: one
    event loop uses it.
    """

    def __init__(
        self,
        *,
        name_weight: float = 3.0,
        k1: float = 1.2,
        b: float = 0.75,
        max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
        max_query_terms: int = 64,
        language: str = "english",
        extra_text: Callable[[SkillEntry], str] | None = None,
        extra_weight: float = 0.5,
    ) -> None:
        if extra_weight <= 0:
            raise ConfigurationError("LexicalRanker needs extra_weight > 0.")
        if name_weight <= 0 or k1 < 0 or not 0 <= b <= 1 or max_query_chars < 1:
            raise ConfigurationError(
                "LexicalRanker needs name_weight > 0, k1 >= 0, 0 <= b <= 1 and "
                "max_query_chars >= 1."
            )
        if max_query_terms < 1:
            raise ConfigurationError("LexicalRanker needs max_query_terms >= 1.")
        self.name_weight, self.k1, self.b = name_weight, k1, b
        self.max_query_chars, self.max_query_terms = max_query_chars, max_query_terms
        stemmer(language)  # an unknown language fails here, not at the first query
        self.language = language
        self.extra_text, self.extra_weight = extra_text, extra_weight
        self._docs: dict[tuple[str, str, str], _Doc] = {}
        self._entries: list[SkillEntry] = []
        self._by_key: dict[int, _Doc] = {}
        self._postings: dict[str, dict[int, float]] = {}
        self._total_length = 0.0
        self._norm_avg = 0.0
        self._next_key = 0
        self.indexed = 0
        """Entries (re)indexed since this ranker was made: a refresh adds only the changed."""

    def __len__(self) -> int:
        return len(self._docs)

    def update(self, entries: Sequence[SkillEntry]) -> None:
        """See :meth:`SkillRanker.update`. Cost: an identity check per entry when at most a few
        changed in place (a typical refresh), else one dict lookup per entry; plus indexing the
        new or changed ones (and a pass over the index when the mean length drifts by 10%).
        An entry whose ``(ref, version)`` repeats an earlier one in ``entries`` is ignored."""
        entries = list(entries)
        if self._replace_in_place(entries):
            mean = self._total_length / len(self._docs)
            if abs(mean - self._norm_avg) > 0.1 * self._norm_avg:
                self._reweight(mean)
        else:
            self._update_all(entries)
        self._entries = entries

    def _replace_in_place(self, entries: list[SkillEntry]) -> bool:
        """The fast path: the same skills at the same positions, a few of them new objects."""
        last = self._entries
        if len(entries) != len(last) or not last:
            return False
        moved = [i for i, (a, b) in enumerate(zip(entries, last, strict=True)) if a is not b]
        if len(moved) > _IN_PLACE_CHANGES:
            return False
        swaps, fresh_idents = [], set()
        for i in moved:
            old, new = last[i], entries[i]
            if (old.source_id, old.id) != (new.source_id, new.id):
                return False
            ident, fresh = (
                (old.source_id, old.id, old.version),
                (new.source_id, new.id, new.version),
            )
            doc = self._docs.get(ident)
            if doc is None or doc.position != i or fresh in fresh_idents:
                return False  # a skill listed twice: the full update handles duplicates
            if fresh != ident and fresh in self._docs:
                return False
            fresh_idents.add(fresh)
            swaps.append((i, ident, new))
        for position, ident, entry in swaps:
            doc = self._docs.pop(ident)
            fresh = (entry.source_id, entry.id, entry.version)
            if fresh != ident:
                self._remove(doc)
                doc = self._new_doc(entry)
                self._add(doc)
            doc.entry, doc.position = entry, position
            self._docs[fresh] = doc
        return True

    def _update_all(self, entries: list[SkillEntry]) -> None:
        docs = self._docs
        keep: dict[tuple[str, str, str], _Doc] = {}
        added: list[_Doc] = []
        for position, entry in enumerate(entries):
            ident = (entry.source_id, entry.id, entry.version)
            doc = docs.get(ident)
            if doc is None:
                if ident in keep:
                    continue
                doc = self._new_doc(entry)
                added.append(doc)
            doc.entry = entry
            doc.position = position
            keep[ident] = doc
        if len(keep) - len(added) != len(docs):  # some were removed or changed
            for ident, doc in docs.items():
                if ident not in keep:
                    self._remove(doc)
        self._docs = keep
        total = self._total_length + sum(doc.length for doc in added)
        mean = total / len(keep) if keep else 0.0
        if not self._norm_avg or abs(mean - self._norm_avg) > 0.1 * self._norm_avg:
            self._reweight(mean)  # the docs kept; the added are weighed at the new mean below
        for doc in added:
            self._add(doc)

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """See :meth:`SkillRanker.rank`. Cost: the postings of the query's distinct terms, rarest
        first; a word found in more than an eighth of the skills ("file", "data") only adds to
        the skills a rarer word of the query already found, unless none did."""
        return [entry for entry, _ in self.scored(query, limit)]

    def scored(self, query: str, limit: int) -> list[tuple[SkillEntry, float]]:
        """:meth:`rank` with each skill's BM25F score (> 0), for a caller that combines scores
        (:class:`~plait.skills.embedding.EmbeddingRanker`)."""
        if limit < 1 or not self._docs:
            return []
        wanted = list(
            dict.fromkeys(terms(query, language=self.language, max_chars=self.max_query_chars))
        )
        count = len(self._docs)
        found = [(p, t) for t in wanted[: self.max_query_terms] if (p := self._postings.get(t))]
        found.sort(key=lambda pair: len(pair[0]))  # rarest first; stable: ties in query order
        scores: dict[int, float] = {}
        get = scores.get
        for postings, _ in found:
            df = len(postings)
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            if scores and df * _COMMON > count:
                for key in scores:  # a common word only re-orders what rarer words found
                    weight = postings.get(key)
                    if weight is not None:
                        scores[key] += idf * weight
                continue
            for key, weight in postings.items():
                scores[key] = get(key, 0.0) + idf * weight
        docs = self._by_key
        best = heapq.nsmallest(limit, scores.items(), key=lambda kv: (-kv[1], docs[kv[0]].position))
        return [(docs[key].entry, score) for key, score in best]

    # --- index maintenance --------------------------------------------------------------------

    def _new_doc(self, entry: SkillEntry) -> _Doc:
        counts = Counter(terms(entry.description, language=self.language))
        weights = cast("dict[str, float]", counts)  # ints are floats to the arithmetic below
        for term in terms(entry.name, language=self.language):
            weights[term] = weights.get(term, 0.0) + self.name_weight
        if self.extra_text is not None:
            for term in terms(self.extra_text(entry), language=self.language):
                weights[term] = weights.get(term, 0.0) + self.extra_weight
        self._next_key += 1
        self.indexed += 1
        return _Doc(self._next_key, entry, weights, sum(weights.values()))

    def _norm(self, doc: _Doc) -> float:
        """BM25's length normalisation of ``doc`` at the current mean length."""
        return self.k1 * (
            1.0 - self.b + self.b * doc.length / (self._norm_avg or doc.length or 1.0)
        )

    def _add(self, doc: _Doc) -> None:
        self._by_key[doc.key] = doc
        self._total_length += doc.length
        postings = self._postings
        key, scale, norm = doc.key, self.k1 + 1.0, self._norm(doc)
        for term, tf in doc.terms.items():
            found = postings.get(term)
            if found is None:
                found = postings[term] = {}
            found[key] = tf * scale / (tf + norm)

    def _remove(self, doc: _Doc) -> None:
        del self._by_key[doc.key]
        self._total_length -= doc.length
        for term in doc.terms:
            postings = self._postings[term]
            del postings[doc.key]
            if not postings:
                del self._postings[term]

    def _reweight(self, mean: float) -> None:
        """Recompute every posting's BM25 term weight for the new mean length."""
        self._norm_avg = mean
        postings = self._postings
        scale = self.k1 + 1.0
        for doc in self._by_key.values():
            key, norm = doc.key, self._norm(doc)
            for term, tf in doc.terms.items():
                postings[term][key] = tf * scale / (tf + norm)


class CatalogRanking:
    """A ranker kept in step with a catalog's active, model-invocable skills: re-indexed
    (incrementally, see :meth:`SkillRanker.update`) whenever the catalog's generation moved."""

    def __init__(self, catalog: SkillCatalog, ranker: SkillRanker | None = None) -> None:
        self.catalog = catalog
        self.ranker: SkillRanker = ranker if ranker is not None else LexicalRanker()
        self._generation = -1

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """The best ``limit`` active skills for ``query`` (see :meth:`SkillRanker.rank`)."""
        if self._generation != self.catalog.generation:
            self.ranker.update([e for e in self.catalog.active() if e.meta.model_invocable])
            self._generation = self.catalog.generation
        return self.ranker.rank(query, limit)
