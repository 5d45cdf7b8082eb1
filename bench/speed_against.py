"""This tree's engine against an older one, in the same run: whole `python -m crs plan --json`
processes and in-process rounds under the product's defaults, interleaved, with the outputs
compared (the same decisions, bit for bit).

The machine is often shared, so wall times swing; CPU time (user + system) is the steadier
figure, and the ratio of two trees measured side by side is what to read.

Run: git archive main crs | (mkdir -p /tmp/before && tar -x -C /tmp/before)
     .venv/bin/python -m bench.speed_against /tmp/before [--runs 5] [--methods bruteforce topsis]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.make_snapshot import synthetic

ROOT = Path(__file__).resolve().parent.parent

# One round in the tree on PYTHONPATH (run in a child, so each tree imports its own crs):
# the product's defaults, dynamic mode, hold served and no margin, so the plan always runs.
ROUND = """
import json, sys, time
from dataclasses import replace
from crs.balancer import run_round
from crs.decision import RoundState
from crs.model import PRODUCT
from crs.snapshot import load_file
snap = load_file(sys.argv[1])
target = PRODUCT.target_imbalance if sys.argv[2] == "default" else float(sys.argv[2])
settings = replace(PRODUCT, mode="dynamic", hold_duration=0, threshold=0.0, margin=0.0, target_imbalance=target)
snap = snap.with_settings(settings)
best = float("inf")
for _ in range(int(sys.argv[3])):
    start = time.process_time()
    result = run_round(snap, RoundState())
    best = min(best, time.process_time() - start)
moves = [[s.move.leader, s.move.target, s.move.imbalance_after] for s in result.plan]
print(json.dumps({"cpu": best, "moves": moves}))
"""


def process(tree: Path, argv: list[str]) -> tuple[float, float, bytes]:
    """(wall s, CPU s, stdout) of `python -m crs …` with `tree` first on the path; run from
    the tree itself, as `-m` puts the working directory first."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = os.times()
    proc = subprocess.Popen([sys.executable, "-m", "crs", *argv], stdout=subprocess.PIPE, cwd=tree, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    assert status == 0, status
    return os.times().elapsed - start.elapsed, usage.ru_utime + usage.ru_stime, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path, help="a directory holding the older tree's crs/")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=["bruteforce", "topsis"])
    args = parser.parse_args()
    trees = {"before": args.baseline.resolve(), "after": ROOT}
    for tree in trees.values():  # installed packages carry compiled bytecode: so do both trees here
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "crs")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods:
            path = Path(tmp, f"{method}.json")
            path.write_text(json.dumps(synthetic(1000, 20000, "dynamic", method)))
            best = {name: [float("inf"), float("inf")] for name in trees}
            outputs = {}
            for _ in range(args.runs if method == "bruteforce" else max(1, args.runs // 2)):
                for name, tree in trees.items():
                    wall, cpu, outputs[name] = process(tree, ["plan", str(path), "--json"])
                    best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
            assert outputs["before"] == outputs["after"], "the two trees decide differently"
            print(f"plan --json, 1000 x 20000, {method}: best wall / CPU (s)")
            for name in trees:
                print(f"  {name:6} {best[name][0]:.2f} / {best[name][1]:.2f}")
            print(f"  ratio after/before CPU {best['after'][1] / best['before'][1]:.2f}")
        path = Path(tmp, "bruteforce.json")
        for target in ("default", "0"):
            results = {}
            for name, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=str(tree))
                out = subprocess.run(
                    [sys.executable, "-c", ROUND, str(path), target, str(args.runs)],
                    cwd=tmp,
                    env=env,
                    check=True,
                    capture_output=True,
                ).stdout
                results[name] = json.loads(out)
            assert results["before"]["moves"] == results["after"]["moves"], "the two trees plan differently"
            moves = len(results["after"]["moves"])
            print(f"run_round, product defaults, target {target}: {moves} move(s), best CPU (s)")
            for name in trees:
                print(f"  {name:6} {results[name]['cpu']:.3f}")
            print(f"  ratio after/before {results['after']['cpu'] / results['before']['cpu']:.2f}")


if __name__ == "__main__":
    main()
