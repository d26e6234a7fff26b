"""Start-up times: imports and CLI commands in fresh processes, against the targets.

Each figure is the median of ``--runs`` (default 7) fresh processes, measured round by round
(every figure once per round) so that machine load hits them alike:

* imports: wall time of the import statement alone, taken inside the child with
  ``perf_counter`` (interpreter start-up excluded);
* CLI: wall time of the whole ``plait …`` process as a user waits for it (interpreter start-up
  and the console script included), and ``python -c pass`` for reference.

Children run with the bytecode cache on, as for an installed wheel (pip compiles it): the
parent's ``PYTHONDONTWRITEBYTECODE`` is dropped from their environment and one unmeasured round
writes the ``.pyc`` files first. Without the cache (an editable install run with
``PYTHONDONTWRITEBYTECODE=1``) every plait module compiles its source again in every process,
which made ``import plait`` 4 to 5 ms instead of 1.3 ms.

Run: ``python bench/startup.py [--runs 7]`` (from the repository, with plait installed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

IMPORTS = [
    ("import plait", 100.0),
    ("from plait import Agent", None),
    ('from plait import Agent, tool; tool(lambda x: x, name="echo")', None),
    ("import plait.skills", 150.0),
    ("from plait.skills import SkillsMiddleware", None),
    ("import plait.cli.app", None),
]


def cli_commands() -> list[tuple[str, list[str], float | None]]:
    plait = shutil.which("plait") or ""
    python = sys.executable
    commands: list[tuple[str, list[str], float | None]] = [
        ("python -c pass", [python, "-c", "pass"], None),
        ("plait --version", [plait, "--version"], 150.0),
        ("plait --help", [plait, "--help"], 150.0),
        ("plait skills --help", [plait, "skills", "--help"], None),
    ]
    return [c for c in commands if c[1][0]]


def child_env() -> dict[str, str]:
    """The children's environment: the parent's, with the bytecode cache on."""
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_ms(statement: str, env: dict[str, str]) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return float(done.stdout) * 1e3


def process_ms(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    env = child_env()
    commands = cli_commands()
    for statement, _target in IMPORTS:  # unmeasured: writes the .pyc files a user's install has
        import_ms(statement, env)
    samples: dict[str, list[float]] = {name: [] for name, _ in IMPORTS}
    samples.update({name: [] for name, _, _ in commands})
    for _ in range(args.runs):
        for statement, _target in IMPORTS:
            samples[statement].append(import_ms(statement, env))
        for name, argv, _target in commands:
            samples[name].append(process_ms(argv, env))
    targets = {name: target for name, target in IMPORTS}
    targets.update({name: target for name, _, target in commands})
    width = max(len(name) for name in samples)
    load = os.getloadavg()[0]
    print(
        f"start-up, ms (median of {args.runs} fresh processes, bytecode cache on; "
        f"load average {load:.1f})"
    )
    print(f"{'figure':<{width}}  {'median':>8}  {'min':>8}  target")
    for name, values in samples.items():
        target = targets[name]
        mark = "-" if target is None else f"≤ {target:.0f} ms"
        if target is not None:
            mark += "  met" if statistics.median(values) <= target else "  NOT MET"
        print(f"{name:<{width}}  {statistics.median(values):>8.1f}  {min(values):>8.1f}  {mark}")


if __name__ == "__main__":
    main()
