"""Hostile skill input finishes in bounded time and memory (issue 11 §4-6).

    python bench/skills_hostile.py [--runs 3]

Each case runs in a fresh Python process (so its peak RSS is its own) and prints the median
wall time and the largest peak RSS over ``--runs``, next to a baseline process that only
imports plait. The cases:

* ``recursive-alias``: ``x: &a [*a]`` (was RecursionError),
* ``bomb-7-unconstructible``: seven alias levels over leaves YAML cannot build (was 2.8 s),
* ``lol-bomb-cli-json``: ``plait skills list --format json`` on a 9-level ``["lol"]`` bomb
  (was > 30 s and 1.16 GB),
* ``deep-nesting``: ``[`` nested 100 000 deep (crashed the C composer),
* ``read-1gib-limit-1``: ``read_file(path, limit=1)`` on a sparse 1 GiB file (was 12 s, 2.1 GB),
* ``skill-md-1gib``: discovery beside a sparse 1 GiB SKILL.md (skipped unread),
* ``collection-3000``: discovery of 3,000 skills nested up to ten levels deep.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap

_SETUP = """
import asyncio, os, resource, sys, time
from pathlib import Path
root = Path(sys.argv[1])
def skill(folder, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
def md(name):
    return f"---\\nname: {name}\\ndescription: Does {name}.\\n---\\n# {name}\\n"
def bomb(levels, leaf, fan):
    lines = [f"a0: &a0 [{leaf}, {leaf}]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * fan) + "]")
    return "---\\nname: x\\ndescription: y\\n" + "\\n".join(lines) + "\\n---\\nbody\\n"
"""

CASES = {
    "baseline-import": "import plait.skills\nstart = time.perf_counter()\n",
    "recursive-alias": """
        from plait.skills import check_skill_md
        data = b"---\\nname: x\\ndescription: y\\nx: &a [*a]\\n---\\nbody\\n"
        start = time.perf_counter()
        check_skill_md(data, folder_name="x")
    """,
    "bomb-7-unconstructible": """
        from plait.skills import check_skill_md
        data = bomb(7, "!!timestamp 2024-13-45", 10)
        start = time.perf_counter()
        check_skill_md(data, folder_name="x")
    """,
    "lol-bomb-cli-json": """
        from typer.testing import CliRunner
        from plait.cli.app import app
        skill(root / "s" / "x", bomb(9, '"lol"', 9))
        skill(root / "s" / "good", md("good"))
        start = time.perf_counter()
        out = CliRunner().invoke(app, ["skills", "list", str(root / "s"), "--format", "json"])
        assert out.exit_code == 0 and "yaml-too-large" in out.output
    """,
    "deep-nesting": """
        from plait.skills import check_skill_md
        data = "---\\nname: x\\ndescription: y\\nx: " + "[" * 100_000 + "]" * 100_000 + "\\n---\\n"
        start = time.perf_counter()
        check_skill_md(data, folder_name="x")
    """,
    "read-1gib-limit-1": """
        from plait.skills import FilesystemSource, PromptFormat, SkillCatalog
        from plait.skills.disclosure.read_file import read_skill_file
        from plait.skills.disclosure.snapshot import take_snapshot
        skill(root / "s" / "big", md("big"))
        with open(root / "s" / "big" / "huge.log", "wb") as f:
            f.write(b"first line\\n" * 1000)
            f.truncate(1 << 30)
        catalog = SkillCatalog([FilesystemSource(root / "s")])
        asyncio.run(catalog.load())
        snap = take_snapshot(catalog, format=PromptFormat.MARKDOWN, budget=None, instructions=None)
        start = time.perf_counter()
        text = asyncio.run(read_skill_file(catalog, snap, str(root / "s/big/huge.log"), 0, 1))
        assert text.endswith("first line\\n")
    """,
    "skill-md-1gib": """
        from plait.skills import FilesystemSource
        skill(root / "s" / "good", md("good"))
        (root / "s" / "huge").mkdir()
        with open(root / "s" / "huge" / "SKILL.md", "wb") as f:
            f.write(md("huge").encode())
            f.truncate(1 << 30)
        start = time.perf_counter()
        items = FilesystemSource(root / "s").scan()
        assert len(items) == 2
    """,
    "collection-3000": """
        from plait.skills import FilesystemSource
        for i in range(3000):
            parents = "/".join(f"c{d}" for d in range(i % 10))
            skill(root / "s" / parents / f"s{i}", md(f"s{i}"))
        start = time.perf_counter()
        items = FilesystemSource(root / "s").scan()
        assert sum(1 for item in items if hasattr(item, "meta")) == 3000
    """,
}

_REPORT = """
elapsed = time.perf_counter() - start
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run_case(body: str) -> tuple[float, int]:
    """One fresh process: (seconds for the measured part, peak RSS in KiB)."""
    code = _SETUP + textwrap.dedent(body) + _REPORT
    with tempfile.TemporaryDirectory() as root:
        out = subprocess.run(
            [sys.executable, "-c", code, root], capture_output=True, text=True, timeout=300
        )
    if out.returncode != 0:
        raise SystemExit(f"case failed:\n{out.stderr}")
    seconds, rss = out.stdout.split()[-2:]
    return float(seconds), int(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON rows instead")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in CASES}
    for _ in range(args.runs):  # cases interleaved round by round
        for name, body in CASES.items():
            results[name].append(run_case(body))
    rows = [
        {
            "case": name,
            "median_ms": round(statistics.median(s for s, _ in runs) * 1000, 2),
            "peak_rss_mib": round(max(r for _, r in runs) / 1024, 1),
        }
        for name, runs in results.items()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'case':<26}{'median ms':>12}{'peak RSS MiB':>15}")
    for row in rows:
        print(f"{row['case']:<26}{row['median_ms']:>12}{row['peak_rss_mib']:>15}")


if __name__ == "__main__":
    main()
