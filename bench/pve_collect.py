"""What a collect of a Proxmox cluster costs over a network (issue 36; target ≤ 0.3 s p95 wall,
≤ 10 calls in steady state).

The fake Proxmox (harness/fakepve) with a 12-node, 400-guest cluster as Proxmox VE 9 shows it
(pressure on every running guest, HA on a tenth, a migrate pre-check per VM), 50 ms added to
every answer. Collects every 10 s of simulated time (the clock is passed in, so an hour runs
in about a minute), each by a source opened from the state the previous one left, as the
dashboard opens it. Warm-up: the first --warmup-minutes; then, over --minutes: the p95 wall
of a collect and the mean calls a collect. No migration runs, so no follow-up is counted.
Measured twice: with the metrics export (PVE 8.3+) and without it (a rrddata call per guest).

    .venv/bin/python -m bench.pve_collect [--minutes 10] [--warmup-minutes 10] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.results import record
from crs.sources import open_source
from harness.fakepve import GIB, TOKEN, FakePve

T0 = 1_800_000_000.0
EVERY_S = 10.0
NODES, GUESTS = 12, 400


def cluster(fake: FakePve, seed: int = 36) -> None:
    """Replace the fake's recorded 4-node cluster with NODES nodes and GUESTS guests."""
    rng = random.Random(seed)
    nodes = [f"node{i:02d}" for i in range(1, NODES + 1)]
    fake.resources = [
        {"id": f"node/{n}", "type": "node", "node": n, "status": "online", "cpu": 0.3, "maxcpu": 64}
        | {"mem": 200 * GIB, "maxmem": 512 * GIB, "uptime": 86_400}
        for n in nodes
    ]
    fake.ha_resources, fake.services = [], {}
    for i in range(GUESTS):
        kind, vmid, node = ("lxc" if i % 10 == 9 else "qemu"), 1000 + i, nodes[i % NODES]
        running = i % 12 != 11
        entry = {"id": f"{kind}/{vmid}", "type": kind, "vmid": vmid, "node": node, "name": f"g{vmid}"}
        entry |= {"status": "running" if running else "stopped", "template": 0, "maxcpu": rng.choice((2, 4, 8))}
        entry |= {"maxmem": rng.choice((4, 8, 16)) * GIB, "maxdisk": 32 * GIB, "disk": 0}
        if running:
            entry |= {"cpu": round(rng.uniform(0.05, 0.6), 4), "mem": int(rng.uniform(1, 4) * GIB), "uptime": 3600}
            fake.guest_psi[entry["id"]] = {"pressurecpusome": round(rng.uniform(0, 5), 2), "pressurememorysome": 0}
        if i % 10 == 0:
            sid = f"{'vm' if kind == 'qemu' else 'ct'}:{vmid}"
            entry["hastate"] = "started"
            fake.ha_resources.append({"sid": sid, "type": sid[:2], "state": "started"})
            fake.services[sid] = {"node": node, "state": "started"}
        if kind == "qemu":
            others = [n for n in nodes if n != node]
            fake.preconditions[entry["id"]] = {"running": running, "allowed_nodes": others}
            fake.preconditions[entry["id"]] |= {"not_allowed_nodes": {}, "local_disks": [], "local_resources": []}
        fake.resources.append(entry)
    fake.node_status = dict.fromkeys(nodes, "online")
    fake.lrm_mode = dict.fromkeys(nodes, "active")
    fake.rules = []


def run(fake: FakePve, collects: int, warmup: int) -> dict:
    """Collect `collects` times, 10 simulated seconds apart; figures over those after `warmup`."""
    config = {"host": "127.0.0.1", "port": fake.port, "token": TOKEN, "verify_ssl": fake.ca_file}
    config |= {"usage_period": 300}
    state: dict | None = None
    walls, calls = [], []
    for i in range(collects):
        now = T0 + i * EVERY_S
        fake.metrics_time = now
        for n in range(1, NODES + 1):  # the node's RRD as pvestatd keeps it: a row a minute
            fake.node_rrd[f"node{n:02d}"] = [{"time": now - 60, "cpu": 0.3, "maxcpu": 64, "pressurecpusome": 1.0}]
        source = open_source("proxmox", config, state)
        started = time.perf_counter()
        source.collect(now)
        walls.append(time.perf_counter() - started)
        calls.append(source.calls)
        state = source.state()
    steady = walls[warmup:]
    return {
        "p95_s": statistics.quantiles(steady, n=20)[-1],
        "p50_s": statistics.median(steady),
        "calls": statistics.fmean(calls[warmup:]),
        "first_calls": calls[0],
        "first_s": walls[0],
        "state_bytes": len(json.dumps(state)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--warmup-minutes", type=float, default=10.0)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every answer")
    args = parser.parse_args()
    per_minute = int(60 / EVERY_S)
    warmup, collects = int(args.warmup_minutes * per_minute), int((args.warmup_minutes + args.minutes) * per_minute)
    figures = {}
    with tempfile.TemporaryDirectory() as directory:
        fake = FakePve(Path(directory))
        cluster(fake)
        fake.checks_schema, fake.latency_s = False, args.latency
        fake.start()
        try:
            for name, export in (("export", True), ("rrddata", False)):
                fake.metrics_export = export
                figures[name] = run(fake, collects, warmup)
                print(name, {k: round(v, 3) for k, v in figures[name].items()})
        finally:
            fake.stop()
    after, without = figures["export"], figures["rrddata"]
    record(
        "pve_collect",
        f"a collect of a {NODES}-node, {GUESTS}-guest fake Proxmox at {args.latency * 1000:.0f} ms a call, "
        f"steady state ({args.minutes:g} min of 10-s collects after {args.warmup_minutes:g} min)",
        f"p95 {after['p95_s']:.3f} s wall, {after['calls']:.1f} calls a collect "
        f"(without the metrics export: p95 {without['p95_s']:.3f} s, {without['calls']:.1f} calls; "
        "before: 3.3–3.6 s, ~65 calls, one at a time)",
        "≤ 0.3 s p95, ≤ 10 calls: " + ("met" if after["p95_s"] <= 0.3 and after["calls"] <= 10 else "not met"),
        figures,
    )


if __name__ == "__main__":
    main()
