"""Fake-Proxmox clusters on the distributed stack (issue 36): N clusters, each its own fake
Proxmox (harness/fakepve with bench/pve_collect.py's 12-node, 400-guest cluster, a seed each),
served from this process with 50 ms added to every answer, made as the fault soak makes its
Proxmox clusters (`manage.py shell`, suggest-only, calls timing out in 5 s), at 10-s rounds on
bench.many_clusters' Run: the same figures, collects on `make worker-proxmox`'s threads and
rounds on the prefork worker. Halfway through, one cluster stops answering (the fake's
`silent`): every other cluster's p99 lateness in the second half against the first (target:
within 10 % or 100 ms). The run's figures leave the silent cluster out; the fakes' own CPU (this
process) is reported apart, as a real Proxmox's would not be on this machine.

    .venv/bin/python -m bench.many_pve [--clusters 50] [--minutes 10] [--processes 2] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.many_clusters import Run, database_url_of, numbers
from bench.many_clusters_figures import kept, table, timeliness
from bench.pve_collect import cluster
from bench.results import record
from harness.fakepve import FakePve
from harness.faultsoak import pve_config, setup


class PveRun(Run):
    def __init__(self, database_url: str, clusters: int, processes: int, minutes: float, interval: int, latency: float):
        super().__init__(database_url, clusters, processes, minutes, interval)
        self.latency = latency
        self.fakes: list[FakePve] = []
        self.silent_id = 0
        self.quiet_at = 0.0

    def measure(self) -> dict:
        with tempfile.TemporaryDirectory() as directory:
            for i in range(1, self.clusters + 1):
                (where := Path(directory) / f"pve{i}").mkdir()
                fake = FakePve(where)
                cluster(fake, seed=i)
                fake.checks_schema, fake.latency_s = False, self.latency
                fake.start()
                self.fakes.append(fake)
            try:
                return super().measure()
            finally:
                for fake in self.fakes:
                    fake.stop()

    def clusters_code(self) -> str:
        return setup(0, self.interval, {f"{i:03d}": pve_config(f) for i, f in enumerate(self.fakes, start=1)})

    def window(self, began: float) -> None:
        """Half the window as it is, then the last cluster stops answering for the rest."""
        name = f"soak-pve-{self.clusters:03d}"
        self.silent_id = self.query("SELECT id FROM dashboard_cluster WHERE name = %s", (name,))[0][0]
        cpu = time.process_time()
        time.sleep(self.minutes * 30)
        self.quiet_at = time.time()
        self.fakes[-1].silent = True
        time.sleep(self.minutes * 30)
        self.fakes_cpu = time.process_time() - cpu

    def left_out(self) -> set[int]:
        return {self.silent_id}

    def report(self, began, ended, warm, before, after, loads, split) -> dict:
        result = super().report(began, ended, warm, before, after, loads, split)
        times = self.round_times(began, ended)
        first = timeliness(times, began, self.quiet_at, self.interval, self.left_out())
        second = timeliness(times, self.quiet_at, ended, self.interval, self.left_out())
        p1, p2 = first["lateness_s"]["p99"], second["lateness_s"]["p99"]
        silent = times.get(self.silent_id, [])
        result["silent"] = {
            "others_first_half": first,
            "others_second_half": second,
            "its_rounds": [sum(t < self.quiet_at for t in silent), sum(t >= self.quiet_at for t in silent)],
            "met": p1 is not None and p2 is not None and p2 <= max(p1 * 1.1, p1 + 0.1),
        }
        result["fakes_cpu_s_per_round"] = round(self.fakes_cpu / result["rounds"], 4) if result["rounds"] else None
        result["latency_s"] = self.latency
        return result


def keep(results: list[dict], interval: int, latency: float) -> None:
    """bench/results/many_clusters-pve.json (the fleet) and -pve-silent.json (the cluster that
    stops answering), each with every run beside it."""
    runs = kept("many_clusters-pve", interval, results)
    r = max(runs, key=lambda r: (r["clusters"], r["worker_processes"]))
    ms = f"{latency * 1000:.0f} ms"
    what = f"fake-Proxmox clusters (12 nodes, 400 guests each, {ms} a call) at {interval}-s rounds, 2 cores"
    cpu = r["cpu_s_per_round"]
    record(
        "many_clusters-pve",
        what,
        f"{r['clusters']} clusters × {r['worker_processes']} worker processes, {r['minutes']} min "
        f"(the silent one left out): {r['rounds_made']:.0%} of rounds made, p50 / p99 lateness "
        f"{r['lateness_s']['p50']} / {r['lateness_s']['p99']} s, longest gap {r['longest_gap_s']} s, queue max "
        f"{r['queue']['max']}, CPU s a round worker {cpu['worker']}, Proxmox worker {cpu['proxmox worker']}, "
        f"PostgreSQL {cpu['postgres']} (the fakes {r['fakes_cpu_s_per_round']}), connections ≤ "
        f"{r['connections']['max']} ({r['connections']['new_in_window']} new)",
        f"{r['clusters']} clusters: p99 lateness ≤ 1 s, no gap > 2 intervals, ≥ 90 % of rounds made: "
        + ("met" if r["met"] and r["clusters"] >= 50 else "not met"),
        {"runs": runs},
    )
    s = r["silent"]
    first, second = s["others_first_half"], s["others_second_half"]
    record(
        "many_clusters-pve-silent",
        f"one of {r['clusters']} fake-Proxmox clusters stops answering for the second half of the run ({ms} a call, "
        f"{interval}-s rounds, calls time out in 5 s)",
        f"the other {r['clusters'] - 1}' p99 lateness {first['lateness_s']['p99']} s before, "
        f"{second['lateness_s']['p99']} s while it is silent (longest gap {first['longest_gap_s']} → "
        f"{second['longest_gap_s']} s); its own rounds {s['its_rounds'][0]} → {s['its_rounds'][1]}",
        "every other cluster's p99 lateness within 10 % or 100 ms: " + ("met" if s["met"] else "not met"),
        {"runs": runs},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--processes", type=numbers, default=[2], help="worker pool sizes, one run each")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--interval", type=int, default=10, help="seconds between a cluster's rounds")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every answer")
    parser.add_argument(
        "--database-url",
        default=database_url_of(os.environ.get("CRS_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crs")),
    )
    args = parser.parse_args()
    results: list[dict] = []
    for processes in args.processes:
        print(f"{time.strftime('%H:%M:%S')} {args.clusters} Proxmox clusters, {processes} processes…", flush=True)
        run = PveRun(args.database_url, args.clusters, processes, args.minutes, args.interval, args.latency)
        results.append(run.measure())
        print(table(results[-1:]), flush=True)
        s = results[-1]["silent"]
        print("silent:", {k: v["lateness_s"] if isinstance(v, dict) else v for k, v in s.items()}, flush=True)
        print(f"fakes' CPU s a round: {results[-1]['fakes_cpu_s_per_round']}", flush=True)
        keep(results, args.interval, args.latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
