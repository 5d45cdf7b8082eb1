"""Our plan against Ganeti's hbal on the same cluster, judged under OUR imbalance metric.

The cluster is bench/make_snapshot.py's 40 nodes / 400 guests, static mode. It is
written in hbal's text format (reference: ganeti-htools.md §4; shared storage, so every
hbal move is a live migration `fa:`), `hbal -t FILE -C` prints its moves, each is applied
to our snapshot and our imbalance measured after it. Then our engine plans on the same
snapshot: how many moves it needs to reach hbal's final imbalance, how long planning
takes, and how often each sequence churns (a guest moved twice, or back to a node it left).

Needs `hbal` (Debian: apt-get install ganeti-htools); without it, says so and exits 0.

Run: .venv/bin/python -m bench.hbal_compare [--steps 150] [--write bench/notes/05-plan-quality-against-ganeti-s-hbal.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.make_snapshot import synthetic
from crs import balancer
from crs.imbalance import imbalance
from crs.model import Snapshot
from crs.snapshot import parse
from crs.usage import node_loads

MIB = 2**20
GROUP_UUID = "uuid-default"
DISK_MIB = 10 * 1024  # hbal wants a disk size; shared storage, so it never moves
POLICY = "128,1,1024,1,1,1|128,1,1024,1,1,1;1048576,64,1048576,16,8,12|ext,sharedfile,rbd|4.0|32.0"
# `   12. vm131 node0003          => node0031           19.53150589 a=fa:node0031` (shared storage:
# no secondary, else printed as primary:secondary)
MOVE = re.compile(r"^\s*\d+\.\s+(\S+)\s+([^\s:]+)(?::\S*)?\s+=>\s+([^\s:]+)(?::\S*)?\s+([0-9.]+)\s+a=(.*)$")


def cluster(nodes: int = 40, guests: int = 400) -> Snapshot:
    return parse(synthetic(nodes, guests, mode="static"))


def hbal_name(sid: str) -> str:
    return sid.replace(":", "")  # hbal prints "primary:secondary"; a colon in a name would split it


def to_hbal_text(snap: Snapshot, host_cpus: int = 1) -> str:
    """Groups, nodes, instances, cluster tags (none), ipolicies; sections split by one empty line.
    `host_cpus`: the CPUs each node keeps for itself (Ganeti's cpu_nodes; our model keeps none)."""
    used = {n.name: 0.0 for n in snap.nodes}
    for g in snap.guests:
        used[g.node] += g.memory_bytes
    lines = [f"default|{GROUP_UUID}|preferred||", ""]
    for n in snap.nodes:
        total = int(n.memory_bytes // MIB)
        free = total - int(used[n.name] // MIB)
        lines.append(f"{n.name}|{total}|0|{free}|1048576|1048576|{int(n.cpus)}|N|{GROUP_UUID}|12||N|0|{host_cpus}|1.0")
    lines.append("")
    for g in snap.guests:
        mem = int(g.memory_bytes // MIB)
        lines.append(f"{hbal_name(g.sid)}|{mem}|{DISK_MIB}|{int(g.cores)}|running|Y|{g.node}||ext||1|-|N")
    lines += ["", "", f"|{POLICY}", f"default|{POLICY}"]
    return "\n".join(lines) + "\n"


def run_hbal(snap: Snapshot) -> tuple[list[tuple[str, str, str]], float, float, str]:
    """hbal's moves as (sid, source, target), its wall and CPU time, and its summary line."""
    with tempfile.NamedTemporaryFile("w", suffix=".data") as f:
        f.write(to_hbal_text(snap))
        f.flush()
        began, cpu = time.perf_counter(), os.times()
        done = subprocess.run(["hbal", "-t", f.name, "-C"], capture_output=True, text=True, check=True)
        seconds, after = time.perf_counter() - began, os.times()
    cpu_s = after.children_user + after.children_system - cpu.children_user - cpu.children_system
    return hbal_moves(snap, done.stdout), seconds, cpu_s, hbal_summary(done.stdout)


def hbal_summary(output: str) -> str:
    return next((line.strip() for line in output.splitlines() if "score improved" in line), "no move")


def hbal_moves(snap: Snapshot, output: str) -> list[tuple[str, str, str]]:
    sids = {hbal_name(g.sid): g.sid for g in snap.guests}
    moves = []
    for line in output.splitlines():
        if m := MOVE.match(line):
            if not m.group(5).startswith("fa:"):
                raise SystemExit(f"unexpected hbal move kind: {line.strip()}")
            moves.append((sids[m.group(1)], m.group(2), m.group(3)))
    return moves


def our_imbalance(snap: Snapshot) -> float:
    return imbalance(list(node_loads(snap, snap.settings.mode).values()), snap.settings.imbalance_scale)


def follow(snap: Snapshot, moves: list[tuple[str, str, str]]) -> list[float]:
    """Our imbalance after each of the moves, applied in order."""
    placement = {g.sid: g.node for g in snap.guests}
    out = []
    for sid, source, target in moves:
        if placement[sid] != source:
            raise SystemExit(f"{sid}: expected on {source}, is on {placement[sid]}")
        placement[sid] = target
        guests = tuple(dataclasses.replace(g, node=placement[g.sid]) for g in snap.guests)
        out.append(our_imbalance(dataclasses.replace(snap, guests=guests)))
    return out


def churn(moves: list[tuple[str, str, str]]) -> tuple[int, int]:
    """(moves of a guest already moved in the sequence, moves back to a node the guest left)."""
    seen: dict[str, set[str]] = {}
    again = back = 0
    for sid, source, target in moves:
        if sid in seen:
            again += 1
            back += target in seen[sid]
        seen.setdefault(sid, set()).add(source)
    return again, back


def reach(values: list[float], goal: float) -> int | None:
    """Moves needed until the imbalance is at or below `goal` (None: never)."""
    return next((i + 1 for i, v in enumerate(values) if v <= goal + 1e-12), None)


def ours(snap: Snapshot, steps: int, goal: float) -> dict[str, tuple[list[tuple[str, str, str]], list[float], float]]:
    """The engine's sequences: greedy best-next-move (`moves`), and the round planner's plan
    (`plan`) with hbal's final imbalance as its target."""
    settings = {"threshold": 0.0, "margin": 0.0, "hold_duration": 0}
    settings |= {"preset": "product", "target_imbalance": goal, "moves_per_round": steps}
    snap = snap.with_settings(dataclasses.replace(snap.settings, **settings))
    began = time.perf_counter()
    result = balancer.plan(snap, steps=steps)
    seconds = time.perf_counter() - began
    out = {"greedy best next move": [(m.guests[0], m.source, m.target) for m in result.moves]}
    out["plan (rounds' planner)"] = [(s.move.guests[0], s.move.source, s.move.target) for s in result.plan]
    return {name: (moves, follow(snap, moves), seconds) for name, moves in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="our move budget (default 150)")
    parser.add_argument("--write", metavar="README", help="replace the table between the hbal-table markers")
    args = parser.parse_args()
    if shutil.which("hbal") is None:
        print("hbal not found (Debian: apt-get install ganeti-htools): comparison skipped")
        return
    text = report(args.steps)
    print(text)
    if args.write:
        path = Path(args.write)
        block = f"<!-- hbal-table -->\n{text}\n<!-- /hbal-table -->"
        marked = r"<!-- hbal-table -->.*?<!-- /hbal-table -->"
        path.write_text(re.sub(marked, lambda _: block, path.read_text(), flags=re.S))


def report(steps: int) -> str:
    snap = cluster()
    start = our_imbalance(snap)
    moves_of_hbal, hbal_s, hbal_cpu_s, score = run_hbal(snap)
    hbal_values = follow(snap, moves_of_hbal)
    goal = hbal_values[-1] if hbal_values else start
    lines = [
        f"cluster: {len(snap.nodes)} nodes, {len(snap.guests)} guests, static; our imbalance {start:.4f}",
        f"hbal: {score} (its own score); {hbal_cpu_s:.1f} s CPU",
        "",
        "| sequence | moves | our imbalance after | moves to reach hbal's final | churn on the way (again / back) "
        "| churn in all (again / back) | wall time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = {"hbal -C (default options)": (moves_of_hbal, hbal_values, hbal_s)} | ours(snap, steps, goal)
    for name, (moves, values, seconds) in rows.items():
        needed = reach(values, goal)
        on_the_way = "{} / {}".format(*churn(moves[:needed])) if needed else "-"
        lines.append(
            f"| {name} | {len(moves)} | {values[-1] if values else start:.4f} | {needed or 'never'} "
            f"| {on_the_way} | {'{} / {}'.format(*churn(moves))} | {seconds:.2f} s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
