"""``plait skills list`` over many skills: wall time of the whole command, per output format.

Builds N skills (default 10,000; one with a 400-character name) in a temporary
``./.agents/skills``, then runs ``plait skills list`` with ``--format table``, ``tsv`` and
``json`` in fresh processes, round by round (each format once per round, so machine load hits
them alike), and prints the median and minimum of each, plus the longest output line.

Run: ``python bench/skills_list.py [--skills 10000] [--runs 5]`` (with plait installed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

FORMATS = ("table", "tsv", "json")


def build(root: Path, count: int) -> None:
    folder = root / ".agents" / "skills"
    long_name = "-".join(["a" * 19] * 20) + "x"
    for i in range(count):
        name = long_name if i == 0 else f"skill-{i:05d}"
        skill = folder / ("long" if i == 0 else name)
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Does thing {i}. Use when thing {i} is asked.\n"
            "---\nBody.\n",
            encoding="utf-8",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    plait = shutil.which("plait")
    if plait is None:
        raise SystemExit("plait is not on PATH: pip install -e . first")
    times: dict[str, list[float]] = {f: [] for f in FORMATS}
    widest: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        root = Path(tmp)
        build(root, args.skills)
        env = {**os.environ, "HOME": tmp, "PLAIT_HOME": str(root / "home"), "COLUMNS": "120"}
        for _ in range(args.runs):
            for fmt in FORMATS:
                started = time.perf_counter()
                done = subprocess.run(
                    [plait, "skills", "list", "--format", fmt],
                    cwd=root,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                times[fmt].append((time.perf_counter() - started) * 1000)
                widest[fmt] = max(len(line) for line in done.stdout.splitlines())
    load = os.getloadavg()[0]
    print(f"plait skills list, {args.skills:,} skills, ms (median of {args.runs}; load {load:.1f})")
    print(f"{'format':<8}{'median':>10}{'min':>10}{'widest line':>14}")
    for fmt in FORMATS:
        print(
            f"{fmt:<8}{statistics.median(times[fmt]):>10.0f}{min(times[fmt]):>10.0f}"
            f"{widest[fmt]:>14}"
        )


if __name__ == "__main__":
    main()
