"""Plan quality: moves needed to reach an imbalance, the planner against greedy.

    python -m bench.plan_quality [--nodes 40] [--guests 400] [--steps 150] [--seeds 7,1,2,3]

On `make_snapshot.py`'s static clusters (threshold and margin 0, so every step counts):
- greedy today: `crs plan --steps`' `moves`, single-move rounds each applied before the
  next (the same guest may move again, or back);
- greedy, no churn: the planner with its look-ahead turned off (each step the best next
  move; no guest moved twice; no noise step);
- planner: what rounds use (bruteforce, look-ahead over the three best first moves).
For each: moves until the imbalance is at or below each level, moves and imbalance at
the end, guests moved more than once, and the CPU time to plan (process time: the
machine is shared, so wall time would measure the neighbours).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from bench.make_snapshot import synthetic
from crs import balancer, planner, snapshot
from crs.decision import RoundState

LEVELS = (0.0434, 0.0395, 0.02, 0.01, 0.005)


def measure(moves: list[tuple[tuple[str, ...], float]], seconds: float) -> dict:
    """moves: (guests, imbalance after) in plan order."""
    afters = [a for _, a in moves]
    reach = {lv: next((i for i, a in enumerate(afters, 1) if a <= lv), None) for lv in LEVELS}
    seen: dict[str, int] = {}
    for guests, _ in moves:
        for sid in guests:
            seen[sid] = seen.get(sid, 0) + 1
    return {
        "reach": reach,
        "moves": len(moves),
        "final": afters[-1] if afters else None,
        "twice": sum(1 for c in seen.values() if c > 1),
        "seconds": seconds,
    }


def run(nodes: int, guests: int, steps: int, seed: int) -> dict[str, dict]:
    snap = snapshot.parse(synthetic(nodes, guests, mode="static", seed=seed))
    out = {}
    t = time.process_time()
    greedy = balancer.plan(snap, steps=steps).moves
    out["greedy today"] = measure([(m.guests, m.imbalance_after) for m in greedy], time.process_time() - t)
    planned = snap.with_settings(replace(snap.settings, moves_per_round=steps, hold_duration=0))
    for name, lookahead in (("greedy, no churn", 1), ("planner", planner.LOOKAHEAD)):
        saved, planner.LOOKAHEAD = planner.LOOKAHEAD, lookahead
        try:
            t = time.process_time()
            result = balancer.run_round(planned, RoundState())
            seconds = time.process_time() - t
        finally:
            planner.LOOKAHEAD = saved
        out[name] = measure([(s.move.guests, s.imbalance_after) for s in result.plan], seconds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--guests", type=int, default=400)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seeds", default="7,1,2,3")
    args = parser.parse_args()
    head = " | ".join(f"≤ {lv}" for lv in LEVELS)
    print(f"| seed | what | {head} | moves | final imbalance | guests moved twice | time |")
    print("| ---: | --- |" + " ---: |" * (len(LEVELS) + 4))
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, m in run(args.nodes, args.guests, args.steps, seed).items():
            reach = " | ".join("–" if m["reach"][lv] is None else str(m["reach"][lv]) for lv in LEVELS)
            print(
                f"| {seed} | {name} | {reach} | {m['moves']} | {m['final']:.5f} | {m['twice']} | {m['seconds']:.2f} s |"
            )


if __name__ == "__main__":
    main()
