"""Benchmark the skills catalog on generated skill trees.

    python bench/skills_catalog.py [--sizes 1000 10000] [--runs 5] [--budget 16000]

For each size, a temporary folder of skill folders is generated (every tenth skill also has
``scripts/`` and ``references/``), then measured, median of ``--runs``:

* cold discovery: a new FilesystemSource + SkillCatalog and ``await catalog.load()``
  (files are in the OS page cache, as they are after the first run of any agent);
* refresh with nothing changed, and with one SKILL.md rewritten;
* prompt render (Markdown and XML) of the active skills under a character budget, uncached,
  and of every skill without a budget;
* lenient parse + validate of one typical SKILL.md (``check_skill_md``), per file.

Targets (1,000 skills): cold ≤ 300 ms, no-change refresh ≤ 20 ms, render ≤ 10 ms,
parse + validate ≤ 0.2 ms per file.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml

from plait.skills import FilesystemSource, SkillCatalog, ValidationMode, check_skill_md
from plait.skills.render import render_markdown, render_xml

TARGETS_MS = {"cold": 300.0, "refresh": 20.0, "render_md": 10.0, "render_xml": 10.0}
TARGET_PARSE_MS = 0.2


def skill_text(index: int, revision: int = 0) -> str:
    name = f"skill-{index:05d}"
    body = "\n".join(
        f"{step}. Step {step} of the procedure for {name}: read the input, check it, and "
        "write the result where the user asked."
        for step in range(1, 31)
    )
    return (
        "---\n"
        f"name: {name}\n"
        f"description: Handles task family {index} (revision {revision}) end to end. Use when "
        f"the user mentions topic {index}, its file formats, or asks to automate it.\n"
        "license: MIT\n"
        "compatibility: Requires Python 3.11+\n"
        "metadata:\n"
        "  author: bench\n"
        '  version: "1.0"\n'
        "allowed-tools: Bash(python3:*) Read Write\n"
        "---\n\n"
        f"# {name}\n\nFollow these steps.\n\n{body}\n"
    )


def generate(root: Path, count: int) -> None:
    for index in range(count):
        folder = root / f"skill-{index:05d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_text(index))
        if index % 10 == 0:
            (folder / "scripts").mkdir()
            (folder / "scripts" / "run.py").write_text("print('hello')\n")
            (folder / "references").mkdir()
            (folder / "references" / "REFERENCE.md").write_text("# Reference\n")


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


def new_catalog(root: Path, count: int) -> SkillCatalog:
    source = FilesystemSource(root, source_id="bench", max_dirs=count * 2)
    return SkillCatalog([source])


async def measure(root: Path, count: int, runs: int, budget: int) -> dict[str, float]:
    cold = []
    for _ in range(runs):
        catalog = new_catalog(root, count)
        cold.append(await timed(catalog.load))
    catalog = new_catalog(root, count)
    await catalog.load()
    assert len(catalog.active()) == count, "every generated skill must load"
    unchanged = [await timed(catalog.refresh) for _ in range(runs)]
    changed = []
    for revision in range(1, runs + 1):
        (root / "skill-00007" / "SKILL.md").write_text(skill_text(7, revision))
        start = time.perf_counter()
        result = await catalog.refresh()
        changed.append(time.perf_counter() - start)
        assert len(result.changed) == 1, result
    active = catalog.active()
    render_md, render_x, render_all = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        text = render_markdown(active, budget=budget)
        render_md.append(time.perf_counter() - start)
        assert len(text) <= budget
        start = time.perf_counter()
        render_xml(active, budget=budget)
        render_x.append(time.perf_counter() - start)
        start = time.perf_counter()
        render_markdown(active)
        render_all.append(time.perf_counter() - start)
    return {
        "cold": median_ms(cold),
        "refresh": median_ms(unchanged),
        "refresh_one": median_ms(changed),
        "render_md": median_ms(render_md),
        "render_xml": median_ms(render_x),
        "render_all": median_ms(render_all),
        "parse": parse_per_file_ms(root, min(count, 1000), runs),
    }


def parse_per_file_ms(root: Path, files: int, runs: int) -> float:
    samples = [
        (p.read_bytes(), p.parent.name) for p in sorted(root.glob("skill-*/SKILL.md"))[:files]
    ]
    per_run = []
    for _ in range(runs):
        start = time.perf_counter()
        for data, folder in samples:
            check_skill_md(data, folder_name=folder, mode=ValidationMode.LENIENT)
        per_run.append((time.perf_counter() - start) / len(samples))
    return median_ms(per_run)


ROWS = [
    ("cold discovery (load)", "cold", "≤ 300 ms"),
    ("refresh, nothing changed", "refresh", "≤ 20 ms"),
    ("refresh, one skill changed", "refresh_one", "-"),
    ("render markdown under budget", "render_md", "≤ 10 ms"),
    ("render xml under budget", "render_xml", "≤ 10 ms"),
    ("render markdown, no budget (all)", "render_all", "-"),
    ("lenient parse + validate, per file", "parse", "≤ 0.2 ms"),
]


def print_table(results: dict[int, dict[str, float]], runs: int, budget: int) -> bool:
    sizes = sorted(results)
    header = ["measurement", *(f"{n:,} skills" for n in sizes), "target (1,000)", "ok"]
    lines = [header]
    passed = True
    for label, key, target in ROWS:
        cells = [
            f"{results[n][key]:.3f} ms" if key == "parse" else f"{results[n][key]:.1f} ms"
            for n in sizes
        ]
        limit = TARGETS_MS.get(key, TARGET_PARSE_MS if key == "parse" else None)
        base = results.get(1000, results[sizes[0]])[key]
        ok = "-" if limit is None else ("yes" if base <= limit else "NO")
        passed = passed and ok != "NO"
        lines.append([label, *cells, target, ok])
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    print(
        f"PyYAML C loader: {getattr(yaml, '__with_libyaml__', False)}; median of {runs} runs; "
        f"render budget {budget:,} characters"
    )
    for number, row in enumerate(lines):
        print("| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + " |")
        if number == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=int, default=16_000)
    args = parser.parse_args()
    results = {}
    for count in args.sizes:
        with tempfile.TemporaryDirectory(prefix="plait-skills-bench-") as tmp:
            root = Path(tmp) / "skills"
            generate(root, count)
            results[count] = asyncio.run(measure(root, count, args.runs, args.budget))
    return 0 if print_table(results, args.runs, args.budget) else 1


if __name__ == "__main__":
    raise SystemExit(main())
