"""Per-turn cost of the agent's model deadline (``Limits.model_timeout``) on a model without one.

The default agent (model deadline 600 s) against the same agent with ``model_timeout=math.inf``
(no deadline), measured as ``bench/overhead.py`` measures (timestamps inside the fake model and
tool, configurations interleaved round by round); the added cost is the median of the paired
differences. The deadline arms a timer only once a model call suspends, so a fake model that
answers at once pays for the wrapper alone.

Run: ``python bench/model_deadline.py [--rounds 21] [--long 1000] [--short 10]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import overhead

from plait import Agent, Limits


def config(model_timeout: float) -> overhead.Config:
    async def run(turns: int) -> overhead.Stamps:
        stamps = overhead.Stamps()
        agent = Agent(
            overhead.StampedModel(turns, stamps),
            tools=[overhead.stamped_tool(stamps)],
            limits=Limits(model_calls_per_turn=turns + 1, model_timeout=model_timeout),
        )
        result = await agent.run("go", thread_id="bench")
        assert result.output == "done", result.output
        return stamps

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=1000)
    args = parser.parse_args()
    configs = {"deadline 600 s": config(600.0), "no deadline": config(math.inf)}
    short, _ = overhead.measure(configs, args.short, args.rounds, tail=args.short)
    long, _ = overhead.measure(configs, args.long, max(3, args.rounds // 3), tail=100)
    cols = (f"{args.short} turns", f"{args.long:,} turns")
    print("per-turn overhead, µs (median)")
    print(f"{'configuration':<26}{cols[0]:>12}{cols[1]:>14}")
    for name in configs:
        print(
            f"{name:<26}{statistics.median(short[name]):>12.1f}{statistics.median(long[name]):>14.1f}"
        )
    added = [overhead.paired(m, "deadline 600 s", "no deadline") for m in (short, long)]
    print(f"{'added by the deadline':<26}{added[0]:>12.1f}{added[1]:>14.1f}")


if __name__ == "__main__":
    main()
