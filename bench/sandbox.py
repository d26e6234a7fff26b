"""Skill-script sandbox cost: one script call in ``BubblewrapSandbox`` vs ``UnsandboxedRunner``.

A trivial script (``scripts/noop.sh``: ``exit 0`` through ``/bin/sh``, and ``scripts/noop.py``:
an empty Python file) is run through :func:`plait.skills.managed.scripts.run_script` - the code
the ``run_<skill>_<script>`` tool calls - in a prepared workspace. The configurations are
interleaved round by round (unsandboxed, then bubblewrap, in alternating order), so machine
load hits both alike; the added cost is the median of the per-round paired differences.
Target: added cost <= 20 ms per call.

Run: ``python bench/sandbox.py [rounds]`` (default 200). Needs ``bwrap`` (Debian: bubblewrap).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from plait.sandbox import BubblewrapSandbox, UnsandboxedRunner
from plait.skills.managed.scripts import ScriptConfig, Workspace, run_script

TARGET_MS = 20.0


async def timed(workspace: Workspace, script: str, config: ScriptConfig) -> float:
    start = time.perf_counter()
    await run_script(workspace, script, [], config)
    return (time.perf_counter() - start) * 1000


async def measure(workspace: Workspace, script: str, rounds: int) -> tuple[float, float, float]:
    bare = ScriptConfig(sandbox=UnsandboxedRunner())
    boxed = ScriptConfig(sandbox=BubblewrapSandbox())
    await boxed.sandbox.check()  # the first-use probe is paid once, not per call
    for _ in range(5):  # warm-up
        await timed(workspace, script, bare)
        await timed(workspace, script, boxed)
    plain: list[float] = []
    sandboxed: list[float] = []
    for i in range(rounds):
        if i % 2:
            b = await timed(workspace, script, boxed)
            u = await timed(workspace, script, bare)
        else:
            u = await timed(workspace, script, bare)
            b = await timed(workspace, script, boxed)
        plain.append(u)
        sandboxed.append(b)
    added = statistics.median(b - u for b, u in zip(sandboxed, plain, strict=True))
    return statistics.median(plain), statistics.median(sandboxed), added


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="plait-bench-sandbox-") as folder:
        root = Path(folder)
        (root / "scripts").mkdir()
        (root / "scripts" / "noop.sh").write_text("exit 0\n")
        (root / "scripts" / "noop.py").write_text("")
        workspace = Workspace(root)
        print(f"{rounds} rounds, interleaved; medians in ms per script call")
        print(f"{'script':<18}{'unsandboxed':>12}{'bubblewrap':>12}{'added':>10}{'target':>9}")
        for script in ("scripts/noop.sh", "scripts/noop.py"):
            plain, boxed, added = await measure(workspace, script, rounds)
            verdict = "ok" if added <= TARGET_MS else "OVER"
            print(
                f"{script:<18}{plain:>12.2f}{boxed:>12.2f}{added:>10.2f}"
                f"{'<=' + format(TARGET_MS, 'g'):>7} {verdict}"
            )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
