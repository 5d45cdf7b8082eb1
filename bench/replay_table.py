"""The replay table: every packaged trace day on 12 and 24 nodes, seeds 0–4, under
Proxmox's single move per round and under the product's plan settings.

Each cell is `python -m crs replay --trace T --nodes N --seed S --json` plus the policy's
flags; a row aggregates the five seeds. The policies' flags depend on what the engine
offers: `--preset` exists once crs.model.Settings has a `preset` field (the planner).

Run: .venv/bin/python -m bench.replay_table [--seeds 5] [--hours 24] [--write bench/notes/04-replay-on-every-trace.md]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import time
from pathlib import Path

from crs.programs import cli

TRACES = ("bitbrains", "planetlab", "google")
NODES = (12, 24)
BEGIN, END = "<!-- replay-table -->", "<!-- /replay-table -->"


def policies() -> dict[str, list[str]]:
    """Proxmox: one move per round, no cooldown; the product: its preset (plans of several
    moves down to a target) and the dashboard's 30-minute cooldown."""
    return {
        "proxmox": ["--cooldown", "0", "--preset", "proxmox"],
        "product": ["--cooldown", "30", "--preset", "product"],
    }


def cell(trace: str, nodes: int, seed: int, flags: list[str], hours: float) -> dict:
    argv = ["replay", "--trace", trace, "--nodes", str(nodes), "--seed", str(seed), "--hours", str(hours), "--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if cli.main(argv + flags) != 0:
            raise SystemExit(f"replay failed: {' '.join(argv + flags)}")
    return json.loads(out.getvalue())


def row(trace: str, nodes: int, policy: str, cells: list[dict]) -> str:
    within = [c["share_within_threshold_after_first_hour"] for c in cells]
    mean = lambda key: sum(key(c) for c in cells) / len(cells)  # noqa: E731
    return (
        f"| {trace} | {nodes} | {policy} | {min(within):.1%} | {mean(lambda c: c['imbalance']['p50']):.3f} "
        f"| {mean(lambda c: c['imbalance']['p90']):.3f} | {mean(lambda c: c['imbalance']['p99']):.3f} "
        f"| {mean(lambda c: c['migrations']['per_day']):.1f} | {mean(lambda c: c['gib_moved_per_day']):.0f} "
        f"| {max(c['ping_pongs_per_day'] for c in cells):.1f} "
        f"| {max(c['most_moves_of_one_guest']['moves'] for c in cells)} |"
    )


def table(seeds: int, hours: float) -> str:
    began = time.perf_counter()
    lines = [
        "| trace | nodes | policy | at or below threshold after 1 h (worst seed) | imbalance p50 | p90 | p99 "
        "| migrations/day | GiB moved/day | ping-pongs/day (worst) | most moves of one guest |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for trace in TRACES:
        for nodes in NODES:
            for policy, flags in policies().items():
                cells = [cell(trace, nodes, seed, flags, hours) for seed in range(seeds)]
                lines.append(row(trace, nodes, policy, cells))
                print(lines[-1], file=sys.stderr)
    flags = "; ".join(f"{name}: `{' '.join(f)}`" for name, f in policies().items())
    lines += [
        "",
        f"Seeds 0–{seeds - 1}, {hours:g} h of each trace, one round per 5-minute sample, mode dynamic, "
        f"threshold/hold/margin of the preset; flags {flags}. Measured in {time.perf_counter() - began:.0f} s.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--write", metavar="README", help="replace the table between the replay-table markers")
    args = parser.parse_args()
    text = table(args.seeds, args.hours)
    print(text)
    if args.write:
        path = Path(args.write)
        readme = path.read_text()
        block = f"{BEGIN}\n{text}\n{END}"
        path.write_text(re.sub(f"{BEGIN}.*?{END}", lambda _: block, readme, flags=re.S))


if __name__ == "__main__":
    main()
